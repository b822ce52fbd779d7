"""The race's looks: after which rounds it looks at its figures, and the confidence each look's
intervals are taken at so that all of them hold together (tuner/decide/stats.py's decision)."""
from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np


@dataclass(frozen=True)
class Looks:
    """The looks a race has taken: the rounds done at each, out of the ``planned`` rounds it may
    run. ``final``: no look follows (the race's last round, or a ``--budget`` that fits no more),
    so this one spends what the error rate has left."""

    taken: tuple[int, ...]
    planned: int
    final: bool = False

    def confidence(self, confidence: float, candidates: float) -> float:
        """The confidence this look's intervals are taken at (:func:`look_confidence`)."""
        return look_confidence(confidence, self.taken, self.planned, candidates, self.final)

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
                    final: bool = False) -> float:
    """The confidence the intervals of the last of the ``taken`` looks are taken at, so that every
    interval of every look, for each of ``candidates``, holds at ``confidence`` together.

    The error rate ``alpha = 1 - confidence`` is shared among the candidates (Bonferroni: the race
    picks its leader among them) and, for each, spent over the looks by Lan and DeMets' Pocock-type
    function ``alpha x ln(1 + (e - 1) t)`` of the information ``t = rounds / planned``; the
    boundary of each look is computed exactly from the correlation of the looks (each look's
    figures contain the earlier ones': :func:`_boundaries`), not by Bonferroni over the looks,
    which counts every look as a fresh chance to err. A ``final`` look spends all that is left:
    valid because what ends the race there (its last round, the budget's clock) does not depend
    on the figures. Its interval is what Bonferroni over the looks would have kept in reserve for
    rounds that never run (the zoo's BERT server, cut at 6 of 18 rounds: 99.3 % instead of 99.7 %
    per interval)."""
    alpha = (1 - confidence) / max(1, candidates)
    fractions = tuple(min(1.0, n / max(1, planned)) for n in taken)
    spend = [alpha * _spent(t) for t in fractions]
    if final or fractions[-1] >= 1.0:
        spend[-1] = alpha
    bound = _boundaries(fractions, tuple(spend))[-1]
    return 1 - 2 * (1 - _normal_cdf(bound))


def _spent(fraction: float) -> float:
    """The share of the error rate spent once ``fraction`` of the planned rounds ran (Pocock-type:
    early looks cost about what Bonferroni over the looks costs them, late ones less)."""
    return math.log(1 + (math.e - 1) * fraction)


def _normal_cdf(z: float) -> float:
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


_erf = np.vectorize(math.erf, otypes=[float])
#: Points of the grid on which the density of the continuing races is carried from look to look.
_GRID = 401


@functools.lru_cache(maxsize=1024)
def _boundaries(fractions: tuple[float, ...], spend: tuple[float, ...]) -> tuple[float, ...]:
    """Two-sided boundaries ``c_k`` on the z scale for looks at information ``fractions``, such
    that a race with nothing to find first crosses at look ``k`` with probability ``spend[k] -
    spend[k-1]`` (Armitage, McPherson and Rowe's recursion: the z statistic is a Brownian motion
    observed at the looks; the density of the races not yet stopped is carried on a Simpson grid
    over ``(-c, c)``, and the next look's crossing probability is in closed form)."""
    c = NormalDist().inv_cdf(1 - spend[0] / 2)
    bounds = [c]
    nodes, weights = _simpson(c)
    weights = weights * np.exp(-nodes ** 2 / 2) / math.sqrt(2 * math.pi)  # P(no crossing yet), per node
    for k in range(1, len(fractions)):
        before, t = fractions[k - 1], fractions[k]
        walk = nodes * math.sqrt(before)  # the Brownian motion at the look before, where races go on
        sd = math.sqrt(max(t - before, 1e-12))
        target = float(weights.sum()) - max(spend[k] - spend[k - 1], 0.0)
        lo, hi = 0.0, 40.0
        for _ in range(80):  # bisection: what stays inside rises with c
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if _inside(mid, t, walk, sd, weights) < target else (lo, mid)
        bounds.append(hi)
        nodes, grid = _simpson(hi)
        moved = (nodes[:, None] * math.sqrt(t) - walk[None, :]) / sd
        density = np.exp(-moved ** 2 / 2) / (sd * math.sqrt(2 * math.pi)) @ weights * math.sqrt(t)
        weights = grid * density
    return tuple(bounds)


def _inside(c: float, t: float, walk: np.ndarray, sd: float, weights: np.ndarray) -> float:
    """P(no crossing before, and ``|Z| < c`` at information ``t``), from the races still going
    at ``walk`` (with probability ``weights``), each moving by N(0, sd^2) until ``t``."""
    hi = (c * math.sqrt(t) - walk) / (sd * math.sqrt(2))
    lo = (-c * math.sqrt(t) - walk) / (sd * math.sqrt(2))
    return float(weights @ (0.5 * (_erf(hi) - _erf(lo))))


def _simpson(c: float) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and Simpson weights over ``(-c, c)``."""
    nodes = np.linspace(-c, c, _GRID)
    w = np.ones(_GRID)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    return nodes, w * (nodes[1] - nodes[0]) / 3


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
