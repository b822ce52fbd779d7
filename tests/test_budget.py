"""The --budget: durations and the planner's decisions (whole runs: tests/test_budget_runs.py).

The planner is pure arithmetic over the trials' wall times, so its decisions are tested with
made-up trials, and nothing here depends on how fast the machine is.
"""
from types import SimpleNamespace

import pytest

from tuner.core.durations import (
    budget_line,
    format_duration,
    parse_duration,
    time_line,
)
from tuner.core.errors import TunerError
from tuner.decide.confirm import CONFIRM_TIMING_SHARE, EAGER_ALONE
from tuner.run import budget
from tuner.run.budget import OUTPUT_RESERVE_S, Plan
from tuner.run.clock import RunClock
from tuner.run.pipeline import TuneOptions


@pytest.mark.parametrize("text, seconds", [
    ("20m", 1200.0), ("90s", 90.0), ("1h", 3600.0), ("1h30m", 5400.0), ("1.5h", 5400.0), ("90", 90.0),
    ("2.5", 2.5), (" 1H 5M 3S ", 3903.0), ("1m30s", 90.0), (45, 45.0), (0.5, 0.5),
])
def test_durations_parse_to_seconds(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "20 minutes", "m", "30m1h", "1m1m", "-5m", "0", "0s", "1m30", "inf",
                                  "nan", "1h-30m", True])
def test_a_bad_duration_names_the_flag_and_gives_a_hint(text):
    with pytest.raises(TunerError) as info:
        parse_duration(text)
    assert info.value.message.startswith("--budget must be") and "20m" in info.value.hint


def test_tune_options_read_a_budget_as_a_duration():
    assert TuneOptions("model.py", budget="2m").budget == 120.0
    with pytest.raises(TunerError, match="--budget"):
        TuneOptions("model.py", budget="two minutes")


@pytest.mark.parametrize("seconds, text", [
    (6.04, "6.0 s"), (48.2, "48 s"), (190, "3m 10s"), (300, "5m"), (362, "6m 02s"), (3720, "1h 02m"), (3600, "1h"),
])
def test_durations_are_written_as_a_person_reads_them(seconds, text):
    assert format_duration(seconds) == text


def trial(wall, role="search", warm=None, **extra):
    attrs = {"trial_wall_s": wall, "role": role, **extra}
    if warm is not None:
        attrs["warm_compile_wall_s"] = warm
    return SimpleNamespace(user_attrs=attrs)


def test_the_plan_takes_medians_and_leaves_out_repeats_and_interrupted_trials():
    trials = [trial(2.0, "eager"), trial(10.0, "plain"), trial(12.0, warm=4.0), trial(14.0),
              trial(99.0, duplicate_of=3), trial(99.0, interrupted=True),
              SimpleNamespace(user_attrs={"role": "search"})]
    plan = Plan.from_trials(trials, confirm=2, warm_start=True)
    assert plan.trial_s == 12.0  # median of 2, 10, 16 (12 + its warm compile), 14
    # plain, 2 finalists, and eager's processes of the round (alone twice, once as a user's process starts)
    assert plan.compiled_trial_s == 14.0 and plan.confirm_trials == 3 + EAGER_ALONE
    # eager alone compiles nothing: each of its processes is a share of the eager baseline's trial
    assert plan.eager_alone_s == pytest.approx(CONFIRM_TIMING_SHARE * 2.0)
    assert plan.confirm_round_s() == pytest.approx(3 * plan.confirm_trial_s + EAGER_ALONE * plan.eager_alone_s)


def test_under_a_budget_a_paired_race_plans_no_eager_alone():
    """The race under a --budget times no eager alone where it pairs its processes (the heap pinned):
    the plan's rounds hold the candidates' processes only, every one priced as a compiled one."""
    trials = [trial(2.0, "eager"), trial(10.0, "plain"), trial(12.0)]
    pinned = Plan.for_run(trials, TuneOptions("model.py", confirm=2, heap="pinned"))
    bounded = Plan.for_run(trials, TuneOptions("model.py", confirm=2, heap="pinned", budget="10m"))
    unpaired = Plan.for_run(trials, TuneOptions("model.py", confirm=2, heap="default", budget="10m"))
    assert pinned.confirm_trials == bounded.confirm_trials + EAGER_ALONE and bounded.eager_alone == 0
    assert unpaired.eager_alone == EAGER_ALONE  # unpaired rounds time eager alone: their only contrast
    assert bounded.confirm_round_s() == pytest.approx(bounded.confirm_trials * bounded.confirm_trial_s)
    assert pinned.confirm_round_s() > bounded.confirm_round_s()


