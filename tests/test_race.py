"""The run's one race (tuner/decide/race.py): eager against plain compile from the start, the
search's finalists joining later, an answer at every decided look. Processes are simulated with
known speedups and spread, as tests/test_stats.py does; tests/test_tune.py runs the race for real."""
import math
import random

import pytest

from tuner.core.config import EAGER, PLAIN_COMPILE, CompileConfig
from tuner.core.score import Scoring
from tuner.decide import stats
from tuner.decide.race import Race
from tuner.decide.rounds import COLD_COMPILES, MIN_ROUNDS, PAIRED_PER_ROUND

SCORING = Scoring(steps=100_000, eager_step_s=0.01)
TUNED = CompileConfig(target="blocks", options={"freezing": True})


def simulated(speedups: dict[str, float], spread: float = 0.01, seed: int = 0, calls: list | None = None):
    """Paired processes: each shares its own luck between eager beside it and its config."""
    rng = random.Random(seed)

    def measure(cfg, label, round_=0, heap=None, reuse_cache=False, timing="alone"):
        luck = rng.lognormvariate(0, 0.08)
        if calls is not None:
            calls.append((cfg.key(), round_, reuse_cache))
        step = 0.01 * luck
        result = {"status": "ok", "peak_memory_mb": 1.0, "timing": timing}
        if not cfg.compiles:
            return {**result, "step_s": step}
        result.update(step_s=step / speedups[cfg.key()] * rng.lognormvariate(0, spread),
                      compile_time_s=(30.0 if not reuse_cache else 5.0) * rng.lognormvariate(0, 0.03))
        if reuse_cache:
            result["compiled_from_cache"] = True
        if timing == "beside":
            result["eager_step_s"] = step * rng.lognormvariate(0, spread)
        return result

    return measure


def race(measure, **kw):
    return Race(SCORING, measure, rounds=12, heap_apart=False, paired=True, log=lambda line: None, **kw)


def test_the_opening_decides_plain_compile_and_writes_it_at_the_first_look():
    looks = []
    r = race(simulated({PLAIN_COMPILE.key(): 1.3}), on_look=looks.append)
    r.join([PLAIN_COMPILE], cold={PLAIN_COMPILE.key(): 30.0})
    d = r.run(until=3)
    assert d["verdict"] == "compile" and d["rounds_done"] == MIN_ROUNDS
    assert looks and looks[-1]["verdict"] == "compile" and "trailing" not in looks[-1]


def test_a_finalist_joining_a_decided_race_is_measured_before_the_race_settles():
    calls = []
    speedups = {PLAIN_COMPILE.key(): 1.3, TUNED.key(): 1.35}
    r = race(simulated(speedups, calls=calls), per_round=PAIRED_PER_ROUND)
    r.join([PLAIN_COMPILE], cold={PLAIN_COMPILE.key(): 30.0})
    assert r.run(until=3)["verdict"] == "compile"
    opened = r.done
    r.join([TUNED], cold={TUNED.key(): 1.0})  # a search figure offered for a finalist is not taken
    d = r.run()
    # it decides on its own figures only, after two rounds of its own processes (issue 57's review)
    assert d["verdict"] == "compile" and r.done - opened == MIN_ROUNDS
    assert r.records[TUNED.key()].rounds == MIN_ROUNDS and r.looked[-1] == r.done
    tuned = [(rnd, reuse) for key, rnd, reuse in calls if key == TUNED.key()]
    # one cold compile a round, the first process of each of its first rounds (issue 59)
    colds = [rnd for rnd, reuse in tuned if not reuse]
    assert colds == [opened, opened + 1] and len(colds) == COLD_COMPILES
    assert [reuse for _, reuse in tuned[:PAIRED_PER_ROUND + 1]] == [False, True, True, False]
    assert 1.0 not in r.records[TUNED.key()].cold and len(r.records[TUNED.key()].cold) == COLD_COMPILES
    # the run's first compile (plain compile's baseline trial) is a third cold compile beside the
    # race's two, one a round, and named for the report
    plain = [(rnd, reuse) for key, rnd, reuse in calls if key == PLAIN_COMPILE.key()]
    assert [rnd for rnd, reuse in plain if not reuse] == [0, 1]
    record = r.records[PLAIN_COMPILE.key()]
    assert len(record.cold) == 3 and record.first_compile == [30.0] == record.cold[:1]


