"""The statistics a verdict rests on: a model of fresh processes, intervals at a stated
confidence, and the sequential three-way decision (compile, stay eager, or measure more).

**The measurement model.** The process is the unit of sampling: on a shared machine two fresh
processes running the same step differ by 5-20 %, far more than the steps inside one. So each
process contributes one sample, its mean step, and on the log scale

    log step(config c, round r, process p) = mu_c + rho_r + e,    e ~ N(0, sigma^2)

where ``rho_r`` is what the machine did to every process of round ``r`` (drift: the rounds
interleave every candidate) and ``sigma`` is the spread between processes. The model is fitted by
least squares over every process of the confirmation, eager and compiled alike, so ``sigma`` is
pooled from all of them with ``N - C - R + 1`` degrees of freedom, instead of resting on the
largest of two or three eager pairs. A speedup is ``exp(mu_eager - mu_c)``; its interval is a
t-interval on that log contrast.

**Paired processes.** Most of that spread is the process's own (where its pages and threads
landed, what the machine did during its seconds) and hits eager and a compiled config alike when
one process times both (then in blocks of steps; step by step since: docs/statistics.md):
measured on a 4-block transformer here, 16 fresh processes each, the ratio of eager alone over
compiled alone in neighbouring processes spread 14.4 % and the ratio inside one process 4.2 %,
the same speedup (1.13x, 1.11x). So where the heap is pinned (which removed the one bias timing
in one process had: docs/zoo.md) each confirmation process of a config times eager beside it,
and the model takes the process's effect ``pi_p`` in place of the round's:

    log step(c, p) = mu_c + pi_p + e

so the speedup's interval is a paired t-interval over processes, about a tenth of the rounds for
the same width. Eager's level ``E`` for totals is the mean of every pinned eager figure: its
processes alone and its side of each paired process (tuner/decide/evidence.py).

**The saving** of a config over eager is ``steps x E x (1 - 1/speedup) - compile`` (``E``: eager's
mean step, ``compile``: the mean of the config's cold compiles, their spread pooled over the
candidates' cold compiles alone: :func:`compile_costs`). Its interval maps the speedup's through
that formula exactly and adds E's and the compile's uncertainty by the MOVER method.

**The decision** (:func:`decide`), with a tie margin ``m`` (a share of eager's total), puts each
candidate's saving interval in one of three zones (:func:`zone`): *compile* when it lies above zero
and reaches ``m``; *tie* when it lies inside ``(-m, m)``, two one-sided tests of equivalence at once
(Schuirmann's TOST: compiling buys nothing worth it, either way); *slower* when it lies below zero
and is no tie. The race says compile when a candidate is in the compile zone (the best by estimate
leads), stay eager when every candidate is a tie or slower (or trails, beyond doubt, one that is),
and otherwise measures another round. Until 2026-12-04 a candidate whose interval lay below ``m``
was a tie, one-sided (-3.6 % to +0.04 % of eager's total read "a tie within 2 %"), and one above
zero was compile however far below ``m`` it lay.

The race looks at the data after rounds 2, 3, 5, 8, 12, 18 (:func:`look_rounds`) and picks its
leader among several candidates, so each interval is taken at a higher confidence, such that all
of them hold at the stated one together (repeated confidence intervals, Jennison and Turnbull):
the error rate is shared among the candidates that start the race (Bonferroni; one dropped later
keeps its share) and spent over the looks by a Pocock-type function with boundaries computed from
the looks' correlation, for the t statistics at each look's degrees of freedom
(:func:`look_confidence`, tuner/decide/boundaries.py); the race's last look, where its rounds or
a ``--budget`` end it, spends what is left, and no round runs after it. Until 2026-12-03 it was
Bonferroni over the planned looks as well, which kept the share of looks that a budget never let
run (the zoo's BERT server: 1.09x (1.01x-1.17x) after 6 of 18 rounds, each interval at 99.7 %,
undecided). tests/test_stats.py
measures the error rates on simulated processes of known spread, with and without a budget that
cuts the race short, with heavy tails and an outlier process, and where compiling saves exactly
nothing; each rate two-sided, against its nominal value where the race's rate has one.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from .looks import Looks, arrival_share, look_confidence, look_rounds  # noqa: F401 - the race's looks, where they are decided
from .student_t import _normal_quantile, t_quantile  # noqa: F401 - the quantiles every interval here takes

#: The confidence every interval the tool states is taken at.
CONFIDENCE = 0.95
#: A saving below this share of eager's total is a tie: not worth compiling for.
TIE_MARGIN = 0.02


# ----------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class Sample:
    """One process's mean step (seconds) of one candidate, in which round. ``process`` names
    the process when it timed more than one candidate (eager and a config alternating): the
    model then removes that process's effect instead of the round's."""

    key: str
    round: int
    step_s: float
    process: str | None = None


@dataclass(frozen=True)
class Interval:
    """An estimate and its interval at ``confidence``."""

    estimate: float
    low: float
    high: float
    confidence: float

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


@dataclass(frozen=True)
class ProcessModel:
    """The fitted model: each candidate's log level, the spread between processes, its df."""

    keys: tuple[str, ...]
    level: dict[str, float]
    """Candidate -> mu (log seconds, rounds' effects removed; round 0 is the reference)."""
    sigma: float
    """The spread between processes (log scale: 0.05 is about 5 %)."""
    df: int
    count: dict[str, int]
    _cov: np.ndarray
    """(X'X)^+ over the candidates' columns: the contrasts' variances are sigma^2 times its quadratic forms."""

    def log_ratio(self, a: str, b: str) -> tuple[float, float]:
        """``(mu_a - mu_b, its standard error)``: log of b's speedup over a (steps a / steps b)."""
        i, j = self.keys.index(a), self.keys.index(b)
        v = self._cov[i, i] + self._cov[j, j] - 2 * self._cov[i, j]
        return self.level[a] - self.level[b], self.sigma * math.sqrt(max(v, 0.0))

    def contrast(self, a: str, b: str) -> Contrast:
        """:meth:`log_ratio` with the model's degrees of freedom."""
        d, se = self.log_ratio(a, b)
        return Contrast(d, se, float(self.df))

    def speedup(self, eager: str, key: str, confidence: float = CONFIDENCE) -> Interval:
        """Eager's step over ``key``'s, with its t-interval at ``confidence``."""
        return self.contrast(eager, key).speedup(confidence)


