"""Workers keep large blocks in glibc's heap instead of mapping each afresh: a
stream's reads, chunks and lines (250 KB to a few MB) otherwise came as new pages
the kernel faults in, about a third of a postgres stream's CPU."""

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


def _mapped_blocks(mode: str, env: dict[str, str] | None = None) -> int:
    done = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True,
                          text=True, check=True, env=env)
    return int(done.stdout)


def test_a_tuned_process_takes_a_megabyte_block_from_its_heap():
    assert _mapped_blocks("default") == 1  # glibc maps it on its own by default
    assert _mapped_blocks("tuned") == 0


def test_the_gunicorn_settings_tune_the_master_whose_forks_are_the_workers(tmp_path):
    # A metrics folder of the test's, which the settings would otherwise create.
    env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(tmp_path))
    assert _mapped_blocks("gunicorn settings", env) == 0