def test_only_the_timing_of_a_search_trial_shrinks_in_its_confirmation_estimate():
    # Seen on the zoo's T5-small (--budget 6m, 2026-12-02): a process's start, build and warm-up
    # do not shrink with the timing, and scaling the whole rest left room for one round, not two.
    # 10 s besides the compile, 5 s of it timed steps (20 of the config's 0.1 s and eager's 0.15 s)
    searched = {"trial_wall_s": 40.0, "compile_time_s": 30.0, "compile_time_warm_s": 3.0, "timed_steps": 20,
                "step_s": 0.1, "eager_step_s": 0.15}
    assert budget.confirm_trial_wall(searched) == pytest.approx(3.0 + 5.0 + CONFIRM_TIMING_SHARE * 5.0)
    assert budget.confirm_trial_wall(searched, cold=True) == pytest.approx(30.0 + 5.0 + CONFIRM_TIMING_SHARE * 5.0)
    # eager alone: its own steps only, nothing beside them
    eager = {"trial_wall_s": 7.5, "role": "eager", "timed_steps": 25, "step_s": 0.1, "eager_step_s": 0.1}
    assert budget.confirm_trial_wall(eager) == pytest.approx(5.0 + CONFIRM_TIMING_SHARE * 2.5)
    assert budget.timed_s({**searched, "timing": "alone"}) == pytest.approx(2.0)


def test_a_confirmation_trial_is_a_warm_compile_and_a_share_of_the_search_trials_timing():
    # 30 s of compile, 10 s of the rest: from the kept cache, a warm compile and a share of the rest
    assert budget.confirm_trial_wall({"trial_wall_s": 40.0, "compile_time_s": 30.0, "compile_time_warm_s": 3.0}) \
        == pytest.approx(3.0 + CONFIRM_TIMING_SHARE * 10.0)
    # before any warm compile was measured: a share of the cold one
    assert budget.confirm_trial_wall({"trial_wall_s": 40.0, "compile_time_s": 30.0}) \
        == pytest.approx(budget.WARM_COMPILE_SHARE * 30.0 + CONFIRM_TIMING_SHARE * 10.0)
    plan = Plan.from_trials([trial(40.0, "plain", compile_time_s=30.0, compile_time_warm_s=3.0),
                             trial(20.0, compile_time_s=10.0, compile_time_warm_s=1.0)], confirm=1)
    rest = CONFIRM_TIMING_SHARE * 10.0
    assert plan.confirm_trial_s == pytest.approx(((3.0 + rest) + (1.0 + rest)) / 2)
    # plain, the finalist and eager's processes; with no eager trial measured, each eager process
    # is estimated as a confirmation trial
    assert plan.confirm_round_s() == pytest.approx((2 + EAGER_ALONE) * plan.confirm_trial_s)


def test_the_reserve_holds_a_cold_round_a_warm_round_the_warm_start_and_the_outputs():
    plan = Plan(trial_s=8.0, compiled_trial_s=10.0, confirm_trial_s=4.0, confirm_cold_trial_s=6.0, confirm_trials=3,
                warm_start=True)
    # the first round compiles cold, the second from its cache; the warm start from the kept cache
    # (no longer than a confirmation trial); the outputs
    # the rounds with a margin for what their estimates miss by
    assert plan.reserve_s == pytest.approx(budget.CONFIRM_RESERVE_MARGIN * (3 * 6.0 + 3 * 4.0) + 4.0 + OUTPUT_RESERVE_S)
    assert plan.warm_start_without_cache_s() == 10.0  # a cold compile first: a compiled trial
    assert plan.search_trial_fits(8.0 + plan.reserve_s) and not plan.search_trial_fits(8.0 + plan.reserve_s - 0.1)
    assert Plan(trial_s=8.0, compiled_trial_s=10.0).reserve_s == OUTPUT_RESERVE_S  # no confirmation, no warm start