def test_plain_compiles_baseline_trial_is_one_of_the_first_rounds_processes_where_rounds_are_paired():
    calls = []
    measure = simulated({PLAIN_COMPILE.key(): 1.3}, calls=calls)
    baseline = {**measure(PLAIN_COMPILE, "plain", timing="beside"), "step_mean_s": 0.0077,
                "eager_step_mean_s": 0.01}
    calls.clear()
    r = race(measure, per_round=PAIRED_PER_ROUND)
    r.join([PLAIN_COMPILE], cold={PLAIN_COMPILE.key(): 30.0}, baseline=baseline)
    r.run(until=MIN_ROUNDS)
    plain = [(rnd, reuse) for key, rnd, reuse in calls if key == PLAIN_COMPILE.key()]
    assert plain == [(0, False), (0, True), (1, False), (1, True), (1, True)], "one fewer in the first round"
    record = r.records[PLAIN_COMPILE.key()]
    assert len(record.steps) == 2 * PAIRED_PER_ROUND and record.paired and (0, 0.0077) in record.steps
    assert len(record.cold) == 3 and record.first_compile == record.cold[:1], "the baseline's and the race's two"


def test_an_unpaired_baseline_or_one_from_the_cache_opens_nothing():
    for baseline in ({"status": "ok", "timing": "alone", "step_s": 0.01, "step_mean_s": 0.01},
                     {"status": "ok", "timing": "beside", "step_mean_s": 0.01, "eager_step_mean_s": 0.01,
                      "eager_step_s": 0.01, "compiled_from_cache": True}):
        calls = []
        r = race(simulated({PLAIN_COMPILE.key(): 1.3}, calls=calls), per_round=PAIRED_PER_ROUND)
        r.join([PLAIN_COMPILE], cold={PLAIN_COMPILE.key(): 30.0}, baseline=baseline)
        r.run(until=1)
        assert sum(key == PLAIN_COMPILE.key() for key, _, _ in calls) == PAIRED_PER_ROUND
        assert not any(rnd == 0 and s == 0.01 for rnd, s in r.records[PLAIN_COMPILE.key()].steps)


def test_eagers_baseline_trial_is_the_first_rounds_process_of_eager_alone_where_rounds_are_paired():
    calls = []
    measure = simulated({PLAIN_COMPILE.key(): 1.3}, calls=calls)
    eager_baseline = {"status": "ok", "timing": "beside", "step_s": 0.0101, "step_mean_s": 0.0102,
                      "eager_step_mean_s": 0.0103, "peak_memory_mb": 1.0}
    r = race(measure, per_round=PAIRED_PER_ROUND)
    r.join([PLAIN_COMPILE], cold={PLAIN_COMPILE.key(): 30.0})
    assert r.take_eager_baseline(eager_baseline)
    r.run(until=MIN_ROUNDS)
    eager = [rnd for key, rnd, _ in calls if key == EAGER.key()]
    assert eager == [1], "round 0's process of eager alone is the baseline trial; round 1 times its own"
    record = r.records[EAGER.key()]
    assert record.steps[0] == (0, 0.0102) and not record.beside, "one sample of eager's level, not a pair"
    # unpaired rounds time eager around the candidates, and a race under way has had its first round
    for paired, started in ((False, False), (True, True)):
        r = Race(SCORING, simulated({PLAIN_COMPILE.key(): 1.3}), rounds=12, heap_apart=False, paired=paired,
                 log=lambda line: None)
        r.join([PLAIN_COMPILE])
        if started:
            r.run(until=1)
        assert not r.take_eager_baseline(eager_baseline)
        assert (0, 0.0102) not in r.records[EAGER.key()].steps


def test_the_error_rate_follows_the_candidates_as_they_join():
    r = race(simulated({PLAIN_COMPILE.key(): 1.3, TUNED.key(): 1.3}))
    r.join([PLAIN_COMPILE])
    d = r.run(until=2)
    # plain compile opens the race with half of the error rate, whatever joins later (one look:
    # the t boundary's tail is what the look spends, whatever its degrees of freedom)
    assert d["look_confidence"] == pytest.approx(stats.look_confidence(stats.CONFIDENCE, (2,), 12, candidates=2))
    r.join([TUNED])
    d = r.run()
    joined = r.records[TUNED.key()].joined
    tuned = next(c for c in d["candidates"] if c["config_label"] == TUNED.describe())
    # the second candidate a quarter, spent over its own looks from its own first round
    own = tuple(n - joined for n in r.looked if n > joined)
    # each of its looks' boundaries at the degrees of freedom its own paired processes had then
    dfs = stats.look_dfs(r.records[TUNED.key()].samples(EAGER.key()), [n + joined for n in own])
    assert len(own) > 1 and dfs[-1] >= 1
    assert tuned["against_plain"]["look_confidence"] == pytest.approx(
        stats.look_confidence(stats.CONFIDENCE, own, 12 - joined, candidates=4, dfs=dfs))


def test_a_budget_that_fits_no_round_of_a_new_stretch_cuts_the_race_with_the_figures_so_far():
    r = race(simulated({PLAIN_COMPILE.key(): 1.3, TUNED.key(): 1.3}))
    r.join([PLAIN_COMPILE])
    r.run(until=2)
    r.join([TUNED])
    d = r.run(round_fits=lambda n, ran: False)
    assert d["cut_short"] == "2 of 12 rounds" and d["verdict"] == "compile"
    assert not r.records[TUNED.key()].steps