@dataclass(frozen=True)
class Contrast:
    """The log of one mean step over another (``log(a / b)``: b's speedup over a), its standard
    error and degrees of freedom. Contrasts from separate fits (each candidate's own paired model:
    tuner/decide/evidence.py) are independent, and :meth:`minus` combines two of them with
    Welch and Satterthwaite's degrees of freedom: a candidate against plain compile, each timed
    beside eager in processes of its own, is ``log(eager / plain) - log(eager / candidate)``.

    >>> c = Contrast(0.10, 0.01, 5.0).minus(Contrast(0.04, 0.01, 5.0))
    >>> round(c.d, 2), round(c.se, 4), c.df
    (0.06, 0.0141, 10.0)
    """

    d: float
    se: float
    df: float

    def minus(self, other: Contrast) -> Contrast:
        """This contrast less an independent ``other`` (``log(e/a) - log(e/b) = log(b/a)``)."""
        parts = [(self.se ** 2, self.df), (other.se ** 2, other.df)]
        var = sum(v for v, _ in parts)
        if min(self.df, other.df) < 1:
            df = 0.0
        elif var <= 0:
            df = min(self.df, other.df)
        else:
            df = var ** 2 / sum(v ** 2 / f for v, f in parts if v > 0)
        return Contrast(self.d - other.d, math.sqrt(var), df)

    def speedup(self, confidence: float = CONFIDENCE) -> Interval:
        """``exp(d)`` with its t-interval at ``confidence`` (no interval below one degree of freedom)."""
        half = t_quantile(0.5 + confidence / 2, self.df) * self.se if self.df >= 1 else math.inf
        return Interval(math.exp(self.d), _exp(self.d - half), _exp(self.d + half), confidence)