def test_under_a_budget_the_search_leaves_half_of_it_to_confirmation():
    """A larger budget buys rounds, not only search trials (the zoo's BERT server at --budget 30m:
    a 943 s search, 4 rounds, undecided)."""
    plan = Plan(trial_s=8.0, compiled_trial_s=10.0, confirm_trial_s=4.0, confirm_cold_trial_s=6.0, confirm_trials=3,
                warm_start=True)
    share = budget.CONFIRM_BUDGET_SHARE * 600.0 + plan.warm_start_s + OUTPUT_RESERVE_S
    assert share > plan.reserve_s
    assert plan.search_reserve_s(600.0) == pytest.approx(share)
    assert plan.search_trial_fits(8.0 + share, 600.0) and not plan.search_trial_fits(8.0 + share - 0.1, 600.0)
    # a small budget: the two rounds' reserve is the larger, as before
    assert plan.search_reserve_s(20.0) == plan.reserve_s
    # confirmation off: nothing is kept for it
    off = Plan(trial_s=8.0, compiled_trial_s=10.0, warm_start=True)
    assert off.search_reserve_s(600.0) == off.reserve_s
    now = [0.0]
    clock = RunClock(600.0, now=lambda: now[0])
    clock.plan = lambda: plan
    now[0] = 600.0 - (8.0 + share) + 1.0  # one second short of a trial and the share
    assert not clock.search_trial_fits()
    now[0] -= 2.0
    assert clock.search_trial_fits()


def test_a_confirmation_round_runs_when_it_fits_beside_the_outputs_before_the_warm_start():
    plan = Plan(trial_s=8.0, compiled_trial_s=10.0, confirm_trial_s=4.0, confirm_trials=3, warm_start=True)
    needed = 2 * 4.0 + OUTPUT_RESERVE_S  # two trials and the outputs: the verdict before the warm start
    assert plan.confirm_round_fits(needed, trials=2) and not plan.confirm_round_fits(needed - 1, trials=2)
    assert plan.warm_start_s > 0 and plan.reserve_s > 2 * plan.confirm_round_s() + OUTPUT_RESERVE_S, \
        "the search still leaves room for the warm start"


def test_the_reserve_holds_as_many_rounds_as_the_race_runs_at_least():
    from tuner.decide.confirm import MIN_ROUNDS

    assert budget.CONFIRM_RESERVE_ROUNDS == MIN_ROUNDS


def test_a_confirmation_trial_of_the_first_round_is_estimated_cold():
    """Round 0 compiles every finalist cold (tuner/decide/confirm.py): a slow compile makes the
    reserve large (on the zoo's BERT the warm estimate let only one round fit)."""
    attrs = {"trial_wall_s": 40.0, "compile_time_s": 30.0, "compile_time_warm_s": 3.0, "role": "search"}

    class T:
        user_attrs = attrs

    plan = Plan.from_trials([T()], confirm=1)
    assert plan.confirm_cold_trial_s == pytest.approx(30.0 + budget.CONFIRM_TIMING_SHARE * 10.0)
    assert plan.confirm_trial_s == pytest.approx(3.0 + budget.CONFIRM_TIMING_SHARE * 10.0)
    assert plan.confirm_round_s(cold=True) > plan.confirm_round_s()


def test_before_any_trial_everything_fits_and_nothing_is_estimated():
    plan = Plan.from_trials([], confirm=2, warm_start=True)
    assert plan.search_trial_fits(OUTPUT_RESERVE_S) and plan.left_s(5) is None


def test_the_estimate_of_what_is_left_never_exceeds_the_budget():
    plan = Plan(trial_s=10.0, compiled_trial_s=10.0)
    assert plan.left_s(3) == 30.0 + OUTPUT_RESERVE_S
    now = [100.0]
    clock = RunClock(60.0, now=lambda: now[0])
    now[0] += 50.0
    assert clock.progress_text(plan.left_s(3)) == "50 s elapsed, about 10 s left"
    assert RunClock(now=lambda: now[0]).progress_text(plan.left_s(3)) == "0.0 s elapsed, about 35 s left"


def test_the_clock_adds_up_phases_and_says_what_was_cut_and_skipped():
    now = [0.0]
    clock = RunClock(300.0, now=lambda: now[0])
    for phase, seconds in (("check", 6.0), ("baselines", 48.0), ("search", 190.0), ("outputs", 1.0),
                           ("outputs", 2.0)):
        with clock.phase(phase):
            now[0] += seconds
    now[0] += 45.0
    clock.cut_short("search", "3 of 8 trials")
    assert not clock.fits("warm start", clock.left(), log=lambda line: None)  # the outputs need their seconds too
    assert clock.fits("thread check", clock.left() - OUTPUT_RESERVE_S, log=lambda line: None)
    # the warm start's race asks per pair of start processes: the same reserve, nothing recorded as skipped
    assert not clock.has_room(clock.left()) and clock.has_room(clock.left() - OUTPUT_RESERVE_S)
    assert clock.skipped == ["warm start"]
    phases = clock.phase_seconds()
    assert list(phases) == ["check", "baselines", "search", "outputs", "other", "total"] and phases["outputs"] == 3.0
    assert time_line(phases) == ("time: check 6.0 s, baselines 48 s, search 3m 10s, outputs 3.0 s, other 45 s; "
                                 "total 4m 52s")
    assert budget_line(clock.budget_record()) == \
        "budget 5m: used 4m 52s; cut short: search (3 of 8 trials); skipped: warm start"
    now[0] += 20.0
    assert budget_line(clock.budget_record()).startswith("budget 5m: used 5m 12s (12 s over)")
    assert "nothing was cut short" in budget_line(RunClock(60.0, now=lambda: 0.0).budget_record())


