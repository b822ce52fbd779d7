"""The statistics of tuner/decide/stats.py, and the race of tuner/decide/confirm.py that rests on
them, against simulated processes of known spread: every error rate asserted here is measured.

A simulated process's mean step is eager's step over the candidate's true speedup, times the
round's drift and the process's own noise (both log-normal, or Student's t with 3 df, or one
process 30 % slow). The figures the tests assert are the issue's: a false "compile" at most 5 %,
a true 1.10x at 5 % spread decided "compile" at least 90 % of the time within the default number
of rounds, and a stated 95 % interval that holds the true speedup at least 95 % of the time; and
at the edges (issue 45): a speedup whose compile eats its whole saving, heavy tails, an outlier
process and A/A races, each rate held under the count that tells its nominal rate from a doubled
one (:func:`most`), so that a doubled error rate fails.
"""
from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

from tuner.core.config import EAGER, PLAIN_COMPILE, CompileConfig
from tuner.core.score import Scoring
from tuner.decide import evidence, stats
from tuner.decide.confirm import confirm
from tuner.run.options import TuneOptions

TUNED = CompileConfig(target="blocks", options={"freezing": True})
OTHER = CompileConfig(target="whole", backend="aot_eager")
RUNS = 200
#: A candidate's first processes in a race compile cold, this many, plain compile's baseline trial
#: counting as one (tuner/decide/race.py); the processes after them compile from the kept cache.
COLD = 2


@pytest.mark.parametrize("p, df, expected", [(0.975, 1, 12.7062), (0.975, 5, 2.5706), (0.975, 30, 2.0423),
                                              (0.995, 10, 3.1693), (0.025, 7, -2.3646), (0.975, math.inf, 1.9600)])
def test_t_quantiles_match_the_tables(p, df, expected):
    assert stats.t_quantile(p, df) == pytest.approx(expected, abs=1e-4)


class Machine:
    """Fresh processes of known spread: ``true`` maps a config key to its true speedup; eager
    as a user's process starts runs ``heap_gain`` times slower than pinned eager; every
    ``crowded``-th process waits half its time for a core. A process's own effect (``spread``)
    hits everything it times; ``inner`` is each side's own noise when it times eager beside a
    config (``timing="beside"``): at 0.15 and 0.03 alone processes differ by 15 % and the paired
    ratio by 4 %, as measured here (tuner/decide/stats.py).

    ``tails``: the process noise is Student's t with that many degrees of freedom, scaled to the
    same spread (0: normal). ``outlier``: one process among the first eight (the first two rounds)
    runs that many times slower. ``compile_s``: the median compile (or key -> its median); a cold
    compile varies by ``cold`` (log scale), a warm one by ``warm``; a candidate's first :data:`COLD`
    compiles are cold (:meth:`cold_compile` counts them), unless the race says ``reuse_cache``."""

    def __init__(self, true: dict[str, float], spread: float, seed: int, drift: float = 0.05,
                 compile_s: float | dict[str, float] = 0.0, heap_gain: float = 1.0, crowded: int = 0,
                 inner: float = 0.0, cold: float = 0.03, warm: float = 0.03, tails: float = 0, outlier: float = 1.0):
        self.true, self.spread, self.drift, self.compile_s = true, spread, drift, compile_s
        self.heap_gain, self.crowded, self.inner = heap_gain, crowded, inner
        self.cold, self.warm, self.tails = cold, warm, tails
        self.rng = random.Random(seed)
        self.outlier = (self.rng.randrange(8) if outlier != 1.0 else -1, outlier)
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
        step *= math.exp(process + self.noise(self.inner))
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
            eager = 0.01 * math.exp(process + self.noise(self.inner))
            result.update(eager_step_s=eager, eager_step_mean_s=eager)
        return result


def race(true: dict[str, float], spread: float, seed: int, finalists=(TUNED,), steps: int = 100_000,
         rounds: int | None = None, paired: bool = False, cut: int | None = None, processes: int | None = None,
         **machine) -> tuple[dict, Machine]:
    """One race; ``cut``: a --budget that fits no round after that many; ``processes``: a
    --budget that fits that many confirmation processes (a round runs only while all of it fits).
    Plain compile's baseline trial compiled cold once before the race (a finalist's search trial
    does not count: tuner/decide/race.py)."""
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
                paired=paired, round_fits=fits if cut or processes else None)
    return d, m


