"""Plain compile riding in the candidates' processes: each process of a candidate beyond plain
compile steps plain compile as a third side beside eager (tuner/measure/timing.py), so it is a
paired sample of plain compile against eager as much as one of plain compile's own processes is.
Once candidates race, plain compile runs none of its own (tuner/decide/rounds.py: ``RoundMakeup.rides``)
and is weighed on theirs too.

What pooling them assumes, and is checked before it is done: a third side in the process leaves
eager's and plain compile's ratio where plain compile's own processes put it. Each process is its
own block, so a shift of the process's level cancels; a shift of the ratio would not. Plain
compile's speedup from the rides and from its own processes, each fitted apart, are compared
(Welch), and where the two differ at :data:`HOMOGENEITY` the rides are left out of its fit and
the decision says so (``rides``).
"""
from __future__ import annotations

from typing import Any

from ..core.config import PLAIN_COMPILE
from . import stats
from .records import Record

#: The confidence at which plain compile's rides and its own processes are taken to differ (a
#: two-sided test at 5 %: no share of the race's error rate pays for it, since it only decides
#: which processes plain compile's fit holds, and holding fewer is the conservative side).
HOMOGENEITY = 0.95


def ride_samples(records: dict[str, Record], eager_key: str) -> list[stats.Sample]:
    """Plain compile against eager in the processes of every candidate beyond it that stepped it
    (``Record.ride_samples``): a dropped or later failed candidate's clean processes too, since
    what they measured of plain compile does not depend on the candidate's fate."""
    plain = PLAIN_COMPILE.key()
    return [s for r in records.values() if r.config.compiles and r.key != plain
            for s in r.ride_samples(eager_key, plain)]


def ride_rounds(records: dict[str, Record]) -> set[int]:
    """The rounds of the processes :func:`ride_samples` takes."""
    plain = PLAIN_COMPILE.key()
    return {rnd for r in records.values() if r.config.compiles and r.key != plain and r.paired
            for rnd in r.rival_round_set}


def pooled(own: list[stats.Sample], rides: list[stats.Sample], eager_key: str
           ) -> tuple[list[stats.Sample], dict[str, Any] | None]:
    """Plain compile's samples for its fit: its own processes' and, where they agree, the rides';
    and what the decision says of the rides (None where there are none)."""
    if not rides:
        return own, None
    plain = PLAIN_COMPILE.key()
    n = len(rides) // 2
    apart_own, apart_rides = stats.fit(own), stats.fit(rides)
    if apart_own.df < 1 or apart_rides.df < 1:
        return own + rides, {"processes": n, "pooled": True}
    shift = apart_rides.contrast(eager_key, plain).minus(apart_own.contrast(eager_key, plain))
    within = shift.speedup(HOMOGENEITY)
    info = {"processes": n, "shift": within.estimate, "shift_interval": [within.low, within.high],
            "shift_df": round(shift.df, 1)}
    if within.contains(1.0):
        return own + rides, {**info, "pooled": True}
    return own, {**info, "pooled": False,
                 "why": (f"plain compile read {within.estimate:.3f}x as fast against eager in the candidates' "
                         f"processes as in its own ({within.low:.3f}x to {within.high:.3f}x at {HOMOGENEITY:.0%}): "
                         "a third side shifts the ratio, so its own processes alone decide it")}
