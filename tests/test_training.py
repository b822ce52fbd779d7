"""Training steps, optimizer compile, warm starts from a saved compile cache, thread safety."""
import ast
import copy
import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import ROOT

import tuner
from tuner.core.config import CompileConfig, TunedConfig
from tuner.core.spec import TrialSpec
from tuner.export.best_config import load_tuned_config, save_tuned_config
from tuner.isolation.isolated import run_isolated
from tuner.runtime.warmstart import CACHE_DIRNAME, DIGEST_KEY, bundle_digest
from tuner.ship.bundle import bundle_and_measure
from tuner.study import StudySettings
from tuner.user.workload import load_workload


def test_train_trial_checks_loss_and_gradients_with_a_compiled_optimizer(workloads, tmp_path):
    spec = TrialSpec(workload=str(workloads / "blocks.py"), task="train", measure_seconds=0.5, rounds=2,
                     config={"target": "blocks", "backend": "aot_eager", "compile_optimizer": True})
    result = run_isolated(spec, timeout=300, work_dir=tmp_path)
    assert result["status"] == "ok", result.get("failure")
    assert result["correct"] is True
    assert result["compile_time_s"] > 0 and result["speedup"] > 0


def test_optimizer_step_is_compiled_only_when_asked_and_matches_eager():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    twin = copy.deepcopy(model)
    opt, twin_opt = torch.optim.AdamW(model.parameters(), lr=0.1), torch.optim.AdamW(twin.parameters(), lr=0.1)
    assert tuner.optimizer_step(opt, CompileConfig(backend="eager")) == opt.step
    step = tuner.optimizer_step(opt, CompileConfig(backend="eager", compile_optimizer=True))
    assert step != opt.step
    for _ in range(3):
        x = torch.randn(3, 4)
        for m, o, s in ((model, opt, step), (twin, twin_opt, twin_opt.step)):
            o.zero_grad()
            m(x).pow(2).mean().backward()
            s()
    torch.testing.assert_close(model.weight, twin.weight)


