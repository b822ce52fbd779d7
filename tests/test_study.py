"""The whole tool from the command line: real trials, a real SQLite Optuna study."""
import os
import shutil
import signal
import subprocess
import sys
import time

import optuna
import pandas as pd
import pytest
import yaml
from conftest import ROOT
from optuna.trial import TrialState

import tuner
from tuner.user.workload import load_workload

# Many steps: a compile of a second or two never exceeds the best total, so nothing is pruned.
FAST = ["--measure-seconds", "0.5", "--steps", "10000000", "--no-progress", "--confirm", "0"]


@pytest.fixture(scope="module")
def tuned(tmp_path_factory, request):
    """One small study on the blocks model: eager + plain baselines and 3 search trials."""
    from conftest import SPACES, WORKLOADS, run_cli

    out = tmp_path_factory.mktemp("run") / "blocks"
    proc = run_cli(str(WORKLOADS / "blocks.py"), "--space", str(SPACES / "logic.yaml"), "--trials", "3",
                   "--out", str(out), *FAST)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out, proc


def measured_rows(out):
    frame = pd.read_csv(out / "trials.csv")
    return frame[frame["duplicate_of"].isna()] if "duplicate_of" in frame else frame


def test_tune_writes_best_config_and_trials_csv(tuned):
    out, proc = tuned
    frame = measured_rows(out)
    assert list(frame["role"]).count("eager") == 1 and list(frame["role"]).count("plain") == 1
    search = frame[frame["role"] == "search"]
    assert len(search) == 3
    keys = frame["config_label"].tolist()
    assert len(keys) == len(set(keys)), "no config is measured twice"
    for column in ("total_time_s", "compile_time_s", "step_time_s", "speedup", "peak_memory_mb", "correct",
                   "graph_breaks", "recompiles", "failure_category", "state"):
        assert column in frame.columns
    best = yaml.safe_load((out / "best_config.yaml").read_text())
    assert best["verdict"] in ("compile", "stay_eager")
    assert best["tuned_on"]["torch"] and best["tuned_on"]["device"] == "cpu"
    assert "verdict:" in proc.stdout and "config" in proc.stdout


def test_the_winner_never_loses_to_eager(tuned):
    out, _ = tuned
    best = yaml.safe_load((out / "best_config.yaml").read_text())
    frame = measured_rows(out)
    eager_total = frame.loc[frame["role"] == "eager", "total_time_s"].item()
    if best["verdict"] == "compile":
        assert best["measured"]["total_time_s"] < eager_total
        assert best["measured"]["speedup_vs_eager"] > 0
        assert best["measured"]["break_even_steps"] is not None
    else:
        ok = frame[(frame["state"] == "COMPLETE") & (frame["role"] != "eager")]
        assert (ok["total_time_s"] >= eager_total).all()


def test_rerunning_the_same_command_continues_without_remeasuring(tuned, tmp_path, cli, workloads, spaces):
    out = tmp_path / "blocks"
    shutil.copytree(tuned[0], out)
    before = measured_rows(out)
    proc = cli(str(workloads / "blocks.py"), "--space", str(spaces / "logic.yaml"), "--trials", "4", "--out", str(out), *FAST)
    assert proc.returncode == 0, proc.stderr
    after = measured_rows(out)
    assert len(after) == len(before) + 1, "only the one missing search trial is measured"
    merged = before.merge(after, on="number", suffixes=("_a", "_b"))
    assert (merged["trial_wall_s_a"] == merged["trial_wall_s_b"]).all(), "finished trials are untouched"
    assert "  eager  eager (no compile):" not in proc.stdout, "baselines are not measured again"
    assert "  plain  whole/inductor/default:" not in proc.stdout


def test_resuming_with_other_steps_is_refused(tuned, tmp_path, cli, workloads, spaces):
    out = tmp_path / "blocks"
    shutil.copytree(tuned[0], out)
    proc = cli(str(workloads / "blocks.py"), "--space", str(spaces / "logic.yaml"), "--trials", "3", "--out", str(out),
               "--steps", "5", "--no-progress")
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: study 'blocks' was measured with steps=10000000, now steps=5")


def test_apply_config_reproduces_the_measured_config(tuned, workloads):
    import torch

    out, _ = tuned
    w = load_workload(workloads / "blocks.py")
    model = w.make_model().eval()
    with torch.no_grad():
        expected = model(*w.make_inputs())
    applied = tuner.apply_config(model, out / "best_config.yaml")
    with torch.no_grad():
        torch.testing.assert_close(applied(*w.make_inputs()), expected, rtol=1e-4, atol=1e-4)