def test_without_a_budget_the_clock_only_times():
    clock = RunClock()
    assert not clock.bounded and clock.budget_record() is None and clock.left() == float("inf")
    assert clock.fits("warm start", 1e9, log=print) and clock.overrun("the baselines") is None


def test_workers_share_the_deadline_of_the_run():
    clock = RunClock(60.0, deadline=1060.0, now=lambda: 1030.0)
    assert clock.elapsed() == 30.0 and clock.left() == 30.0


def test_a_confirmation_round_measured_faster_than_estimated_lets_the_next_one_run():
    plan = Plan(trial_s=8.0, compiled_trial_s=10.0, confirm_trial_s=9.0, confirm_trials=3, warm_start=True)
    left = 3 * 3.0 + OUTPUT_RESERVE_S
    assert not plan.confirm_round_fits(left, trials=3)  # the search's estimate: 9 s a trial
    assert plan.confirm_round_fits(left, trials=3, each_s=3.0)  # the round before took 3 s a trial


def test_a_part_of_a_round_that_did_not_fit_is_priced_from_the_same_round():
    # Under a --budget no round times eager alone: a process left out of a round is a candidate's.
    now = [0.0]
    clock = RunClock(100.0, now=lambda: now[0])
    clock.plan = lambda: Plan(trial_s=8.0, compiled_trial_s=10.0, confirm_trial_s=40.0, confirm_trials=2,
                              eager_alone=0)
    assert clock.round_fits(2, None)
    now[0] += 30.0
    assert clock.round_fits(2, 2)  # 15 s a process
    now[0] += 40.0  # 20 s a process: two do not fit in the 30 s left beside the outputs' 5 s
    assert not clock.round_fits(2, 2)
    # one, asked next, is priced from that round too (not from the 0 s since the refused ask)
    assert not clock.round_fits(2, 2)
    assert clock.round_fits(1, 2) and clock.round_began == now[0]
    now[0] += 25.0  # that process took 25 s: none fits in the 5 s left
    assert not clock.round_fits(1, 1)


def test_the_clock_sizes_the_next_round_by_what_the_round_before_took():
    now = [0.0]
    clock = RunClock(100.0, now=lambda: now[0])
    clock.plan = lambda: Plan(trial_s=8.0, compiled_trial_s=10.0, confirm_trial_s=40.0, confirm_trials=2)
    assert clock.round_fits(2, None)  # 2 x 40 s estimated and 5 s of outputs fit in 100 s
    now[0] += 30.0  # the first round: 2 trials in 30 s
    assert clock.round_fits(2, 2)  # 2 x 15 s measured fit in the 70 s left (the estimate, 80 s, would not)
    now[0] += 50.0  # the second round took 25 s a trial: 2 x 25 s do not fit in 20 s
    assert not clock.round_fits(2, 2)


def test_a_measured_warm_compile_sets_the_share_for_the_configs_without_one():
    """Under a budget plain torch.compile's warm compile is measured: its share of the cold one,
    not :data:`WARM_COMPILE_SHARE`, then estimates the confirmation trials of the others."""
    trials = [trial(40.0, "plain", compile_time_s=30.0, compile_time_warm_s=3.0), trial(20.0, compile_time_s=10.0)]
    plan = Plan.from_trials(trials, confirm=1)
    rest = CONFIRM_TIMING_SHARE * 10.0
    assert plan.confirm_trial_s == pytest.approx(((3.0 + rest) + (0.1 * 10.0 + rest)) / 2)
    assert budget.warm_share([t.user_attrs for t in trials[1:]]) == budget.WARM_COMPILE_SHARE


