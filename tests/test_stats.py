"""The statistics of tuner/decide/stats.py, and the race of tuner/decide/confirm.py that rests on
them, against simulated processes of known spread: every error rate asserted here is measured.

A simulated process's mean step is eager's step over the candidate's true speedup, times the
round's drift and the process's own noise (both log-normal, or Student's t with 3 df, or one
process 30 % slow). The figures the tests assert are the issue's: a false "compile" at most 5 %,
a true 1.10x at 5 % spread decided "compile" at least 90 % of the time within the default number
of rounds, and a stated 95 % interval that holds the true speedup at least 95 % of the time. The
simulated machine and race are tests/simulated_races.py; the rates at the decision's edges (issue
45), and the one setting where a whole race's error rate has a value, are
tests/test_error_edges.py; the looks' boundaries alone, tests/test_boundaries.py.

Every rate is held two-sided (issue 59): an interval's or a single look's against its nominal
rate (:func:`simulated_races.within`), failing the rule set at 90 % and at 99.9 % too; a whole
race's, whose nominal rate is a bound the race keeps below by design (a second candidate holds a
share, a tie stops a race before a later look can err, only the deciding look's intervals are
stated), against the rule's own rate measured on seeds the tests do not use
(:func:`simulated_races.agrees`, :data:`REFERENCE`). A rate of right answers (a true speedup
decided compile) is held from below alone: more of them is never wrong.
"""
from __future__ import annotations

import math
import random

import numpy as np
import pytest
from simulated_races import (
    OTHER,
    T5_LIKE,
    TUNED,
    Machine,
    agrees,
    crowded,
    holds,
    race,
    races,
    verdicts,
    within,
)

from tuner.core.config import EAGER, PLAIN_COMPILE
from tuner.core.score import Scoring
from tuner.decide import evidence, stats
from tuner.decide.confirm import confirm
from tuner.run.options import TuneOptions


@pytest.mark.parametrize("p, df, expected", [(0.975, 1, 12.7062), (0.975, 5, 2.5706), (0.975, 30, 2.0423),
                                              (0.995, 10, 3.1693), (0.025, 7, -2.3646), (0.975, math.inf, 1.9600)])
def test_t_quantiles_match_the_tables(p, df, expected):
    assert stats.t_quantile(p, df) == pytest.approx(expected, abs=1e-4)


NULL = {PLAIN_COMPILE.key(): 1.0, TUNED.key(): 1.0}
COVER = {PLAIN_COMPILE.key(): 1.05, TUNED.key(): 1.25}
PAIRED = dict(spread=0.15, inner=0.03, paired=True)
#: The race's own rates, ``(count, races)`` on seeds from 10,000 on, at 95 % (``python
#: benchmarks/error_rates.py --races N --first-seed 10000``): a false compile where nothing is
#: saved, and races in which a stated interval missed its truth.
REFERENCE = {
    "nothing saved": (64, 4000),
    "nothing saved, cut at round 4": (15, 1000),
    "nothing saved, paired": (46, 4000),
    "nothing saved, paired, cut at round 4": (10, 1000),
    "a tie called compile": (4, 1000),
    "intervals missed": (18, 1000),
    "intervals missed, cut at round 4": (28, 1000),
    "intervals missed, paired": (9, 1000),
}


def false_compiles(runs: int, **kw) -> int:
    return sum(d["verdict"] == "compile" for d in races(runs, **kw))


def missed(runs: int, true: dict[str, float], **kw) -> int:
    return sum(not holds(d, true) for d in races(runs, true=true, **kw))








def test_the_default_race_is_long_enough_to_decide_a_true_1_10x_at_5_percent_spread():
    rates = verdicts(true={PLAIN_COMPILE.key(): 1.10, TUNED.key(): 1.10}, spread=0.05)
    assert rates.get("compile", 0) >= 0.90, rates


