"""One race from the start: eager and plain ``torch.compile`` raced in fresh processes as soon as
the baselines are measured, the search's finalists joining the same race later, so a verdict is
known minutes into a run and the search refines it instead of starting it.

Confirmation used to begin after the search, from nothing: the zoo's BERT server waited 15 min of
search for its first confirmed figure, though eager against plain compile, timed paired in four
processes, decides a 1.04x (docs/zoo.md). Here the race's records (every process's figures) live
as long as the run; :meth:`Race.run` adds rounds until a look decides, and a candidate that joins
(:meth:`Race.join`) is timed beside the rest from the next round on. Each look hands its decision
to ``on_look``, which writes best_config.yaml: the answer so far, kept whatever stops the run.

Three rules keep a race that changes its field honest:
- the error rate is shared among the candidates the race is *planned* for (``slots``: plain
  compile and the ``--confirm`` finalists), fixed when it starts, not among those measured so far,
  so a look taken before the finalists join holds at the same level as one after;
- a candidate chosen by the search brings none of its search figures: its search trial won
  partly by luck (a fast process, a short compile), so its steps and both of its cold compiles
  (:data:`COLD_COMPILES`) come from processes after it was chosen. Plain compile is chosen before
  anything is measured: its baseline trial's cold compile counts too, a third, since the cold
  spread is pooled over cold compiles alone (tuner/decide/stats.py) and a race of plain compile
  alone would otherwise rest on one degree of freedom (a t quantile near 100 at a look's
  confidence, on a compile that can be half of what compiling saves). Where rounds are paired,
  the whole baseline trial is one of the first round's processes, which then runs one fewer of
  plain compile's (:meth:`Race.join`), and eager's baseline trial is its process of eager alone
  (:meth:`Race.take_eager_baseline`);
- the race stops only when a look decides *and* every candidate in it has had its own first look
  (:meth:`Race.first_look_after`: :data:`MIN_ROUNDS` rounds since it joined, one for a paired
  finalist joining a race past its first look): a verdict already decided for plain compile does
  not end the race before a finalist has been measured.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core.config import EAGER, PLAIN_COMPILE, CompileConfig
from ..core.score import Scoring
from . import stats
from .evidence import AS_STARTED, Record, weigh

#: The fewest rounds before a candidate's first look: one more than it takes to see any spread.
MIN_ROUNDS = 2
#: Cold compiles of a candidate measured after it was chosen: its first processes compile without
#: the kept cache, the ones after them from it (the warm figure).
COLD_COMPILES = 2
#: Each candidate's processes in a round where they are paired (eager timed beside the config in
#: each). A paired process is one sample of the speedup and the processes of eager alone are none,
#: so one per round left two of a round's three processes out of the contrast, and a look after two
#: rounds had one degree of freedom (a t quantile above 100 at a look's confidence). Three per
#: round give five by the first look; drift needs no interleaving here, each process's own effect
#: cancels in the pair.
PAIRED_PER_ROUND = 3
#: The most processes of eager alone in a round: one pinned and one as the user's process starts
#: (paired), or two (first and last) unpaired. The budget's plan counts each as a confirmation
#: trial (they compile nothing: an overestimate).
EAGER_ALONE = 2
#: The rounds that time eager alone where rounds are paired: the first look's, for the pin's own
#: gain and a fresh process's spread. After them eager's level comes from its side of each paired
#: process, and a round is the candidates' processes only. Seen on the zoo's GPT-2 training
#: (--budget 10m, 2026-12-05): two of each round's five processes were eager alone, a 130 s round
#: took ~50 s of them, and the fourth round, which would likely have called its 0.6 % a tie, did
#: not fit. Unpaired rounds time eager alone every round: it is their only contrast.
EAGER_ALONE_ROUNDS = MIN_ROUNDS

Decision = dict[str, Any]


def round_processes(candidates: int, heap_apart: bool, paired: bool, per_round: int = 1, alone: bool = True) -> int:
    """The processes of one round: each candidate's ``per_round``, and where ``alone``
    (:func:`times_eager_alone`) eager alone once (paired) or twice, and eager as started where the
    heap's gain is measured apart."""
    return candidates * per_round + ((1 if paired else 2) + heap_apart if alone else 0)


