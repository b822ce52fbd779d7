"""How many trials run at once on this machine (``--parallel``): compile in parallel, time in turn.

A trial is mostly compiling (CPU work, nothing timed) and, for a few seconds, timing. Lanes
overlap the two: while one trial holds the machine's timing slot (tuner/measure/slot.py) on the
timing cores, the others compile on the cores that are left. On a CPU the timing cores are the
``--threads`` a trial times with; on a GPU the timed work is on the GPU, and the timing process
keeps two cores for launching kernels. Each compiling lane wants at least two cores (inductor
compiles its C++/Triton kernels in parallel); with fewer free cores, ``auto`` runs one lane, as
before: nothing is gained by compiling on the cores a trial times on, and the timing would suffer.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import TunerError

ENV = "COMPILE_TUNE_LANES"
#: More lanes than this add little: the timing slot is the bottleneck.
MAX_AUTO = 4
CORES_PER_COMPILE = 2


@dataclass
class LanePlan:
    lanes: int
    timing_cores: list[int] = field(default_factory=list)
    compile_cores: list[int] = field(default_factory=list)
    why: str = ""


def cores() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def plan_lanes(requested: str | int, device: str, threads: int, available: list[int] | None = None) -> LanePlan:
    """The lanes for ``--parallel requested`` (``auto`` or a number).

    Example:
        >>> plan_lanes("auto", "cpu", threads=2, available=[0, 1]).lanes
        1
        >>> plan_lanes("auto", "cpu", threads=2, available=list(range(8))).lanes
        4
    """
    available = available if available is not None else cores()
    timing_n = 2 if device.startswith("cuda") else threads
    timing, free = available[:timing_n], available[timing_n:]
    requested = parse_parallel(requested)
    n = 1 + min(MAX_AUTO - 1, len(free) // CORES_PER_COMPILE) if requested == "auto" else int(requested)
    if n == 1:
        return LanePlan(1, why=f"1 lane: {len(free)} core(s) left beside the {len(timing)} timing core(s); a lane "
                               f"that compiles while another times needs {CORES_PER_COMPILE}" if requested == "auto"
                        else "1 lane (--parallel 1)")
    if not free:
        raise TunerError(f"--parallel {n}: this machine has {len(available)} core(s) and trials time on "
                         f"{timing_n}, so no core is left to compile on",
                         "lower --threads, or use --parallel 1")
    why = (f"{n} lanes: trials compile on core(s) {_span(free)} and take turns timing on core(s) {_span(timing)}"
           + (f" ({len(free)} core(s) shared by {n - 1} compiling trial(s): compile times may read high)"
              if len(free) < CORES_PER_COMPILE * (n - 1) else ""))
    return LanePlan(n, timing, free, why)


def parse_parallel(value: str | int) -> str | int:
    """``auto`` or a number of lanes >= 1; anything else is a one-line error naming ``--parallel``."""
    if value == "auto":
        return value
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = 0
    if n < 1:
        raise TunerError(f"--parallel must be auto or a number of lanes >= 1, got {value!r}",
                         "e.g. --parallel 2, or leave it at auto")
    return n


def lane_env(plan: LanePlan, work_dir: Path, device: str) -> dict[str, str]:
    """What a lane's worker process is told (read by :func:`from_env` in its Tuner)."""
    if plan.lanes == 1:
        return {}
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    work_dir.mkdir(parents=True, exist_ok=True)
    slot = work_dir.resolve() / f"timing-slot-{device.replace(':', '')}{visible.replace(',', '_')}.lock"
    return {ENV: f"{slot}|{','.join(map(str, plan.timing_cores))}|{','.join(map(str, plan.compile_cores))}"}


def from_env() -> dict:
    """The TrialSpec fields of this process's lane, or {} outside lanes."""
    value = os.environ.get(ENV)
    if not value:
        return {}
    slot, timing, compile_ = value.split("|")
    return {"timing_slot": slot, "timing_cores": [int(c) for c in timing.split(",") if c],
            "compile_cores": [int(c) for c in compile_.split(",") if c]}


def _span(cores: list[int]) -> str:
    return f"{cores[0]}-{cores[-1]}" if len(cores) > 1 and cores[-1] - cores[0] == len(cores) - 1 else \
        ",".join(map(str, cores))
