"""The statistics of tuner/decide/stats.py, and the race of tuner/decide/confirm.py that rests on
them, against simulated processes of known spread: every error rate asserted here is measured.

A simulated process's mean step is eager's step over the candidate's true speedup, times the
round's drift and the process's own noise (both log-normal). The figures the tests assert are
the issue's: a false "compile" at most 5 %, a true 1.10x at 5 % spread decided "compile" at least
90 % of the time within the default number of rounds, and a stated 95 % interval that holds the
true speedup at least 95 % of the time.
"""
from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

from tuner.core.config import EAGER, PLAIN_COMPILE, CompileConfig
from tuner.core.score import Scoring
from tuner.decide import stats
from tuner.decide.confirm import confirm
from tuner.run.options import TuneOptions

TUNED = CompileConfig(target="blocks", options={"freezing": True})
OTHER = CompileConfig(target="whole", backend="aot_eager")
RUNS = 200


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
    ratio by 4 %, as measured here (tuner/decide/stats.py)."""

    def __init__(self, true: dict[str, float], spread: float, seed: int, drift: float = 0.05, compile_s: float = 0.0,
                 heap_gain: float = 1.0, crowded: int = 0, inner: float = 0.0):
        self.true, self.spread, self.drift, self.compile_s = true, spread, drift, compile_s
        self.heap_gain, self.crowded, self.inner = heap_gain, crowded, inner
        self.rng = random.Random(seed)
        self.round_effect: dict[int, float] = {}
        self.calls: list[tuple[str, str]] = []

    def __call__(self, cfg, label, round_=0, heap=None, timing="alone"):
        self.calls.append((cfg.key() if heap != "default" else "as-started", timing))
        drift = self.round_effect.setdefault(round_, self.rng.gauss(0, self.drift))
        process = drift + self.rng.gauss(0, self.spread)
        step = 0.01 / self.true.get(cfg.key(), 1.0) * (self.heap_gain if heap == "default" else 1.0)
        step *= math.exp(process + self.rng.gauss(0, self.inner))
        compile_s = self.compile_s * math.exp(self.rng.gauss(0, 0.03)) if cfg.compiles else 0.0
        wait = 0.5 if self.crowded and len(self.calls) % self.crowded == 0 else 0.01  # every crowded-th process
        result = {"status": "ok", "step_s": step, "step_mean_s": step, "compile_time_s": compile_s,
                  "compiled_from_cache": round_ > 0, "peak_memory_mb": 10.0, "core_wait_share": wait,
                  "load_average": 1.0, "timing": timing}
        if timing == "beside":
            eager = 0.01 * math.exp(process + self.rng.gauss(0, self.inner))
            result.update(eager_step_s=eager, eager_step_mean_s=eager)
        return result


def race(true: dict[str, float], spread: float, seed: int, finalists=(TUNED,), steps: int = 100_000,
         rounds: int | None = None, paired: bool = False, cut: int | None = None, processes: int | None = None,
         **machine) -> tuple[dict, Machine]:
    """One race; ``cut``: a --budget that fits no round after that many; ``processes``: a
    --budget that fits that many confirmation processes (a round runs only while all of it fits)."""
    m = Machine(true, spread, seed, **machine)
    search_cold = {c.key(): m.compile_s for c in [PLAIN_COMPILE, *finalists]} if m.compile_s else None
    asked = itertools.count(1)  # round_fits is asked before each round after the first
    spent = [0]

    def fits(n: int, ran: int) -> bool:
        if processes:
            spent[0] += ran
            return spent[0] + n <= processes
        return next(asked) < cut

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
    held = 0
    for seed in range(runs):
        d, _ = race(true, seed=seed, **kw)
        truth = {c.describe(): v for c in (PLAIN_COMPILE, TUNED, OTHER) if (v := true.get(c.key()))}
        ok = [c for c in d["candidates"] if c.get("speedup_interval") and c["config_label"] in truth]
        held += all(c["speedup_interval"][0] <= truth[c["config_label"]] <= c["speedup_interval"][1] for c in ok)
    return held / runs


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
    assert len(d["best"]["cold_compiles_s"]) == 2  # the search's and the first round's


def test_the_compile_spread_is_pooled_with_the_warm_compiles_of_the_later_rounds():
    # the zoo's ResNet-50 (2026-12-03): cold compiles of 48.6 s (the search's) and 35.0 s (round 1's)
    cold = {"whole": [48.6, 35.0]}
    alone = stats.compile_costs(cold)["whole"]
    pooled = stats.compile_costs(cold, [[5.5, 5.7, 5.4, 5.6, 5.9, 5.3, 5.6]])["whole"]
    assert alone.compile_df == 1 and pooled.compile_df == 7
    assert pooled.compile_s == alone.compile_s == pytest.approx(41.8)
    # the pair's gap still counts, pooled with the replicates, but at 7 degrees of freedom, not 1
    assert 0 < pooled.compile_se < alone.compile_se

    def half(cost):
        return stats.t_quantile(0.9958, cost.compile_df) * cost.compile_se
    assert half(alone) > 400 and half(pooled) < 20, (half(alone), half(pooled))


def test_a_clear_win_is_decided_though_the_searchs_cold_compile_was_slower_than_the_rounds():
    # 1.24x at 6.7 % spread, 42 s of compile in a 3,000 s eager total; the search's compile took
    # 39 % longer than the fresh processes' (as the zoo's ResNet-50 did): decided, not undecided
    won = 0
    for seed in range(20):
        m = Machine({PLAIN_COMPILE.key(): 1.24}, 0.067, seed, compile_s=35.0)
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
