"""The timing slot of parallel lanes (``--parallel``, tuner/system/lanes.py): compile in parallel, time
in turn.

Several trials may be in flight; each compiles (and does everything else that is not timed) on
the compile cores, and takes the machine's one timing slot, an exclusive lock, for its timed
stages, moving every one of its threads to the timing cores while it holds it. So no two trials
time at once, and no compile runs on the cores a trial times on.
"""
from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager


def pin(cores: list[int] | None) -> None:
    """Move every thread of this process (torch's OpenMP pool included) onto ``cores``; compile
    workers started afterwards inherit it."""
    if not cores or not hasattr(os, "sched_setaffinity"):
        return
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cores)
        except OSError:
            pass  # a thread that just ended


@contextmanager
def timing_slot(spec, rec) -> Iterator[None]:
    """Hold the slot (and the timing cores) for the block; records how long the trial waited."""
    if not spec.timing_slot:
        yield
        return
    start = time.perf_counter()
    with open(spec.timing_slot, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released by the kernel if this process dies
        rec.update(slot_wait_s=time.perf_counter() - start, timing_cores=spec.timing_cores)
        pin(spec.timing_cores)
        try:
            yield
        finally:
            pin(spec.compile_cores)
            fcntl.flock(lock, fcntl.LOCK_UN)
