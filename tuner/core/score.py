"""From a measurement to the number Optuna minimises, and the figures users decide on.

total time = compile time + steps x step time.

Step times from different processes drift 10-20 % on a shared machine, while good configs
differ by ~5 %. So a trial's step time is not taken at face value: each trial times eager and
compiled steps side by side, and its step time is scored as

    normalised step time = eager reference step time / speedup measured in the trial

where the eager reference is fixed once per study (the eager baseline trial) and both are
weighted means over the run's shape mix (tuner/mix.py). Ratios survive machine drift; absolute
times do not.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


def total_time(compile_s: float, steps: float, step_s: float) -> float:
    """The score of a run: its compile once, then ``steps`` steps. Every total in the package is this."""
    return compile_s + steps * step_s


@dataclass(frozen=True)
class Scoring:
    """How trials are scored; fixed for the life of a study."""

    steps: int
    """How many steps the user's real run takes (``--steps``)."""
    eager_step_s: float
    """The study's eager reference step time (from the eager baseline trial)."""
    max_memory_mb: float | None = None
    compile_cost: str = "cold"
    """``cold``: the compile time of a first run (empty cache); ``warm``: of a restart that
    finds its cache (what users who keep the cache pay on every restart)."""

    def compile_time(self, m) -> float:
        """The compile time that counts: the one place that decides cold or warm, for the score,
        pruning, break-even steps and the reports. ``m``: a measurement, trial attributes or a
        report row (a missing value may be None or NaN)."""
        warm = _number(m.get("compile_time_warm_s"))
        if self.compile_cost == "warm" and warm is not None:
            return warm
        return _number(m.get("compile_time_s")) or 0.0

    def step_time(self, m: dict) -> float | None:
        speedup = m.get("speedup")
        if not speedup or speedup <= 0:
            return None
        return self.eager_step_s / speedup

    def total_time(self, m: dict) -> float | None:
        step = self.step_time(m)
        if step is None:
            return None
        return total_time(self.compile_time(m), self.steps, step)

    @property
    def eager_total(self) -> float:
        return total_time(0.0, self.steps, self.eager_step_s)

    def over_memory(self, m: dict) -> bool:
        return self.max_memory_mb is not None and float(m.get("peak_memory_mb") or 0.0) > self.max_memory_mb


def break_even_steps(compile_s: float, eager_step_s: float, step_s: float) -> float | None:
    """Steps after which compiling has paid for itself; None if it never does."""
    saving = eager_step_s - step_s
    if saving <= 0:
        return None
    return math.ceil(compile_s / saving)


def _number(value) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def pareto_front(points: list[tuple[float, float, Any]]) -> list[tuple[float, float, Any]]:
    """(total time, peak memory, item) points that no other point beats on both, fastest first."""
    front, lowest = [], float("inf")
    for total, memory, item in sorted(points, key=lambda p: (p[0], p[1])):
        if memory < lowest:
            front.append((total, memory, item))
            lowest = memory
    return front


def knee(front: list[tuple[float, float, Any]]):
    """The documented pick from a Pareto front: scale total time and peak memory each to [0, 1]
    over the front, and take the point with the smallest sum (closest to "fastest and leanest");
    ties go to the faster point."""
    if len(front) == 1:
        return front[0]
    t_lo, t_hi = front[0][0], front[-1][0]
    m_lo, m_hi = min(p[1] for p in front), max(p[1] for p in front)

    def scaled(p):
        return ((p[0] - t_lo) / ((t_hi - t_lo) or 1.0)) + ((p[1] - m_lo) / ((m_hi - m_lo) or 1.0))

    return min(front, key=lambda p: (scaled(p), p[0]))
