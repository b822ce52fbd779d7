"""What one round of the race is made of (tuner/decide/race.py): which processes it runs, of which
candidates, with which cold compiles, with eager alone or not, whether plain compile runs its own
or rides in the candidates' processes, and the part of a round a ``--budget``'s end still fits.

The race decides *whether* to run a round, looks after it and manages its field (who joins,
waits, is dropped); :class:`RoundMakeup` is the round itself, the ``--budget``'s price of the next
one (:meth:`RoundMakeup.next_round_processes`) and the processes it runs (:meth:`RoundMakeup._round`).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..core.config import EAGER, PLAIN_COMPILE, CompileConfig
from ..core.score import Scoring
from .evidence import AS_STARTED, Record

#: The fewest rounds before a candidate's first look: one more than it takes to see any spread.
MIN_ROUNDS = 2
#: Cold compiles of a candidate measured after it was chosen, one a round: the first process of each
#: of its first rounds compiles without the kept cache, the others from it (the warm figure). Two
#: in one round shared that round's state of the machine (until 2026-12-07, issue 59); spread over
#: rounds they vary as the run's compiles do.
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
#: not fit. Unpaired rounds time eager alone every round: it is their only contrast. Under a
#: ``--budget`` a paired race times it in no round (``Race.eager_alone_rounds``, :data:`NOT_TIMED`).
EAGER_ALONE_ROUNDS = MIN_ROUNDS
#: Why a paired race under a ``--budget`` times no eager alone beyond eager's baseline trial: its
#: processes feed only side figures (the heap pin's own gain, whose interval two rounds cannot give
#: anyway: tuner/decide/eager_alone.py), and they cost a candidate's search trial. On the zoo's
#: GPT-2 training (--budget 10m, 2026-12-07) the opening's three eager-alone processes took about
#: 50 s, and the search trial that would have followed it did not fit.
NOT_TIMED = ("not timed under the --budget: its processes went to the candidates (a run without --budget times "
             "eager alone and as started in its first two rounds)")


def round_processes(candidates: int, heap_apart: bool, paired: bool, per_round: int = 1, alone: bool = True) -> int:
    """The processes of one round: each candidate's ``per_round``, and where ``alone``
    (:func:`times_eager_alone`) eager alone once (paired) or twice, and eager as started where the
    heap's gain is measured apart."""
    return candidates * per_round + ((1 if paired else 2) + heap_apart if alone else 0)


def times_eager_alone(round_: int, paired: bool, rounds: int = EAGER_ALONE_ROUNDS) -> bool:
    """Whether round ``round_`` (from 0) times eager alone: every unpaired round, the first
    ``rounds`` paired ones (:data:`EAGER_ALONE_ROUNDS`, or none under a ``--budget``)."""
    return not paired or round_ < rounds


