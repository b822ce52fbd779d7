"""Races of simulated processes of known spread, run through the real race and statistics code
(tuner/decide/confirm.py, race.py, stats.py): the machine, a race, and the counting that the
tests of tests/test_stats.py and tests/test_error_edges.py and benchmarks/error_rates.py share.

A simulated process's mean step is eager's step over the candidate's true speedup, times the
round's drift and the process's own noise (both log-normal, or Student's t with 3 df, or one
process 30 % slow, or one compiled side of a paired process 30 % slow: a hiccup the pair does
not cancel).

Every rate is checked two-sided (:func:`within`): the count must lie in the binomial acceptance
region of the rate the rule should give, so that a rule made too conservative fails as one made
too liberal does; :func:`rule` mis-sets the race's confidence to show that it does.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import math
import random
from collections.abc import Iterator

from tuner.core.config import PLAIN_COMPILE, CompileConfig
from tuner.core.score import Scoring
from tuner.decide import evidence
from tuner.decide import race as race_module
from tuner.decide.confirm import confirm
from tuner.decide.rounds import PAIRED_PER_ROUND
from tuner.run.options import TuneOptions

TUNED = CompileConfig(target="blocks", options={"freezing": True})
OTHER = CompileConfig(target="whole", backend="aot_eager")
RUNS = 200
#: A candidate's first processes in a race compile cold, this many, plain compile's baseline trial
#: counting as one (tuner/decide/race.py); the processes after them compile from the kept cache.
COLD = 2


class Machine:
    """Fresh processes of known spread: ``true`` maps a config key to its true speedup; eager
    as a user's process starts runs ``heap_gain`` times slower than pinned eager; every
    ``crowded``-th process waits half its time for a core. A process's own effect (``spread``)
    hits everything it times; ``inner`` is each side's own noise when it times eager beside a
    config (``timing="beside"``; or config key -> it, a candidate noisier than another): at 0.15
    and 0.03 alone processes differ by 15 % and the paired ratio by 4 %, as measured here
    (tuner/decide/stats.py).

    ``tails``: the process noise is Student's t with that many degrees of freedom, scaled to the
    same spread (0: normal). ``outlier``: one process among the first eight (the first two rounds)
    runs that many times slower. ``hiccup``: one of the first six processes of a compiled config
    runs its config's side alone that many times slower (a collector pause in the compiled model:
    eager beside it does not share it, so the pair does not cancel it). ``compile_s``: the median
    compile (or key -> its median); a cold compile varies by ``cold`` (log scale), a warm one by
    ``warm``; a candidate's first :data:`COLD` compiles are cold (:meth:`cold_compile` counts
    them), unless the race says ``reuse_cache``."""

    def __init__(self, true: dict[str, float], spread: float, seed: int, drift: float = 0.05,
                 compile_s: float | dict[str, float] = 0.0, heap_gain: float = 1.0, crowded: int = 0,
                 inner: float | dict[str, float] = 0.0, cold: float = 0.03, warm: float = 0.03, tails: float = 0,
                 outlier: float = 1.0, hiccup: float = 1.0):
        self.true, self.spread, self.drift, self.compile_s = true, spread, drift, compile_s
        self.heap_gain, self.crowded, self.inner = heap_gain, crowded, inner
        self.cold, self.warm, self.tails = cold, warm, tails
        self.rng = random.Random(seed)
        self.outlier = (self.rng.randrange(8) if outlier != 1.0 else -1, outlier)
        self.hiccup = (self.rng.randrange(6) if hiccup != 1.0 else -1, hiccup)
        self.compiled_calls = 0
        self.round_effect: dict[int, float] = {}
        self.calls: list[tuple[str, str]] = []
        self.colds: dict[str, int] = {}

    def median_compile(self, key: str) -> float:
        return self.compile_s.get(key, 0.0) if isinstance(self.compile_s, dict) else self.compile_s

    def cold_compile(self, key: str) -> float:
        """One cold compile of ``key`` (the search's baseline trial, or a race's process)."""
        self.colds[key] = self.colds.get(key, 0) + 1
        return self.median_compile(key) * math.exp(self.rng.gauss(0, self.cold))

    def noise(self, sd: float) -> float:
        if not self.tails or not sd:
            return self.rng.gauss(0, sd)
        t = self.rng.gauss(0, 1) / math.sqrt(self.rng.gammavariate(self.tails / 2, 2) / self.tails)
        return sd * t / math.sqrt(self.tails / (self.tails - 2))  # t's variance is df / (df - 2)

    def __call__(self, cfg, label, round_=0, heap=None, timing="alone", reuse_cache=None):
        self.calls.append((cfg.key() if heap != "default" else "as-started", timing))
        drift = self.round_effect.setdefault(round_, self.rng.gauss(0, self.drift))
        process = drift + self.noise(self.spread)
        if len(self.calls) - 1 == self.outlier[0]:
            process += math.log(self.outlier[1])
        step = 0.01 / self.true.get(cfg.key(), 1.0) * (self.heap_gain if heap == "default" else 1.0)
        inner = self.inner.get(cfg.key(), 0.0) if isinstance(self.inner, dict) else self.inner
        step *= math.exp(process + self.noise(inner))
        if cfg.compiles:
            if self.compiled_calls == self.hiccup[0]:
                step *= self.hiccup[1]
            self.compiled_calls += 1
        key = cfg.key()
        warm = reuse_cache if reuse_cache is not None else self.colds.get(key, 0) >= COLD
        if not cfg.compiles:
            compile_s = 0.0
        elif warm:
            compile_s = self.median_compile(key) * math.exp(self.rng.gauss(0, self.warm))
        else:
            compile_s = self.cold_compile(key)
        wait = 0.5 if self.crowded and len(self.calls) % self.crowded == 0 else 0.01  # every crowded-th process
        result = {"status": "ok", "step_s": step, "step_mean_s": step, "compile_time_s": compile_s,
                  "compiled_from_cache": bool(warm), "peak_memory_mb": 10.0, "core_wait_share": wait,
                  "load_average": 1.0, "timing": timing}
        if timing == "beside":
            eager = 0.01 * math.exp(process + self.noise(inner))
            result.update(eager_step_s=eager, eager_step_mean_s=eager)
        return result


def race(true: dict[str, float], spread: float, seed: int, finalists=(TUNED,), steps: int = 100_000,
         rounds: int | None = None, paired: bool = False, cut: int | None = None, processes: int | None = None,
         per_round: int = 1, tie_margin: float | None = None, **machine) -> tuple[dict, Machine]:
    """One race; ``cut``: a --budget that fits no round after that many; ``processes``: a
    --budget that fits that many confirmation processes (a round runs only while all of it fits).
    Plain compile's baseline trial compiled cold once before the race (a finalist's search trial
    does not count: tuner/decide/race.py). ``per_round``: each candidate's processes a round
    (a run's paired race: ``rounds.PAIRED_PER_ROUND``); ``tie_margin``: the race's (its default)."""
    m = Machine(true, spread, seed, **machine)
    plain = PLAIN_COMPILE.key()
    search_cold = {plain: m.cold_compile(plain)} if m.median_compile(plain) else None
    asked = itertools.count(1)  # each round after the first: ``ran`` is None before the first
    spent = [0]

    def fits(n: int, ran: int | None) -> bool:
        if processes:
            spent[0] += ran or 0
            return spent[0] + n <= processes
        return ran is None or next(asked) < cut

    d = confirm(list(finalists), Scoring(steps=steps, eager_step_s=0.01), m,
                rounds=rounds or TuneOptions.confirm_rounds, log=lambda line: None, search_cold=search_cold,
                paired=paired, round_fits=fits if cut or processes else None, per_round=per_round,
                **({} if tie_margin is None else {"tie_margin": tie_margin}))
    return d, m


#: Eager against plain compile that is eager under another name (1.0x, no compile), as a run's
#: race times them (paired, three processes a round, 15 % apart and 3 % once paired), over 8
#: rounds and with no tie margin: the race stops only where plain compile's interval misses its
#: truth, so it decides at all (compile, or slower) exactly as often as plain compile's share of
#: the error rate allows over all its looks: 2.5 %. The one setting where a whole race's error
#: rate has a value, not only a bound (a tie that stops a race, or a second candidate sharing the
#: rate, keep the others below their nominal rates).
A_A = dict(true={PLAIN_COMPILE.key(): 1.0}, finalists=(), spread=0.15, inner=0.03, paired=True,
           per_round=PAIRED_PER_ROUND, tie_margin=0.0, rounds=8)


def compile_or_slower(d: dict) -> bool:
    """The race's false decisions where nothing is to be found (a tie or undecided are right)."""
    return d["verdict"] == "compile" or d.get("zone") == "slower"


def tally(test, runs: int, confidence: float | None = None, **kw) -> int:
    """How many of ``runs`` races (seeds 0, 1, ...) ``test(decision)`` holds for, the race's
    intervals at ``confidence`` together (:func:`rule`; None: the rule in force, the stated one
    unless a caller mis-set it)."""
    with rule(confidence) if confidence is not None else contextlib.nullcontext():
        return sum(bool(test(race(seed=seed, **kw)[0])) for seed in range(runs))


def verdicts(runs: int = RUNS, **kw) -> dict[str, float]:
    counts: dict[str, int] = {}
    for seed in range(runs):
        v = race(seed=seed, **kw)[0]["verdict"]
        counts[v] = counts.get(v, 0) + 1
    return {k: n / runs for k, n in counts.items()}


def coverage(true: dict[str, float], runs: int = RUNS, **kw) -> float:
    """How often every stated interval of a race holds its candidate's true speedup."""
    return sum(holds(d, true) for d in races(runs, true=true, **kw)) / runs


def races(runs: int = RUNS, **kw) -> list[dict]:
    """The decisions of ``runs`` races, seeds 0, 1, ..."""
    return [race(seed=seed, **kw)[0] for seed in range(runs)]


def holds(d: dict, true: dict[str, float], saving: float | None = None) -> bool:
    """Whether every interval a race stated holds its truth: each candidate's speedup, and its
    saving where the true ``saving`` is given (the same for every candidate)."""
    truth = {c.describe(): v for c in (PLAIN_COMPILE, TUNED, OTHER) if (v := true.get(c.key()))}
    for c in d["candidates"]:
        if c["config_label"] not in truth or not c.get("speedup_interval") or c["speedup_interval"][0] is None:
            continue
        lo, hi = c["speedup_interval"]
        if not lo <= truth[c["config_label"]] <= hi:
            return False
        if saving is not None and not c["saving_interval_s"][0] <= saving <= c["saving_interval_s"][1]:
            return False
    return True


def _binomial_cdf(runs: int, rate: float) -> list[float]:
    """P(count <= k) for k = 0 .. runs, ``runs`` independent races each erring at ``rate``."""
    pmf = [math.exp(math.lgamma(runs + 1) - math.lgamma(k + 1) - math.lgamma(runs - k + 1)
                    + k * math.log(rate) + (runs - k) * math.log1p(-rate)) for k in range(runs + 1)]
    return list(itertools.accumulate(pmf))


#: The chance that a rule at just the rate it should give fails a rate's check by luck of the seeds:
#: at 1 %, of a test file's twenty checks one fails by luck about once in five redraws of the
#: random numbers. The region is what separates a halved and a doubled rate from the nominal one.
LUCK = 0.01


def acceptance(runs: int, rate: float, alpha: float = LUCK) -> tuple[int, int]:
    """The counts ``runs`` races erring at ``rate`` give in all but ``alpha`` of seeds, ``alpha / 2``
    left out on each side (the binomial's own quantiles; the normal's beyond 20,000 races).

    >>> acceptance(1000, 0.025)  # 25 expected
    (13, 39)
    """
    if runs > 20_000:
        z = -_normal_quantile(alpha / 2)
        sd = math.sqrt(runs * rate * (1 - rate))
        return math.ceil(runs * rate - z * sd), math.floor(runs * rate + z * sd)
    cdf = _binomial_cdf(runs, rate)
    low = next(k for k in range(runs + 1) if cdf[k] > alpha / 2)
    high = next(k for k in range(runs + 1) if 1 - cdf[k] <= alpha / 2)
    return low, high


def within(count: int, runs: int, rate: float, alpha: float = LUCK) -> bool:
    """Whether ``count`` of ``runs`` is what a rule erring at ``rate`` gives (:func:`acceptance`):
    the two-sided check every rate of these tests is held to."""
    low, high = acceptance(runs, rate, alpha)
    return low <= count <= high


def power(runs: int, rate: float, alpha: float = LUCK) -> tuple[float, float]:
    """How often :func:`within` fails a rule erring at half ``rate`` and at twice it: what a check
    of ``runs`` races can tell.

    >>> [round(p, 2) for p in power(2000, 0.025)]  # 1,000 races fail a halved 2.5 % in only 52 % of seeds
    [0.93, 1.0]
    """
    low, high = acceptance(runs, rate, alpha)
    out = []
    for wrong in (rate / 2, min(1.0, rate * 2)):
        cdf = _binomial_cdf(runs, wrong)
        out.append((cdf[low - 1] if low > 0 else 0.0) + 1 - cdf[high])
    return out[0], out[1]


def agrees(count: int, runs: int, reference: tuple[int, int], alpha: float = LUCK) -> bool:
    """Whether ``count`` of ``runs`` is what the rule that erred ``reference = (count, runs)`` times
    on other seeds gives: given both counts' total, the test's share of it is binomial with the
    test's share of the races where the two rates are one (the conditional test of two binomial
    rates), held to its two-sided acceptance region. For a rate the rule keeps below its nominal
    one by design (a tie that stops a race, a second candidate sharing the error rate), where
    the nominal rate is a bound and not a value: the rule's own rate, measured, is the reference.

    >>> agrees(13, 1000, (13, 1000)), agrees(40, 1000, (13, 1000)), agrees(0, 1000, (13, 1000))
    (True, False, False)
    """
    both = count + reference[0]
    if both == 0:
        return True
    low, high = acceptance(both, runs / (runs + reference[1]), alpha)
    return low <= count <= high


def _normal_quantile(p: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(p)


@contextlib.contextmanager
def rule(confidence: float) -> Iterator[None]:
    """Races whose intervals hold at ``confidence`` instead of the stated 95 %: the rule made too
    liberal (0.90) or too conservative (0.999) on purpose, to show that a check fails it."""
    weigh = race_module.weigh
    race_module.weigh = functools.partial(evidence.weigh, confidence=confidence)
    try:
        yield
    finally:
        race_module.weigh = weigh


def binomial_interval(count: int, runs: int, confidence: float = 0.95) -> tuple[float, float]:
    """Clopper and Pearson's interval for a rate measured as ``count`` of ``runs``."""
    def bound(upper: bool) -> float:
        if (count == runs and upper) or (count == 0 and not upper):
            return float(upper)
        lo, hi = 0.0, 1.0
        for _ in range(60):  # P(X <= count) falls as the rate rises
            mid = (lo + hi) / 2
            cdf = _binomial_cdf(runs, mid)
            tail = cdf[count] if upper else 1 - (cdf[count - 1] if count else 0.0)
            lo, hi = ((mid, hi) if tail > (1 - confidence) / 2 else (lo, mid)) if upper else \
                ((lo, mid) if tail > (1 - confidence) / 2 else (mid, hi))
        return (lo + hi) / 2
    return bound(False), bound(True)


def crowded(compiled: bool):
    """Processes that all run at eager's speed, those of compiled configs (or of eager) waiting
    for a core 40 % of their timing."""
    def measure(cfg, label, round_=0, heap=None):
        wait = 0.4 if cfg.compiles == compiled else 0.01
        return {"status": "ok", "step_s": 0.01, "step_mean_s": 0.01, "compile_time_s": 1.0 if cfg.compiles else 0.0,
                "peak_memory_mb": 10.0, "core_wait_share": wait, "load_average": 2.0}
    return measure


def null_compile(speedup: float, steps: int, spread: float, drift: float = 0.05, inner: float = 0.0,
                 cold: float = 0.05) -> float:
    """The median cold compile that makes a true ``speedup`` save exactly nothing over ``steps``:
    eager's mean step (10 ms times the log-normal's exp(variance / 2)) times ``steps x (1 -
    1/speedup)``, over the log-normal compile's own mean factor."""
    eager = 0.01 * math.exp((drift ** 2 + spread ** 2 + inner ** 2) / 2)
    return steps * eager * (1 - 1 / speedup) / math.exp(cold ** 2 / 2)


def saving_null(speedup: float) -> dict:
    """A race in which ``speedup``'s compile (cold ones 5 % apart, warm ones 1.5 %) is exactly what
    it saves over 110,000 steps of 10 ms: the saving that decides is zero. Paired at 1.4 %, the
    steps' part is measured about as tightly as a 1.05x's compile (53 s); a 1.25x's (222 s) is
    most of the saving's uncertainty."""
    return dict(true={PLAIN_COMPILE.key(): speedup, TUNED.key(): speedup}, spread=0.15, inner=0.01, paired=True,
                steps=110_000, cold=0.05, warm=0.015, compile_s=null_compile(speedup, 110_000, 0.15, inner=0.01))


# T5-small on the zoo (2026-12-03): 1.17x, 40 s of compile, eager's 10,000 steps 1,096 s, fresh
# processes 14.9 % apart; 9 rounds fitted in its --budget and left it undecided
T5_LIKE = dict(true={PLAIN_COMPILE.key(): 1.17, TUNED.key(): 1.17}, spread=0.15, inner=0.03, compile_s=40.0,
               steps=110_000, rounds=9)