def test_show_prints_the_verdict_of_a_finished_run(tuned, cli):
    proc = cli("show", str(tuned[0]))
    assert proc.returncode == 0, proc.stderr
    assert "verdict:" in proc.stdout and "eager (no compile)" in proc.stdout


def test_compile_cost_dominates_short_runs_so_the_verdict_is_stay_eager(tmp_path, cli, workloads, spaces):
    out = tmp_path / "mlp"
    proc = cli(str(workloads / "mlp.py"), "--space", str(spaces / "logic.yaml"), "--trials", "1", "--out", str(out),
               "--measure-seconds", "0.5", "--steps", "1", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    best = yaml.safe_load((out / "best_config.yaml").read_text())
    assert best["verdict"] == "stay_eager" and best["config"]["target"] == "none"
    assert "stay eager" in proc.stdout


def test_failed_trials_are_recorded_and_the_study_goes_on(tmp_path, cli, workloads):
    space = tmp_path / "space.yaml"
    space.write_text("backend: [segfault_backend, raising_backend, aot_eager]\n")
    out = tmp_path / "bad"
    proc = cli(str(workloads / "bad_backends.py"), "--space", str(space), "--trials", "3", "--out", str(out), *FAST)
    assert proc.returncode == 0, proc.stderr
    frame = measured_rows(out)
    search = frame[frame["role"] == "search"].set_index("backend")
    assert search.loc["segfault_backend", "failure_category"] == "crashed"
    assert search.loc["raising_backend", "failure_category"] == "compiler_failure"
    assert search.loc["aot_eager", "state"] == "COMPLETE"
    assert "failed or pruned:" in proc.stdout and "crashed" in proc.stdout


def test_interrupting_and_rerunning_continues_the_study(tmp_path, workloads, spaces):
    """Ctrl-C at the worst moment, then the same command again.

    The worst moment is inside a storage commit: a ``KeyboardInterrupt`` there used to become
    SQLAlchemy's ``AssertionError`` and end the run with a traceback, no outputs and the trial
    left running. tests/hold_in_commit.py stops the run in the commit that claims the first
    search trial (WAITING -> RUNNING) until the SIGINT has been delivered, so that moment is hit
    every time instead of once in a while.
    """
    out = tmp_path / "blocks"
    marker = tmp_path / "held-in-commit"
    args = [str(workloads / "blocks.py"), "--space", str(spaces / "logic.yaml"), "--trials", "3", "--out", str(out),
            *FAST]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "hold_in_commit.py"), str(marker),
                             "set_trial_state_values", *args],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while not marker.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert marker.exists(), "the run never reached the search"
    proc.send_signal(signal.SIGINT)
    marker.unlink()
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert (out / "best_config.yaml").exists(), "what was measured is written out on interrupt"
    study = optuna.load_study(study_name="blocks", storage=f"sqlite:///{out / 'study.db'}")
    claimed = [t for t in study.get_trials(deepcopy=False) if t.user_attrs.get("role") == "search"]
    assert [t.state for t in claimed] == [TrialState.FAIL] and claimed[0].user_attrs["interrupted"], \
        "the trial claimed when Ctrl-C came is marked interrupted, not left running"
    finished = len(measured_rows(out).query("state == 'COMPLETE'"))
    again = subprocess.run([sys.executable, "-m", "tuner", *args], cwd=ROOT, capture_output=True, text=True,
                           timeout=600)
    assert again.returncode == 0, again.stderr
    frame = measured_rows(out)
    assert len(frame[(frame["role"] == "search") & (frame["state"] == "COMPLETE")]) == 3
    assert len(frame.query("state == 'COMPLETE'")) >= finished


def test_graph_break_model_is_tuned_with_breaks_counted_and_fullgraph_failing(tmp_path, cli, workloads):
    space = tmp_path / "space.yaml"
    # Dynamo settings pinned at their defaults: the space gains no repair choices (tuner/space/repair.py)
    space.write_text("backend: [eager, aot_eager]\nfullgraph: [false, true]\n"
                     "dynamo:\n  capture_scalar_outputs: false\n  ignore_logging_functions: [[]]\n")
    out = tmp_path / "gb"
    proc = cli(str(workloads / "graph_breaks.py"), "--space", str(space), "--trials", "4", "--out", str(out), *FAST)
    assert proc.returncode == 0, proc.stderr
    frame = measured_rows(out)
    search = frame[frame["role"] == "search"]
    full = search[search["fullgraph"] == True]  # noqa: E712
    assert len(full) == 2 and (full["failure_category"] == "graph_break_fullgraph").all()
    ok = search[search["state"] == "COMPLETE"]
    assert len(ok) == 2 and (ok["graph_breaks"] == 3).all()
    assert yaml.safe_load((out / "best_config.yaml").read_text())["verdict"] in ("compile", "stay_eager")
    # the model check before the search, and the per-model list after it, name each user line
    assert "model check: graph_breaks" in proc.stdout and "numpy at graph_breaks.py:20" in proc.stdout
    summary = proc.stdout.split("graph breaks (3 distinct")[1]
    for line in ("graph_breaks.py:19", "graph_breaks.py:21", "graph_breaks.py:23"):
        assert line in summary
    assert "fix: branch on tensor values with torch.where" in summary