def _exp(x: float) -> float:
    return math.exp(x) if x < 700 else math.inf


def fit(samples: Iterable[Sample]) -> ProcessModel:
    """Least squares of the measurement model over ``samples`` (any mix of rounds and candidates;
    a candidate missing from some rounds is fine; samples that name their ``process`` share that
    process's effect instead of their round's: the paired model of the module's text). ``df``
    is 0, and ``sigma`` unknown (0), until some candidate has been measured twice."""
    samples = [s for s in samples if s.step_s > 0 and math.isfinite(s.step_s)]
    keys = tuple(dict.fromkeys(s.key for s in samples))
    blocks = list(dict.fromkeys(_block(s) for s in sorted(samples, key=lambda s: s.round)))
    cols = {k: i for i, k in enumerate(keys)}
    rcols = {b: len(keys) + i for i, b in enumerate(blocks[1:])}
    x = np.zeros((len(samples), len(keys) + len(rcols)))
    y = np.array([math.log(s.step_s) for s in samples])
    for row, s in enumerate(samples):
        x[row, cols[s.key]] = 1.0
        if _block(s) in rcols:
            x[row, rcols[_block(s)]] = 1.0
    count = {k: sum(1 for s in samples if s.key == k) for k in keys}
    if not samples:
        return ProcessModel((), {}, 0.0, 0, {}, np.zeros((0, 0)))
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    rank = int(np.linalg.matrix_rank(x))
    df = len(samples) - rank
    resid = y - x @ beta
    sigma = math.sqrt(float(resid @ resid) / df) if df > 0 else 0.0
    cov = np.linalg.pinv(x.T @ x)[: len(keys), : len(keys)]
    return ProcessModel(keys, {k: float(beta[i]) for k, i in cols.items()}, sigma, df, count, cov)


def _block(s: Sample) -> tuple[str, object]:
    """What a sample shares its effect with: its process when that timed several candidates, else its round."""
    return ("process", s.process) if s.process is not None else ("round", s.round)


def look_dfs(samples: Sequence[Sample], looks: Iterable[int]) -> tuple[int, ...]:
    """The degrees of freedom :func:`fit` leaves over the ``samples`` a look after each of
    ``looks`` rounds had (those of rounds 0 to n - 1): the samples less the candidates and the
    blocks, plus one, the model's rank where each block shares a candidate with the rest (each
    paired process holds eager, each unpaired round times it). What the looks' boundaries are
    calibrated at (tuner/decide/looks.py).

    >>> pairs = [Sample(k, r, 1.0 + 0.1 * i, f"p{i}") for i, r in enumerate([0, 0, 0, 1, 1, 1]) for k in "ec"]
    >>> look_dfs(pairs, [1, 2])  # a paired t: its processes less one
    (2, 5)
    """
    samples = [s for s in samples if s.step_s > 0 and math.isfinite(s.step_s)]
    out = []
    for n in looks:
        seen = [s for s in samples if s.round < n]
        rank = len({s.key for s in seen}) + len({_block(s) for s in seen}) - 1
        out.append(max(0, len(seen) - rank) if seen else 0)
    return tuple(out)


# ----------------------------------------------------------------------------- totals and savings


@dataclass(frozen=True)
class Cost:
    """What one candidate costs a run, with the uncertainty of each part."""

    key: str
    compile_s: float
    compile_se: float
    compile_df: float


#: A cold compile's relative spread, as a prior, where a candidate was measured cold once: every
#: compile under the tie margin of eager's total is (``race.Race._cold_compiles``), so few or no
#: pairs give a spread. Cold compiles here vary by 3-5 % (the pooled figures of the zoo's races);
#: this is twice the most. It counts as :data:`PRIOR_COLD_DF` degrees of freedom pooled with the
#: pairs there are. Before 2026-12-07 plain compile compiled cold three times whatever its size:
#: on the zoo's GPT-2 training 53 s compiles against a 142 s margin cost the opening about 90 s.
PRIOR_COLD_SPREAD = 0.10
#: The degrees of freedom :data:`PRIOR_COLD_SPREAD` counts as. Not many: a pair that differs by far
#: more still widens the interval. With no pair a 53 s compile is +-30 s at a look's confidence
#: (t at 4 df), well inside a 142 s margin; one pair alone at 1 df made the zoo's BERT server's
#: 26 s compile +-260 s wide at one look (2026-12-07, the prior then taken as known when no pair
#: existed, and not at all beside one).
PRIOR_COLD_DF = 4