def verdicts(runs: int = RUNS, **kw) -> dict[str, float]:
    counts: dict[str, int] = {}
    for seed in range(runs):
        v = race(seed=seed, **kw)[0]["verdict"]
        counts[v] = counts.get(v, 0) + 1
    return {k: n / runs for k, n in counts.items()}


def test_the_default_race_is_long_enough_to_decide_a_true_1_10x_at_5_percent_spread():
    rates = verdicts(true={PLAIN_COMPILE.key(): 1.10, TUNED.key(): 1.10}, spread=0.05)
    assert rates.get("compile", 0) >= 0.90, rates


def test_a_config_that_saves_nothing_is_called_compile_at_most_5_percent_of_the_time():
    # plain compile and the finalist run at eager's speed: the saving is zero
    rates = verdicts(true={PLAIN_COMPILE.key(): 1.0, TUNED.key(): 1.0}, spread=0.05)
    assert rates.get("compile", 0) <= 0.05, rates


def test_a_true_tie_is_decided_stay_eager_and_never_called_a_win():
    # the finalist runs at eager's speed, plain compile 1 % slower: a tie, at 1 % spread a decided one
    rates = verdicts(true={PLAIN_COMPILE.key(): 0.99, TUNED.key(): 1.0}, spread=0.01, runs=100)
    assert rates.get("stay_eager", 0) >= 0.9 and rates.get("compile", 0) <= 0.05, rates


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


def most(runs: int, rate: float, alpha: float = 0.05) -> int:
    """The most errors of a nominal ``rate`` that ``runs`` races may count: a doubled rate counts
    more in all but ``alpha`` of seeds, and the nominal rate this many or fewer in all but
    ``alpha`` (for fewer races the two cannot be told apart: ValueError).

    >>> most(700, 0.025)  # 2.5 % of 700 is 17.5 races, 5 % is 35
    25
    """
    doubled, nominal = _binomial_cdf(runs, 2 * rate), _binomial_cdf(runs, rate)
    limit = max((k for k in range(runs + 1) if doubled[k] <= alpha), default=-1)
    if limit < 0 or 1 - nominal[limit] > alpha:
        raise ValueError(f"{runs} races cannot tell an error rate of {rate:.1%} from {2 * rate:.1%}: run more")
    return limit


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


def test_the_stated_interval_holds_the_true_speedup_at_least_95_percent_of_the_time():
    assert coverage({PLAIN_COMPILE.key(): 1.05, TUNED.key(): 1.25}, spread=0.08) >= 0.95


@pytest.mark.parametrize("taken, final", [((2, 3, 5, 8, 12, 18), False), ((2, 3, 5, 6), True), ((2, 3, 4), True)])
def test_the_looks_boundaries_spend_the_error_rate_they_say(taken, final):
    """With nothing to find, a race's z statistic is a Brownian motion seen at the looks: 200,000 of
    them cross the boundaries 5 % of the time, whether the race runs its 18 rounds or a budget ends
    it at round 6 or 4 (its last look spending what is left)."""
    bounds = [stats._normal_quantile(0.5 + stats.look_confidence(0.95, taken[:k], 18, 1, final and k == len(taken)) / 2)
              for k in range(1, len(taken) + 1)]
    t = np.array(taken) / 18
    steps = np.random.default_rng(0).standard_normal((200_000, len(t))) * np.sqrt(np.diff(t, prepend=0))
    walk = np.cumsum(steps, axis=1)
    crossed = (np.abs(walk / np.sqrt(t)) > np.array(bounds)).any(axis=1).mean()
    assert 0.046 <= crossed <= 0.054, (bounds, crossed)