def test_the_round_after_the_cold_one_is_sized_warm():
    # The first round compiles every finalist cold; the next compiles from the kept caches, so the
    # cold round's time, taken as it is, would size the second round as cold too (seen on the zoo's
    # GPT-2 training at --budget 8m: one round, no interval).
    plan = Plan(trial_s=30.0, compiled_trial_s=40.0, confirm_trial_s=8.0, confirm_cold_trial_s=35.0,
                confirm_trials=2 + EAGER_ALONE)
    n = plan.confirm_trials  # plain, a finalist, eager alone, eager as started
    assert plan.warm_after_cold(25.0, n) == pytest.approx((25.0 * n - 2 * (35.0 - 8.0)) / n)
    now = [0.0]
    clock = RunClock(180.0, now=lambda: now[0])
    clock.plan = lambda: plan
    assert clock.round_fits(n, None)
    now[0] += 25.0 * n  # the cold round: 100 s; 80 s left
    assert not plan.confirm_round_fits(80.0, n, each_s=25.0)  # sized as the cold round: 100 s
    assert clock.round_fits(n, n)  # sized warm: 46 s and the outputs
    now[0] += plan.warm_after_cold(25.0, n) * n  # the second round as estimated; 34 s left
    assert not clock.round_fits(n, n)  # from now on sized as measured


def test_a_confirmation_process_is_planned_without_the_correctness_check_it_skips():
    # GPT-2 training's search trial, roughly: 100 s in all, 30 s compile, 20 s of float64 check
    searched = {"trial_wall_s": 100.0, "compile_time_s": 30.0, "compile_time_warm_s": 5.0, "correctness_s": 20.0,
                "role": "search", "timed_steps": 10, "step_s": 1.0, "eager_step_s": 1.0}  # 20 s timed, beside eager
    without = {k: v for k, v in searched.items() if k != "correctness_s"}
    assert budget.confirm_trial_wall(without) - budget.confirm_trial_wall(searched) == pytest.approx(20.0)
    # a warm compile, the untimed rest (start, build, warm-up) and a quarter of the timing; no check
    assert budget.confirm_trial_wall(searched) == pytest.approx(5.0 + 30.0 + CONFIRM_TIMING_SHARE * 20.0)


def test_the_warm_start_is_planned_from_its_own_parts_per_task():
    # a start, torch's import, the model's build, a warm compile and a step: not a whole trial
    attrs = {"trial_wall_s": 100.0, "child_wall_s": 97.0, "child_import_s": 2.0, "setup_s": 4.0,
             "compile_time_s": 30.0, "compile_time_warm_s": 5.0, "step_s": 0.5, "role": "search"}
    assert budget.warm_start_wall(attrs) == pytest.approx(3.0 + 2.0 + 4.0 + 5.0 + 0.5)
    trials = [trial(40.0, "eager"), SimpleNamespace(user_attrs=attrs)]
    train = Plan.from_trials(trials, confirm=2, warm_start=True, task="train")
    infer = Plan.from_trials(trials, confirm=2, warm_start=True, task="infer")
    assert train.warm_start_s == pytest.approx(14.5) and train.warm_start_s < train.confirm_trial_s
    assert infer.warm_start_s == pytest.approx(3 * 14.5), "inference also saves and starts the precompiled forward"
    # a study measured before these figures were recorded plans a whole confirmation trial, as before
    old = {k: v for k, v in attrs.items() if k != "setup_s"}
    assert budget.warm_start_wall(old) == budget.confirm_trial_wall(old)
    assert Plan.from_trials(trials, confirm=2, warm_start=False).warm_start_s == 0.0


def test_a_phase_aside_stops_the_clock_of_the_phase_around_it():
    now = [0.0]
    clock = RunClock(600.0, now=lambda: now[0])
    with clock.phase("search"):
        now[0] += 10.0
        with clock.aside("confirmation"):
            now[0] += 30.0
        now[0] += 5.0
    spent = clock.phase_seconds()
    assert spent["search"] == 15.0 and spent["confirmation"] == 30.0 and spent["other"] == 0.0


def test_a_stretch_of_the_race_is_priced_from_its_last_round_not_the_search_trials_estimate():
    # a stretch's first round (ran=None) used the plan's estimate: two-sided processes of 4 s, where
    # the race's three-sided ones took 9 s (the zoo's ViT-B/16 ran 1m 56s over its 10 minutes)
    plan = Plan(trial_s=8.0, compiled_trial_s=10.0, confirm_trial_s=4.0, confirm_trials=3)
    now = [0.0]
    clock = RunClock(100.0, now=lambda: now[0])
    clock.plan = lambda: plan
    now[0] = 100.0 - (6 * 4.0 + OUTPUT_RESERVE_S) - 1.0  # six processes at the plan's 4 s fit, one second spare
    assert clock.round_fits(6, None)
    clock.race_round = (54.0, 6)  # the race's last round: six processes of 9 s
    assert not clock.round_fits(6, None)
    now[0] = 100.0 - (6 * 9.0 + OUTPUT_RESERVE_S) - 1.0
    assert clock.round_fits(6, None)