def test_no_round_runs_after_a_look_that_spent_the_error_rate():
    """A --budget's cut spends what the error rate has left: a look after it, with fresh rounds,
    would err beyond the stated confidence. A later run (a finalist joining, a budget that fits a
    smaller round again) gets the standing decision, which says why."""
    calls = []
    same = {PLAIN_COMPILE.key(): 1.02, TUNED.key(): 1.02}
    r = race(simulated(same, spread=0.05, calls=calls), per_round=PAIRED_PER_ROUND)
    r.join([PLAIN_COMPILE])
    d = r.run(round_fits=lambda n, ran: r.done < 3)
    assert d["cut_short"] == "3 of 12 rounds" and r.spent == 3 and not r.settled(), d.get("verdict")
    measured = len(calls)
    r.join([TUNED])
    for fits in (None, lambda n, ran: True):
        again = r.run(round_fits=fits)
        assert again is d and r.done == 3 and len(calls) == measured
        assert again["looks_closed"].startswith("the look after round 3 spent what was left of the error rate")
    # the race's last round spends what is left too
    last = Race(SCORING, simulated({PLAIN_COMPILE.key(): 1.02}, spread=0.05), rounds=3, heap_apart=False, paired=True,
                log=lambda line: None, per_round=PAIRED_PER_ROUND)
    last.join([PLAIN_COMPILE])
    last.run()
    assert last.spent == 3 and not last.settled() and "looks_closed" in last.run()


def test_a_race_that_fits_no_round_at_all_says_nothing():
    r = race(simulated({PLAIN_COMPILE.key(): 1.3}))
    r.join([PLAIN_COMPILE])
    assert r.run(round_fits=lambda n, ran: False) == {} and r.done == 0


def test_paired_rounds_give_each_candidate_several_processes_and_two_cold_compiles_in_all():
    calls = []
    r = race(simulated({PLAIN_COMPILE.key(): 1.05, TUNED.key(): 1.05}, calls=calls), per_round=3)
    r.join([PLAIN_COMPILE, TUNED], cold={PLAIN_COMPILE.key(): 30.0})
    r.run(until=2)
    tuned = [reuse for key, _, reuse in calls if key == TUNED.key()]
    plain = [reuse for key, _, reuse in calls if key == PLAIN_COMPILE.key()]
    assert len(tuned) == len(plain) == 6, "three processes each per round, two rounds"
    assert tuned == plain == [False, True, True, False, True, True], "one cold compile a round"
    eager = [key for key, _, _ in calls if key == "none"]
    assert len(eager) == 2, "one process of eager alone per round: the pairs carry the contrast"
    # five degrees of freedom by the first look: the paired model has one effect per process
    assert r.decision["spread_df"] >= 2 * 6 - 2 - 1


def test_ctrl_c_after_the_first_decided_look_leaves_that_answer_and_a_report(tmp_path, workloads):
    """Real processes, real inductor compiles: the run is stopped with SIGINT at its first
    "so far" line; best_config.yaml then holds a verdict with its interval that apply_config takes."""
    import os
    import signal
    import subprocess
    import sys

    import torch
    import yaml
    from conftest import ROOT

    import tuner

    out, space = tmp_path / "fusable", tmp_path / "space.yaml"
    space.write_text("backend: [inductor]\nmode: [default, max-autotune-no-cudagraphs]\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuner", str(workloads / "fusable.py"), "--space", str(space), "--trials", "2",
         "--out", str(out), "--measure-seconds", "0.5", "--steps", "1000000", "--no-check", "--no-warm-start",
         "--no-progress"], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    lines = []
    for line in proc.stdout:  # type: ignore[union-attr]
        lines.append(line)
        if line.startswith("so far:"):
            proc.send_signal(signal.SIGINT)
            break
    rest, stderr = proc.communicate(timeout=300)
    lines.append(rest)
    said = "".join(lines)
    best = yaml.safe_load((out / "best_config.yaml").read_text())
    if "so far:" not in said:
        # the race never decided: on a crowded machine it says so, it never guesses
        assert best["verdict"] == "undecided" and "busy" in best["measured"]["reason"], said
        return
    assert proc.returncode in (0, 130), stderr
    assert "Traceback" not in stderr
    m = best["measured"]
    assert best["verdict"] in ("compile", "stay_eager") and m["confirmed"] is True, said
    low, high = m["speedup_interval"]
    assert low <= m["speedup"] <= high and m["confidence"] == 0.95 and m["first_answer_s"] > 0
    assert (out / "report.md").exists() and (out / "report.html").exists()
    model = tuner.apply_config(workloads_model(workloads), out / "best_config.yaml")
    assert torch.allclose(model(torch.ones(4, 8)), workloads_model(workloads)(torch.ones(4, 8)), atol=1e-4)