def test_early_looks_cost_what_bonferroni_cost_and_a_budgets_last_look_spends_the_rest():
    bonferroni = 0.05 / (6 * 3)  # six planned looks of 18 rounds, three candidates
    first = 1 - stats.look_confidence(0.95, (2,), 18, 3)
    assert 0.7 * bonferroni < first < 1.3 * bonferroni
    cut = 1 - stats.look_confidence(0.95, (2, 3, 5, 6), 18, 3, final=True)  # the zoo's BERT server: 6 of 18 rounds
    assert cut > 4 * bonferroni
    # one look, the last: Bonferroni over the candidates alone
    assert stats.look_confidence(0.95, (2,), 2, 3) == pytest.approx(1 - 0.05 / 3, abs=1e-6)


def test_a_race_the_budget_cuts_short_keeps_its_error_rates():
    """Cut at round 4 of 18, the last look spends what the looks left: still no more false
    "compile" than 5 %, and intervals that hold the truth at least 95 % of the time."""
    null = verdicts(true={PLAIN_COMPILE.key(): 1.0, TUNED.key(): 1.0}, spread=0.05, cut=4)
    assert null.get("compile", 0) <= 0.05, null
    assert coverage({PLAIN_COMPILE.key(): 1.05, TUNED.key(): 1.25}, spread=0.08, cut=4) >= 0.95
    paired = verdicts(paired=True, true={PLAIN_COMPILE.key(): 1.0, TUNED.key(): 1.0}, spread=0.15, inner=0.03, cut=4)
    assert paired.get("compile", 0) <= 0.05, paired


def test_the_interval_on_one_look_covers_at_its_nominal_level():
    """Without the race's correction: the model's t-interval after 3 rounds, 95 %, 400 simulations."""
    held, rng = 0, random.Random(7)
    for _ in range(400):
        samples = []
        for r in range(3):
            drift = rng.gauss(0, 0.1)
            for key, speedup in (("eager", 1.0), ("a", 1.3), ("b", 1.1), ("eager", 1.0)):
                samples.append(stats.Sample(key, r, 0.01 / speedup * math.exp(drift + rng.gauss(0, 0.07))))
        held += stats.fit(samples).speedup("eager", "a", 0.95).contains(1.3)
    assert 0.92 <= held / 400 <= 0.98, held


def test_a_clear_win_stops_at_the_first_look_and_states_its_interval():
    d, m = race({PLAIN_COMPILE.key(): 1.3, TUNED.key(): 2.0}, spread=0.02, seed=1)
    assert d["verdict"] == "compile" and d["choice"] == TUNED.to_dict() and d["rounds_done"] == 2
    lo, hi = d["best"]["speedup_interval"]
    assert lo < 2.0 < hi and d["confidence"] == 0.95 and d["best"]["saving_interval_s"][0] > 0
    assert len(m.calls) == 2 * 5  # each round: eager, eager as started, plain, the finalist, eager


def test_plain_compile_is_preferred_when_the_finalist_is_not_shown_to_beat_it():
    d, _ = race({PLAIN_COMPILE.key(): 1.5, TUNED.key(): 1.52}, spread=0.03, seed=3)
    assert d["verdict"] == "compile" and d["choice"] == PLAIN_COMPILE.to_dict()
    assert "the simpler plain torch.compile" in d["reason"]


def test_a_close_call_runs_to_the_last_round_and_says_undecided_with_what_would_decide():
    d, _ = race({PLAIN_COMPILE.key(): 1.02, TUNED.key(): 1.03}, spread=0.10, seed=2, rounds=5)
    assert d["verdict"] == "undecided" and d["rounds_done"] == 5 and d["choice"] == EAGER.to_dict()
    assert "could not tell" in d["reason"] and d["to_decide"]["rounds"] > 5


def test_the_heaps_gain_is_its_own_figure():
    d, _ = race({PLAIN_COMPILE.key(): 1.3, TUNED.key(): 1.3}, spread=0.02, seed=4, heap_gain=1.17)
    lo, hi = d["heap"]["interval"]
    assert lo < 1.17 < hi and abs(d["heap"]["gain"] - 1.17) < 0.05
    # and compile is judged against pinned eager: its speedup is not inflated by the heap's
    assert d["best"]["speedup_interval"][0] < 1.3 < d["best"]["speedup_interval"][1]


