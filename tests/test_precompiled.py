"""torch's ahead-of-time precompiled forward as a warm start: saved into the bundle, timed against
the bundle alone, loaded by apply_config in a user's process, and left for torch.compile when the
inputs fall outside it."""
import json
import statistics
import subprocess
import sys

import pytest
import torch
from conftest import ROOT

from tuner.core.config import CompileConfig, TunedConfig
from tuner.export.best_config import load_tuned_config, save_tuned_config
from tuner.runtime import precompiled
from tuner.runtime.warmstart import CACHE_DIRNAME, DIGEST_KEY, bundle_digest
from tuner.ship.bundle import START_PROCESSES, bundle_and_measure, choose_start
from tuner.study import StudySettings

needs_precompile = pytest.mark.skipif(not hasattr(torch.compiler, "load_compiled_function"),
                                      reason=f"torch {torch.__version__} has no load_compiled_function")


@pytest.mark.parametrize("config, task, why", [
    (CompileConfig(fullgraph=True), "train", "training"),
    (CompileConfig(target="blocks", fullgraph=True), "infer", "target 'blocks'"),
    (CompileConfig(), "infer", "graph breaks"),
    (CompileConfig(backend="aot_eager", fullgraph=True), "infer", "backend aot_eager"),
    (CompileConfig(fullgraph=True, dynamo={"cache_size_limit": 4}), "infer", "dynamo settings"),
])
@needs_precompile
def test_what_cannot_start_precompiled_says_why(config, task, why):
    assert why in precompiled.not_precompilable(config, task)
    assert precompiled.not_precompilable(CompileConfig(fullgraph=True), "infer") is None
    assert precompiled.not_precompilable(CompileConfig(), "infer", graph_breaks=0) is None  # one graph seen


USER = """
import json, sys, torch, tuner
from tuner.runtime.precompiled import PrecompiledForward
from tuner.user.workload import load_workload
torch.set_num_threads(1)  # as tuned: the precompiled guards hold the thread count
w = load_workload(sys.argv[1])  # imported under another module name than when it was saved
model, inputs = w.make_model().eval(), w.make_inputs()
with torch.no_grad():
    eager = model(**inputs)
    model = tuner.apply_config(model, sys.argv[2])
    found = {"precompiled": isinstance(vars(model).get("forward"), PrecompiledForward)}
    out = model(**inputs)
    found["same"] = torch.allclose(out.logits, eager.logits, atol=1e-5)
    found["after_first"] = isinstance(vars(model).get("forward"), PrecompiledForward)
    other = dict(inputs, x=torch.randn(7, 8))
    got = model(**other)
    found["other_same"] = torch.allclose(got.logits, w.make_model().eval()(**other).logits, atol=1e-5)
    found["still_precompiled"] = isinstance(vars(model).get("forward"), PrecompiledForward)
print(json.dumps(found))
"""


