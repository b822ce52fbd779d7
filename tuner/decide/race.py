"""One race from the start: eager and plain ``torch.compile`` raced in fresh processes as soon as
the baselines are measured, the search's finalists joining the same race later, so a verdict is
known minutes into a run and the search refines it instead of starting it.

Confirmation used to begin after the search, from nothing: the zoo's BERT server waited 15 min of
search for its first confirmed figure, though eager against plain compile, timed paired in four
processes, decides a 1.04x (docs/zoo.md). Here the race's records (every process's figures) live
as long as the run; :meth:`Race.run` adds rounds until a look decides, and a candidate that joins
(:meth:`Race.join`) is timed beside the rest from the next round on. Each look hands its decision
to ``on_look``, which writes best_config.yaml: the answer so far, kept whatever stops the run.
What one round runs (its processes, cold compiles, eager alone, plain compile's rides, the part
of a round a ``--budget``'s end fits) is tuner/decide/rounds.py.

Four rules keep a race that changes its field honest:
- each candidate holds a share of the error rate by the order it joined in
  (``stats.arrival_share``: a half for plain compile, then a quarter, a twelfth ...), spent over
  its own looks from when it joined (``stats.Looks.since``), so it holds however many join, and
  plain compile's looks no longer pay for finalists that never come (until 2026-12-07 the rate
  was split ``1 + k`` ways from the start; in 13 of the zoo's 14 runs no finalist joined);
- a candidate joins as soon as the search proposed it, bar a failure or a hopeless total, so its
  search trial, timed as a race process (the race's share of the steps, eager beside it), is one
  of its samples and its cold compile one of its :data:`rounds.COLD_COMPILES` (:meth:`Race.join`). A
  finalist chosen after the search by its search figures brings none of them (that choice is
  where the search's luck is). Plain compile is chosen before anything is measured: its baseline
  trial's cold compile counts too, a third, and where rounds are paired the whole baseline trial
  is one of the first round's processes; eager's baseline trial is its process of eager alone
  (:meth:`Race.take_eager_baseline`);
- a candidate decides only on its own figures after :data:`MIN_ROUNDS` rounds of its own
  processes (paired: its own spread, tuner/decide/evidence.py), and the race looks at each
  candidate's own look rounds as well as its own (:meth:`Race.looks_now`);
- the race stops only when a look decides, every candidate in it has had its own rounds, and none
  racing is undecided against plain compile (:meth:`Race.settled`); a candidate decided against
  plain compile (slower, or a tie: plain compile is simpler), trailing the leader beyond doubt, or
  that the rounds left cannot decide, is dropped and stays dropped (:meth:`Race._drop`, tuner/decide/dropping.py).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core.config import EAGER, PLAIN_COMPILE, CompileConfig
from ..core.score import Scoring
from . import stats
from .dropping import Dropping
from .evidence import AS_STARTED, Record, weigh
from .rounds import EAGER_ALONE_ROUNDS, MIN_ROUNDS, NOT_TIMED, RoundMakeup, round_processes
from .waiting import Waiting

Decision = dict[str, Any]


@dataclass
class Race(Dropping, RoundMakeup):
    """Eager against the candidates that joined, round by round in fresh processes.

    ``measure(config, label, round_=r, heap=None, reuse_cache=bool, **timing)`` runs one isolated
    process; ``heap="default"`` asks for eager as a user's process starts (only with
    ``heap_apart``); ``paired``: each config's process times eager beside it
    (``timing="beside"``). ``rounds``: the most rounds of the whole race.
    """

    scoring: Scoring
    measure: Callable[..., dict]
    rounds: int = 12
    heap_apart: bool = True
    paired: bool = False
    tie_margin: float = stats.TIE_MARGIN
    log: Callable[[str], None] = print
    on_look: Callable[[Decision], None] | None = None
    per_round: int = 1
    """Each candidate's processes in a round (:data:`PAIRED_PER_ROUND` where paired)."""
    beside_plain: bool = False
    """Paired: a candidate beyond plain compile steps plain compile in its processes too, as a third
    side (``measure(..., rival=PLAIN_COMPILE)``), so it is compared with plain compile in one
    process (tuner/decide/against_plain.py)."""
    eager_alone_rounds: int = EAGER_ALONE_ROUNDS
    """Paired: the first rounds that time eager alone (pinned, and as started where ``heap_apart``);
    0 under a ``--budget`` (:data:`NOT_TIMED`). Unpaired rounds time it every round whatever this says."""
    slots: int = 1
    """Candidates beyond plain compile racing undecided against it at once; the search's others wait
    (:attr:`waiting`, :meth:`admit`)."""
    rides_after: int = MIN_ROUNDS
    """Plain compile's own rounds before it may ride in the candidates' processes (:meth:`rides`):
    one where the opening yields after its first round to let the search's first candidate in
    (tuner/decide/confirm.py's ``open_race``, ``shorten``)."""
    finalist_keys: list[str] = field(default_factory=list)
    """The search's finalists as the study names them (what tells a stored decision is current)."""
    records: dict[str, Record] = field(init=False)
    racing: list[CompileConfig] = field(init=False, default_factory=list)
    done: int = field(init=False, default=0)
    walls: list[float] = field(init=False, default_factory=list)
    ran: int | None = field(init=False, default=None)
    """The processes of the round just run (None before the first)."""
    decision: Decision = field(init=False, default_factory=dict)
    cold_rounds: dict[str, list[int]] = field(init=False, default_factory=dict)
    """Candidate key -> the rounds in which it compiled cold (at most :data:`rounds.COLD_COMPILES`, one a round)."""
    answer: Decision = field(init=False, default_factory=dict)
    """The last look that decided (``on_look`` has seen it)."""
    ahead: dict[str, int] = field(init=False, default_factory=dict)
    """Candidate key -> the round whose processes its baseline or search trial opened (:meth:`join`)."""
    looked: list[int] = field(init=False, default_factory=list)
    """The rounds after which the race looked (:meth:`looks_now`)."""
    waiting: list[Waiting] = field(init=False, default_factory=list)
    """Searched configs waiting for a slot (tuner/decide/waiting.py), best first when one frees."""
    spent: int | None = field(init=False, default=None)
    """The round after which a look spent what was left of the error rate (the race's last round,
    or a ``--budget``'s cut): no round runs after it (:meth:`run`)."""

    def __post_init__(self) -> None:
        self.records = {EAGER.key(): Record(EAGER)}
        if self.heap_apart:
            self.records[AS_STARTED] = Record(EAGER, key=AS_STARTED)
        self.looks = stats.look_rounds(self.rounds, MIN_ROUNDS)

    # ----------------------------------------------------------------------------- the field

    def join(self, configs: list[CompileConfig], cold: dict[str, float] | None = None,
             baseline: dict[str, Any] | None = None, opened: dict[str, dict[str, Any]] | None = None
             ) -> list[CompileConfig]:
        """Add candidates from the next round on (one already in the race, or dropped from it,
        stays as it is); ``cold``: key -> a cold compile measured before the race, of which plain
        compile's alone counts. ``baseline``: plain compile's baseline trial, whole; ``opened``:
        key -> a search trial measured as a race process (the race's share of the steps, eager
        beside it). Where rounds are paired, such a trial is one of the joining round's processes
        (:data:`PAIRED_PER_ROUND`) and its cold compile one of the candidate's
        :data:`rounds.COLD_COMPILES`: the candidate joined as soon as the search proposed it, whatever
        its trial said (bar a failure or a hopeless total), so that trial is a sample like any
        other and the candidate costs one process and one cold compile less. Returns the
        candidates that joined."""
        first = {**(opened or {}), **({PLAIN_COMPILE.key(): baseline} if baseline else {})}
        new = []
        for cfg in configs:
            key = cfg.key()
            if key in self.records or not cfg.compiles:
                continue
            self.records[key] = Record(cfg, joined=self.done)
            self.racing.append(cfg)
            record = self.records[key]
            if self._opens_with(first.get(key)):
                record.add(first[key], self.scoring, self.done)
                self.ahead[key] = self.done
                if key != PLAIN_COMPILE.key():
                    self.cold_rounds[key] = [self.done]  # its trial compiled cold: one more, a round later
                elif record.cold:
                    record.first_compile.append(record.cold[-1])
            elif key == PLAIN_COMPILE.key() and (cold or {}).get(key):
                record.cold.append(float((cold or {})[key]))
                record.first_compile.append(record.cold[-1])
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
        """Whether a trial before the race counts as one of its processes (see :meth:`join`)."""
        return bool(self.paired and self.per_round > 1 and baseline and baseline.get("status") == "ok"
                    and baseline.get("timing") == "beside" and baseline.get("step_mean_s")
                    and baseline.get("eager_step_mean_s")
                    and not baseline.get("compiled_from_cache"))

    # ----------------------------------------------------------------------------- rounds

    def run(self, round_fits: Callable[[int, int | None], bool] | None = None, until: int | None = None) -> Decision:
        """Rounds until a look settles the race (:meth:`settled`), the race's last round, the
        ``until``-th round of the race (earlier where a look estimates that more rounds than that
        would decide it: a stretch, the opening, ends rather than spend rounds it cannot use), or
        ``round_fits(processes, ran)`` (a ``--budget``) says the next round does not fit; then it
        looks once more, spending what the error rate has left, and the decision says
        ``cut_short``. After a look that spent what was left (that one, or the race's last round's)
        it runs no round again: the decision stands and says why (``looks_closed``). A waiting
        candidate joins as a slot frees (:meth:`admit`), before the first round and after each look."""
        self.admit()
        if self.decision and self.settled():
            return self.decision  # settled, and nothing joined since that would need its own look
        if self.spent is not None:
            # A look after a spend-all one would be a chance to err that no share of the error rate
            # pays for, and every interval stated would hold less often than it says. The race's
            # answer stands, said so, rather than raising: the run still writes it (a finalist that
            # joined since is not measured; the --budget that cut the race is rarely wider later).
            return self._refused()
        last = min(self.rounds, until if until is not None else self.rounds)
        fresh = True  # the budget's clock times a round from its previous call: none in this stretch yet
        while self.done < last and self.racing:
            n = self.next_round_processes()
            if round_fits is not None and not round_fits(n, None if fresh else self.ran):
                if not self.done:
                    self.log("  race skipped: not even one round fits in what is left of the --budget")
                    return self.decision
                part = self._part_round()
                if part and round_fits(sum(part.values()), None if fresh else self.ran):
                    self._round(only=part)
                    self.log(f"  race round {self.done}/{self.rounds} done, in part: one process of each candidate "
                             "short of its first interval (the whole round does not fit in the --budget)")
                self.log(f"  race stopped after round {self.done}/{self.rounds}: the next round does not fit in the "
                         "--budget")
                self._look(final=True)
                self.decision["cut_short"] = f"{self.done} of {self.rounds} rounds"
                break
            fresh = False
            self._round()
            if not self.looks_now():
                self.log(f"  race round {self.done}/{self.rounds} done")
                continue
            self._look(final=self.done >= self.rounds)
            dropped = self._drop()
            self.admit()  # a candidate decided (or dropped) frees its slot: the next one races from the next round
            if self.settled():
                self.log(f"  race round {self.done}/{self.rounds} done: {self.decision.get('verdict') or 'failed'}"
                         + _dropped_words(dropped))
                break
            self.log(f"  race round {self.done}/{self.rounds} done: not decided yet ({self.decision.get('reason')})"
                     + _dropped_words(dropped))
            need = (self.decision.get("to_decide") or {}).get("rounds")
            if until is not None and not (need and need <= last):
                break  # this stretch cannot decide it: the rounds are worth more to what comes next
        self.decision.pop("trailing", None)
        return self.decision

    def _refused(self) -> Decision:
        """The standing decision, saying why no round runs (:meth:`run`)."""
        why = f"the look after round {self.spent} spent what was left of the error rate: no round runs after it"
        if self.decision.get("looks_closed") != why:
            self.log(f"  race: {why}")
        self.decision["looks_closed"] = why
        return self.decision

    def joiner_processes(self, least: bool = False) -> tuple[int, int]:
        """``(cold, warm)``: the processes a candidate joining after its search trial (one of its
        own, cold) runs, with the rest of the race, until its first look (:data:`MIN_ROUNDS`
        rounds): what the ``--budget`` keeps for it before a search trial starts. Where the race's
        slots are full it will wait (:meth:`admit`): its own processes come once one is decided,
        and only the rest of the race is priced. ``least``: its own processes only as many as its
        first interval needs at the least (a round of its own, then a process of the next: the
        ``--budget``'s last round in part, :meth:`_part_round`), and plain compile riding."""
        waits = self.undecided_beyond_plain() >= self.slots
        # (less its search trial, one of them)
        own = 0 if waits else (self.per_round if least else self.per_round * MIN_ROUNDS - 1)
        cold = 0 if waits else self._cold_compiles("a joiner") - 1
        others = sum(0 if c.key() == PLAIN_COMPILE.key() and self.rides(joining=True) else self._processes_of(c.key())
                     for c in self.racing) * MIN_ROUNDS
        alone = sum(round_processes(0, self.heap_apart, self.paired, alone=self._times_eager_alone(r))
                    for r in range(self.done, self.done + MIN_ROUNDS))
        return cold, own - cold + others + alone

    def looks_now(self) -> bool:
        """Whether the race looks after the round just run: at the race's look rounds
        (:func:`stats.look_rounds`: 2, 3, 5, 8 ...), at its last round, and at each candidate's
        own look rounds counted from when it joined, so a finalist that joins at round 5 has its
        first look after its second round (7), not the race's next (8)."""
        if self.done in self.looks or self.done >= self.rounds:
            return True
        return any(self.done - self.records[c.key()].joined in self.looks for c in self.racing)

    def settled(self) -> bool:
        """Whether the last look decided (or failed), every candidate racing had :data:`MIN_ROUNDS`
        rounds of its own, and none racing is still undecided against plain compile."""
        d = self.decision
        if d.get("failed"):
            return True
        racing = {c.key() for c in self.racing}
        return (d.get("verdict") in ("compile", "stay_eager")
                and all(self.done - self.records[k].joined >= MIN_ROUNDS for k in racing)
                and not racing & set(d.get("undecided_against_plain") or []))

    def promising(self) -> bool:
        """Whether another round is worth running now: the race is not settled, has rounds left, and
        its last look (if any) estimated that the race's rounds can decide it, and no look spent what
        was left of the error rate (the line after a budget's cut said "racing on" before)."""
        need = (self.decision.get("to_decide") or {}).get("rounds")
        return (bool(self.racing) and not self.settled() and self.done < self.rounds and self.spent is None
                and not self.decision.get("cut_short") and (need is None or need <= self.rounds))

    def beyond_plain_joined(self) -> bool:
        """Whether any candidate beyond plain compile has joined (racing, decided or dropped)."""
        return any(k not in (PLAIN_COMPILE.key(), EAGER.key(), AS_STARTED) for k in self.records)

    def undecided_beyond_plain(self) -> int:
        """Candidates beyond plain compile still racing whose comparison with it is open."""
        open_ = set(self.decision.get("undecided_against_plain") or [])
        return sum(1 for c in self.racing if c.key() != PLAIN_COMPILE.key()
                   and (c.key() in open_ or self.done - self.records[c.key()].joined < MIN_ROUNDS))

    def wait(self, entry: Waiting) -> None:
        """A searched config waits for a slot (one in the race or waiting already stays as it is)."""
        key = entry.config.key()
        if key not in self.records and all(w.config.key() != key for w in self.waiting):
            self.waiting.append(entry)

    def admit(self) -> list[CompileConfig]:
        """The waiting candidates with the lowest total as their search trial read it join, while
        fewer than :attr:`slots` beyond plain compile race undecided against it and the race may
        still look. Returns those that joined."""
        joined: list[CompileConfig] = []
        while self.waiting and self.spent is None and self.undecided_beyond_plain() < self.slots:
            entry = min(self.waiting, key=lambda w: w.total_s)
            self.waiting.remove(entry)
            key = entry.config.key()
            new = self.join([entry.config], opened={key: entry.trial} if entry.trial else None)
            if new:
                kept = "; that trial one of its processes" if entry.trial else ""
                self.log(f"  {entry.config.describe()} joins the race (round {self.done + 1}): against eager and plain "
                         f"torch.compile ({entry.reading}{kept})")
            joined += new
        return joined

    def _to_interval(self, decision: Decision) -> None:
        """Where the best config beyond plain compile has no interval yet (fewer than
        :data:`MIN_ROUNDS` rounds of its own): the processes it still needs for one, and about how
        long they take at the last round's pace (``beyond_plain["to_interval"]``), so an answer cut
        short by a ``--budget`` says what a longer one buys. The zoo's GPT-2 training at --budget
        10m (2026-12-07): ``+optimizer`` read 1.28x plain compile's steps in its one process, and
        the verdict said only "no interval: one round"."""
        beyond = decision.get("beyond_plain") or {}
        record = self.records.get(beyond.get("key") or "")
        stated = (beyond.get("saving_interval_s") or [None])[0] is not None
        if record is None or stated or not (self.walls and self.ran):
            return
        need = max(1, self.per_round * MIN_ROUNDS - record.processes)
        beyond["to_interval"] = {"processes": need, "seconds": round(need * self.walls[-1] / self.ran, 1)}

    def _look(self, final: bool) -> None:
        """Weigh every process so far at this look's confidence; hand the decision to ``on_look``."""
        if not self.looked or self.looked[-1] != self.done:
            self.looked.append(self.done)
        taken = stats.Looks(tuple(self.looked), self.rounds, final or self.done >= self.rounds)
        if self.spent is not None and self.done > self.spent:
            raise RuntimeError(f"a look after round {self.done}, though the look after round {self.spent} spent "
                               "what was left of the error rate (Race.run refuses such rounds)")
        if taken.final:
            self.spent = self.done
        decision: Decision = weigh(self.records, self.scoring, looks=taken, tie_margin=self.tie_margin)
        decision["rounds_done"] = self.done
        decision["racing"] = [c.key() for c in self.racing]
        if self.waiting:  # searched, not yet raced: what their search trials read
            decision["waiting"] = [{"config_label": w.config.describe(), "reading": w.reading}
                                   for w in sorted(self.waiting, key=lambda w: w.total_s)]
        if self.paired and not self.eager_alone_rounds:
            decision["eager_alone"] = NOT_TIMED
        if self.walls:
            decision["round_s"] = sum(self.walls) / len(self.walls)
        self._to_interval(decision)
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


def _dropped_words(dropped: list[str]) -> str:
    return f"; stopped measuring {'; '.join(dropped)}" if dropped else ""
