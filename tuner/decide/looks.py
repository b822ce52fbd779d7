"""The race's looks: after which rounds it looks at its figures, and the confidence each look's
intervals are taken at so that all of them hold together (tuner/decide/stats.py's decision)."""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .boundaries import t_boundaries, t_inside, usable, z_boundaries

#: Above this many degrees of freedom a look's t statistic is taken as a z statistic: the t scale
#: then moves a boundary by less than 0.2 %, and the exact recursion's terms grow with them.
T_DFS_UP_TO = 400


@dataclass(frozen=True)
class Looks:
    """The looks a race has taken: the rounds done at each, out of the ``planned`` rounds it may
    run. ``final``: no look follows (the race's last round, or a ``--budget`` that fits no more),
    so this one spends what the error rate has left."""

    taken: tuple[int, ...]
    planned: int
    final: bool = False

    def confidence(self, confidence: float, candidates: float, dfs: Sequence[float] | None = None) -> float:
        """The confidence this look's intervals are taken at (:func:`look_confidence`); ``dfs``:
        the degrees of freedom of the t statistic at each look :attr:`taken`."""
        return look_confidence(confidence, self.taken, self.planned, candidates, self.final, dfs)

    def since(self, joined: int) -> Looks:
        """The looks of a candidate that joined after ``joined`` rounds, counted in its own rounds
        out of the rounds the race had left for it: its error rate is spent over its own looks,
        from its own first one, so a late joiner's boundaries are those of a race that started
        when it did (the rounds before it have no figure of its own to err on)."""
        if joined <= 0:
            return self
        own = tuple(n - joined for n in self.taken if n > joined) or (1,)
        return Looks(own, max(1, self.planned - joined), self.final)


def arrival_share(index: int) -> float:
    """The share of the race's error rate held by the candidate that joined ``index``-th (0: plain
    compile, which opens the race): a half for plain compile, then ``1 / (2 j (j + 1))`` for the
    ``j``-th candidate after it (a quarter, a twelfth, a twenty-fourth ...), which sums to the
    other half however many join. Bonferroni over every candidate that could ever join, so it
    holds without planning their number: until 2026-12-07 the race split the rate ``1 + k`` ways
    from its start (``--confirm k``), and in 13 of the zoo's 14 runs of measurement 12 no
    finalist ever came, so plain compile's looks paid for candidates that never ran.

    >>> [round(arrival_share(i), 4) for i in range(4)], round(sum(arrival_share(i) for i in range(10**5)), 4)
    ([0.5, 0.25, 0.0833, 0.0417], 1.0)
    """
    return 0.5 if index <= 0 else 0.5 / (index * (index + 1))


def look_confidence(confidence: float, taken: Sequence[int], planned: int, candidates: float = 1,
                    final: bool = False, dfs: Sequence[float] | None = None) -> float:
    """The confidence the intervals of the last of the ``taken`` looks are taken at, so that every
    interval of every look, for each of ``candidates``, holds at ``confidence`` together.

    The error rate ``alpha = 1 - confidence`` is shared among the candidates (Bonferroni: the race
    picks its leader among them) and, for each, spent over the looks by Lan and DeMets' Pocock-type
    function ``alpha x ln(1 + (e - 1) t)`` of the information ``t = rounds / planned``; the
    boundary of each look is computed exactly from the correlation of the looks (each look's
    figures contain the earlier ones': tuner/decide/boundaries.py), not by Bonferroni over the
    looks, which counts every look as a fresh chance to err. A ``final`` look spends all that is
    left: valid because what ends the race there (its last round, the budget's clock) does not
    depend on the figures, and only as long as nothing looks after it (tuner/decide/race.py
    refuses to). Its interval is what Bonferroni over the looks would have kept in reserve for
    rounds that never run (the zoo's BERT server, cut at 6 of 18 rounds: 99.3 % instead of 99.7 %
    per interval).

    With ``dfs``, the degrees of freedom of the t statistic at each look, the boundaries are those
    of the t statistics themselves (``boundaries.t_boundaries``): at the returned confidence, a t
    interval at the last look's degrees of freedom crosses with just the probability planned for
    it. Without, they are the z statistic's, whose tail probabilities taken as t quantiles err
    about 7 % more often than planned at the race's 5-50 degrees of freedom.

    >>> round(look_confidence(0.95, (2, 3), 18, 2), 5), round(look_confidence(0.95, (2, 3), 18, 2, dfs=(5, 8)), 5)
    (0.99694, 0.99737)
    """
    alpha = (1 - confidence) / max(1, candidates)
    fractions = tuple(min(1.0, n / max(1, planned)) for n in taken)
    spend = [alpha * _spent(t) for t in fractions]
    if final or fractions[-1] >= 1.0:
        spend[-1] = alpha
    if dfs is not None and 1 <= dfs[-1] and max(dfs) <= T_DFS_UP_TO:
        kept = usable(dfs)
        whole = tuple(int(dfs[k]) for k in kept)
        return t_inside(t_boundaries(whole, tuple(spend[k] for k in kept))[-1], whole[-1])
    bound = z_boundaries(fractions, tuple(spend))[-1]
    return 1 - 2 * (1 - _normal_cdf(bound))


def _spent(fraction: float) -> float:
    """The share of the error rate spent once ``fraction`` of the planned rounds ran (Pocock-type:
    early looks cost about what Bonferroni over the looks costs them, late ones less)."""
    return math.log(1 + (math.e - 1) * fraction)


def _normal_cdf(z: float) -> float:
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


def look_rounds(rounds: int, first: int = 2) -> list[int]:
    """After which rounds a race of at most ``rounds`` rounds looks at its figures: ``first``,
    then each about 1.5 times the one before (2, 3, 5, 8, 12, 18, ...), and always the last.
    Few looks cost little confidence each, and the rounds between them are where a close call
    gathers its evidence."""
    if rounds < first:
        return [max(1, rounds)]
    looks = [first]
    while looks[-1] < rounds:
        looks.append(min(rounds, max(looks[-1] + 1, math.ceil(looks[-1] * 1.5))))
    return looks
