"""Workers keep large blocks in glibc's heap instead of mapping each afresh: a
stream's reads, chunks and lines (250 KB to a few MB) otherwise came as new pages
the kernel faults in, about a third of a postgres stream's CPU. And their threads
share two heaps: memory freed in a heap of a thread's own stayed resident there
(idle kafka streams took up to 50 KB each)."""

from __future__ import annotations

import os
import subprocess
import sys

# How many blocks of a fresh process are mapped on their own after it allocates a
# 1 MB bytes object, with the thresholds set first, by loading the gunicorn
# settings, or not at all (glibc's mallinfo2).
PROBE = """
import ctypes, runpy, sys
from workers.allocator import keep_large_blocks

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]

if sys.argv[1] == "tuned":
    assert keep_large_blocks()
elif sys.argv[1] == "gunicorn settings":
    runpy.run_path("gunicorn.conf.py")
mallinfo2 = ctypes.CDLL(None).mallinfo2
mallinfo2.restype = MallInfo2
before = mallinfo2().hblks
block = bytes(1 << 20)
print(mallinfo2().hblks - before)
"""


def _probe(script: str, mode: str, env: dict[str, str] | None = None) -> int:
    """The number a probe prints, run in a fresh process."""
    done = subprocess.run([sys.executable, "-c", script, mode], capture_output=True,
                          text=True, check=True, env=env)
    return int(done.stdout)


def _mapped_blocks(mode: str, env: dict[str, str] | None = None) -> int:
    return _probe(PROBE, mode, env)


def test_a_tuned_process_takes_a_megabyte_block_from_its_heap():
    assert _mapped_blocks("default") == 1  # glibc maps it on its own by default
    assert _mapped_blocks("tuned") == 0


def test_the_gunicorn_settings_tune_the_master_whose_forks_are_the_workers(tmp_path):
    # A metrics folder of the test's, which the settings would otherwise create.
    env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(tmp_path))
    assert _mapped_blocks("gunicorn settings", env) == 0


# How many more heaps (glibc arenas) than ``HEAPS`` a fresh process has once four
# threads allocated, from malloc_info's report.
HEAPS_PROBE = """
import ctypes, runpy, sys, threading
from workers.allocator import HEAPS, few_heaps

if sys.argv[1] == "few heaps":
    assert few_heaps()
elif sys.argv[1] == "gunicorn settings":
    runpy.run_path("gunicorn.conf.py")
done = threading.Barrier(5)
def allocate():
    block = bytearray(100_000)
    done.wait()
threads = [threading.Thread(target=allocate) for _ in range(4)]
for thread in threads:
    thread.start()
done.wait()
libc = ctypes.CDLL(None)
libc.open_memstream.restype = ctypes.c_void_p
libc.open_memstream.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_size_t)]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
report, size = ctypes.c_char_p(), ctypes.c_size_t()
stream = libc.open_memstream(ctypes.byref(report), ctypes.byref(size))
libc.malloc_info(0, stream)
libc.fclose(stream)
print(report.value.count(b"<heap nr=") - HEAPS)
"""


def _extra_heaps(mode: str, env: dict[str, str] | None = None) -> int:
    return _probe(HEAPS_PROBE, mode, env)


def test_the_threads_of_a_worker_share_a_few_heaps(tmp_path):
    assert _extra_heaps("default") > 0  # glibc gives threads heaps of their own by default
    assert _extra_heaps("few heaps") == 0
    env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(tmp_path))
    assert _extra_heaps("gunicorn settings", env) == 0