def test_a_config_that_saves_nothing_is_called_compile_at_the_rules_rate():
    """Plain compile and the finalist run at eager's speed: the saving is zero. 1.6 % on other
    seeds, within the 5 % guaranteed (one-sided "compile" of two candidates' shares, less the
    races a tie or a loss stopped)."""
    runs = 600
    assert agrees(false := false_compiles(runs, true=NULL, spread=0.05), runs, REFERENCE["nothing saved"]), false


def test_a_true_tie_is_decided_stay_eager_and_never_called_a_win():
    # the finalist runs at eager's speed, plain compile 1 % slower: a tie, at 1 % spread a decided one
    rates = verdicts(true={PLAIN_COMPILE.key(): 0.99, TUNED.key(): 1.0}, spread=0.01, runs=100)
    assert rates.get("stay_eager", 0) >= 0.9, rates
    # one-sided in effect: 0.4 % on other seeds, none or one in 100
    assert agrees(round(rates.get("compile", 0) * 100), 100, REFERENCE["a tie called compile"]), rates














def test_the_stated_intervals_hold_the_true_speedups_at_the_rules_rate():
    """Every interval the race states, of every candidate, holds its truth: missed 1.8 % of the
    time on other seeds, within the 5 % guaranteed (the deciding look's intervals alone)."""
    runs = 400
    assert agrees(miss := missed(runs, COVER, spread=0.08), runs, REFERENCE["intervals missed"]), miss


def brownian_crossings(taken: tuple[int, ...], final: bool, confidence: float = 0.95, paths: int = 200_000) -> int:
    """How many of ``paths`` z statistics with nothing to find (a Brownian motion seen at the
    looks ``taken`` of 18 rounds) cross the looks' boundaries at ``confidence``."""
    bounds = [stats._normal_quantile(0.5 + stats.look_confidence(confidence, taken[:k], 18, 1,
                                                                  final and k == len(taken)) / 2)
              for k in range(1, len(taken) + 1)]
    t = np.array(taken) / 18
    steps = np.random.default_rng(0).standard_normal((paths, len(t))) * np.sqrt(np.diff(t, prepend=0))
    walk = np.cumsum(steps, axis=1)
    return int((np.abs(walk / np.sqrt(t)) > np.array(bounds)).any(axis=1).sum())


LOOKS = [((2, 3, 5, 8, 12, 18), False), ((2, 3, 5, 6), True), ((2, 3, 4), True)]


@pytest.mark.parametrize("taken, final", LOOKS)
def test_the_looks_boundaries_spend_the_error_rate_they_say(taken, final):
    """With nothing to find, a race's z statistic is a Brownian motion seen at the looks: 200,000 of
    them cross the boundaries 5 % of the time, whether the race runs its 18 rounds or a budget ends
    it at round 6 or 4 (its last look spending what is left). Two-sided: 4.87-5.13 %."""
    assert within(crossed := brownian_crossings(taken, final), 200_000, 0.05), crossed / 200_000


@pytest.mark.parametrize("taken, final", LOOKS)
@pytest.mark.parametrize("confidence", [0.90, 0.999])
def test_the_boundaries_check_fails_a_rule_spending_too_much_or_too_little(taken, final, confidence):
    assert not within(crossed := brownian_crossings(taken, final, confidence), 200_000, 0.05), crossed


def test_early_looks_cost_what_bonferroni_cost_and_a_budgets_last_look_spends_the_rest():
    bonferroni = 0.05 / (6 * 3)  # six planned looks of 18 rounds, three candidates
    first = 1 - stats.look_confidence(0.95, (2,), 18, 3)
    assert 0.7 * bonferroni < first < 1.3 * bonferroni
    cut = 1 - stats.look_confidence(0.95, (2, 3, 5, 6), 18, 3, final=True)  # the zoo's BERT server: 6 of 18 rounds
    assert cut > 4 * bonferroni
    # one look, the last: Bonferroni over the candidates alone
    assert stats.look_confidence(0.95, (2,), 2, 3) == pytest.approx(1 - 0.05 / 3, abs=1e-6)


