"""torch's default thread count in a process of the user's: what a run's trials are measured at.

A verdict holds at the thread count it was measured at, so the tuner asks what the user's own
run will have: a fresh interpreter with this environment answers (tuner/isolation/isolated.py asks the
trial launcher first, which found the same number when it imported torch).
"""
from __future__ import annotations

import functools
import os
import subprocess
import sys


def fresh_process_threads() -> int:
    """The torch thread count of the user's own run: what ``torch.get_num_threads()`` reports in a
    fresh Python process started with this environment (so ``OMP_NUM_THREADS``, if the user set
    it, and the CPU affinity count). It is asked of a fresh interpreter, not computed, because
    torch's rule (OpenMP's default, physical vs logical cores) differs between builds; and not
    read in this process, which may have changed its own count. A verdict holds at the thread
    count it was measured at, so trials run at the one the user's run will have."""
    return _asked(sys.executable, os.environ.get("OMP_NUM_THREADS"), os.environ.get("MKL_NUM_THREADS"))


@functools.cache
def _asked(python: str, omp: str | None, mkl: str | None) -> int:
    """(Cached per interpreter and thread variables: the answer costs an import of torch.)"""
    try:
        out = subprocess.run([python, "-c", "import torch; print(torch.get_num_threads())"], capture_output=True,
                             text=True, timeout=120, env=dict(os.environ), check=True).stdout
        return max(1, int(out.strip().splitlines()[-1]))
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        # No answer from a fresh process: OpenMP's own rule (OMP_NUM_THREADS, else usable CPUs).
        env = (omp or "").split(",")[0].strip()
        if env.isdigit() and int(env) > 0:
            return int(env)
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:
            return os.cpu_count() or 1
