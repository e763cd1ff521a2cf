"""glibc's allocator, set for the large blocks of the processes that stream: the
gunicorn workers (set in their master, ``gunicorn.conf.py``) and Spark's Python
workers reading stream lines for the pipeline (``workers.pipeline.source``).

By default glibc maps a block of 128 KB or more afresh and unmaps it when it is
freed, and hands the top of its heap back to the kernel once 128 KB of it are
free. It raises both thresholds when it sees bigger blocks freed, but a stream's
cycle (a read of a few MB, the chunks' bytes and lines of ~250 KB each, all freed
before the next read) keeps crossing them, so most of those blocks came as fresh
pages that the kernel faults in and zeroes: one stream of 1M events from begin
cost its worker 0.46-0.53 s of CPU, and 0.31-0.34 s with these settings (1.6-1.8M
against 2.1-2.3M events/s). The cost is memory kept rather than returned: up to
``TRIM_THRESHOLD`` free at the top of a worker's heap. It imports nothing, so the
pipeline, which imports nothing of the broker, can use it.

The gunicorn workers also keep to two heaps (``few_heaps``): by default glibc
gives threads heaps of their own, up to eight per core, and memory freed in a
heap is reused only by the threads of that heap. A worker's threads are the
kafka engine's pool (dozens in a storm of streams opening, each making a
short-lived librdkafka consumer on Tansu), librdkafka's own and the group
commit's; what they used once stayed resident in their heaps.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable

M_TRIM_THRESHOLD = -1  # mallopt parameters, from glibc's malloc.h
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8

MMAP_THRESHOLD = 4 * 1024 * 1024
"""Blocks below this come from the heap: every read, chunk and line a stream makes."""
TRIM_THRESHOLD = 32 * 1024 * 1024
"""Free memory at the heap's top kept for the next blocks rather than given back."""

HEAPS = 2
"""Python allocates under the GIL, and glibc's per-thread caches serve most small
blocks of the native threads without a heap's lock; a second heap keeps the
native threads off the Python thread's lock otherwise. 2,000 idle kafka streams
opened at once on one worker took 39-44 KB each with two heaps (their worker's
heaps held 6 MB free), 39-41 KB with one, and 44-50 KB with glibc's default (18
MB free)."""


def _mallopt() -> Callable[[int, int], int] | None:
    """glibc's ``mallopt``, or None where the C library is not glibc."""
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is not None:
        mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        mallopt.restype = ctypes.c_int
    return mallopt


@functools.cache
def keep_large_blocks() -> bool:
    """Apply the thresholds to this process (and the processes it forks from now on),
    once: callers may call it before each piece of work. False where the C library
    is not glibc, which is then left as it is."""
    mallopt = _mallopt()
    return mallopt is not None and bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) \
        and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


@functools.cache
def few_heaps() -> bool:
    """Have the threads of this process (and of the processes it forks from now on)
    share ``HEAPS`` heaps, before they start; False where the C library is not glibc."""
    mallopt = _mallopt()
    return mallopt is not None and bool(mallopt(M_ARENA_MAX, HEAPS))