class RoundMakeup:
    """The rounds of a :class:`tuner.decide.race.Race`: the race's state they read and write is
    declared here, and held by the race (a dataclass)."""

    scoring: Scoring
    measure: Callable[..., dict]
    heap_apart: bool
    paired: bool
    tie_margin: float
    per_round: int
    beside_plain: bool
    eager_alone_rounds: int
    rides_after: int
    records: dict[str, Record]
    racing: list[CompileConfig]
    done: int
    walls: list[float]
    ran: int | None
    decision: dict[str, Any]
    cold_rounds: dict[str, list[int]]
    ahead: dict[str, int]

    def next_round_processes(self) -> int:
        """The processes the next round runs (what the ``--budget`` is asked to fit)."""
        alone = self._times_eager_alone(self.done)
        return (round_processes(0, self.heap_apart, self.paired, alone=alone)
                + sum(self._processes_of(c.key()) - self._taken(c.key(), self.done) for c in self.racing)
                - (self._taken(EAGER.key(), self.done) if alone else 0))

    def _processes_of(self, key: str) -> int:
        """A candidate's processes in the next round: :attr:`per_round`, or one for plain compile
        once its own verdict is decided while candidates beyond it race. They are compared with
        it in their own processes, which step plain compile beside them (or, before those span two
        rounds, through eager, where six more of plain compile's processes against a joiner's six
        take 11 % off the variance of the difference): the joiner's own processes are what it needs."""
        if key != PLAIN_COMPILE.key() or len(self.racing) < 2 or self.per_round <= 1:
            return self.per_round
        if self.rides():
            return 0
        plain = next((c for c in self.decision.get("candidates") or [] if c.get("config") == PLAIN_COMPILE.to_dict()),
                     None)
        decided = plain and plain.get("zone") and self.done - self.records[key].joined >= MIN_ROUNDS
        return 1 if decided else self.per_round

    def _taken(self, key: str, round_: int) -> int:
        """Processes of ``key`` this round already has from before the race (its baseline trial:
        :meth:`join`, :meth:`take_eager_baseline`)."""
        return 1 if self.ahead.get(key) == round_ else 0

    def rides(self, joining: bool = False) -> bool:
        """Whether plain compile rides in the next round's processes of the candidates beyond it
        instead of running its own: each of them steps plain compile as a third side beside eager
        (:attr:`beside_plain`), so each is a paired sample of plain compile against eager as well
        (tuner/decide/evidence.py). Only after plain compile's own first :data:`MIN_ROUNDS` rounds
        (its own spread, its cold compiles), and only while a racing candidate's last process held
        the rival (one past Dynamo's recompile limit leaves it out). On the zoo's Llama training
        (--budget 10m, 2026-12-07, 1.1 s steps) a round of plain compile's own three processes
        beside a candidate's three took about 134 s more, and no search trial fitted at all.
        ``joining``: as if a candidate that will hold it joins (the budget's price of a joiner)."""
        plain = self.records.get(PLAIN_COMPILE.key())
        if not (self.paired and self.beside_plain and self.per_round > 1 and plain is not None
                and self._plain_steps() and self.done - plain.joined >= self.rides_after):
            return False
        beyond = [self.records[c.key()] for c in self.racing if c.key() != PLAIN_COMPILE.key()]
        if plain.rounds >= MIN_ROUNDS:
            return joining or any(not r.rival or r.rival[-1] for r in beyond)
        # its second round from the rides: only processes that did step it, and only while the rides
        # agree with its own processes (pooled: tuner/decide/rides.py), or it would never get one
        row: dict[str, Any] = next((c for c in self.decision.get("candidates") or []
                                    if c.get("config") == PLAIN_COMPILE.to_dict()), {})
        if (row.get("rides") or {}).get("pooled") is False:
            return False
        return joining or any(r.rival and r.rival[-1] for r in beyond)

    def _round(self, only: dict[str, int] | None = None) -> None:
        """One round: each candidate's processes, eager alone where the round times it. ``only``:
        key -> processes, a part of a round (:meth:`_part_round`): those alone."""
        r = self.done
        started = time.monotonic()
        order = self.racing if r % 2 == 0 else list(reversed(self.racing))
        eager = self.records[EAGER.key()]
        alone = self._times_eager_alone(r) and only is None
        eager_alone = alone and not self._taken(EAGER.key(), r)
        share = (lambda key: only.get(key, 0)) if only is not None else (
            lambda key: self._processes_of(key) - self._taken(key, r))
        plan = [*([eager] if eager_alone else []), *([self.records[AS_STARTED]] if self.heap_apart and alone else []),
                *(self.records[c.key()] for i in range(self.per_round) for c in order if i < share(c.key())),
                *([] if self.paired else [eager])]
        for i, rec in enumerate(plan):
            kwargs: dict[str, Any] = {"heap": "default" if rec.key == AS_STARTED else None}
            if rec.config.compiles:
                if self.paired:
                    kwargs["timing"] = "beside"
                colds = self.cold_rounds.setdefault(rec.key, [])
                # a part of a round (the --budget's last) compiles warm, as the clock priced it: the
                # zoo's BERT server ended 45 s over its budget on a 57 s cold compile (2026-12-07)
                cold = only is None and len(colds) < self._cold_compiles(rec.key) and r not in colds
                kwargs["reuse_cache"] = not cold
                if cold:
                    colds.append(r)
                if self.paired and self.beside_plain and rec.key != PLAIN_COMPILE.key() and self._plain_steps():
                    kwargs["rival"] = PLAIN_COMPILE
            rec.add(self.measure(rec.config, f"confirm-{r}-{i}", round_=r, **kwargs), self.scoring, r)
        self.ran = len(plan)
        self.walls.append(time.monotonic() - started)
        self.done += 1

    def _cold_compiles(self, key: str) -> int:
        """The cold compiles a candidate is measured with: :data:`COLD_COMPILES`, or one (its search
        trial's, or plain compile's baseline trial's) for a candidate whose cold compile, or plain
        compile's before it is measured, costs less than the tie margin of eager's total. Its
        compile's spread is then pooled from the others' where one has two, else the prior
        (``stats.compile_costs``, ``PRIOR_COLD_SPREAD``), and the whole compile is within the
        margin, so no second sample of it can move a decision; a cold process of a model whose step
        takes a second costs a minute (the zoo's Llama training: 46 s of a 10,000-step total of
        11,361 s; GPT-2 training's plain compile compiled cold three times, 53 s each, against a
        142 s margin)."""
        own, plain = self.records.get(key), self.records.get(PLAIN_COMPILE.key())
        first = (own.cold if own and own.cold else plain.cold if plain and plain.cold else [None])[0]
        small = first is not None and first < self.tie_margin * self.scoring.steps * self.scoring.eager_step_s
        if key == PLAIN_COMPILE.key():
            # its baseline trial compiled cold before the race (its first compile, reported apart):
            # below the margin that one is all it needs
            return 0 if small and plain is not None and plain.first_compile else COLD_COMPILES
        return 1 if small else COLD_COMPILES

    def _plain_steps(self) -> bool:
        """Whether plain compile ran cleanly in this race: a rival that fails is no yardstick."""
        plain = self.records.get(PLAIN_COMPILE.key())
        return bool(plain and plain.steps and not plain.failures)

    def _times_eager_alone(self, round_: int) -> bool:
        """:func:`times_eager_alone`, and every round while a candidate's processes came back
        without eager beside them (a trial that could not time it): eager alone is then their only
        contrast."""
        unpaired = any(self.records[c.key()].steps and not self.records[c.key()].paired for c in self.racing)
        return unpaired or times_eager_alone(round_, self.paired, self.eager_alone_rounds)

    def _part_round(self) -> dict[str, int]:
        """Where a whole round does not fit in the ``--budget``: one process of each candidate beyond
        plain compile that has a round of its own but not the :data:`MIN_ROUNDS` an interval needs,
        plain compile riding in them (paired; its own processes otherwise). A round of one process
        is a round of its own: with the three of its first it gives a paired spread of three degrees
        of freedom, enough to state a large gain. The zoo's GPT-2 training (--budget 10m,
        2026-12-07): ``+optimizer`` read 1.25x plain compile's steps in its first round, the next
        round's three processes (two minutes) did not fit in the 68 s left, and the run ended with
        it undecided and 11 % of the budget unused."""
        plain = PLAIN_COMPILE.key()
        short = [c.key() for c in self.racing if c.key() != plain and 0 < self.records[c.key()].rounds < MIN_ROUNDS]
        if not short:
            return {}
        return {key: 1 for key in (*short, *([] if self.rides() else [plain]))}
