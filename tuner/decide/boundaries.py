"""Group-sequential boundaries: how far out each look's statistic must lie to cross, so that a race
with nothing to find first crosses at each look with exactly the probability planned for it
(tuner/decide/looks.py plans it). Two recursions, one per scale the race's statistics live on:

- :func:`z_boundaries`, for a z statistic (the spread known): Armitage, McPherson and Rowe's
  recursion over the Brownian motion the statistic traces from look to look;
- :func:`t_boundaries`, for the t statistics tuner/decide/stats.py actually takes, at each look's
  own degrees of freedom. Until 2026-12-07 the race took the z boundaries' tail probabilities as
  t quantiles, which keeps each look's own error right but not their joint one: a t statistic's
  spread is estimated afresh at each look, so the looks agree less than z statistics do and more
  of them cross. Simulated, plain compile's share of 5 % (2.5 %) came out 2.66 %, and 2.64-2.67 %
  for a race cut short (tests/test_stats.py).

**Why the t looks form a chain of one variable.** A look's t statistic, ``T = sqrt(nu) R /
sqrt(1 - R^2)``, is a function of ``R``, the cosine between the data (projected onto the part the
contrast and the residuals live in, of dimension ``n = nu + 1``) and the contrast's own direction.
The data being normal, that projection's direction is independent of its length. From one look to
the next, ``m`` more dimensions join (the new degrees of freedom) and

    R' = a sqrt(B) R + sqrt(1 - a^2) sqrt(1 - B) D

where ``a^2`` is the information's ratio between the looks, ``B ~ Beta(n/2, m/2)`` is the share of
the new length that the old dimensions hold, and ``D`` is the cosine of a direction in the ``m``
new ones; ``B`` and ``D`` are independent of each other and of every earlier look. So the race's
looks are a Markov chain in ``R`` alone, and the probability that the races not stopped yet cross
at the next look follows from the distribution of ``R`` among them, in closed form: the cosine of
a random direction in ``k`` dimensions is ``t`` with ``k - 1`` degrees of freedom in disguise, whose
distribution for a whole number of degrees of freedom is a finite sum (Abramowitz and Stegun
26.7.3-4). The information is counted as ``nu + 1``, the processes of a one-sample t: exact for the
paired model, where each of a candidate's processes is one sample of its log ratio; for the
unpaired model, where rounds add information and residual degrees of freedom at different rates,
an approximation (its spread is pooled over many more degrees of freedom, and the t scale matters
less there).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np

from .student_t import t_quantile

_erf = np.vectorize(math.erf, otypes=[float])
#: Points of the grid on which the density of the continuing races is carried from look to look (z).
_GRID = 401
#: Cells the races still going are kept in from one t look to the next, equal in ``arcsin R`` (where
#: the density of ``R`` is smooth even at few degrees of freedom), and Gauss-Legendre nodes over
#: ``B``. At 100 and 24 a race of six looks takes about 0.1 s, and its boundaries lie within 0.002
#: of those at 400 and 32 (on the t scale; under 0.2 % of a look's crossing probability).
_CELLS, _NODES = 100, 24


@functools.lru_cache(maxsize=1024)
def z_boundaries(fractions: tuple[float, ...], spend: tuple[float, ...]) -> tuple[float, ...]:
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


# ----------------------------------------------------------------------------- t looks


@functools.lru_cache(maxsize=1024)
def t_boundaries(dfs: tuple[int, ...], spend: tuple[float, ...]) -> tuple[float, ...]:
    """Two-sided boundaries on the t scale for looks whose t statistics have ``dfs`` degrees of
    freedom (increasing, each at least 1), such that a race with nothing to find first crosses at
    look ``k`` with probability ``spend[k] - spend[k-1]`` (the module's text: the races still
    going are carried in ``R``, uniform within each cell, and each look's crossing probability is
    in closed form from them).

    >>> [round(c, 3) for c in t_boundaries((5, 8), (0.005, 0.01))]  # the first: t's 99.75 % point at 5 df
    [4.773, 3.686]
    """
    rho = _cosine(t_quantile(1 - spend[0] / 2, dfs[0]), dfs[0])
    edges = _cells(rho)
    mass = np.diff(_cosine_cdf(edges, dfs[0]))
    bounds = [_t_of(rho, dfs[0])]
    for k in range(1, len(dfs)):
        n, m = dfs[k - 1] + 1, dfs[k] - dfs[k - 1]
        below = _carried(edges, mass, n, m)
        target = max(spend[k] - spend[k - 1], 0.0) / 2  # each side's: the races are symmetric
        lo, hi = 0.0, 1.0
        for _ in range(50):  # bisection: fewer races lie below -rho as rho rises
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if below(-mid) > target else (lo, mid)
        bounds.append(_t_of(hi, dfs[k]))
        edges = _cells(hi)
        mass = np.diff(below(edges))
    return tuple(bounds)


def t_inside(c: float, df: int) -> float:
    """P(|T| < c) for Student's t with ``df`` (a whole number) degrees of freedom, in closed form:
    the confidence whose t quantile at ``df`` is ``c``.

    >>> round(t_inside(2.5706, 5), 4)
    0.95
    """
    return float(_inside_cosine(np.array(_cosine(c, df)), df)) if math.isfinite(c) else 1.0


def _cosine(t: float, df: int) -> float:
    """The cosine ``R`` whose t statistic at ``df`` degrees of freedom is ``t``."""
    return t / math.sqrt(df + t * t) if math.isfinite(t) else 1.0


def _t_of(rho: float, df: int) -> float:
    return math.sqrt(df) * rho / math.sqrt(1 - rho * rho) if rho < 1 else math.inf


def _cells(rho: float) -> np.ndarray:
    """The cells' edges over ``(-rho, rho)``: narrower towards the ends, where at few degrees of
    freedom the density of ``R`` bends sharply."""
    return np.sin(np.linspace(-math.asin(rho), math.asin(rho), _CELLS + 1))


def _carried(edges: np.ndarray, mass: np.ndarray, n: int, m: int):
    """``P(R' <= z)`` as a function of ``z``, for the races still going in cells ``edges`` with
    ``mass`` each (uniform within a cell) at a look of ``n - 1`` degrees of freedom, ``m`` more at
    the next. For one cell and one node of ``B``, ``P(aU + bD <= z) = b / (a h) x (H((z - a lo) / b)
    - H((z - a hi) / b))``, ``H`` the integral of D's distribution function; summed over the cells,
    each edge's ``H`` is weighed by the density's change across it."""
    s, q = _split(n, m)
    a = math.sqrt(n / (n + m)) * np.sqrt(1 - s * s)
    b = np.maximum(math.sqrt(m / (n + m)) * s, 1e-12)
    density = np.concatenate([[0.0], mass / np.diff(edges), [0.0]])
    coef = np.diff(density)[:, None] * (q * b / a)[None, :]  # edge x node: the density's step up across the edge

    def below(z: float | np.ndarray) -> np.ndarray:
        z = np.asarray(z, dtype=float)
        x = (z[..., None, None] - a[None, :] * edges[:, None]) / b[None, :]
        return (_cosine_integral(x, m - 1) * coef).sum(axis=(-2, -1))
    return below


def _split(n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes and weights for ``s = sqrt(1 - B)``, ``B ~ Beta(n/2, m/2)``: in ``s``
    the density, ``(1 - s^2)^(n/2 - 1) s^(m - 1)``, is bounded (in ``B`` it is not for one new
    degree of freedom), and the nodes are laid over where it is not negligible."""
    grid = np.linspace(0.0, 1.0, 2001)[1:-1]
    log = (n / 2 - 1) * np.log1p(-grid ** 2) + (m - 1) * np.log(grid)
    kept = grid[log > log.max() - 40]
    lo, hi = max(0.0, kept[0] - 5e-4), min(1.0, kept[-1] + 5e-4)
    x, w = np.polynomial.legendre.leggauss(_NODES)
    s = lo + (hi - lo) * (x + 1) / 2
    log = (n / 2 - 1) * np.log1p(-s ** 2) + (m - 1) * np.log(s)
    w = w * np.exp(log - log.max())
    return s, w / w.sum()


def _inside_cosine(z: np.ndarray, df: int) -> np.ndarray:
    """``P(|R| < z)`` for ``z`` in [0, 1], ``R`` the cosine of a random direction in ``df + 1``
    dimensions: ``P(|T| < t)`` of Student's t (Abramowitz and Stegun 26.7.3-4, with ``sin theta
    = z``)."""
    z = np.clip(z, 0.0, 1.0)
    if df == 0:
        return np.where(z >= 1, 1.0, 0.0)
    c2, total, coef, power = 1 - z * z, np.zeros_like(z), 1.0, np.ones_like(z)
    for i in range((df - 1) // 2 if df % 2 else df // 2):
        if i:
            coef *= (2 * i) / (2 * i + 1) if df % 2 else (2 * i - 1) / (2 * i)
        total, power = total + coef * power, power * c2
    if df % 2 == 0:
        return z * total
    return 2 / math.pi * (np.arcsin(z) + z * np.sqrt(c2) * total)


def _inside_integral(z: np.ndarray, df: int) -> np.ndarray:
    """The integral of :func:`_inside_cosine` from 0 to ``z``, in closed form term by term."""
    z = np.clip(z, 0.0, 1.0)
    if df == 0:
        return np.zeros_like(z)
    c2, total, coef = 1 - z * z, np.zeros_like(z), 1.0
    power = c2 * np.sqrt(c2) if df % 2 else c2
    for i in range((df - 1) // 2 if df % 2 else df // 2):
        if i:
            coef *= (2 * i) / (2 * i + 1) if df % 2 else (2 * i - 1) / (2 * i)
        total, power = total + coef * (1 - power) / ((2 * i + 3) if df % 2 else (2 * i + 2)), power * c2
    if df % 2 == 0:
        return total
    return 2 / math.pi * (z * np.arcsin(z) + np.sqrt(c2) - 1 + total)


def _cosine_cdf(x: np.ndarray, df: int) -> np.ndarray:
    """``P(R <= x)`` (``df + 1`` dimensions)."""
    inside = _inside_cosine(np.abs(x), df)
    return np.where(x >= 1, 1.0, np.where(x <= -1, 0.0, 0.5 + np.sign(x) * inside / 2))


def _cosine_integral(x: np.ndarray, df: int) -> np.ndarray:
    """``H(x)``, the integral of ``P(R <= y)`` over ``y`` up to ``x``: 0 below -1, ``x`` above 1."""
    inside = (x + 1) / 2 + (_inside_integral(np.abs(x), df) - float(_inside_integral(np.array(1.0), df))) / 2
    return np.where(x >= 1, x, np.where(x <= -1, 0.0, inside))


def usable(dfs: Sequence[float]) -> list[int]:
    """The looks (indices) whose t statistics can cross and differ from the next one's: a look
    below one degree of freedom states no interval (tuner/decide/stats.py), and one with no more
    degrees of freedom than the next holds the same figures as it (a round of crowded processes).
    Dropping them moves their share of the error rate to the next look kept (what the spending
    plans is the total spent by each look, not each look's own part)."""
    kept = [k for k, df in enumerate(dfs) if df >= 1]
    return [k for i, k in enumerate(kept) if i + 1 == len(kept) or int(dfs[kept[i + 1]]) > int(dfs[k])]