def test_a_race_the_budget_cuts_short_keeps_its_error_rates():
    """Cut at round 4 of 18, the last look spends what the looks left: a false "compile" 1.5 %
    (unpaired) and 1.0 % (paired) of the time on other seeds, and intervals that miss their truth
    2.8 %, all within the 5 % guaranteed; each held two-sided at that rate. (Where the race's rate
    has a value, eager against itself, a cut race is exact: tests/test_error_edges.py.)"""
    runs = 1000
    assert agrees(false := false_compiles(runs, true=NULL, spread=0.05, cut=4), runs,
                  REFERENCE["nothing saved, cut at round 4"]), false
    assert agrees(miss := missed(runs, COVER, spread=0.08, cut=4), runs,
                  REFERENCE["intervals missed, cut at round 4"]), miss
    assert agrees(false := false_compiles(runs, true=NULL, cut=4, **PAIRED), runs,
                  REFERENCE["nothing saved, paired, cut at round 4"]), false


def one_look_misses(confidence: float = 0.95, runs: int = 2000) -> int:
    """How often the model's t-interval after 3 rounds (unpaired, two candidates), at
    ``confidence``, misses the true speedup: the interval alone, without the race's looks."""
    missed, rng = 0, random.Random(7)
    for _ in range(runs):
        samples = []
        for r in range(3):
            drift = rng.gauss(0, 0.1)
            for key, speedup in (("eager", 1.0), ("a", 1.3), ("b", 1.1), ("eager", 1.0)):
                samples.append(stats.Sample(key, r, 0.01 / speedup * math.exp(drift + rng.gauss(0, 0.07))))
        missed += not stats.fit(samples).speedup("eager", "a", confidence).contains(1.3)
    return missed


def test_the_interval_on_one_look_covers_at_its_nominal_level():
    """2,000 simulations, two-sided around 5 %: a halved or doubled rate fails all but 0.1 % of seeds."""
    assert within(miss := one_look_misses(), 2000, 0.05), miss


@pytest.mark.parametrize("confidence", [0.90, 0.999])
def test_the_one_look_check_fails_an_interval_too_narrow_or_too_wide(confidence):
    assert not within(miss := one_look_misses(confidence), 2000, 0.05), miss


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


def test_a_busy_machine_makes_the_verdict_undecided_and_says_so():
    d, _ = race({PLAIN_COMPILE.key(): 1.5, TUNED.key(): 1.5}, spread=0.02, seed=5, crowded=2)
    assert d["verdict"] == "undecided" and d["reason"].startswith("the machine was busy")
    assert d["machine"]["busy"] and d["machine"]["crowded"] > 0.25 * d["machine"]["processes"]




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
    plain = next(c for c in d["candidates"] if c["config_label"] == PLAIN_COMPILE.describe())
    assert other["processes"] < plain["processes"], (other["processes"], plain["processes"])
    assert other["dropped"].startswith("trails the leader beyond doubt") and other["against_plain"]["zone"] == "slower"
    assert OTHER.key() not in d["racing"] and PLAIN_COMPILE.key() in d["racing"]  # plain is the yardstick


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