def test_a_busy_machine_makes_the_verdict_undecided_and_says_so():
    d, _ = race({PLAIN_COMPILE.key(): 1.5, TUNED.key(): 1.5}, spread=0.02, seed=5, crowded=2)
    assert d["verdict"] == "undecided" and d["reason"].startswith("the machine was busy")
    assert d["machine"]["busy"] and d["machine"]["crowded"] > 0.25 * d["machine"]["processes"]


def crowded(compiled: bool):
    """Processes that all run at eager's speed, those of compiled configs (or of eager) waiting
    for a core 40 % of their timing."""
    def measure(cfg, label, round_=0, heap=None):
        wait = 0.4 if cfg.compiles == compiled else 0.01
        return {"status": "ok", "step_s": 0.01, "step_mean_s": 0.01, "compile_time_s": 1.0 if cfg.compiles else 0.0,
                "peak_memory_mb": 10.0, "core_wait_share": wait, "load_average": 2.0}
    return measure


def test_compiled_processes_that_were_all_crowded_are_undecided_not_failed():
    # Seen in a test run on a shared VM: both of plain compile's processes waited for a core, eager's
    # did not all; nothing failed, so neither "no finalist was confirmed" nor "over the memory bound".
    d = confirm([], Scoring(steps=1000, eager_step_s=0.01), crowded(compiled=True), rounds=2, log=lambda line: None,
                heap_apart=False)
    assert d["verdict"] == "undecided" and d["reason"].startswith("the machine was busy"), d["reason"]
    assert d["choice"] == EAGER.to_dict() and "best" not in d


def test_eager_processes_that_were_all_crowded_are_undecided_not_a_failed_confirmation():
    # Seen in a test run beside a zoo run on this VM: every eager process waited for a core
    d = confirm([], Scoring(steps=1000, eager_step_s=0.01), crowded(compiled=False), rounds=2, log=lambda line: None,
                heap_apart=False)
    assert "failed" not in d and d["verdict"] == "undecided", d
    assert d["reason"].startswith("the machine was busy") and d["choice"] == EAGER.to_dict(), d["reason"]


def test_a_clear_loser_is_dropped_from_the_race():
    d, m = race({PLAIN_COMPILE.key(): 1.02, TUNED.key(): 1.03, OTHER.key(): 0.5}, spread=0.05, seed=6,
                finalists=(TUNED, OTHER), compile_s=1.0, rounds=8)
    other = next(c for c in d["candidates"] if c["config_label"] == OTHER.describe())
    tuned = next(c for c in d["candidates"] if c["config_label"] == TUNED.describe())
    assert other["processes"] < tuned["processes"], (other["processes"], tuned["processes"])


def test_compile_time_counts_and_two_cold_compiles_are_its_samples():
    # a 1.05x step speedup does not pay for 300 s of compile over 100,000 steps of 10 ms (50 s saved)
    d, _ = race({PLAIN_COMPILE.key(): 1.05, TUNED.key(): 1.05}, spread=0.02, seed=8, compile_s=300.0)
    assert d["verdict"] == "stay_eager" and "slower than eager" in d["reason"], d["reason"]
    assert len(d["best"]["cold_compiles_s"]) == 2  # its baseline trial's and its first process's


def test_a_cold_compiles_spread_is_pooled_over_the_candidates_cold_compiles():
    # the zoo's ResNet-50 (2026-12-03): cold compiles of 48.6 s (the search's) and 35.0 s (round 1's)
    alone = stats.compile_costs({"whole": [48.6, 35.0]})["whole"]
    pooled = stats.compile_costs({"whole": [48.6, 35.0], "blocks": [30.2, 31.1]}, [[61.0, 59.3]])["whole"]
    assert alone.compile_df == 1 and pooled.compile_df == 3
    assert pooled.compile_s == alone.compile_s == pytest.approx(41.8)
    # the pair's gap still counts, pooled with the other candidates' pairs, at 3 degrees of freedom

    def half(cost):
        return stats.t_quantile(0.9958, cost.compile_df) * cost.compile_se
    assert half(alone) > 400 and half(pooled) < 100, (half(alone), half(pooled))


