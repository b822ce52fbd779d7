"""benchmarks/race_table.py, the table of benchmarks/full_races.py, on canned race lines: the
intervals on rates, the truths of the stand-ins, what counts as a false answer or a reversal.
Every rate asserted is held between two bounds, so a rule that counts too few fails as one that
counts too many does."""
import math
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import race_table as rt  # noqa: E402

AA, SLOW, FAST = "stand-in@1", "stand-in:1.05@1", "stand-in-fast:1.10@1"


def cand(zone=None, speedup=1.0, spread=0.01, df=10.0, saving=0.0, half_s=20.0, against=None, paired=6, order=0):
    se = spread / math.sqrt(paired)
    half = rt.t_quantile(0.975, df) * se
    c = {"zone": zone, "speedup": speedup, "saving_s": saving, "paired": paired, "order": order,
         "speedup_interval": [speedup * math.exp(-2 * half), speedup * math.exp(2 * half)],
         "unadjusted": {"log_speedup": math.log(speedup), "se_log": se, "df": df,
                        "speedup_interval": [speedup * math.exp(-half), speedup * math.exp(half)],
                        "saving_interval_s": [saving - half_s, saving + half_s]}}
    if against:
        c["against_plain"] = against
    return c


def decision(verdict="stay_eager", choice="eager", candidates=None, eager_alone=(0.001, 0.001), **kw):
    return {"verdict": verdict, "choice": choice, "candidates": candidates or {}, "eager_alone": list(eager_alone),
            "tie_margin": 0.02, "eager_total_s": 1000.0, **kw}


def row(race=0, block=0, roles=None, final=None, answers=(), workload="w.py", steps=1_000_000, eager=(0.001, 0.001)):
    return {"race": race, "block": block, "roles": roles or {AA: "A/A"}, "final": final or decision(),
            "answers": list(answers), "workload": workload, "steps": steps, "eager_alone": list(eager),
            "lineup": "aa", "machine": "test CPU", "threads": 2, "torch": "2.13.0+cpu", "commit": "abc1234",
            "started": "2026-12-07 10:00:00", "wall_s": 300.0, "exit": 0, "f_cal": 0.001}


# ----------------------------------------------------------------------------- intervals


def test_clopper_pearson_matches_the_exact_binomial_interval():
    low, high = rt.clopper_pearson(3, 100)
    assert 0.0061 < low < 0.0063 and 0.0850 < high < 0.0854
    low, high = rt.clopper_pearson(0, 10)
    assert low == 0.0 and 0.3083 < high < 0.3087


def test_blocks_that_agree_keep_the_binomial_interval_and_blocks_that_differ_widen_it():
    even = rt.clustered([(1, 20)] * 10)  # 10 of 200, one a block: less spread than binomial chance
    assert even["icc"] == 0.0 and even["deff"] == 1.0 and even["interval"] == pytest.approx(even["binomial"])
    lumped = rt.clustered([(10, 20)] + [(0, 20)] * 9)  # the same 10 of 200, all in one block
    assert 0.3 < lumped["icc"] < 0.7 and 5 < lumped["deff"] < 15
    assert lumped["rate"] == pytest.approx(0.05)
    assert lumped["interval"][0] < even["interval"][0] and lumped["interval"][1] > even["interval"][1] + 0.05


def test_the_variance_of_standardized_errors_is_judged_two_sided():
    rng = random.Random(0)
    right = [rng.gauss(0, 1) for _ in range(400)]
    var, low, high = rt.variance_interval(right)
    assert 0.85 < var < 1.15 and low < 1 < high
    assert rt.variance_interval([2 * z for z in right])[1] > 1  # intervals half as wide as stated
    assert rt.variance_interval([0.5 * z for z in right])[2] < 1  # intervals twice as wide as stated


def test_a_t_statistic_becomes_the_normal_score_of_the_same_tail():
    assert rt.normal_score(0.0, 5) == pytest.approx(0.0)
    assert rt.normal_score(rt.t_quantile(0.975, 3), 3) == pytest.approx(1.96, abs=0.01)
    assert rt.normal_score(1.5, math.inf) == pytest.approx(1.5, abs=1e-6)


def test_an_interval_stated_at_the_looks_confidence_gives_back_its_95_percent_one():
    est, se, df = 1.1, 0.02, 8.0
    look = 0.995
    wide = rt.t_quantile(0.5 + look / 2, df) * se
    row_ = {"speedup": est, "df": df, "look_confidence": look,
            "speedup_interval": [est * math.exp(-wide), est * math.exp(wide)]}
    lo, hi = rt.unadjusted_speedup(row_)
    half = rt.t_quantile(0.975, df) * se
    assert lo == pytest.approx(est * math.exp(-half)) and hi == pytest.approx(est * math.exp(half))


# ----------------------------------------------------------------------------- truths


def test_a_stand_ins_saving_is_its_speedup_over_eagers_reference_less_its_delay():
    rows = [row(race=i, eager=(0.002, 0.002) if i else (0.5, 0.5)) for i in range(6)]
    d = decision(candidates={SLOW: cand(paired=6)})
    t = rt.truth(SLOW, rows[0], rows, d)  # the reference is the other races' eager, not its own 0.5 s
    assert t["speedup"] == pytest.approx(1 / 1.05)
    assert t["saving_s"] == pytest.approx(1_000_000 * 0.002 * (1 - 1.05) - 1.0)
    assert rt.truth(AA, rows[0], rows, d)["saving_s"] == pytest.approx(-1.0)
    assert rt.truth(rt.PLAIN, rows[0], rows, d) is None