def test_compiles_measured_cold_once_take_the_prior_spread_pooled_with_the_pairs_there_are():
    # every compile under the tie margin is measured cold once (race.Race._cold_compiles): no pair
    # gives a spread, so PRIOR_COLD_SPREAD stands in at PRIOR_COLD_DF degrees of freedom, not a
    # compile's own mean as its error (a 53 s compile +-4,000 s wide at a look, before 2026-12-07)
    once = stats.compile_costs({"plain": [53.0], "opt": [79.0]})
    assert once["plain"].compile_se == pytest.approx(53.0 * stats.PRIOR_COLD_SPREAD)
    assert once["plain"].compile_df == stats.PRIOR_COLD_DF
    half = stats.t_quantile(0.997, once["plain"].compile_df) * once["plain"].compile_se
    assert 20 < half < 0.25 * 142  # inside a quarter of GPT-2 training's margin, not a point
    # twice the most a cold compile varied by here (3-5 %)
    assert 2 * 0.05 <= stats.PRIOR_COLD_SPREAD
    # one pair beside them joins the prior, not replaces it: 1 df alone made BERT's 26 s compile
    # +-260 s wide at a look (the zoo, 2026-12-07)
    pooled = stats.compile_costs({"plain": [25.6], "opt": [40.7, 42.7]})["plain"]
    assert pooled.compile_df == stats.PRIOR_COLD_DF + 1
    assert stats.t_quantile(0.997, pooled.compile_df) * pooled.compile_se < 15
    # a pair far apart still widens it: the prior is not a ceiling
    wide = stats.compile_costs({"plain": [25.6], "opt": [30.0, 45.0]})["plain"]
    assert wide.compile_se > pooled.compile_se * 1.3
    # every candidate measured twice: the pairs alone, as before
    assert stats.compile_costs({"a": [40.0, 42.0]})["a"].compile_df == 1


def cold_compile_misses(confidence: float = 0.95, runs: int = 2000) -> dict[str, int]:
    """How often the cold compile mean's interval at ``confidence`` misses its truth: cold compiles
    3-5 % apart, warm ones 1-2 %, three candidates' cold pairs pooled (``cold``), or pooled with the
    warm compiles as until 2026-12-04 (``with warm``)."""
    rng, missed = random.Random(11), {"cold": 0, "with warm": 0}
    for _ in range(runs):
        spreads = [rng.uniform(0.03, 0.05) for _ in range(3)]
        cold = {k: [40.0 * math.exp(rng.gauss(0, s)) for _ in range(2)] for k, s in zip("abc", spreads)}
        warm = [[8.0 * math.exp(rng.gauss(0, rng.uniform(0.01, 0.02))) for _ in range(6)] for _ in range(3)]
        truth = 40.0 * math.exp(spreads[0] ** 2 / 2)
        costs = {"cold": stats.compile_costs(cold)["a"], "with warm": stats.compile_costs(cold, warm)["a"]}
        for name, cost in costs.items():
            half = stats.t_quantile(0.5 + confidence / 2, cost.compile_df) * cost.compile_se
            missed[name] += abs(cost.compile_s - truth) > half
    return missed


def test_a_cold_compiles_interval_covers_though_cold_compiles_vary_more_than_warm_ones():
    """Three candidates' cold pairs pooled cover the cold mean at 95 %, two-sided; pooled with the
    warm compiles as until 2026-12-04, they missed more than 10 % of the time."""
    runs = 2000
    missed = cold_compile_misses(runs=runs)
    assert within(missed["cold"], runs, 0.05), missed
    assert missed["with warm"] > 0.1 * runs, missed


@pytest.mark.parametrize("confidence", [0.90, 0.999])
def test_the_cold_compile_check_fails_an_interval_too_narrow_or_too_wide(confidence):
    assert not within(miss := cold_compile_misses(confidence)["cold"], 2000, 0.05), miss


def test_a_clear_win_is_decided_though_the_searchs_cold_compile_was_slower_than_the_rounds():
    # 1.24x at 6.7 % spread, 42 s of compile in a 3,000 s eager total; the search's compile took
    # 39 % longer than the fresh processes' (as the zoo's ResNet-50 did): decided, not undecided
    won = 0
    for seed in range(20):
        # the baseline trial's cold compile is given below; the race compiles plain cold twice more
        # (tuner/decide/race.py's COLD_COMPILES), three in all, as a run's race does
        m = Machine({PLAIN_COMPILE.key(): 1.24}, 0.067, seed, compile_s=35.0)
        d = confirm([], Scoring(steps=300_000, eager_step_s=0.01), m, rounds=TuneOptions.confirm_rounds,
                    log=lambda line: None, search_cold={PLAIN_COMPILE.key(): 48.6})
        won += d["verdict"] == "compile"
    assert won >= 18, won