def compile_costs(samples: dict[str, list[float]], replicates: Iterable[Sequence[float]] = ()) -> dict[str, Cost]:
    """Each candidate's mean compile and its standard error. The relative spread is pooled on the
    log scale, each candidate's compiles about their own mean, over the candidates' ``samples``
    and the further ``replicates``: groups of the same kind of compile (cold, where the score
    charges cold) from candidates that are not weighed (one that failed a later process). A fresh
    process varies by a share of what it does, but a cold compile by more than a warm one (3-5 %
    against 1-2 %), so warm compiles never set a cold compile's spread: until 2026-12-04 they were
    pooled in, and at that mix the cold mean's 95 % interval held its truth 72 % of the time
    (tests/test_stats.py). Degrees of freedom come from pooling over candidates: two cold
    compiles of one candidate alone give one, whose t quantile at the looks' confidence (76 at
    99.6 %) makes a 42 s compile +-520 s wide (the zoo's ResNet-50, 2026-12-03: cold compiles of
    48.6 s and 35.0 s); three candidates' pairs give three. A candidate with one sample borrows
    the pooled spread. Where a candidate was measured cold once (its compile under the tie
    margin), :data:`PRIOR_COLD_SPREAD` joins the pool as :data:`PRIOR_COLD_DF` degrees of freedom.

    >>> cost = compile_costs({"a": [40.0, 42.0], "b": [20.0, 20.8]})["a"]
    >>> round(cost.compile_s, 1), cost.compile_df
    (41.0, 2.0)
    >>> once = compile_costs({"a": [40.0], "b": [20.0]})["a"]
    >>> round(once.compile_se, 3), once.compile_df
    (4.0, 4.0)
    """
    groups = [[math.log(v) for v in vs if v > 0] for vs in [*samples.values(), *replicates]]
    ss = sum(sum((v - sum(vs) / len(vs)) ** 2 for v in vs) for vs in groups if len(vs) > 1)
    df = sum(len(vs) - 1 for vs in groups if len(vs) > 1)
    if any(len([v for v in vs if v > 0]) == 1 for vs in samples.values()):
        ss, df = ss + PRIOR_COLD_DF * PRIOR_COLD_SPREAD ** 2, df + PRIOR_COLD_DF
    rel = math.sqrt(ss / df) if df else 0.0
    out = {}
    for k, vs in samples.items():
        positive = [v for v in vs if v > 0]
        mean = sum(positive) / len(positive) if positive else 0.0
        se = mean * rel / math.sqrt(len(positive)) if positive and df else (mean if positive else 0.0)
        out[k] = Cost(k, mean, se, float(df) if df else (1.0 if positive else math.inf))
    return out


def saving(model: ProcessModel, base: str, key: str, steps: int, base_step_s: float, base_step_se_log: float,
           cost: Cost, confidence: float, base_cost: Cost | None = None, base_df: int = 1) -> Interval:
    """``base``'s total minus ``key``'s: ``steps x B x (1 - 1/speedup) - (compile - base's compile)``
    (``B``: base's mean step; eager's, or plain compile's when a finalist is set against it;
    ``base_step_se_log`` its standard error on the log scale, from ``base_df + 1`` processes),
    with its interval.

    The steps' part is a monotone function of the log speedup, so its interval is the speedup's
    interval mapped through it, exactly (a linearisation would claim a saving where the speedup's
    own interval reaches 1.0x). The other parts, B's level and the compiles, are added to it by
    the MOVER method (Zou and Donner: each part's distance to its own bound, in quadrature), so
    the saving's interval lies above zero only where the speedup's lies above what the compile
    costs."""
    return saving_of(model.contrast(base, key), steps, base_step_s, base_step_se_log, cost, confidence, base_cost,
                     base_df)