def workloads_model(workloads):
    import importlib.util

    spec = importlib.util.spec_from_file_location("fusable_under_test", workloads / "fusable.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.build_model()


def test_a_decided_look_stays_the_answer_when_later_looks_cannot_tell():
    """The machine turns busy after the first look decided: later looks say undecided (busy),
    the race's answer stays the decided one, and says why."""
    looks = []
    r = race(simulated({PLAIN_COMPILE.key(): 1.3}), on_look=looks.append)
    r.join([PLAIN_COMPILE])
    assert r.run(until=2)["verdict"] == "compile"
    r.join([TUNED])
    quiet = simulated({PLAIN_COMPILE.key(): 1.3, TUNED.key(): 1.3})
    # from here every process waited for a core half its time: left out, and the machine reads busy
    r.measure = lambda cfg, label, **kw: {**quiet(cfg, label, **kw), "core_wait_share": 0.5}
    r.run(until=4)
    assert r.decision["verdict"] == "undecided" and "busy" in r.decision["reason"]
    final = r.final()
    assert final["verdict"] == "compile" and final["rounds_done"] == 2 and "did not decide" in final["later_looks"]
    assert len(looks) == 1, "an undecided look does not overwrite the answer on disk"


def test_a_settled_race_that_nothing_joined_runs_no_more_rounds():
    calls = []
    r = race(simulated({PLAIN_COMPILE.key(): 1.3}, calls=calls))
    r.join([PLAIN_COMPILE])
    assert r.run(until=3)["verdict"] == "compile"
    before = len(calls)
    r.join([])  # the search found nothing worth confirming
    assert r.run()["verdict"] == "compile" and len(calls) == before


def test_a_crowded_compile_is_left_out_where_a_clean_one_of_its_kind_exists():
    from tuner.decide.evidence import Record

    rec = Record(PLAIN_COMPILE)
    base = {"status": "ok", "step_s": 0.01, "peak_memory_mb": 1.0}
    rec.add({**base, "compile_time_s": 30.0, "compile_wait_share": 0.02}, SCORING, 0)
    rec.add({**base, "compile_time_s": 55.0, "compile_wait_share": 0.40}, SCORING, 0)  # another job's compile too
    rec.add({**base, "compile_time_s": 31.0, "compile_wait_share": 0.01}, SCORING, 1)
    assert rec.compile_samples(SCORING) == [30.0, 31.0] and rec.crowded_compiles == [(False, 55.0)]
    alone = Record(PLAIN_COMPILE)
    alone.add({**base, "compile_time_s": 55.0, "compile_wait_share": 0.40}, SCORING, 0)
    assert alone.compile_samples(SCORING) == [55.0], "a crowded compile is a conservative figure, not none"


def test_paired_a_race_whose_eager_alone_processes_were_all_crowded_still_states_its_figures():
    """Seen in tests/test_confirm.py on this shared VM: both eager-alone processes of a 2-round race
    waited for a core; paired, eager's side of each config's process is its level."""
    quiet = simulated({PLAIN_COMPILE.key(): 1.3})

    def measure(cfg, label, **kw):
        result = quiet(cfg, label, **kw)
        return {**result, "core_wait_share": 0.5 if not cfg.compiles else 0.01}

    r = race(measure, per_round=3)  # 2 of 8 processes crowded: not a busy machine
    r.join([PLAIN_COMPILE])
    d = r.run(until=2)
    assert d["verdict"] == "compile" and d["confidence"] == 0.95 and d["eager_step_s"] > 0


def test_an_unpaired_finalist_or_one_that_starts_the_race_still_waits_two_rounds():
    r = Race(SCORING, simulated({PLAIN_COMPILE.key(): 1.3, TUNED.key(): 1.35}), rounds=12,
             heap_apart=False, paired=False, log=lambda line: None)
    r.join([PLAIN_COMPILE])
    r.run(until=2)
    r.join([TUNED])  # one process a round: one round would give it a single process
    opened = r.done
    r.run(until=opened + 1)
    assert not r.settled() and r.records[TUNED.key()].rounds == 1
    assert r.run()["verdict"] == "compile" and r.done - opened >= MIN_ROUNDS


def test_an_undecided_opening_is_promising_only_while_its_rounds_can_decide_it():
    close = race(simulated({PLAIN_COMPILE.key(): 1.02}, spread=0.01))
    close.join([PLAIN_COMPILE])
    close.run(until=2)
    need = close.decision["to_decide"]["rounds"]
    assert close.decision["verdict"] == "undecided" and close.promising() == (need <= close.rounds)
    hopeless = race(simulated({PLAIN_COMPILE.key(): 1.001}, spread=0.05))
    hopeless.join([PLAIN_COMPILE])
    hopeless.run(until=2)
    assert hopeless.decision["to_decide"]["rounds"] > hopeless.rounds and not hopeless.promising()
    decided = race(simulated({PLAIN_COMPILE.key(): 1.3}))
    decided.join([PLAIN_COMPILE])
    decided.run(until=2)
    assert decided.settled() and not decided.promising()


def test_paired_rounds_after_the_first_look_time_the_candidates_alone():
    """Eager alone is no sample of a paired speedup: it runs in the first look's rounds (the heap's
    own gain, a fresh process's spread), and the rounds after them are the candidates' processes."""
    calls = []
    r = Race(SCORING, simulated({PLAIN_COMPILE.key(): 1.005}, spread=0.03, calls=calls), rounds=5,
             heap_apart=True, paired=True, per_round=PAIRED_PER_ROUND, log=lambda line: None)
    r.join([PLAIN_COMPILE], cold={PLAIN_COMPILE.key(): 30.0})
    d = r.run()
    assert r.done == 5, d.get("reason")  # a near tie at 3 % spread: no look decides
    eager_rounds = [rnd for key, rnd, _ in calls if key == CompileConfig(target="none").key()]
    assert eager_rounds == [0, 0, 1, 1], eager_rounds  # pinned and as started, rounds 1 and 2 only
    assert len(calls) == 2 * (2 + PAIRED_PER_ROUND) + 3 * PAIRED_PER_ROUND
    assert d["heap"]["processes"] == 2 and d["rounds_done"] == 5


def test_under_a_budget_a_paired_race_times_no_eager_alone_and_says_why_the_heaps_gain_is_missing():
    """Under a --budget eager alone's processes go to the candidates: no round times it (eager's
    level is its side of each paired process), the heap's gain is not stated, and the decision
    says why; the rounds' process counts, which the budget prices, say the same."""
    calls = []
    r = Race(SCORING, simulated({PLAIN_COMPILE.key(): 1.005}, spread=0.03, calls=calls), rounds=3,
             heap_apart=True, paired=True, per_round=PAIRED_PER_ROUND, log=lambda line: None, eager_alone_rounds=0,
             beside_plain=True)
    r.join([PLAIN_COMPILE], cold={PLAIN_COMPILE.key(): 30.0})
    assert r.next_round_processes() == PAIRED_PER_ROUND
    d = r.run()
    assert r.done == 3, d.get("reason")
    assert [key for key, _, _ in calls] == [PLAIN_COMPILE.key()] * 3 * PAIRED_PER_ROUND
    assert "heap" not in d and "--budget" in d["eager_alone"]
    assert d["eager_step_s"] == pytest.approx(0.01, rel=0.1)  # eager's level from its side of each process
    # a joiner's own processes to its first look, one of them cold; plain compile rides, no eager alone
    assert r.joiner_processes() == (COLD_COMPILES - 1, PAIRED_PER_ROUND * MIN_ROUNDS - COLD_COMPILES)


def test_a_candidate_timed_without_eager_beside_it_keeps_eager_alone_in_every_round():
    calls = []
    paired = simulated({PLAIN_COMPILE.key(): 1.005}, spread=0.03, calls=calls)

    def unpaired(cfg, label, round_=0, heap=None, reuse_cache=False, timing="alone"):
        result = paired(cfg, label, round_=round_, heap=heap, reuse_cache=reuse_cache, timing=timing)
        result.pop("eager_step_s", None)  # the trial could not time eager beside it
        return {**result, "timing": "alone"}

    r = Race(SCORING, unpaired, rounds=4, heap_apart=False, paired=True, per_round=PAIRED_PER_ROUND,
             log=lambda line: None)
    r.join([PLAIN_COMPILE], cold={PLAIN_COMPILE.key(): 30.0})
    r.run()
    assert [rnd for key, rnd, _ in calls if key == CompileConfig(target="none").key()] == [0, 1, 2, 3]


def test_a_searched_config_joins_with_its_trial_as_a_process_unless_it_cannot_beat_plain():
    from tuner.decide.confirm import CONFIRM_TIMING_SHARE, join_searched

    measure = simulated({PLAIN_COMPILE.key(): 1.3, TUNED.key(): 1.32})
    r = race(measure, per_round=PAIRED_PER_ROUND)
    r.join([PLAIN_COMPILE])
    assert r.run(until=3)["verdict"] == "compile"

    def trial(config, speedup):
        return {"status": "ok", "correct": True, "config": config.to_dict(), "timing": "beside",
                "step_s": 0.01 / speedup, "step_mean_s": 0.01 / speedup, "eager_step_s": 0.01,
                "eager_step_mean_s": 0.01, "speedup": speedup, "compile_time_s": 30.0,
                "timing_share": CONFIRM_TIMING_SHARE}

    said = []
    # 0.87x of eager where plain compile runs 1.3x: even 4 paired spreads faster it cannot beat plain
    slow = CompileConfig(backend="aot_eager")
    assert not join_searched(r, trial(slow, 0.87), SCORING, said.append)
    assert slow.key() not in r.records and "does not join the race" in said[-1]
    # one as fast as plain compile joins, its trial the first of its round's processes and cold compiles
    assert join_searched(r, trial(TUNED, 1.3), SCORING, said.append)
    record = r.records[TUNED.key()]
    assert record.steps == [(r.done, 0.01 / 1.3)] and record.cold == [30.0] and r.cold_rounds[TUNED.key()] == [r.done]
    assert r.next_round_processes() == PAIRED_PER_ROUND - 1 + 1  # its two more, plain compile's one (decided)


def test_a_search_trials_third_side_is_stored_and_joins_the_race_with_it():
    """A search trial in a run that races steps plain compile beside its config (its rival): the
    study keeps that side, so the candidate's first process is a direct sample against plain
    compile and a ride of plain compile, as its later race processes are. Until 2026-12-07 the
    study dropped it: the zoo's search trials paid for the rival and it was thrown away."""
    from tuner.decide.confirm import CONFIRM_TIMING_SHARE, join_searched
    from tuner.study._attrs import trial_attrs

    r = race(simulated({PLAIN_COMPILE.key(): 1.3}), per_round=PAIRED_PER_ROUND, beside_plain=True)
    r.join([PLAIN_COMPILE])
    r.run(until=2)
    result = {"status": "ok", "correct": True, "timing": "beside", "step_s": 0.01 / 1.5, "step_mean_s": 0.01 / 1.5,
              "eager_step_s": 0.01, "eager_step_mean_s": 0.01, "speedup": 1.5, "compile_time_s": 30.0,
              "timing_share": CONFIRM_TIMING_SHARE, "rival": PLAIN_COMPILE.to_dict(), "rival_step_s": 0.01 / 1.3,
              "rival_step_mean_s": 0.01 / 1.3, "rival_speedup": 1.5 / 1.3, "rival_compile_s": 4.0}
    attrs = trial_attrs(TUNED, "search", result, SCORING)
    assert attrs["rival_step_mean_s"] == pytest.approx(0.01 / 1.3) and attrs["rival"] == PLAIN_COMPILE.to_dict()
    assert join_searched(r, attrs, SCORING, lambda line: None)
    record = r.records[TUNED.key()]
    assert record.rival == [pytest.approx(0.01 / 1.3)]
    assert record.rival_samples(PLAIN_COMPILE.key()) and record.ride_samples(EAGER.key(), PLAIN_COMPILE.key())


def beside_plain(speedups: dict[str, float], process: float = 0.10, spread: float = 0.01, seed: int = 0,
                 rivals: list | None = None):
    """Paired processes whose luck differs widely from process to process (``process``), which
    eager, plain compile beside a candidate (its rival) and the candidate share."""
    rng = random.Random(seed)

    def measure(cfg, label, round_=0, heap=None, reuse_cache=False, timing="alone", rival=None):
        luck = rng.lognormvariate(0, process)
        step = 0.01 * luck
        result = {"status": "ok", "peak_memory_mb": 1.0, "timing": timing}
        if not cfg.compiles:
            return {**result, "step_s": step}
        result.update(step_s=step / speedups[cfg.key()] * rng.lognormvariate(0, spread),
                      compile_time_s=30.0 * rng.lognormvariate(0, 0.03),
                      eager_step_s=step * rng.lognormvariate(0, spread))
        if rival is not None:
            if rivals is not None:
                rivals.append(cfg.key())
            result.update(rival=rival.to_dict(),
                          rival_step_mean_s=step / speedups[rival.key()] * rng.lognormvariate(0, spread))
        return result

    return measure


@pytest.mark.parametrize("seed", range(3))
def test_a_candidate_is_decided_against_plain_in_the_processes_that_step_both(seed):
    # 4 % faster than plain compile, processes 10 % apart: the candidate's own processes that step
    # plain beside it decide "beats", with the interval of one contrast
    rivals = []
    speedups = {PLAIN_COMPILE.key(): 1.3, TUNED.key(): 1.3 * 1.04}
    r = race(beside_plain(speedups, seed=seed, rivals=rivals), per_round=PAIRED_PER_ROUND, beside_plain=True)
    r.join([PLAIN_COMPILE], cold={PLAIN_COMPILE.key(): 30.0})
    assert r.run(until=3)["verdict"] == "compile"
    r.join([TUNED])
    d = r.run()
    row = d["against_plain"][TUNED.key()]
    assert row["compared"] == "beside plain" and row["zone"] == "beats"
    assert d["choice"] == TUNED.to_dict()
    assert set(rivals) == {TUNED.key()}  # plain compile is never its own rival
    low, high = row["speedup_interval"]
    assert low < 1.04 < high and high / low < 1.1


def test_without_a_rival_the_comparison_goes_through_eager_and_says_so():
    speedups = {PLAIN_COMPILE.key(): 1.3, TUNED.key(): 1.3 * 1.04}
    r = race(beside_plain(speedups), per_round=PAIRED_PER_ROUND)  # beside_plain off
    r.join([PLAIN_COMPILE], cold={PLAIN_COMPILE.key(): 30.0})
    r.run(until=3)
    r.join([TUNED])
    d = r.run(until=r.done + MIN_ROUNDS)
    assert d["against_plain"][TUNED.key()]["compared"] == "through eager"


def test_beside_plain_decides_more_candidates_in_fewer_rounds_than_through_eager():
    # steps 2 % noisy in a process: one contrast's variance against two (30 races each, seeded:
    # beside plain 27 "beats" within 5 rounds each, through eager 23, some after 10)
    def races(beside: bool) -> list[tuple[str, int]]:
        out = []
        for seed in range(30):
            speedups = {PLAIN_COMPILE.key(): 1.3, TUNED.key(): 1.3 * 1.04}
            r = race(beside_plain(speedups, seed=seed, spread=0.02), per_round=PAIRED_PER_ROUND, beside_plain=beside)
            r.join([PLAIN_COMPILE], cold={PLAIN_COMPILE.key(): 30.0})
            r.run(until=3)
            joined = r.done
            r.join([TUNED])
            out.append((r.run()["against_plain"][TUNED.key()]["zone"], r.done - joined))
        return out

    beside, through = races(True), races(False)
    assert sum(z == "beats" for z, _ in beside) > sum(z == "beats" for z, _ in through)
    assert max(n for _, n in beside) < max(n for _, n in through)


def test_each_candidate_keeps_its_unadjusted_95_percent_intervals_beside_the_looks_wider_ones():
    # what benchmarks/full_races.py judges against a known truth: the intervals at 95 % itself,
    # inside the look's (taken at a higher confidence), and the log speedup's estimate, se and df
    r = race(simulated({PLAIN_COMPILE.key(): 1.3}))
    r.join([PLAIN_COMPILE], cold={PLAIN_COMPILE.key(): 30.0})
    d = r.run(until=3)
    plain = next(c for c in d["candidates"] if c["config"] == PLAIN_COMPILE.to_dict())
    u = plain["unadjusted"]
    assert u["confidence"] == 0.95 and u["df"] >= 1 and u["se_log"] > 0
    lo, hi = u["speedup_interval"]
    assert plain["speedup_interval"][0] < lo < plain["speedup"] < hi < plain["speedup_interval"][1]
    lo, hi = u["saving_interval_s"]
    assert plain["saving_interval_s"][0] < lo < plain["saving_s"] < hi < plain["saving_interval_s"][1]
    assert abs(math.exp(u["log_speedup"]) - plain["speedup"]) < 1e-12


def test_a_best_config_beyond_plain_without_an_interval_says_what_one_would_take():
    """A candidate with one round of its own states no interval: the decision says how many more of
    its processes an interval needs, and about how long they take at the last round's pace, so an
    answer cut short by a --budget says what a longer one buys."""
    r = race(beside_plain({PLAIN_COMPILE.key(): 1.3, TUNED.key(): 1.6}), per_round=PAIRED_PER_ROUND,
             beside_plain=True)
    r.join([PLAIN_COMPILE])
    r.run(until=2)
    r.join([TUNED])
    d = r.run(until=3)
    beyond = d["beyond_plain"]
    assert beyond["key"] == TUNED.key() and beyond["saving_interval_s"] == [None, None]
    each = r.walls[-1] / r.ran
    assert beyond["to_interval"] == {"processes": PAIRED_PER_ROUND * MIN_ROUNDS - PAIRED_PER_ROUND,
                                     "seconds": pytest.approx(PAIRED_PER_ROUND * each, abs=0.1)}
    d = r.run(until=4)  # its second round: an interval, nothing more to say
    assert d["beyond_plain"]["saving_interval_s"][0] is not None and "to_interval" not in d["beyond_plain"]


def test_where_a_whole_round_does_not_fit_a_candidate_short_of_its_interval_gets_one_process():
    """Under a --budget that fits one process but not a round, the candidate with one round of its own
    runs one more (plain compile riding in it), and the race's last look states its interval: a
    large gain is decided on four processes rather than left with none."""
    r = race(beside_plain({PLAIN_COMPILE.key(): 1.3, TUNED.key(): 1.3 * 1.25}), per_round=PAIRED_PER_ROUND,
             beside_plain=True)
    r.join([PLAIN_COMPILE])
    r.run(until=2)
    r.join([TUNED])
    r.run(until=3)
    assert r.decision["beyond_plain"]["saving_interval_s"] == [None, None]
    asked = []

    def fits(n, ran):
        asked.append(n)
        return n <= 1

    d = r.run(fits)
    assert asked == [PAIRED_PER_ROUND, 1] and r.ran == 1 and r.done == 4
    assert r.records[TUNED.key()].rounds == MIN_ROUNDS and r.records[TUNED.key()].processes == PAIRED_PER_ROUND + 1
    beyond = d["beyond_plain"]
    assert beyond["zone"] == "beats" and beyond["saving_interval_s"][0] > 0, beyond
    assert d["cut_short"] == f"4 of {r.rounds} rounds" and r.spent == 4
    # nothing short of its interval: a whole round that does not fit is not cut into parts
    asked.clear()
    r2 = race(beside_plain({PLAIN_COMPILE.key(): 1.02}, spread=0.03), per_round=PAIRED_PER_ROUND, beside_plain=True)
    r2.join([PLAIN_COMPILE])
    r2.run(until=2)
    assert not r2.settled()
    r2.run(fits)
    assert asked == [PAIRED_PER_ROUND] and r2.done == 2


def test_a_part_of_a_round_compiles_warm_as_the_budget_priced_it():
    """The zoo's BERT server (--budget 10m, 2026-12-07): the last process, a part of a round, was
    its candidate's second cold compile (57 s) priced as a warm process, and the run ended 45 s
    over its budget. A part of a round compiles from the kept cache; the candidate's compile spread
    comes from the pool or the prior (``stats.compile_costs``)."""
    calls = []
    inner = beside_plain({PLAIN_COMPILE.key(): 1.3, TUNED.key(): 1.3 * 1.1})

    def measure(cfg, label, round_=0, reuse_cache=False, **kw):
        calls.append((cfg.key(), reuse_cache))
        return inner(cfg, label, round_=round_, reuse_cache=reuse_cache, **kw)

    r = race(measure, per_round=PAIRED_PER_ROUND, beside_plain=True)
    r.join([PLAIN_COMPILE], cold={PLAIN_COMPILE.key(): 30.0})
    r.run(until=MIN_ROUNDS)
    r.join([TUNED])  # a 30 s compile, over the 20 s margin: two cold compiles in whole rounds
    r.run(until=r.done + 1)
    assert [reuse for key, reuse in calls if key == TUNED.key()][0] is False
    part = r._part_round()
    assert part.get(TUNED.key()) == 1
    r._round(only=part)
    assert calls[-1] == (TUNED.key(), True)


def test_an_opening_that_yields_after_one_round_decides_plain_compile_on_the_first_candidates_processes():
    # The zoo's GPT-2 training at --budget 10m: a second round of plain compile's own left the
    # first candidate no time. Plain compile rides in the candidate's processes as its second round:
    # its first look comes after the candidate's first round, with no process of its own in it.
    calls: list = []
    speedups = {PLAIN_COMPILE.key(): 1.3, TUNED.key(): 1.3 * 1.2}
    measure = beside_plain(speedups)
    r = race(lambda cfg, label, **kw: (calls.append((cfg.key(), kw.get("round_"))), measure(cfg, label, **kw))[1],
             per_round=PAIRED_PER_ROUND, beside_plain=True, eager_alone_rounds=0)  # as under a --budget
    baseline = {**measure(PLAIN_COMPILE, "plain", timing="beside"), "timing": "beside", "step_mean_s": 0.01 / 1.3,
                "eager_step_mean_s": 0.01}
    r.join([PLAIN_COMPILE], baseline=baseline)
    r.run(until=1)
    assert r.done == 1 and not r.decision and not r.rides()  # one round of its own: it runs its own
    r.rides_after = 1
    trial = {**measure(TUNED, "search", timing="beside", rival=PLAIN_COMPILE), "step_mean_s": 0.01 / 1.56,
             "eager_step_mean_s": 0.01}
    r.join([TUNED], opened={TUNED.key(): trial})
    assert r.rides() and r.next_round_processes() == PAIRED_PER_ROUND - 1
    calls.clear()
    d = r.run(until=2)
    assert {key for key, _ in calls} == {TUNED.key()}, calls  # no process of plain compile's own
    plain = next(c for c in d["candidates"] if c["config"] == PLAIN_COMPILE.to_dict())
    assert d["verdict"] == "compile" and plain["rides"]["pooled"] is True, d.get("reason")
    assert d["choice"] == PLAIN_COMPILE.to_dict() or d["choice"] == TUNED.to_dict()


def test_plain_compile_runs_its_own_second_round_where_no_candidate_carries_it():
    # an opening that yielded early, but the search's first config did not join (it failed, or read
    # behind plain compile): plain compile's second round is its own, not none
    speedups = {PLAIN_COMPILE.key(): 1.3}
    measure = beside_plain(speedups)
    r = race(measure, per_round=PAIRED_PER_ROUND, beside_plain=True, eager_alone_rounds=0)
    baseline = {**measure(PLAIN_COMPILE, "plain", timing="beside"), "step_mean_s": 0.01 / 1.3,
                "eager_step_mean_s": 0.01}
    r.join([PLAIN_COMPILE], baseline=baseline)
    r.run(until=1)
    r.rides_after = 1
    assert not r.rides() and r.next_round_processes() == PAIRED_PER_ROUND
    assert r.run(until=2)["verdict"] == "compile"