# ----------------------------------------------------------------------------- paired processes




def test_paired_processes_decide_a_win_that_processes_15_percent_apart_leave_undecided():
    paired = verdicts(paired=True, runs=100, **T5_LIKE)
    alone = verdicts(runs=100, **T5_LIKE)
    assert paired.get("compile", 0) >= 0.95, paired
    assert alone.get("compile", 0) < paired.get("compile", 0), (alone, paired)


def test_paired_a_config_that_saves_nothing_is_called_compile_at_the_rules_rate():
    # 200 races told 2.5 % from 5 % by luck of the seeds: a change that drew the random numbers in
    # another order (eager alone in the first rounds only) read 5.5 % at 200 and 2.6 % at 3,000
    # (2.8 % before it; 1.15 % on seeds 10,000-13,999 since the looks' boundaries are the t
    # statistics'). 1,000 races, two-sided around the rule's own rate.
    runs = 1000
    false = false_compiles(runs, true=NULL, **PAIRED)
    assert agrees(false, runs, REFERENCE["nothing saved, paired"]), false


def test_paired_the_stated_intervals_hold_the_true_speedups_at_the_rules_rate():
    """Missed 0.9 % of the time on other seeds (a few in 400: one-sided in effect)."""
    runs = 400
    assert agrees(miss := missed(runs, COVER, **PAIRED), runs, REFERENCE["intervals missed, paired"]), miss


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
    # the heap's gain on 1 df: its interval withheld (tests/test_heap.py)
    assert d["heap"]["interval"] == [None, None] and d["heap"]["df"] == 1


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


def test_rounds_to_decide_counts_the_t_quantile_falling_as_rounds_add_degrees_of_freedom():
    """ViT-B/16's first look (2 rounds, 5 df, a look's confidence of 0.997): the rounds alone
    said 33, beyond the race's 18; with the quantile's fall it is about half of that."""
    first = stats.Interval(10.0, -299.0, 319.0, 0.997)
    alone = stats.rounds_to_decide(first, 86.0, 2)
    counted = stats.rounds_to_decide(first, 86.0, 2, df=5)
    assert alone > 18 and 8 <= counted <= 18
    # where it lands, the half width at that round's df is inside the distance, and a round less is not
    q = 0.5 + first.confidence / 2

    def half(n):
        return 309.0 * (2 / n) ** 0.5 * stats.t_quantile(q, 5 * n / 2) / stats.t_quantile(q, 5)
    assert half(counted) <= 76.0 < half(counted - 1)


def test_the_verdict_says_a_tie_only_when_two_sided_and_names_its_zone():
    tie = race({PLAIN_COMPILE.key(): 0.99, TUNED.key(): 1.0}, spread=0.01, seed=0)[0]
    assert tie["verdict"] == "stay_eager" and tie["zone"] == "tie" and tie["reason"].startswith("a tie within 2%")
    # every candidate still racing is a tie or slower; one dropped was decided against plain compile or
    # could not be within the race's rounds (a 1 % step gain against a 2 % margin)
    assert {c.get("zone") for c in tie["candidates"][1:] if not c.get("dropped")} <= {"tie", "slower"}
    assert all(c["dropped"].startswith(("ties plain", "slower than plain", "its comparison with plain"))
               for c in tie["candidates"][1:] if c.get("dropped"))
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
    # at the degrees of freedom the pooled model (eager and plain compile) had at each look
    pooled = [s for k in (EAGER.key(), PLAIN_COMPILE.key()) for s in records[k].samples(EAGER.key())]
    assert d["look_confidence"] == pytest.approx(looks.confidence(0.95, 2, stats.look_dfs(pooled, looks.taken)))