def test_trace_keeps_each_trials_structured_compile_trace(tmp_path, cli, workloads, spaces):
    out = tmp_path / "mlp"
    proc = cli(str(workloads / "mlp.py"), "--space", str(spaces / "logic.yaml"), "--trials", "1", "--out", str(out),
               "--trace", "--no-check", *FAST)
    assert proc.returncode == 0, proc.stderr
    frame = measured_rows(out)
    traced = frame[frame["role"] != "eager"]
    for path in traced["trace_dir"]:
        logs = list((out / "traces").glob(f"{path.split('/')[-1]}/*.log"))
        assert logs and logs[0].stat().st_size > 0


def test_a_trial_whose_compile_alone_exceeds_the_best_total_is_pruned(tmp_path, cli, workloads):
    space = tmp_path / "space.yaml"
    space.write_text("backend: [inductor]\noptions: {freezing: [false, true]}\n")
    out = tmp_path / "mlp"
    # 100 steps of a tiny MLP take milliseconds eagerly: no cold inductor compile can win.
    proc = cli(str(workloads / "mlp.py"), "--space", str(space), "--trials", "1", "--out", str(out),
               "--measure-seconds", "0.5", "--steps", "100", "--no-progress", "--confirm", "0", "--no-check")
    assert proc.returncode == 0, proc.stderr
    frame = measured_rows(out)
    pruned = frame[frame["role"] == "search"]
    assert len(pruned) == 1 and pruned["state"].item() == "PRUNED"
    assert "the compile alone already exceeds the best total time so far" in pruned["pruned_reason"].item()
    assert pruned["trial_wall_s"].item() < 30
    assert yaml.safe_load((out / "best_config.yaml").read_text())["verdict"] == "stay_eager"


def _settings(workloads, **changes):
    from tuner.study import StudySettings

    base = dict(workload=str(workloads / "mlp.py"), task="infer", device="cpu", threads=1, steps=10_000, trials=1,
                torch="2.13.0")
    return StudySettings(**{**base, **changes})


def test_resuming_a_study_measured_with_another_torch_is_refused(tmp_path, workloads):
    from tuner.core.errors import StudyError
    from tuner.study import check_settings, open_study

    study = open_study(f"sqlite:///{tmp_path / 'study.db'}", "mlp", seed=0)
    check_settings(study, _settings(workloads, torch="2.12.0"))
    assert study.user_attrs["settings"]["torch"] == "2.12.0"
    check_settings(study, _settings(workloads, torch="2.12.0"))  # the same torch resumes
    with pytest.raises(StudyError, match=r"^study 'mlp' was measured with torch 2.12.0, this is torch 2.13.0") as err:
        check_settings(study, _settings(workloads, torch="2.13.0"))
    assert "new --out" in err.value.hint and "\n" not in err.value.message


def test_a_study_stored_before_torch_was_a_setting_resumes_and_its_eager_torch_is_checked(tmp_path, workloads):
    from studies import Builder

    from tuner.core.errors import StudyError
    from tuner.study import check_settings

    b = Builder(tmp_path / "old.db", steps=10_000)  # settings without a torch key, as stored before
    check_settings(b.study, _settings(workloads, torch="9.9.9"))  # nothing to compare with: it keeps working
    b.eager()  # its eager baseline recorded torch 2.13.0+cpu
    check_settings(b.study, _settings(workloads, torch="2.13.0+cpu"))
    with pytest.raises(StudyError, match="measured with torch 2.13.0\\+cpu, this is torch 9.9.9"):
        check_settings(b.study, _settings(workloads, torch="9.9.9"))