def saving_of(contrast: Contrast, steps: int, base_step_s: float, base_step_se_log: float, cost: Cost,
              confidence: float, base_cost: Cost | None = None, base_df: int = 1) -> Interval:
    """:func:`saving` of a :class:`Contrast` (``log(base's step / key's step)``) measured in any
    way: one model's, or the difference of two candidates' own (a finalist against plain compile)."""
    d, se_d = contrast.d, contrast.se
    scale = steps * base_step_s
    compile_s = cost.compile_s - (base_cost.compile_s if base_cost else 0.0)
    gain = scale * (1 - math.exp(-d))
    est = gain - compile_s
    if contrast.df < 1:
        return Interval(est, -math.inf, math.inf, confidence)
    q = 0.5 + confidence / 2
    t_d = t_quantile(q, contrast.df)
    # A speedup's interval reaching far below 1x (a t quantile of hundreds at one degree of freedom
    # and a look's confidence) loses more than any float holds: its end is -inf, not an overflow
    # (seen at a 99.9 % rule in tests/test_stats.py).
    below = gain - scale * (1 - _exp(-(d - t_d * se_d)))
    above = scale * (1 - math.exp(-(d + t_d * se_d))) - gain
    level = t_quantile(q, max(1, base_df)) * abs(gain) * base_step_se_log
    compile_half = _compile_half(cost, base_cost, q)
    return Interval(est, est - math.hypot(below, level, compile_half), est + math.hypot(above, level, compile_half),
                    confidence)


def _compile_half(cost: Cost, base_cost: Cost | None, q: float) -> float:
    """Half the interval of a compile time (or of a difference of two), Welch-Satterthwaite df."""
    parts = [(cost.compile_se ** 2, cost.compile_df)]
    if base_cost is not None:
        parts.append((base_cost.compile_se ** 2, base_cost.compile_df))
    var = sum(v for v, _ in parts)
    if var <= 0:
        return 0.0
    df = var ** 2 / sum(v ** 2 / f for v, f in parts if v > 0)
    return t_quantile(q, df) * math.sqrt(var)


# ----------------------------------------------------------------------------- deciding


#: Where a saving's interval lies against zero and the tie margin (:func:`zone`).
Zone = Literal["compile", "tie", "slower"]


@dataclass(frozen=True)
class Call:
    """One look's answer: ``compile``, ``stay_eager`` or None (measure more)."""

    verdict: str | None
    leader: str | None
    why: str
    zone: Zone | None = None
    """The leader's zone when the race is decided: ``compile``; ``tie`` or ``slower`` (stay eager)."""
    zones: dict[str, Zone | None] = field(default_factory=dict)
    """Each candidate's own zone (None: not decided)."""


def zone(saving: Interval, margin_s: float) -> Zone | None:
    """Where a saving's interval lies: ``compile`` above zero and reaching the margin, ``tie``
    inside ``(-margin_s, margin_s)`` (an equivalence test, two one-sided tests at once), ``slower``
    below zero and no tie; None when it spans more than one of them.

    >>> [zone(Interval(e, lo, hi, 0.95), 20.0) for e, lo, hi in [(40, 5, 75), (10, 5, 15), (-40, -75, -5)]]
    ['compile', 'tie', 'slower']
    >>> zone(Interval(-17.0, -36.0, 0.4, 0.95), 20.0) is None  # a loss of up to 36 s is no tie within 20 s
    True
    """
    if saving.low > 0 and saving.high >= margin_s:
        return "compile"
    if -margin_s < saving.low and saving.high < margin_s:
        return "tie"
    if saving.high < 0:
        return "slower"
    return None