@needs_precompile
def test_a_precompiled_forward_is_saved_timed_and_loaded_and_new_shapes_fall_back(workloads, tmp_path):
    workload = workloads / "kwargs_dict_output.py"
    config_path = save_tuned_config(
        TunedConfig(CompileConfig(backend="inductor", fullgraph=True), verdict="compile",
                    tuned_on={"torch": torch.__version__, "device": "cpu", "task": "infer", "steps": 1000}),
        tmp_path / "best_config.yaml")
    settings = StudySettings(workload=str(workload), task="infer", device="cpu", threads=1, steps=1000,
                             trials=1, trial_timeout=300)
    started = bundle_and_measure(settings, config_path, tmp_path / "work")
    assert "warm_start_error" not in started and "precompiled_error" not in started, started
    assert (tmp_path / CACHE_DIRNAME / precompiled.PRECOMPILED).stat().st_size > 0
    assert started["guard_check_us"] > 0 and started["precompiled_start_s"] > 0, started
    assert started[precompiled.CHOICE_KEY] in ("precompiled", "bundle")
    # the choice is the figures' own: fresh processes of each start in turn, the precompiled one
    # chosen only when all of its first steps, plus its extra guard checks over the run's steps,
    # beat all of the bundle's
    assert started["dynamo_guard_check_us"] > 0, "torch.compile's own guard check, timed beside it"
    guards_s = 1000 * max(0.0, started["guard_check_us"] - started["dynamo_guard_check_us"]) / 1e6
    bundle, ahead = started["start_processes"]["bundle"], started["start_processes"]["precompiled"]
    assert 1 <= len(bundle) == len(ahead) <= START_PROCESSES, started
    assert started["warm_start_s"] == pytest.approx(statistics.median(bundle), abs=2e-3)
    saving = statistics.median(bundle) - statistics.median(ahead) - guards_s
    assert started["precompiled_saving_s"] == pytest.approx(saving, abs=2e-3)
    won = len(ahead) == START_PROCESSES and max(ahead) + guards_s < min(bundle)
    assert (started[precompiled.CHOICE_KEY] == "precompiled") == won, started
    if len(ahead) < START_PROCESSES:  # the race stopped as soon as the precompiled start could not win
        assert max(ahead) + guards_s >= min(bundle), started
    tuned = load_tuned_config(config_path)
    assert tuned.measured[DIGEST_KEY] == bundle_digest(tmp_path / CACHE_DIRNAME), "the hash covers the forward"

    # A user's process applies it as saved, whichever start was faster here
    save_tuned_config(TunedConfig(tuned.config, verdict="compile", tuned_on=tuned.tuned_on,
                                  measured={**tuned.measured, precompiled.CHOICE_KEY: "precompiled"}), config_path)
    run = subprocess.run([sys.executable, "-c", USER, str(workload), str(config_path)], capture_output=True,
                         text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    assert found["precompiled"] and found["same"] and found["after_first"], found
    # a batch of 7 fails the guards of a forward compiled at 4: said once, then torch.compile answers
    assert found["other_same"] and not found["still_precompiled"], found
    warned = [line for line in run.stderr.splitlines() if "the precompiled forward is left" in line]
    assert len(warned) == 1 and "outside what it was precompiled for" in warned[0], run.stderr[-2000:]
    assert "size mismatch at index 0. expected 4, actual 7" in warned[0], warned  # the failed guard, named


def test_a_guard_failure_is_named_in_one_line():
    message = ("GuardManager check failed, reason: GuardDebugInfo(\nresult=0,\n"
               "verbose_code_parts=['GLOBAL_STATE changed: num_threads '],\nnum_guards_executed=2,\nuser_stack=None)\n")
    assert precompiled.guard_failure(message) == "GLOBAL_STATE changed: num_threads"


@needs_precompile
def test_a_workload_whose_schedule_leaves_the_guards_keeps_the_bundle(workloads, tmp_path):
    # fusable_schedule.py serves 160 to 256 rows; a forward precompiled at its example's 256 holds
    # 2 of the schedule's 6 requests
    config_path = save_tuned_config(
        TunedConfig(CompileConfig(backend="inductor", fullgraph=True), verdict="compile",
                    tuned_on={"torch": torch.__version__, "device": "cpu", "task": "infer", "steps": 1000}),
        tmp_path / "best_config.yaml")
    settings = StudySettings(workload=str(workloads / "fusable_schedule.py"), task="infer", device="cpu", threads=1,
                             steps=1000, trials=1, trial_timeout=300)
    started = bundle_and_measure(settings, config_path, tmp_path / "work")
    assert started["schedule_guard_misses"] == 4 and started["schedule_inputs"] == 6, started
    assert started[precompiled.CHOICE_KEY] == "bundle"
    assert started["precompiled_error"].startswith("4 of the 6 inputs of the workload's schedule fail its guards")
    assert load_tuned_config(config_path).measured[precompiled.CHOICE_KEY] == "bundle"


def test_the_precompiled_start_is_chosen_only_when_every_process_of_it_beat_every_bundle_start():
    # three of each, every precompiled first step (with 0.1 s of guard checks) below every bundle one
    chosen = choose_start([2.4, 2.2, 2.3], [1.5, 1.4, 2.0], 0.1)
    assert chosen[precompiled.CHOICE_KEY] == "precompiled" and chosen["precompiled_saving_s"] == pytest.approx(0.7)
    assert chosen["warm_start_s"] == 2.3 and chosen["precompiled_start_s"] == 1.5
    # the medians say 0.7 s, but one slow precompiled process overlaps the bundle's: inside the spread
    assert choose_start([2.4, 2.2, 2.3], [1.5, 1.4, 2.15], 0.1)[precompiled.CHOICE_KEY] == "bundle"
    # fewer than three of each cannot reach 5 %, however far apart
    assert choose_start([2.4, 2.3], [1.0, 1.1], 0.0)[precompiled.CHOICE_KEY] == "bundle"
