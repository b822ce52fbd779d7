"""The run's clock: wall time per phase, and the ``--budget`` it asks :class:`~tuner.run.budget.Plan`
about (what still fits: a search trial, a race round, the warm start), the cuts it records, and the
lines that say where the time went."""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..core.durations import PHASES, format_duration
from .budget import OUTPUT_RESERVE_S, Plan


@dataclass
class RunClock:
    """Wall time per phase of one run, and its ``--budget`` (none: unbounded).

    ``deadline`` is absolute (``time.time()``), so the ``--workers`` processes a run starts share
    its clock; the budget started ``budget_s`` before it.
    """

    budget_s: float | None = None
    deadline: float | None = None
    now: Callable[[], float] = time.time
    started: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)
    running: dict[str, float] = field(default_factory=dict)  # phase -> when it began, while it runs
    cut: dict[str, str] = field(default_factory=dict)
    """Phases the budget cut short, with how far each got (``3 of 8 trials``)."""
    skipped: list[str] = field(default_factory=list)
    """Phases the budget left no room for."""
    reported: tuple | None = field(default=None, init=False, repr=False)
    """What was cut and skipped when the outputs were last written."""
    round_began: float | None = field(default=None, init=False, repr=False)
    """When the confirmation round now running began (:meth:`round_fits`)."""
    rounds_timed: int = field(default=0, init=False, repr=False)
    """Confirmation rounds measured by :meth:`round_fits` so far (the first compiled cold)."""
    plan: Callable[[], Plan] = field(default=lambda: Plan(None, None), init=False, repr=False)
    """The current :class:`Plan` (the run sets it: it reads the study's trials each time)."""
    race_round: tuple[float, int] | None = field(default=None, init=False, repr=False)
    """``(seconds, processes)`` of the race's last round, where the run knows it: what a stretch's
    first round is priced from (:meth:`round_fits`)."""

    def __post_init__(self) -> None:
        if self.budget_s is None:
            self.started = self.now()
            return
        if self.deadline is None:
            self.deadline = self.now() + self.budget_s
        self.started = self.deadline - self.budget_s

    @property
    def bounded(self) -> bool:
        return self.budget_s is not None

    def elapsed(self) -> float:
        return self.now() - self.started

    def left(self) -> float:
        """Seconds left of the budget (infinite without one; negative once it is overrun)."""
        return math.inf if self.deadline is None else self.deadline - self.now()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time a phase; a phase entered again (outputs are written more than once) adds up."""
        self.running[name] = self.now()
        try:
            yield
        finally:
            began = self.running.pop(name)  # moved on where a phase ran aside (:meth:`aside`)
            self.phases[name] = self.phases.get(name, 0.0) + self.now() - began

    @contextmanager
    def aside(self, name: str) -> Iterator[None]:
        """Time a phase run in the middle of another (the race's rounds between search trials):
        the phases running around it stop their clocks meanwhile, so no second counts twice."""
        now = self.now()
        outer = dict(self.running)
        for other, began in outer.items():
            self.phases[other] = self.phases.get(other, 0.0) + now - began
            del self.running[other]
        try:
            with self.phase(name):
                yield
        finally:
            now = self.now()
            for other in outer:
                self.running[other] = now

    def cut_short(self, phase: str, how_far: str) -> None:
        self.cut[phase] = how_far

    def skip(self, phase: str) -> None:
        if phase not in self.skipped:
            self.skipped.append(phase)

    def search_trial_fits(self, joiner: tuple[int, int] | None = None) -> bool:
        """Whether one more search trial and the reserve for what follows fit in the budget
        (``joiner``: see ``Plan.search_trial_fits``)."""
        return self.plan().search_trial_fits(self.left(), self.budget_s, self.phase_seconds().get("confirmation", 0.0),
                                             joiner)

    def round_fits(self, trials: int, ran: int | None) -> bool:
        """Whether one more confirmation round of ``trials`` trials fits in the budget. ``ran``: the
        trials of the round just run (None before the first); the time since the last call, over
        them, is what one confirmation trial takes, measured."""
        now = self.now()
        plan = self.plan()
        each_s = (now - self.round_began) / ran if ran and self.round_began is not None else None
        timed = self.rounds_timed + (each_s is not None)
        if each_s is not None:
            if timed == 1:
                each_s = plan.warm_after_cold(each_s, ran or 0)
            each_s = plan.without_eager_alone(each_s, ran or 0, trials)
        elif ran is None and self.race_round is not None and self.race_round[1] > 0:
            # A stretch of the race between search trials starts here: its first round is priced
            # from the race's last round, not from the search trials' estimate, which knows
            # nothing of the third side each candidate's process steps. Seen on the zoo's ViT-B/16
            # (--budget 10m, 2026-12-07): every round ran as a stretch of one, each priced as
            # two-sided processes, and the run ended 1m 56s over its budget.
            wall, processes = self.race_round
            each_s = plan.without_eager_alone(wall / processes, processes, trials)
        fits = plan.confirm_round_fits(self.left(), trials, each_s)
        if fits:  # a round runs: the next call times it. One that does not fit may be asked for less
            self.round_began, self.rounds_timed = now, timed  # (a part of it: Race.run), priced the same
        return fits

    def has_room(self, seconds: float) -> bool:
        """Whether about ``seconds`` more fit, the outputs still to write (``fits`` also logs)."""
        return not self.bounded or seconds + OUTPUT_RESERVE_S <= self.left()

    def fits(self, phase: str, seconds: float, log: Callable[[str], None]) -> bool:
        """Whether an optional phase of about ``seconds`` fits (``has_room``); if not, it is
        recorded as skipped and ``log`` says so."""
        if self.has_room(seconds):
            return True
        self.skip(phase)
        log(f"  {phase} skipped: about {format_duration(seconds)} does not fit in the "
            f"{format_duration(max(0.0, self.left()))} left of the --budget")
        return False

    def overrun(self, what: str) -> str | None:
        """The line saying that ``what`` (steps that run whatever the budget says) used it all up."""
        if self.left() >= 0:
            return None
        return (f"{what} took {format_duration(self.elapsed())}, more than the --budget of "
                f"{format_duration(self.budget_s or 0.0)}: no search trial fits")

    def mark_reported(self) -> None:
        """The outputs are being written with what was cut and skipped so far."""
        self.reported = (dict(self.cut), list(self.skipped))

    def cuts_unreported(self) -> bool:
        """Whether a phase was cut or skipped after the outputs were last written."""
        return self.bounded and self.reported != (self.cut, self.skipped)

    def phase_seconds(self) -> dict[str, float]:
        """Seconds per phase in run order; ``other``: what no phase covers (importing torch, loading
        the workload, the space and the study, the summary); ``total``: the run's wall time so far."""
        now = self.now()
        spent = dict(self.phases)
        for name, began in self.running.items():  # the phase writing the reports counts its time so far
            spent[name] = spent.get(name, 0.0) + now - began
        ordered = {p: round(spent[p], 3) for p in PHASES if p in spent}
        total = self.elapsed()
        return {**ordered, "other": round(max(0.0, total - sum(spent.values())), 3), "total": round(total, 3)}

    def budget_record(self) -> dict | None:
        """What the budget did, for the study (None without one)."""
        if not self.bounded:
            return None
        return {"seconds": self.budget_s, "used_s": round(self.elapsed(), 3), "cut_short": dict(self.cut),
                "skipped": list(self.skipped)}

    def progress_text(self, left_s: float | None) -> str:
        """``1m 20s elapsed, about 3m 10s left``, never more left than the budget has."""
        if self.bounded and left_s is not None:
            left_s = min(left_s, max(0.0, self.left()))
        text = f"{format_duration(self.elapsed())} elapsed"
        return text + (f", about {format_duration(left_s)} left" if left_s is not None else "")
