"""Whether the machine let a process run: how long its threads waited for a core while it was timed,
and how much of the machine's time its hypervisor gave to other guests.

Linux keeps, per thread, the time it spent runnable but waiting on a run queue
(``/proc/self/task/*/schedstat``, second field, nanoseconds). On a quiet machine a trial's threads
barely wait; when another job shares the cores they wait a large share of the time, and the step
times of that process say more about the other job than about the config. Confirmation reads
this share from every process and calls a verdict measured on a busy machine undecided
(tuner/decide/confirm.py), as pyperf warns that a result "may be unstable". On a virtual machine
the neighbours that share the host are invisible to the run queue; the kernel counts the time
the hypervisor ran them instead as ``steal`` (``/proc/stat``), read over the same block.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

_TASKS = Path("/proc/self/task")
_STAT = Path("/proc/stat")


def _steal_and_total() -> tuple[int, int] | None:
    """The machine's stolen and total CPU time so far, in clock ticks (None off Linux)."""
    try:
        fields = [int(v) for v in _STAT.read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    return (fields[7] if len(fields) > 7 else 0), sum(fields[:8])


#: Thread names of a process group's own communication (gloo's ``gloo_tcp_loop`` and
#: ``pt_gloo_runloop``, NCCL's ``pt_nccl_*``): on many ranks they share the cores with the
#: compute threads by design, so their waits are the workload's, not another job's. Measured on
#: GPT-2 training under DDP, 2 ranks on 2 cores: 15 % of wall time waited counting them, 3-4 %
#: by the compute thread alone.
COMMUNICATION_THREADS = ("gloo", "pt_gloo", "pt_nccl")


def _waited_ns() -> int | None:
    """Nanoseconds this process's threads, but its communication threads, have spent waiting for a
    core so far (None off Linux)."""
    try:
        total = 0
        for task in _TASKS.iterdir():
            try:
                if (task / "comm").read_text().startswith(COMMUNICATION_THREADS):
                    continue
                total += int((task / "schedstat").read_text().split()[1])
            except (OSError, IndexError, ValueError):
                continue  # a thread that ended between the listing and the read
        return total
    except OSError:
        return None


class CoreWait:
    """``with CoreWait(threads) as w: ...``; then ``w.figures()``: the share of the block's wall
    time its ``threads`` threads spent waiting for a core, and the load average at its end."""

    def __init__(self, threads: int) -> None:
        self.threads = max(1, threads)
        self.share: float | None = None
        self.steal: float | None = None
        self.load: float | None = None

    def __enter__(self) -> CoreWait:
        self._start, self._waited, self._stolen = time.perf_counter_ns(), _waited_ns(), _steal_and_total()
        return self

    def __exit__(self, *exc) -> None:
        wall = time.perf_counter_ns() - self._start
        waited = _waited_ns()
        if self._waited is not None and waited is not None and wall > 0:
            self.share = max(0.0, (waited - self._waited) / (wall * self.threads))
        stolen = _steal_and_total()
        if self._stolen is not None and stolen is not None and stolen[1] > self._stolen[1]:
            self.steal = (stolen[0] - self._stolen[0]) / (stolen[1] - self._stolen[1])
        try:
            self.load = os.getloadavg()[0]
        except OSError:
            self.load = None

    def figures(self) -> dict[str, float | None]:
        return {"core_wait_share": self.share, "steal_share": self.steal, "load_average": self.load}