def test_warm_start_bundle_makes_the_first_step_faster_and_leaves_the_global_cache_alone(workloads, tmp_path):
    config_path = save_tuned_config(
        TunedConfig(CompileConfig(backend="inductor"), tuned_on={"torch": torch.__version__, "device": "cpu"}),
        tmp_path / "best_config.yaml")
    settings = StudySettings(workload=str(workloads / "mlp.py"), task="infer", device="cpu", threads=1, steps=1000,
                             trials=1, trial_timeout=300)
    started = bundle_and_measure(settings, config_path, tmp_path / "work")
    assert "warm_start_error" not in started, started
    assert (tmp_path / CACHE_DIRNAME / "mega_cache.bin").stat().st_size > 0
    assert any((tmp_path / CACHE_DIRNAME / "inductor").rglob("*.so")), "the C++ kernels travel with the config"
    assert started["warm_start_s"] < started["cold_start_s"] / 2, started
    # known to hit, not assumed: inductor's FX-graph cache served every graph of the warm start
    assert started["warm_start_cache"]["fxgraph_hit"] >= 1 and started["warm_start_cache"]["fxgraph_miss"] == 0
    assert started["warm_start_missed"] is None
    digest = started[DIGEST_KEY]
    assert load_tuned_config(config_path).measured[DIGEST_KEY] == digest

    # A user's process: the bundle goes to a directory of its own, the global inductor cache
    # (under a fresh TMPDIR here) gets nothing from it. torch itself writes one thing there on any
    # CPU compile, whatever TORCHINDUCTOR_CACHE_DIR says: its precompiled-header lock
    # (torch/_inductor/codecache.py, _HEADER_DIR = default_cache_dir()/precompiled_headers).
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    script = ("import os, sys, tempfile, tuner\n"
              "from tuner.user.workload import load_workload\n"
              "def global_files():\n"
              "    root = os.path.join(tempfile.gettempdir(), 'torchinductor_' + __import__('getpass').getuser())\n"
              "    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)\n"
              "w = load_workload(sys.argv[1])\n"
              "model = tuner.apply_config(w.make_model(), sys.argv[2])\n"
              "print('after apply_config:', global_files())\n"
              "model(*w.make_inputs())\n"
              "print('after the first call:', global_files())\n"
              "print(os.environ['TORCHINDUCTOR_CACHE_DIR'])\n")
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    run = subprocess.run([sys.executable, "-c", script, str(workloads / "mlp.py"), str(config_path)],
                         capture_output=True, text=True, env=dict(env, TMPDIR=str(tmpdir)), timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.strip().splitlines()
    assert "after apply_config: []" in lines, lines
    after_call = next(line for line in lines if line.startswith("after the first call:"))
    assert all(f.startswith("precompiled_headers/") for f in ast.literal_eval(after_call.split(":", 1)[1])), after_call
    own = Path(lines[-1])
    assert own.name == f"compile-tune-warm-start-{digest[:16]}" and any(own.rglob("*.so"))

    # The same bundle changed after it was written is refused, and so is one with no recorded hash.
    (tmp_path / CACHE_DIRNAME / "mega_cache.bin").write_bytes(b"changed")
    model = load_workload(workloads / "mlp.py").make_model()
    with pytest.warns(UserWarning, match="do not match the compile_cache_sha256"):
        tuner.apply_config(model, config_path)


def test_the_warm_start_bundles_the_cache_its_search_trial_kept_without_compiling_again(workloads, tmp_path):
    settings = StudySettings(workload=str(workloads / "mlp.py"), task="infer", device="cpu", threads=1, steps=1000,
                             trials=1, trial_timeout=300)
    config = CompileConfig(backend="inductor")
    searched = run_isolated(TrialSpec(workload=settings.workload, config=config.to_dict(), measure_seconds=0.3,
                                      rounds=2), timeout=300, work_dir=tmp_path / "work", keep_cache=True)
    assert searched["status"] == "ok", searched.get("failure")
    kept = Path(searched.pop("cache_dir"))
    measured = {"compile_time_s": searched["compile_time_s"], "step_time_ms": searched["step_s"] * 1000,
                "compile_cost": "cold"}
    config_path = save_tuned_config(TunedConfig(config, measured=measured, tuned_on={"torch": torch.__version__,
                                                                                      "device": "cpu"}),
                                    tmp_path / "best_config.yaml")
    started = bundle_and_measure(settings, config_path, tmp_path / "work", kept_cache=kept)
    assert "warm_start_error" not in started, started
    assert not (tmp_path / CACHE_DIRNAME / "mega_cache.bin").exists(), "no second cold compile ran"
    assert any((tmp_path / CACHE_DIRNAME / "inductor").rglob("*.so")), "the search's kernels travel with the config"
    assert started["cold_start_s"] == pytest.approx(searched["compile_time_s"] + searched["step_s"], abs=1e-3)
    assert started["warm_start_s"] < started["cold_start_s"] / 2, started
    assert started["warm_start_cache"]["fxgraph_hit"] >= 1 and started["warm_start_missed"] is None, started


def fake_bundle(tmp_path, measured):
    path = save_tuned_config(TunedConfig(CompileConfig(backend="eager"), measured=measured,
                                         tuned_on={"torch": torch.__version__, "device": "cpu"}),
                             tmp_path / "best_config.yaml")
    (tmp_path / CACHE_DIRNAME).mkdir()
    (tmp_path / CACHE_DIRNAME / "mega_cache.bin").write_bytes(b"not a cache: unpickling it would raise")
    return path


@pytest.mark.parametrize("measured, why", [
    ({}, "records no compile_cache_sha256"),
    ({DIGEST_KEY: "0" * 64}, "do not match the compile_cache_sha256"),
])
def test_an_unverified_bundle_is_refused_before_anything_is_loaded(workloads, tmp_path, measured, why):
    path = fake_bundle(tmp_path, measured)
    model = load_workload(workloads / "mlp.py").make_model()
    with pytest.warns(UserWarning, match=why):
        tuner.apply_config(model, path)  # loading the fake cache would raise


def test_a_verified_bundle_is_loaded_into_its_own_cache_directory(workloads, tmp_path, monkeypatch, caplog):
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)  # restored after the test
    path = fake_bundle(tmp_path, {})
    digest = bundle_digest(tmp_path / CACHE_DIRNAME)
    save_tuned_config(dataclasses.replace(load_tuned_config(path), measured={DIGEST_KEY: digest}), path)
    model = load_workload(workloads / "mlp.py").make_model()
    tuner.apply_config(model, path)
    assert "Failed to un-pickle cache artifacts" in caplog.text  # verified, so torch read it (and it is no cache)
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"].endswith(f"compile-tune-warm-start-{digest[:16]}")


def test_cache_from_another_torch_version_is_skipped_with_a_warning(workloads, tmp_path):
    path = save_tuned_config(TunedConfig(CompileConfig(backend="eager"), tuned_on={"torch": "0.0.1", "device": "cpu"}),
                             tmp_path / "best_config.yaml")
    (tmp_path / CACHE_DIRNAME).mkdir()
    (tmp_path / CACHE_DIRNAME / "mega_cache.bin").write_bytes(b"not a cache")
    model = load_workload(workloads / "mlp.py").make_model()
    with pytest.warns(UserWarning, match="not loading the saved compile cache: compiled with torch 0.0.1"):
        tuner.apply_config(model, path)