def test_eagers_reference_is_the_same_sittings_other_races_where_they_have_enough_processes():
    rows = [{**row(race=i, eager=(0.002,) * 5), "sitting": "a"} for i in range(3)]
    rows += [{**row(race=9, eager=(0.003,) * 50), "sitting": "b"}]
    assert rt.eager_reference(rows, rows[0]) == pytest.approx(0.002)  # 10 processes of its sitting
    lone = {**row(race=10, eager=(0.004, 0.004)), "sitting": "c"}
    assert rt.eager_reference([*rows, lone], lone) == pytest.approx((15 * 0.002 + 50 * 0.003) / 65)


def test_eagers_level_counts_its_side_slowed_beside_a_fast_stand_in():
    # eager alone twice, beside the fast one 6 times at 1.10, beside the A/A 2 times at 1
    d = decision(candidates={FAST: cand(paired=6), AA: cand(paired=2)})
    assert rt.eager_level_factor(d, row()) == pytest.approx((2 + 6 * 1.10 + 2) / 10)


def test_a_stand_ins_truth_over_a_step_is_its_factor_over_the_forwards_share_of_it():
    r = {**row(), "forward_share": 0.9}  # a tenth of each step is not the forward: not slowed
    assert rt.step_factors(FAST, r) == pytest.approx((1.09, 1.0))
    assert rt.step_factors(SLOW, r) == pytest.approx((1.0, 1.045))
    d = decision(candidates={SLOW: cand()})
    assert rt.truth(SLOW, r, [r], d)["speedup"] == pytest.approx(1 / 1.045)
    assert rt.truth(FAST, r, [r], d)["speedup"] == pytest.approx(1.09)


# ----------------------------------------------------------------------------- rates


def a_a_races(false_at: set[int], n: int = 100, blocks: int = 10) -> list[dict]:
    out = []
    for i in range(n):
        zone = "compile" if i in false_at else "tie"
        verdict = "compile" if i in false_at else "stay_eager"
        said = decision(verdict, AA if i in false_at else "eager", {AA: cand(zone=zone)})
        later = decision("stay_eager", "eager", {AA: cand(zone="tie")})
        out.append(row(race=i, block=i % blocks, answers=[said, later], final=later))
    return out


def test_the_false_compile_rate_counts_every_answer_written_not_only_the_last():
    rows = a_a_races({3, 41, 77})
    found = rt.events(rows, "A/A", rt.false_compile)
    c = rt.clustered(rt.by_block(found))
    assert c["events"] == 3 and c["races"] == 100
    assert 0.025 < c["rate"] < 0.035  # each false one was later reversed, and still counts
    assert 0.005 < c["interval"][0] < 0.007 and 0.08 < c["interval"][1] < 0.09


def test_a_reversed_false_compile_is_counted_reversed_and_wrong():
    rev = rt.reversals(a_a_races({3, 41, 77}))
    assert rev["written"] == 200 and rev["reversed"] == 3 and rev["races_with_reversal"] == 3
    assert rev["reversed_wrong"] == 3 and rev["reversed_known"] == 3


def test_a_reversed_right_stay_eager_is_not_counted_wrong():
    tie = decision("stay_eager", "eager", {AA: cand(zone="tie")})
    fast = decision("compile", FAST, {FAST: cand(zone="compile", speedup=1.1)})
    r = row(roles={FAST: "faster"}, answers=[tie, fast], final=fast)
    rev = rt.reversals([r])  # "stay eager" said before the fast one joined: right for what it weighed
    assert rev["reversed"] == 1 and rev["reversed_wrong"] == 0 and rev["reversed_known"] == 1


def test_false_beats_plain_reads_the_aliases_row_against_plain_compile():
    rows = []
    for i in range(40):
        zone = "beats" if i == 7 else "ties"
        final = decision(candidates={rt.ALIAS: cand(against={"zone": zone})})
        rows.append(row(race=i, roles={rt.ALIAS: rt.ALIAS}, final=final, answers=[final]))
    found = rt.events(rows, rt.ALIAS, lambda c, d, n: rt.false_beats(c, d))
    assert sum(e["hit"] for e in found) == 1 and len(found) == 40


def test_coverage_counts_the_unadjusted_interval_against_the_known_truth():
    rows = []
    for i in range(20):
        speedup = 1.0 if i < 19 else 1.2  # one A/A race whose estimate is far off
        rows.append(row(race=i, final=decision(candidates={AA: cand(speedup=speedup, saving=-1.0)})))
    cov = rt.coverage(rows)["A/A"]
    assert cov["speedup"] == (19, 20)
    assert cov["saving"] == (20, 20)  # every saving interval holds -1 s
    z = rt.standardized(rows)["A/A"]
    assert len(z) == 20 and max(z) > 5 and sorted(z)[-2] == pytest.approx(0.0, abs=1e-9)


def test_the_table_is_headed_by_where_it_was_measured_and_states_each_rate():
    text = rt.table(a_a_races({3}))
    assert text.startswith("100 full-flow races") and "test CPU, 2 threads, torch 2.13.0+cpu, commit abc1234" in text
    assert '| false "compile": the A/A candidate, any answer written | 100 | 1 (1.0%) |' in text
    assert "0: 0/10" in text and "spread of the block rates" in text


def test_eagers_pooled_level_is_set_against_eager_alone_with_the_stand_ins_slowing_taken_out():
    # alone 1 ms twice; beside the fast stand-in (10 % slowed) 6 processes: pooled 1.06 ms is no bias
    rows = [row(race=i, final=decision(candidates={FAST: cand(paired=6)}, eager_alone=(0.001, 0.001),
                                      eager_step_s=0.001 * (2 + 6 * 1.1) / 8 * (1.05 if i == 2 else 1.0)))
            for i in range(3)]
    mean, se, n = rt.level_bias(rows)  # one race pools eager 5 % above its truth, two exactly at it
    assert n == 3 and 0.015 < mean < 0.018 and se > 0