def times_eager_alone(round_: int, paired: bool) -> bool:
    """Whether round ``round_`` (from 0) times eager alone: every unpaired round, the first
    :data:`EAGER_ALONE_ROUNDS` paired ones."""
    return not paired or round_ < EAGER_ALONE_ROUNDS


@dataclass
class Race:
    """Eager against the candidates that joined, round by round in fresh processes.

    ``measure(config, label, round_=r, heap=None, reuse_cache=bool, **timing)`` runs one isolated
    process; ``heap="default"`` asks for eager as a user's process starts (only with
    ``heap_apart``); ``paired``: each config's process times eager beside it
    (``timing="beside"``). ``rounds``: the most rounds of the whole race; ``slots``: the
    candidates its error rate is planned for (see the module's text).
    """

    scoring: Scoring
    measure: Callable[..., dict]
    rounds: int = 12
    slots: int = 1
    heap_apart: bool = True
    paired: bool = False
    tie_margin: float = stats.TIE_MARGIN
    log: Callable[[str], None] = print
    on_look: Callable[[Decision], None] | None = None
    per_round: int = 1
    """Each candidate's processes in a round (:data:`PAIRED_PER_ROUND` where paired)."""
    finalist_keys: list[str] = field(default_factory=list)
    """The search's finalists as the study names them (what tells a stored decision is current)."""
    records: dict[str, Record] = field(init=False)
    racing: list[CompileConfig] = field(init=False, default_factory=list)
    joined: dict[str, int] = field(init=False, default_factory=dict)
    """Candidate key -> the round it joined at."""
    done: int = field(init=False, default=0)
    walls: list[float] = field(init=False, default_factory=list)
    ran: int | None = field(init=False, default=None)
    """The processes of the round just run (None before the first)."""
    decision: Decision = field(init=False, default_factory=dict)
    asked: dict[str, int] = field(init=False, default_factory=dict)
    """Candidate key -> its processes so far (the first :data:`COLD_COMPILES` compile cold)."""
    answer: Decision = field(init=False, default_factory=dict)
    """The last look that decided (``on_look`` has seen it)."""
    ahead: dict[str, int] = field(init=False, default_factory=dict)
    """Candidate key -> the round whose processes its baseline trial opened (:meth:`join`)."""

    def __post_init__(self) -> None:
        self.records = {EAGER.key(): Record(EAGER)}
        if self.heap_apart:
            self.records[AS_STARTED] = Record(EAGER, key=AS_STARTED)
        self.looks = stats.look_rounds(self.rounds, MIN_ROUNDS)

    # ----------------------------------------------------------------------------- the field

    def join(self, configs: list[CompileConfig], cold: dict[str, float] | None = None,
             baseline: dict[str, Any] | None = None) -> list[CompileConfig]:
        """Add candidates from the next round on (one already in the race stays as it is);
        ``cold``: key -> a cold compile measured before the race, of which plain compile's alone
        counts (a finalist's is where the search's luck is: see the module's text). ``baseline``:
        plain compile's baseline trial, whole. Where rounds are paired and it timed eager beside
        plain compile, it is one of the joining round's processes (:data:`PAIRED_PER_ROUND`), not
        only a cold compile: plain compile was chosen before anything was measured, so its steps are
        a sample like any other, and the first look comes one process sooner. Returns the
        candidates that joined."""
        new = []
        for cfg in configs:
            key = cfg.key()
            if key in self.records or not cfg.compiles:
                continue
            self.records[key] = Record(cfg)
            self.racing.append(cfg)
            self.joined[key] = self.done
            if key == PLAIN_COMPILE.key() and self._opens_with(baseline):
                self.records[key].add(baseline or {}, self.scoring, self.done)
                self.ahead[key] = self.done
            elif key == PLAIN_COMPILE.key() and (cold or {}).get(key):
                self.records[key].cold.append(float((cold or {})[key]))
            new.append(cfg)
        return new

    def take_eager_baseline(self, baseline: dict[str, Any] | None) -> bool:
        """Eager's baseline trial as the first round's process of eager alone, where rounds are
        paired and the race has not started: it is a process of eager with the heap pinned, timing
        the race's share of the steps, measured before anything was chosen, so the first look comes
        one process sooner, as with plain compile's baseline (:meth:`join`). Unpaired rounds time eager
        first and last around the candidates against drift, which a trial minutes earlier is not.
        Whether it was taken."""
        if not (self.paired and self.done == 0 and baseline and baseline.get("status") == "ok"
                and (baseline.get("step_mean_s") or baseline.get("step_s")) and EAGER.key() not in self.ahead):
            return False
        # It timed eager beside eager (the run's A/A check): one sample of eager's level like any
        # other process of eager, not a pair of the paired model
        self.records[EAGER.key()].add({**baseline, "timing": None}, self.scoring, 0)
        self.ahead[EAGER.key()] = 0
        return True

    def _opens_with(self, baseline: dict[str, Any] | None) -> bool:
        """Whether plain compile's baseline trial counts as a process of the race (see :meth:`join`)."""
        return bool(self.paired and self.per_round > 1 and baseline and baseline.get("status") == "ok"
                    and baseline.get("timing") == "beside" and baseline.get("step_mean_s")
                    and baseline.get("eager_step_mean_s")
                    and not baseline.get("compiled_from_cache"))

    def _taken(self, key: str, round_: int) -> int:
        """Processes of ``key`` this round already has from before the race (its baseline trial:
        :meth:`join`, :meth:`take_eager_baseline`)."""
        return 1 if self.ahead.get(key) == round_ else 0

    # ----------------------------------------------------------------------------- rounds

    def run(self, round_fits: Callable[[int, int | None], bool] | None = None, until: int | None = None) -> Decision:
        """Rounds until a look settles the race (:meth:`settled`), the race's last round, the
        ``until``-th round of the race (earlier where a look estimates that more rounds than that
        would decide it: a stretch, the opening, ends rather than spend rounds it cannot use), or
        ``round_fits(processes, ran)`` (a ``--budget``) says the next round does not fit; then it
        looks once more, spending what the error rate has left, and the decision says
        ``cut_short``."""
        if self.decision and self.settled():
            return self.decision  # settled, and nothing joined since that would need its own look
        last = min(self.rounds, until if until is not None else self.rounds)
        fresh = True  # the budget's clock times a round from its previous call: none in this stretch yet
        while self.done < last:
            alone = self._times_eager_alone(self.done)
            n = round_processes(len(self.racing), self.heap_apart, self.paired, self.per_round, alone=alone) \
                - sum(self._taken(c.key(), self.done) for c in self.racing) \
                - (self._taken(EAGER.key(), self.done) if alone else 0)
            if round_fits is not None and not round_fits(n, None if fresh else self.ran):
                if not self.done:
                    self.log("  race skipped: not even one round fits in what is left of the --budget")
                    return self.decision
                self.log(f"  race stopped after round {self.done}/{self.rounds}: the next round does not fit in the "
                         "--budget")
                self._look(final=True)
                self.decision["cut_short"] = f"{self.done} of {self.rounds} rounds"
                break
            fresh = False
            self._round()
            if self.done not in self.looks and self.done < self.rounds:
                self.log(f"  race round {self.done}/{self.rounds} done")
                continue
            self._look(final=self.done >= self.rounds)
            if self.settled():
                self.log(f"  race round {self.done}/{self.rounds} done: {self.decision.get('verdict') or 'failed'}")
                break
            dropped = self.decision.pop("trailing", [])
            self.racing = [c for c in self.racing if c.key() not in dropped]
            self.log(f"  race round {self.done}/{self.rounds} done: not decided yet ({self.decision.get('reason')})"
                     + (f"; dropped (trails the leader beyond doubt): "
                        f"{', '.join(self.records[k].config.describe() for k in dropped)}" if dropped else ""))
            need = (self.decision.get("to_decide") or {}).get("rounds")
            if until is not None and not (need and need <= last):
                break  # this stretch cannot decide it: the rounds are worth more to what comes next
        self.decision.pop("trailing", None)
        return self.decision

    def settled(self) -> bool:
        """Whether the last look decided (or failed) and every candidate racing had its first look."""
        d = self.decision
        if d.get("failed"):
            return True
        return (d.get("verdict") in ("compile", "stay_eager")
                and all(self.done - self.joined[c.key()] >= self.first_look_after(c) for c in self.racing))

    def promising(self) -> bool:
        """Whether another round is worth running now: the race is not settled, has rounds left, and
        its last look (if any) estimated that the race's rounds can decide it."""
        need = (self.decision.get("to_decide") or {}).get("rounds")
        return (bool(self.racing) and not self.settled() and self.done < self.rounds
                and not self.decision.get("cut_short") and (need is None or need <= self.rounds))

    def first_look_after(self, config: CompileConfig) -> int:
        """The rounds ``config`` runs before its first look: :data:`MIN_ROUNDS` for a candidate that
        starts the race, one for a finalist that joins a race already past its first rounds where
        rounds are paired. Its interval then rests on the race's pooled spread (eager and plain
        compile's processes so far, the spread's degrees of freedom), not on its own processes
        alone, and one paired round gives it :data:`PAIRED_PER_ROUND` samples and both of its cold
        compiles (:data:`COLD_COMPILES`). A second round cost the README example's finalists 2-3
        rounds of 11 processes after a verdict the opening had already decided (1.59x the old
        command's time; looks fall at rounds 2, 3, 5: a finalist joining at 2 waited until 5)."""
        joined = self.joined[config.key()]
        paired_joiner = self.per_round >= COLD_COMPILES and joined >= MIN_ROUNDS
        return 1 if paired_joiner else MIN_ROUNDS

    def _round(self) -> None:
        r = self.done
        started = time.monotonic()
        order = self.racing if r % 2 == 0 else list(reversed(self.racing))
        eager = self.records[EAGER.key()]
        alone = self._times_eager_alone(r)
        eager_alone = alone and not self._taken(EAGER.key(), r)
        plan = [*([eager] if eager_alone else []), *([self.records[AS_STARTED]] if self.heap_apart and alone else []),
                *(self.records[c.key()] for i in range(self.per_round) for c in order
                  if i < self.per_round - self._taken(c.key(), r)),
                *([] if self.paired else [eager])]
        for i, rec in enumerate(plan):
            kwargs: dict[str, Any] = {"heap": "default" if rec.key == AS_STARTED else None}
            if rec.config.compiles:
                if self.paired:
                    kwargs["timing"] = "beside"
                kwargs["reuse_cache"] = self.asked.get(rec.key, 0) >= COLD_COMPILES
                self.asked[rec.key] = self.asked.get(rec.key, 0) + 1
            rec.add(self.measure(rec.config, f"confirm-{r}-{i}", round_=r, **kwargs), self.scoring, r)
        self.ran = len(plan)
        self.walls.append(time.monotonic() - started)
        self.done += 1

    def _times_eager_alone(self, round_: int) -> bool:
        """:func:`times_eager_alone`, and every round while a candidate's processes came back
        without eager beside them (a trial that could not time it): eager alone is then their only
        contrast."""
        unpaired = any(self.records[c.key()].steps and not self.records[c.key()].paired for c in self.racing)
        return unpaired or times_eager_alone(round_, self.paired)

    def _look(self, final: bool) -> None:
        """Weigh every process so far at this look's confidence; hand the decision to ``on_look``."""
        taken = stats.Looks((*(n for n in self.looks if n < self.done), self.done), self.rounds,
                            final or self.done >= self.rounds)
        decision: Decision = weigh(self.records, self.scoring, looks=taken, tie_margin=self.tie_margin,
                                   slots=self.slots)
        decision["rounds_done"] = self.done
        decision["racing"] = [c.key() for c in self.racing]
        if self.walls:
            decision["round_s"] = sum(self.walls) / len(self.walls)
        to_decide = decision.get("to_decide")
        if to_decide and to_decide.get("rounds") and self.walls:
            to_decide["seconds"] = round(max(0.0, to_decide["rounds"] - self.done) * decision["round_s"], 1)
        self.decision = decision
        if decision.get("verdict") in ("compile", "stay_eager"):
            self.answer = {k: v for k, v in decision.items() if k != "trailing"}
            if self.on_look is not None:
                self.on_look(self.answer)

    def final(self) -> Decision:
        """What the race says once it stops: its last look, or where that one did not decide (a
        budget's cut, a machine that turned busy), the last look that did. The looks' intervals
        hold together (repeated confidence intervals: tuner/decide/looks.py), so a decided look
        stays a valid answer whatever the looks after it could not tell."""
        if self.answer and self.decision.get("verdict") not in ("compile", "stay_eager"):
            later = self.decision.get("reason")
            return {**self.answer, "later_looks": f"{self.done - self.answer['rounds_done']} more round(s) did not "
                                                  f"decide ({later})"}
        return self.decision