def test_a_cold_compiles_interval_covers_though_cold_compiles_vary_more_than_warm_ones():
    """Cold compiles 3-5 % apart, warm ones 1-2 %: three candidates' cold pairs pooled cover the
    cold mean at 95 %; pooled with the warm compiles as until 2026-12-04, they did not."""
    rng, runs, held = random.Random(11), 1000, {"cold": 0, "with warm": 0}
    for _ in range(runs):
        spreads = [rng.uniform(0.03, 0.05) for _ in range(3)]
        cold = {k: [40.0 * math.exp(rng.gauss(0, s)) for _ in range(2)] for k, s in zip("abc", spreads)}
        warm = [[8.0 * math.exp(rng.gauss(0, rng.uniform(0.01, 0.02))) for _ in range(6)] for _ in range(3)]
        truth = 40.0 * math.exp(spreads[0] ** 2 / 2)
        costs = {"cold": stats.compile_costs(cold)["a"], "with warm": stats.compile_costs(cold, warm)["a"]}
        for name, cost in costs.items():
            held[name] += abs(cost.compile_s - truth) <= stats.t_quantile(0.975, cost.compile_df) * cost.compile_se
    assert runs - held["cold"] <= most(runs, 0.05), held
    assert held["with warm"] < 0.9 * runs, held


def test_a_clear_win_is_decided_though_the_searchs_cold_compile_was_slower_than_the_rounds():
    # 1.24x at 6.7 % spread, 42 s of compile in a 3,000 s eager total; the search's compile took
    # 39 % longer than the fresh processes' (as the zoo's ResNet-50 did): decided, not undecided
    won = 0
    for seed in range(20):
        m = Machine({PLAIN_COMPILE.key(): 1.24}, 0.067, seed, compile_s=35.0)
        m.colds[PLAIN_COMPILE.key()] = 1  # the search's, given below: plain compiles cold once more
        d = confirm([], Scoring(steps=300_000, eager_step_s=0.01), m, rounds=TuneOptions.confirm_rounds,
                    log=lambda line: None, search_cold={PLAIN_COMPILE.key(): 48.6})
        won += d["verdict"] == "compile"
    assert won >= 18, won


# ----------------------------------------------------------------------------- paired processes


# T5-small on the zoo (2026-12-03): 1.17x, 40 s of compile, eager's 10,000 steps 1,096 s, fresh
# processes 14.9 % apart; 9 rounds fitted in its --budget and left it undecided
T5_LIKE = dict(true={PLAIN_COMPILE.key(): 1.17, TUNED.key(): 1.17}, spread=0.15, inner=0.03, compile_s=40.0,
               steps=110_000, rounds=9)


def test_paired_processes_decide_a_win_that_processes_15_percent_apart_leave_undecided():
    paired = verdicts(paired=True, runs=100, **T5_LIKE)
    alone = verdicts(runs=100, **T5_LIKE)
    assert paired.get("compile", 0) >= 0.95, paired
    assert alone.get("compile", 0) < paired.get("compile", 0), (alone, paired)


def test_paired_a_config_that_saves_nothing_is_called_compile_at_most_5_percent_of_the_time():
    rates = verdicts(paired=True, true={PLAIN_COMPILE.key(): 1.0, TUNED.key(): 1.0}, spread=0.15, inner=0.03)
    assert rates.get("compile", 0) <= 0.05, rates


def test_paired_the_stated_interval_holds_the_true_speedup_at_least_95_percent_of_the_time():
    assert coverage({PLAIN_COMPILE.key(): 1.05, TUNED.key(): 1.25}, spread=0.15, inner=0.03, paired=True) >= 0.95


