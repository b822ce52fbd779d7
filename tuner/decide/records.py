"""One candidate's processes in the race, as the race collects them and the decision weighs them
(tuner/decide/evidence.py).

A process whose threads waited for a core, or whose machine's time the hypervisor gave to other
guests (steal), more than :data:`CROWDED` of its timed wall time (tuner/measure/contention.py)
measured another job as much as its config: it is kept apart from the model's samples.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..core.config import CompileConfig
from ..core.score import Scoring
from . import stats

#: The record key of eager as a user's process starts (glibc's heap unpinned).
AS_STARTED = "eager-as-started"
#: A process is crowded when its threads waited for a core this share of its timed wall time.
CROWDED = 0.10


@dataclass
class Record:
    """One candidate's confirmation processes."""

    config: CompileConfig
    key: str = ""
    steps: list[tuple[int, float]] = field(default_factory=list)
    """(round, mean step) of each process that was not crowded."""
    beside: list[float] = field(default_factory=list)
    """Eager's mean step in each of those processes that timed eager beside the config (paired)."""
    rival: list[float | None] = field(default_factory=list)
    """Plain compile's mean step in each of those processes that stepped it as a third side (its
    rival: tuner/measure/steps.py), None in the others; aligned with :attr:`steps`."""
    crowded: list[float] = field(default_factory=list)
    """The core-wait share of each crowded process (left out of the model)."""
    waits: list[float] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)
    cold: list[float] = field(default_factory=list)
    """Cold compiles: plain compile's baseline trial's, then each process that compiled without a cache."""
    warm: list[float] = field(default_factory=list)
    first_compile: list[float] = field(default_factory=list)
    """The run's first compile (plain compile's baseline trial), named apart for the report. It is
    one of :attr:`cold` too: the issue that asked it be modelled apart expected it slower, on the
    machine's cold caches, and on the README example it was not (33.9 s against the race's 34.6 s
    and 31.9 s, 2026-12-07, Intel Xeon); dropping it from the pool cost plain compile a third of
    its cold compiles and a decision a round (tests/test_race.py)."""
    crowded_compiles: list[tuple[bool, float]] = field(default_factory=list)
    """(warm?, seconds) of each compile whose threads waited for a core over :data:`CROWDED` of it:
    it read the other job as much as the compile, and is left out where a clean one of its kind
    exists (:meth:`compile_samples`)."""
    peak_memory: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    joined: int = 0
    """The race's round this candidate joined at: its looks count from there (``stats.Looks.since``)."""
    dropped: str = ""
    """Why the race stopped measuring it (it trails the leader, or its comparison with plain compile
    is decided). Its figures stay in the report; it is never chosen later on them, frozen."""

    def __post_init__(self) -> None:
        self.key = self.key or self.config.key()

    def add(self, result: dict, scoring: Scoring, round_: int) -> None:
        """One process's figures (``round_`` counts from 0)."""
        if result.get("status") != "ok":
            self.failures.append((result.get("failure") or {}).get("category", "failed"))
            return
        wait, load = result.get("core_wait_share"), result.get("load_average")
        if wait is not None and result.get("steal_share") is not None:
            wait += float(result["steal_share"])  # the hypervisor ran another guest: as good as waiting
        if wait is not None:
            self.waits.append(float(wait))
        if load is not None:
            self.loads.append(float(load))
        self.peak_memory.append(float(result.get("peak_memory_mb") or 0.0))
        if self.config.compiles and result.get("compile_time_s") is not None:
            warm, seconds = bool(result.get("compiled_from_cache")), float(result["compile_time_s"])
            compile_wait = result.get("compile_wait_share")
            if compile_wait is not None and float(compile_wait) > CROWDED:
                self.crowded_compiles.append((warm, seconds))
            else:
                (self.warm if warm else self.cold).append(seconds)
        if wait is not None and wait > CROWDED:
            self.crowded.append(float(wait))
            return
        self.steps.append((round_, float(result.get("step_mean_s") or result["step_s"])))
        eager_beside = result.get("eager_step_mean_s") or result.get("eager_step_s")
        if result.get("timing") == "beside" and eager_beside:
            self.beside.append(float(eager_beside))
        rival = result.get("rival_step_mean_s")
        self.rival.append(float(rival) if rival else None)

    @property
    def paired(self) -> bool:
        """Whether every process timed eager beside the config (tuner/decide/stats.py's paired model)."""
        return bool(self.steps) and len(self.beside) == len(self.steps)

    def samples(self, eager_key: str) -> list[stats.Sample]:
        """The model's samples: each process's own step and, paired, eager's beside it."""
        if not self.paired:
            return [stats.Sample(self.key, rnd, s) for rnd, s in self.steps]
        out = []
        for i, ((rnd, s), e) in enumerate(zip(self.steps, self.beside)):
            process = f"{self.key}#{i}"
            out += [stats.Sample(eager_key, rnd, e, process), stats.Sample(self.key, rnd, s, process)]
        return out

    def rival_samples(self, rival_key: str) -> list[stats.Sample]:
        """The processes that stepped plain compile beside this config, as paired samples of the two
        (each process its own block: its effect cancels in the pair, as eager's does)."""
        return self._with_rival(lambda i, s: (self.key, s), rival_key)

    def ride_samples(self, eager_key: str, rival_key: str) -> list[stats.Sample]:
        """The same processes as samples of plain compile against eager: eager's side and the rival's,
        paired in each process (plain compile rode in it; tuner/decide/evidence.py)."""
        if not self.paired:
            return []
        return self._with_rival(lambda i, s: (eager_key, self.beside[i]), rival_key)

    def _with_rival(self, other, rival_key: str) -> list[stats.Sample]:
        """Each process that stepped the rival: the rival's sample and ``other(i, step)``'s
        ``(key, seconds)``, one block per process."""
        out = []
        for i, ((rnd, s), r) in enumerate(zip(self.steps, self.rival)):
            if r:
                process = f"{self.key}#{i}"
                key, seconds = other(i, s)
                out += [stats.Sample(key, rnd, seconds, process), stats.Sample(rival_key, rnd, r, process)]
        return out

    @property
    def rival_rounds(self) -> int:
        """The rounds with a process that stepped plain compile beside this config."""
        return len(self.rival_round_set)

    @property
    def processes(self) -> int:
        return len(self.steps) + len(self.crowded)

    @property
    def rounds(self) -> int:
        """The rounds in which it ran cleanly (a candidate decides only after :data:`OWN_ROUNDS`)."""
        return len(self.round_set)

    @property
    def round_set(self) -> set[int]:
        """Those rounds."""
        return {rnd for rnd, _ in self.steps}

    @property
    def rival_round_set(self) -> set[int]:
        """The rounds with a clean process that stepped plain compile beside this config."""
        return {rnd for (rnd, _), r in zip(self.steps, self.rival) if r}

    def compile_samples(self, scoring: Scoring) -> list[float]:
        """The compile times the score charges: warm ones where it charges a warm cache and has them;
        crowded ones only where no clean one of that kind was measured (they read high: a
        conservative figure rather than none)."""
        warm = self.warm or [s for w, s in self.crowded_compiles if w]
        if scoring.compile_cost == "warm" and warm:
            return warm
        return self.cold or [s for w, s in self.crowded_compiles if not w]