def test_thread_check_on_a_compiled_model_is_safe(workloads, tmp_path):
    found = tuner.check_threads(str(workloads / "mlp.py"), CompileConfig(backend="aot_eager"), threads=4,
                                work_dir=tmp_path)
    assert found["verdict"] == "safe", found
    assert found["calls"] == 80 and found["mismatches"] == 0 and found["errors"] == 0


def test_thread_check_catches_a_model_that_is_not_thread_safe(workloads, tmp_path):
    found = tuner.check_threads(str(workloads / "stateful.py"), CompileConfig(backend="aot_eager"), threads=3,
                                work_dir=tmp_path)
    assert found["verdict"] == "unsafe" and found["mismatches"] > 0
    assert "own compiled model" in found["advice"]


def test_train_trial_over_an_input_schedule_compares_like_with_like(workloads, tmp_path):
    # eager and compiled have taken different numbers of optimizer steps by the time the
    # schedule runs; each schedule step must start from the same weights to be comparable
    spec = TrialSpec(workload=str(workloads / "mlp.py"), task="train", measure_seconds=0.5, rounds=2,
                     config={"backend": "aot_eager"})
    result = run_isolated(spec, timeout=300, work_dir=tmp_path)
    assert result["status"] == "ok", result.get("failure")
    assert result["schedule_len"] == 4 and result["correct"] is True


def dropout_trial(workloads, tmp_path, measure_seconds=0.5, check_cache=None, **config):
    spec = TrialSpec(workload=str(workloads / "dropout.py"), task="train", measure_seconds=measure_seconds, rounds=2,
                     config={"target": "blocks", **config}, check_cache_dir=check_cache)
    return run_isolated(spec, timeout=300, work_dir=tmp_path)


def test_training_with_dropout_is_correct_when_compiled(workloads, tmp_path):
    # Dropout draws random numbers every step: the eager reference and the checked compiled step
    # must start from the same random state, or every config looks wrong.
    result = dropout_trial(workloads, tmp_path, backend="aot_eager")
    assert result["status"] == "ok", result.get("correctness_error") or result.get("failure")
    assert result["stochastic"] is True and result["correct"] is True


@pytest.mark.slow
def test_training_with_dropout_under_inductor_is_checked_with_eager_random_numbers(workloads, tmp_path):
    # the forwards recompile with eager's random numbers; the optimizer step, which draws none, is
    # checked as it was compiled and timed (compiled again, it cost GPT-2's check a second cold compile)
    checks = str(tmp_path / "check-cache")
    plain = dropout_trial(workloads, tmp_path, backend="inductor", check_cache=checks)
    assert plain["status"] == "ok", plain.get("correctness_error") or plain.get("failure")
    assert plain["check_cache_hits"] == 0 and plain["check_cache_misses"] > 0 and any(Path(checks).iterdir())
    # +optimizer's forwards are plain compile's: its check compiles them from the run's check cache,
    # its own timed compile from nothing (cold, as a user's first run)
    result = dropout_trial(workloads, tmp_path, backend="inductor", compile_optimizer=True, check_cache=checks)
    assert result["status"] == "ok", result.get("correctness_error") or result.get("failure")
    assert "forwards recompiled with fallback_random=True" in result["correctness_check"]
    assert result["check_cache_hits"] > 0 and result["check_cache_misses"] == 0, result["correctness_check"]
    assert result["fxgraph_cache_hits"] == 0
    assert result["stage_s"]["correctness"] < result["stage_s"]["compile"]


def test_a_miscompiling_backend_is_still_caught_on_a_model_with_dropout(workloads, tmp_path):
    result = dropout_trial(workloads, tmp_path, backend="wrong_backend")
    assert result["status"] == "failed" and result["failure"]["category"] == "wrong_results"


def test_a_miscompiled_optimizer_step_is_caught(workloads, tmp_path):
    # The model's graphs are right; only the compiled optimizer step corrupts the weights. Timed
    # for 100 steps, the corrupted weights are NaN by the check (NaN compares equal to NaN): the
    # check must start from fresh weights to see it.
    result = dropout_trial(workloads, tmp_path, measure_seconds=3, backend="wrong_optimizer_backend",
                           compile_optimizer=True)
    assert result["status"] == "failed" and result["failure"]["category"] == "wrong_results"
    assert "after the optimizer step" in result["correctness_error"]
    assert dropout_trial(workloads, tmp_path, backend="wrong_optimizer_backend")["status"] == "ok"