def test_paired_rounds_time_eager_beside_each_config_and_alone_once():
    d, m = race({PLAIN_COMPILE.key(): 1.3, TUNED.key(): 2.0}, spread=0.15, inner=0.03, seed=1, paired=True,
                heap_gain=1.17)
    assert d["verdict"] == "compile" and d["paired"] and d["rounds_done"] == 2
    # each round: eager alone, eager as started (alone: the heap's gain), then each config beside eager
    assert m.calls[:4] == [("none", "alone"), ("as-started", "alone"), (PLAIN_COMPILE.key(), "beside"),
                           (TUNED.key(), "beside")], m.calls[:4]
    assert len(m.calls) == 2 * 4
    # the spread left once paired is the inner noise's, and the processes' own spread is said apart
    assert d["spread"] < 0.06 and d["process_spread"] > 0.05, (d["spread"], d["process_spread"])
    lo, hi = d["heap"]["interval"]
    assert lo < 1.17 < hi


# ----------------------------------------------------------------------------- the three zones


def saving(estimate: float, low: float, high: float) -> stats.Interval:
    return stats.Interval(estimate, low, high, 0.95)


def test_a_tie_is_two_sided_and_a_saving_below_the_margin_is_no_compile():
    margin = 20.0  # 2 % of a 1,000 s eager total
    # -3.6 % to +0.04 %: it may lose 36 s, so it is no tie within 20 s; nor shown slower
    assert stats.zone(saving(-17.8, -36.0, 0.4), margin) is None
    assert stats.decide({"a": saving(-17.8, -36.0, 0.4)}, margin).verdict is None
    # +0.5 % to +1.5 %: a real saving, but less than the margin: a tie, not compile
    call = stats.decide({"a": saving(10.0, 5.0, 15.0)}, margin)
    assert (call.verdict, call.zone) == ("stay_eager", "tie")
    assert stats.decide({"a": saving(40.0, 5.0, 75.0)}, margin).zone == "compile"
    # below zero but inside the margin is a tie: the best of a slower and a tie leads with "a tie"
    both = stats.decide({"a": saving(-60.0, -90.0, -30.0), "b": saving(-10.0, -15.0, -5.0)}, margin)
    assert (both.verdict, both.zone, both.leader, both.zones["a"]) == ("stay_eager", "tie", "b", "slower")
    assert stats.decide({"a": saving(-60.0, -90.0, -30.0)}, margin).zone == "slower"
    # one candidate undecided keeps the race going, unless it trails a tie beyond doubt
    assert stats.decide({"a": saving(10.0, 5.0, 15.0), "b": saving(0.0, -30.0, 30.0)}, margin).verdict is None
    trailing = stats.decide({"a": saving(10.0, 5.0, 15.0), "b": saving(-12.0, -30.0, 4.0)}, margin)
    assert (trailing.verdict, trailing.zone, trailing.zones["b"]) == ("stay_eager", "tie", None)
    # no margin: the zones are the sign of the saving
    assert stats.zone(saving(1.0, 0.5, 1.5), 0.0) == "compile" and stats.zone(saving(0, -1.0, 1.0), 0.0) is None


def test_rounds_to_decide_aims_at_the_zone_reached_first():
    # a tie needs the half width below margin - |estimate|; slower or compile below |estimate|
    assert stats.rounds_to_decide(saving(-5.0, -35.0, 25.0), 20.0, 4) == pytest.approx(4 * (30 / 15) ** 2)
    assert stats.rounds_to_decide(saving(-15.0, -45.0, 15.0), 20.0, 4) == pytest.approx(4 * (30 / 15) ** 2)
    assert stats.rounds_to_decide(saving(30.0, -10.0, 70.0), 20.0, 4) == pytest.approx(4 * (40 / 30) ** 2)
    assert stats.rounds_to_decide(saving(0.0, -1.0, 1.0), 0.0, 4) is None


def test_the_verdict_says_a_tie_only_when_two_sided_and_names_its_zone():
    tie = race({PLAIN_COMPILE.key(): 0.99, TUNED.key(): 1.0}, spread=0.01, seed=0)[0]
    assert tie["verdict"] == "stay_eager" and tie["zone"] == "tie" and tie["reason"].startswith("a tie within 2%")
    assert {c.get("zone") for c in tie["candidates"][1:]} <= {"tie", "slower"}
    slow = race({PLAIN_COMPILE.key(): 0.7, TUNED.key(): 0.8}, spread=0.02, seed=0)[0]
    assert slow["zone"] == "slower" and "slower than eager" in slow["reason"], slow["reason"]
    win = race({PLAIN_COMPILE.key(): 1.3, TUNED.key(): 2.0}, spread=0.02, seed=1)[0]
    assert win["zone"] == "compile"