def test_a_study_measured_by_an_older_measurement_is_refused_not_mixed(tmp_path, workloads):
    # Before measurement version 2, eager's step time came from example_inputs() alone and peak
    # memory was relative: new trials' figures would not be comparable with the stored ones.
    from tuner.core.errors import StudyError
    from tuner.study import check_settings, open_study

    study = open_study(f"sqlite:///{tmp_path / 'study.db'}", "mlp", seed=0)
    check_settings(study, _settings(workloads))
    stored = dict(study.user_attrs["settings"])
    del stored["measurement"]  # as compile-tune 0.1 stored it
    study.set_user_attr("settings", stored)
    with pytest.raises(StudyError, match="older compile-tune \\(measurement version 1, now 4") as err:
        check_settings(study, _settings(workloads))
    assert "new --out" in err.value.hint


def test_cli_refuses_a_study_of_another_torch_with_exit_code_2(tmp_path, cli, workloads):
    from tuner.study import check_settings, open_study

    out = tmp_path / "mlp"
    out.mkdir()
    check_settings(open_study(f"sqlite:///{out / 'study.db'}", "mlp", seed=0), _settings(workloads, torch="1.0.0"))
    proc = cli(str(workloads / "mlp.py"), "--out", str(out), "--threads", "1", "--no-progress", "--no-check")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"error: study 'mlp' was measured with torch 1.0.0, this is torch {torch_version()}")


def torch_version() -> str:
    import torch

    return torch.__version__


def test_default_threads_is_what_a_fresh_process_of_the_user_gets(monkeypatch):
    from tuner.system.thread_count import fresh_process_threads as default_threads

    def fresh() -> int:
        return int(subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                                  capture_output=True, text=True, check=True).stdout.strip())

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert default_threads() == fresh()
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the user's setting is respected
    assert default_threads() == fresh() == 1


@pytest.mark.parametrize("cost", ["cold", "warm"])
def test_warm_compile_cost_prunes_no_compile_that_could_win_warm(tmp_path, workloads, monkeypatch, cost):
    from tuner.decide.search import Tuner
    from tuner.run.pipeline import TuneOptions, tune

    budgets = []

    def measure(self, config, label="trial", compile_budget_s=None, warm=True, reuse_cache=False, timing_share=1.0,
            timing="beside", **kwargs):
        if label.startswith("trial-"):
            budgets.append(compile_budget_s)
        result = {"status": "ok", "eager_step_s": 0.01, "correct": True, "peak_memory_mb": 1.0,
                  "environment": {"threads": 1}}
        if config.compiles:  # a cold compile far over eager's total; warm, it wins
            result.update(speedup=2.0, compile_time_s=1000.0, compile_time_warm_s=1.0)
        return result

    monkeypatch.setattr(Tuner, "measure", measure)
    tune(TuneOptions(workload=str(workloads / "mlp.py"), space="quick", trials=2, steps=1000, threads=1,
                     out=str(tmp_path / cost), check=False, warm_start=False, progress=False, confirm=0,
                     compile_cost=cost), log=lambda line: None)
    assert len(budgets) == 2
    if cost == "cold":
        assert all(b is not None and b <= 1000 * 0.01 for b in budgets)
    else:
        assert budgets == [None, None]
        best = yaml.safe_load((tmp_path / cost / "best_config.yaml").read_text())
        assert best["verdict"] == "compile" and best["measured"]["compile_time_s"] == 1.0


def test_the_trial_timeout_scales_with_plain_compiles_trial_unless_given():
    import optuna
    from optuna.trial import TrialState, create_trial

    from tuner.study import StudySettings, trial_timeout

    study = optuna.create_study()
    settings = StudySettings(workload="m.py", task="infer", device="cpu", threads=1, steps=10, trials=1)
    assert trial_timeout(study, settings) == 900.0  # nothing measured yet
    study.add_trial(create_trial(state=TrialState.COMPLETE, value=1.0,
                                 user_attrs={"role": "eager", "trial_wall_s": 60.0}))
    assert trial_timeout(study, settings) == 1200.0  # a slow eager model: 20 eager trials
    study.add_trial(create_trial(state=TrialState.COMPLETE, value=1.0, user_attrs={"role": "plain", "trial_wall_s": 12.0}))
    assert trial_timeout(study, settings) == 120.0  # a small model: hangs are stopped in 2 minutes, not 15
    study.add_trial(create_trial(state=TrialState.FAIL, user_attrs={"role": "plain", "trial_wall_s": 400.0}))
    assert trial_timeout(study, settings) == 1600.0  # a large model's compile: 4x its plain trial
    given = StudySettings(workload="m.py", task="infer", device="cpu", threads=1, steps=10, trials=1, trial_timeout=50.0)
    assert trial_timeout(study, given) == 50.0