def test_stock_hugging_face_gpt2_training_with_dropout_is_correct_when_compiled(tmp_path):
    # GPT2Config's defaults: dropout 0.1 on embeddings, attention and residuals
    pytest.importorskip("transformers")
    spec = TrialSpec(workload=str(ROOT / "examples" / "hf_gpt2_train.py"), task="train", measure_seconds=0.5,
                     rounds=2, config={"target": "blocks", "backend": "aot_eager"})
    result = run_isolated(spec, timeout=300, work_dir=tmp_path)
    assert result["status"] == "ok", result.get("correctness_error") or result.get("failure")
    assert result["stochastic"] is True and result["correct"] is True and result["regions"] == 2


def seeding_runner(workloads, tmp_path):
    import optuna

    from tuner.decide.trial_runner import TrialRunner

    settings = StudySettings(workload=str(workloads / "blocks.py"), task="train", device="cpu", threads=1,
                             steps=1000, trials=1, trial_timeout=300, measure_seconds=0.3, rounds=2)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return TrialRunner(optuna.create_study(), settings, tmp_path / "work", leaders=lambda: [])


def store(runner, config, result, role="plain"):
    import optuna

    from tuner.study._attrs import trial_attrs

    runner.study.add_trial(optuna.trial.create_trial(value=1.0, user_attrs=trial_attrs(config, role, result, None)))


@pytest.mark.slow
def test_a_compiled_optimizer_step_starts_from_the_cache_of_the_same_config_without_it(workloads, tmp_path):
    # +optimizer's model graphs are plain compile's: its trial finds them in a copy of plain compile's
    # kept cache and compiles only the optimizer step cold; its cold compile is what it measured plus
    # plain compile's cold compile less its warm one
    runner = seeding_runner(workloads, tmp_path)
    plain = CompileConfig(backend="inductor")
    base = runner.measure(plain, warm=True)
    assert base["status"] == "ok" and base["compile_time_warm_s"] < base["compile_time_s"], base.get("failure")
    store(runner, plain, base)
    result = runner.measure(dataclasses.replace(plain, compile_optimizer=True))
    assert result["status"] == "ok", result.get("failure")
    seeded = result["compile_seeded"]
    assert seeded["graphs_found"] == result["fxgraph_cache_hits"] >= base["fxgraph_cache_misses"] > 0, seeded
    assert result["fxgraph_cache_misses"] > 0, "the optimizer step compiled cold"
    assert result["compile_time_s"] == pytest.approx(
        seeded["measured_s"] + base["compile_time_s"] - base["compile_time_warm_s"], abs=1e-3)
    assert result["compile_peak_memory_mb"] >= base["compile_peak_memory_mb"]
    # its own cache is kept apart from plain compile's: the optimizer step's entries are its alone
    own, kept = runner.caches.get(dataclasses.replace(plain, compile_optimizer=True).key()), runner.caches.get(plain.key())
    assert own != kept and sum(1 for _ in own.rglob("*")) > sum(1 for _ in kept.rglob("*"))


def test_a_compiled_optimizer_step_compiles_cold_without_the_base_configs_warm_compile(workloads, tmp_path):
    runner = seeding_runner(workloads, tmp_path)
    plain, with_optimizer = CompileConfig(backend="inductor"), CompileConfig(backend="inductor", compile_optimizer=True)
    kept = tmp_path / "kept"
    kept.mkdir()
    runner.caches.keep(plain.key(), kept)
    store(runner, plain, {"status": "ok", "compile_time_s": 30.0})  # its warm compile never measured
    assert runner._seed(with_optimizer) is None
    store(runner, plain, {"status": "ok", "compile_time_s": 30.0, "compile_time_warm_s": 4.0})
    seed = runner._seed(with_optimizer)
    assert seed is not None and (seed.cold_s, seed.warm_s) == (30.0, 4.0)
    assert runner._seed(plain) is None and runner._seed(dataclasses.replace(with_optimizer, target="blocks")) is None
    # a trial that found none of the base's graphs compiled cold after all: left as it measured
    cold = {"status": "ok", "compile_time_s": 50.0, "fxgraph_cache_hits": 0}
    seed.compose(cold)
    assert cold["compile_time_s"] == 50.0 and cold["compile_seeded"]["graphs_found"] == 0
    found = {"status": "ok", "compile_time_s": 20.0, "fxgraph_cache_hits": 2, "peak_memory_mb": 10.0}
    seed.compose(found)
    assert found["compile_time_s"] == pytest.approx(46.0) and found["compile_seeded"]["measured_s"] == 20.0
    from tuner.report._rows import seeded_note

    assert seeded_note(found["compile_seeded"]) == ("compile: 20.0 s measured, whole/inductor/default's 2 graph(s) "
                                                    "found in its cache, plus their cold compile (+26.0 s)")
    assert seeded_note(cold["compile_seeded"]) == "" and seeded_note(float("nan")) == ""
