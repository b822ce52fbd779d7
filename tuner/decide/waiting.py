"""Candidates that wait to race: the search measures configs faster than the race can decide them
against plain ``torch.compile``, so a searched config whose turn has not come waits, its search
trial kept, and joins the race best first when a candidate racing is decided (``Race.admit``).

Why: every candidate the race decides costs it about six processes (its search trial and five
more, two rounds of three), and until 2026-12-07 the search proposed the next config only once
the race had decided the one before. Seen on the zoo's seven workloads at 6-10 minute budgets
(docs/zoo.md, measurement 15): two to four configs beyond plain compile searched per run, because
each waited for the one before it to be decided, however little its search trial promised. Now,
once the race has an answer, the search measures :data:`SCREENED` configs first, with no round
between their trials (tuner/run/racing.py), and the race then decides the best of them first: the
search trial's reading against plain compile, stepped in the same process (tuner/measure/trial.py's
rival), is the order, not the decision.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.config import CompileConfig
from ..core.score import Scoring

#: The configs beyond plain compile the search measures before the race spends rounds deciding any
#: but the first: at least this many searched in every run that has the time for their trials (before
#: the race has an answer it still takes a round between trials: the first answer comes first).
SCREENED = 4


@dataclass(frozen=True)
class Waiting:
    """A searched config waiting for its turn in the race."""

    config: CompileConfig
    trial: dict[str, Any] | None
    """Its search trial where it counts as one of its race processes (``Race.join``'s ``opened``)."""
    total_s: float
    """Its total as its search trial read it (:func:`estimated_total`): the order they join in."""
    reading: str
    """That reading in words, for the log and the reports."""
    over_plain: float | None = None
    """Its steps against plain compile's in its search trial (``rival_speedup``), where it stepped both:
    what a racing candidate near a tie with plain compile yields its slot to (``Race._drop``)."""


def estimated_total(attrs: dict[str, Any], scoring: Scoring, plain_speedup: float | None) -> tuple[float, str]:
    """A searched config's total over the scored steps as its search trial read it, and the words:
    its steps against plain compile's in that one process (``rival_speedup``) times plain
    compile's speedup in the race where both are known, else its own speedup against eager."""
    rival = _number(attrs.get("rival_speedup"))
    own = _number(attrs.get("speedup"))
    if rival and plain_speedup:
        speedup, words = rival * plain_speedup, f"{rival:.2f}x plain torch.compile's steps in its search trial"
    elif own:
        speedup, words = own, f"{own:.2f}x eager's steps in its search trial"
    else:
        return float("inf"), "no step time"
    total = scoring.compile_time(attrs) + scoring.steps * scoring.eager_step_s / speedup
    return total, words


def _number(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if out > 0 else None
