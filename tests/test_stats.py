"""The statistics of tuner/decide/stats.py, and the race of tuner/decide/confirm.py that rests on
them, against simulated processes of known spread: every error rate asserted here is measured.

A simulated process's mean step is eager's step over the candidate's true speedup, times the
round's drift and the process's own noise (both log-normal, or Student's t with 3 df, or one
process 30 % slow). The figures the tests assert are the issue's: a false "compile" at most 5 %,
a true 1.10x at 5 % spread decided "compile" at least 90 % of the time within the default number
of rounds, and a stated 95 % interval that holds the true speedup at least 95 % of the time. The
simulated machine and race are tests/simulated_races.py; the rates at the decision's edges (issue
45) are tests/test_error_edges.py.
"""
from __future__ import annotations

import math
import random

import numpy as np
import pytest
from simulated_races import OTHER, T5_LIKE, TUNED, Machine, coverage, crowded, most, race, verdicts

from tuner.core.config import EAGER, PLAIN_COMPILE
from tuner.core.score import Scoring
from tuner.decide import evidence, stats
from tuner.decide.confirm import confirm
from tuner.run.options import TuneOptions


@pytest.mark.parametrize("p, df, expected", [(0.975, 1, 12.7062), (0.975, 5, 2.5706), (0.975, 30, 2.0423),
                                              (0.995, 10, 3.1693), (0.025, 7, -2.3646), (0.975, math.inf, 1.9600)])
def test_t_quantiles_match_the_tables(p, df, expected):
    assert stats.t_quantile(p, df) == pytest.approx(expected, abs=1e-4)








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


def test_paired_a_config_that_saves_nothing_is_called_compile_at_the_nominal_rate():
    # 200 races told 2.5 % from 5 % by luck of the seeds: a change that drew the random numbers in
    # another order (eager alone in the first rounds only) read 5.5 % at 200 and 2.6 % at 3,000
    # (2.8 % before it). 1,000 races and a doubled rate's bound (``most``) tell them apart.
    runs = 1000
    rates = verdicts(runs=runs, paired=True, true={PLAIN_COMPILE.key(): 1.0, TUNED.key(): 1.0}, spread=0.15,
                     inner=0.03)
    assert rates.get("compile", 0) * runs <= most(runs, 0.025), rates


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