def test_the_error_rate_is_shared_over_every_candidate_that_started_the_race():
    """A finalist that fails a later process is no longer weighed; it still had its chances to
    err, so the looks' confidence stays the two candidates' (tuner/decide/evidence.py)."""
    scoring = Scoring(steps=1000, eager_step_s=0.01)
    records = {c.key(): evidence.Record(c) for c in (EAGER, PLAIN_COMPILE, TUNED)}
    m = Machine({PLAIN_COMPILE.key(): 1.1, TUNED.key(): 1.1}, 0.02, 0)
    for r in range(3):
        for rec in records.values():
            rec.add(m(rec.config, "p", round_=r), scoring, r)
    records[TUNED.key()].add({"status": "failed", "failure": {"category": "crashed"}}, scoring, 3)
    looks = stats.Looks((2, 3), 18)
    d = evidence.weigh(records, scoring, looks)
    assert d["look_confidence"] == pytest.approx(looks.confidence(0.95, 2))


# ----------------------------------------------------------------------------- error rates at their edges


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


NOTHING = {PLAIN_COMPILE.key(): 1.0, TUNED.key(): 1.0}
COVER = {PLAIN_COMPILE.key(): 1.05, TUNED.key(): 1.25}


@pytest.mark.parametrize("speedup", [1.05, 1.25])
def test_a_speedup_whose_compile_eats_its_whole_saving_is_called_compile_at_most_2_5_percent_of_the_time(speedup):
    # with the warm compiles pooled into the cold ones' spread (until 2026-12-04), the 1.25x was
    # called compile in 56 of these 700 races and its saving's interval missed zero in 126
    runs, case = 700, saving_null(speedup)
    ds = races(runs, **case)
    false = sum(d["verdict"] == "compile" for d in ds)
    assert false <= most(runs, 0.025), false
    missed = sum(not holds(d, case["true"], saving=0.0) for d in ds)
    assert missed <= most(runs, 0.05), missed


@pytest.mark.parametrize("noise", [dict(tails=3), dict(outlier=1.3)], ids=["student-t-3-df", "one-process-30pc-slow"])
def test_heavy_tails_and_an_outlier_process_keep_the_false_compile_rate_and_the_intervals(noise):
    runs = 700
    false = sum(d["verdict"] == "compile" for d in races(runs, true=NOTHING, spread=0.05, **noise))
    assert false <= most(runs, 0.025), false
    missed = sum(not holds(d, COVER) for d in races(400, true=COVER, spread=0.08, **noise))
    assert missed <= most(400, 0.05), missed


def test_a_a_eager_under_another_name_is_rarely_called_compile_or_slower():
    """Plain compile that is eager under another name (1.0x, no compile): a tie or undecided are
    right; compile and slower are the two false decisions, 5 % together at most."""
    runs = 400
    ds = races(runs, true={PLAIN_COMPILE.key(): 1.0}, finalists=(), spread=0.15, inner=0.03, paired=True)
    false = sum(d["verdict"] == "compile" or d.get("zone") == "slower" for d in ds)
    assert false <= most(runs, 0.05), false


def test_a_a_a_finalist_that_is_plain_compile_again_is_rarely_said_to_beat_it():
    """The finalist is plain compile under another name (the same 1.2x and 20 s compile): it may
    be chosen where plain compile is not itself proven yet, but never said to beat it (chosen
    though plain compile is proven) more than 2.5 % of the time."""
    runs = 700
    ds = races(runs, true={PLAIN_COMPILE.key(): 1.2, TUNED.key(): 1.2}, spread=0.05, compile_s=20.0, cold=0.05,
               warm=0.015)
    plain = PLAIN_COMPILE.describe()
    beat = sum(d["choice"] == TUNED.to_dict() and next(c for c in d["candidates"] if c["config_label"] == plain)
               .get("zone") == "compile" for d in ds)
    assert beat <= most(runs, 0.025), beat