def decide(savings: dict[str, Interval], margin_s: float) -> Call:
    """The three-way decision from each candidate's saving interval (see the module's text):
    compile with the best candidate in the compile zone; stay eager when every candidate is a tie
    or slower, or trails such a one beyond doubt (its interval below that one's: what the race
    stops measuring, and no better than it); otherwise measure more.

    >>> decide({"a": Interval(10.0, 5.0, 15.0, 0.95)}, 20.0).zone  # saves, but less than the margin
    'tie'
    """
    if not savings:
        return Call("stay_eager", None, "no candidate")
    zones = {k: zone(s, margin_s) for k, s in savings.items()}
    # one with an interval leads one without (a candidate a round in: its estimate is one round's luck)
    leader = max(savings, key=lambda k: (math.isfinite(savings[k].low), savings[k].estimate))
    proven = [k for k, z in zones.items() if z == "compile"]
    if proven:
        best = max(proven, key=lambda k: savings[k].estimate)
        return Call("compile", best, "its saving's interval lies above zero and reaches the tie margin", "compile",
                    zones)
    eager_is_enough = [k for k, z in zones.items() if z in ("tie", "slower")]
    if all(k in eager_is_enough or any(savings[k].high < savings[j].low for j in eager_is_enough) for k in savings):
        why = ("its saving's interval lies inside the tie margin, either way" if zones[leader] == "tie" else
               "the best saving's interval lies below zero")
        return Call("stay_eager", leader, why, zones[leader], zones)
    return Call(None, leader, "an interval spans zero or the tie margin", None, zones)


#: The most rounds :func:`rounds_to_decide` counts up to with degrees of freedom.
FARTHEST_ROUND = 400
#: The fewest degrees of freedom whose t quantile :func:`rounds_to_decide` projects: below them the
#: spread itself is too uncertain (at 1 df the quantile alone would promise a 70-fold narrowing of
#: an interval whose spread may have come out small by luck), and the rounds alone are counted.
FEWEST_DF_TO_PROJECT = 4


def rounds_to_decide(interval: Interval, margin_s: float, rounds: int, df: int | None = None) -> float | None:
    """About how many rounds in all would decide a saving measured so far as ``interval`` after
    ``rounds`` rounds (an interval shrinks as 1/sqrt(rounds)); None when the estimate sits on a
    boundary and no number of rounds can be promised. The zone reached first is the one whose
    boundary lies farther from the estimate: 30 % of the margin from zero, a tie once the half
    width falls below 70 % of the margin; 70 % from zero, slower (or compile) once it falls below
    70 % (its far end still past the margin: no tie); beyond the margin, slower or compile.

    With ``df``, the spread's degrees of freedom now, the interval's t quantile also falls as
    rounds add processes (df grows with them), at the same confidence (later looks take a lower
    one: what is left out errs long). Seen on the zoo's ViT-B/16 (2026-12-05): at its first look
    (5 df, a quantile near 5) the rounds alone said 33, more than the race's 18, so the search
    took the rounds; a second run that raced on called the tie at round 8.
    """
    half = (interval.high - interval.low) / 2
    if not math.isfinite(half) or half <= 0:
        return None
    distance = max(abs(interval.estimate), margin_s - abs(interval.estimate))
    if distance <= 0:
        return None
    if not df or df < FEWEST_DF_TO_PROJECT or rounds < 1:
        return rounds * min(half / distance, 1e100) ** 2  # a half width past 1e154 s would overflow
    q = 0.5 + interval.confidence / 2
    now = t_quantile(q, df)
    for n in range(rounds + 1, FARTHEST_ROUND + 1):
        if half * math.sqrt(rounds / n) * t_quantile(q, df * n / rounds) / now <= distance:
            return float(n)
    return float(FARTHEST_ROUND)


def pooled_log_se(values: Sequence[float]) -> float:
    """Standard error of the mean of ``values`` on the log scale (0 for fewer than two)."""
    logs = [math.log(v) for v in values if v > 0]
    if len(logs) < 2:
        return 0.0
    m = sum(logs) / len(logs)
    return math.sqrt(sum((v - m) ** 2 for v in logs) / (len(logs) - 1) / len(logs))
