"""Who stays in the race (tuner/decide/race.py): after each look, the candidates it settled are
dropped and stay dropped: those trailing the leader beyond doubt, those decided against plain
compile (slower, or a tie: plain compile is the simpler choice), those the rounds left cannot
decide, and one near a tie with plain compile that yields its slot to a waiting config that read
better (:class:`Dropping`, the race's base).
"""
from __future__ import annotations

from typing import Any

from ..core.config import PLAIN_COMPILE, CompileConfig
from . import stats
from .evidence import Record
from .rounds import MIN_ROUNDS
from .waiting import Waiting

#: A candidate racing beyond plain compile whose saving over it can reach no more than this many tie
#: margins (the upper end of its interval) is near a tie at best: the search's next config is worth
#: more than deciding it (tuner/run/racing.py), and a waiting config that read better takes its slot
#: (``Race._reads_better``). Seen on the zoo's ResNet-50 (--budget 6m, 2026-12-07): rounds 4 to 8
#: went to deciding cpp_wrapper's 1.01x over plain compile (at most +44.7 s against a 25 s margin
#: after round 4), and 4 configs were left unsearched.
NEAR_TIE_MARGINS = 2.0


def near_tie(row: dict[str, Any]) -> bool:
    """Whether a candidate's row against plain compile can at best come near a tie: the upper end of
    its saving's interval is under :data:`NEAR_TIE_MARGINS` tie margins (False without an interval)."""
    high = (row.get("saving_interval_s") or [None, None])[1]
    return high is not None and high < NEAR_TIE_MARGINS * float(row.get("margin_s") or 0.0)


class Dropping:
    """The race's drop rules: the race's state they read and write is declared here, and held by
    the race (a dataclass)."""

    rounds: int
    done: int
    records: dict[str, Record]
    racing: list[CompileConfig]
    decision: dict[str, Any]
    waiting: list[Waiting]

    def _drop(self) -> list[str]:
        """Stop measuring the candidates the last look settled: those that trail the leader
        beyond doubt, and those decided against plain compile (slower than it or tied with it:
        plain compile, the simpler, is then the better choice), or that the race's rounds left
        cannot decide against it. Plain compile always runs: it is the yardstick. A dropped
        candidate stays dropped (tuner/decide/evidence.py: never chosen on frozen figures)."""
        d, plain = self.decision, PLAIN_COMPILE.key()
        why = {k: "trails the leader beyond doubt" for k in d.pop("trailing", [])}
        rows = d.get("against_plain") or {}
        for c in self.racing:
            key, row = c.key(), rows.get(c.key())
            if key == plain or row is None or key in why or self.done - self.records[key].joined < MIN_ROUNDS:
                continue
            if row["zone"] in ("slower", "ties"):
                why[key] = f"{'slower than' if row['zone'] == 'slower' else 'ties'} plain torch.compile"
            elif row["zone"] is None and not self._can_decide(row, key):
                why[key] = "its comparison with plain torch.compile needs more rounds than the race has left"
            elif row["zone"] is None and (better := self._reads_better(row, key)) is not None:
                why[key] = (f"at most {row['saving_interval_s'][1]:+.1f} s over plain torch.compile, near a tie, while "
                            f"{better.config.describe()} waits ({better.reading}): it yields its slot")
        for key, reason in why.items():
            if key in self.records and key != plain:
                self.records[key].dropped = f"{reason} (round {self.done})"
                for row in (rows.get(key), d.get("beyond_plain")):  # the decision kept says so too
                    if row is not None and (row is rows.get(key) or row.get("key") == key):
                        row["dropped"] = self.records[key].dropped
        self.racing = [c for c in self.racing if c.key() not in why or c.key() == plain]
        return [f"{self.records[k].config.describe()}: {r}" for k, r in why.items() if k in self.records]

    def _reads_better(self, row: dict[str, Any], key: str) -> Waiting | None:
        """A waiting candidate a racing one undecided against plain compile yields its slot to, or
        None: the racing one could at best save a near tie over plain compile (the upper end of its
        saving under :data:`NEAR_TIE_MARGINS` tie margins), and the waiting one read faster steps
        against plain compile in its search trial than the racing one's estimate. Seen on the zoo's
        ViT-B/16 (--budget 10m, 2026-12-07): ``cpp_wrapper``, 1.00x plain compile's steps (at most
        +119.5 s against a 65 s margin after its own two rounds), held the one slot for rounds 3 to 7
        while ``freezing`` and ``cpp_wrapper`` with ``freezing``, at 1.02x in their search trials,
        waited and never raced. Dropping it is an early stop for futility: it can only make a
        "beats plain" rarer, never more frequent than the error rate allows. The waiting one is the
        one :meth:`admit` takes next (the lowest total as its trial read it), and the racing one is
        not the race's choice: dropped, the choice would stand only as an earlier look's answer
        (seen on the zoo's ViT-B/16 at ``af8bc3f``: ``cpp_wrapper``, the only config decided against
        eager, yielded; the looks after could not tell, and the verdict named the dropped config)."""
        speedup = row.get("speedup")
        if speedup is None or not near_tie(row):
            return None
        if not self.waiting or self.decision.get("choice") == self.records[key].config.to_dict():
            return None
        following = min(self.waiting, key=lambda w: w.total_s)
        return following if following.over_plain is not None and following.over_plain > speedup else None

    def _can_decide(self, row: dict[str, Any], key: str) -> bool:
        """Whether the race's rounds left can decide a candidate against plain compile
        (``stats.rounds_to_decide`` of its saving over plain, in its own rounds)."""
        low, high = row.get("saving_interval_s") or (None, None)
        if low is None or high is None:
            return True
        own = self.done - self.records[key].joined
        need = stats.rounds_to_decide(stats.Interval(row["saving_s"], low, high, row.get("look_confidence") or 0.99),
                                      row.get("margin_s") or 0.0, own, df=int(row.get("df") or 0))
        return need is not None and self.records[key].joined + need <= self.rounds
