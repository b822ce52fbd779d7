"""Many workers, one study: real worker processes on a real PostgreSQL server."""
import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
from conftest import FAST, ROOT, SPACES, WORKLOADS, load_study
from optuna.trial import TrialState
from sqlalchemy.engine import make_url

PASSWORD = "Zq7-not-for-logs"


def tune_args(out, url, name, *extra):
    return [sys.executable, "-m", "tuner", str(WORKLOADS / "blocks.py"), "--space", str(SPACES / "logic.yaml"),
            "--out", str(out), "--storage", url, "--study", name, *FAST, *extra]


def measured(study):
    """Trials that measured something: no lost claims, repeats or dead workers' trials."""
    return [t for t in study.get_trials(deepcopy=False)
            if t.state.name in ("COMPLETE", "FAIL") and t.user_attrs.get("duplicate_of") is None
            and not t.user_attrs.get("interrupted")]


@pytest.fixture(scope="module")
def two_workers(postgres_url, tmp_path_factory):
    """``--workers 2`` on one PostgreSQL study, the URL carrying a password (the server trusts loopback)."""
    url = make_url(postgres_url).set(password=PASSWORD).render_as_string(hide_password=False)
    name = f"two-{os.getpid()}-{time.time_ns()}"
    out = tmp_path_factory.mktemp("two") / "blocks"
    proc = subprocess.run(tune_args(out, url, name, "--trials", "4", "--workers", "2"), cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    return out, proc, url, name


def test_two_workers_add_up_to_the_trials_asked_and_measure_no_config_twice(two_workers):
    out, proc, url, name = two_workers
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    trials = measured(load_study(url, name))
    roles = [t.user_attrs["role"] for t in trials]
    assert roles.count("eager") == 1 and roles.count("plain") == 1 and roles.count("search") == 4
    keys = [t.user_attrs["config_key"] for t in trials]
    assert len(keys) == len(set(keys)), "no config is measured twice"
    workers = {t.user_attrs["worker"] for t in trials}
    assert len(workers) == 2, f"both workers measured: {workers}"
    assert "[w0]" in proc.stdout and "[w1]" in proc.stdout
    frame = pd.read_csv(out / "trials.csv")
    assert len(frame[frame["duplicate_of"].isna() & (frame["state"] == "COMPLETE")]) == len(
        [t for t in trials if t.state.name == "COMPLETE"]), "trials.csv is rebuilt from the storage"
    assert (out / "best_config.yaml").exists()


def test_a_password_in_the_storage_url_appears_nowhere(two_workers):
    out, proc, url, name = two_workers
    assert "postgres:***@" in proc.stdout, "the URL is shown, redacted"
    study = load_study(url, name)
    stored = json.dumps([study.user_attrs, study._storage.get_study_system_attrs(study._study_id)]
                        + [[t.user_attrs, t.system_attrs] for t in study.get_trials(deepcopy=False)], default=str)
    assert "--storage" in study.user_attrs["command"]
    for where, text in [("stdout", proc.stdout), ("stderr", proc.stderr), ("study", stored)] + [
            (p.name, p.read_text(errors="replace")) for p in out.rglob("*") if p.is_file() and p.suffix != ".db"]:
        assert PASSWORD not in text, f"password in {where}"


def stop_if_still_running(url, name, trial):
    """Freeze the trial's worker; the trial if it is still running then (the kill lands inside it), else None.

    A search trial here lasts about a second, so a kill timed by sleeping can land after it
    was recorded. A stopped worker records nothing: what the storage says now holds until the kill.
    """
    pid = trial.system_attrs["compile_tune:owner"]["pid"]
    os.kill(pid, signal.SIGSTOP)
    if load_study(url, name).trials[trial.number].state == TrialState.RUNNING:
        return trial
    os.kill(pid, signal.SIGCONT)
    return None


def test_a_worker_killed_mid_trial_is_found_by_its_heartbeat_and_its_config_measured_again(postgres_url, tmp_path):
    name = f"kill-{os.getpid()}-{time.time_ns()}"
    args = tune_args(tmp_path / "blocks", postgres_url, name, "--trials", "3", "--workers", "2", "--heartbeat", "1")
    main = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    victim = None
    deadline = time.time() + 300
    while victim is None and time.time() < deadline and main.poll() is None:
        time.sleep(0.5)
        try:
            study = load_study(postgres_url, name)
        except KeyError:
            continue
        for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            if t.user_attrs.get("role") == "search" and t.user_attrs.get("config_key"):
                victim = stop_if_still_running(postgres_url, name, t)
                break
    assert victim is not None, "a search trial ran"
    os.kill(victim.system_attrs["compile_tune:owner"]["pid"], signal.SIGKILL)
    stdout, _ = main.communicate(timeout=600)
    assert main.returncode == 0, stdout[-3000:]
    assert "exited with code -9; the other workers carried on" in stdout

    study = load_study(postgres_url, name)
    dead = study.trials[victim.number]
    assert dead.state.name == "FAIL" and dead.user_attrs["interrupted"]
    assert "no heartbeat" in dead.user_attrs["failure_explanation"]
    retry = [t for t in study.trials if t.user_attrs.get("retry_of") == victim.number]
    assert len(retry) == 1 and retry[0].user_attrs["config_key"] == victim.user_attrs["config_key"]
    assert retry[0].state.name == "COMPLETE" and retry[0].user_attrs["worker"] != victim.user_attrs["worker"]
    trials = measured(study)
    assert [t.user_attrs["role"] for t in trials].count("search") == 3, "the study completes"
    assert not [t for t in study.trials if t.state.name == "RUNNING"], "nothing is left running"


def test_each_worker_gets_one_visible_gpu_round_robin(monkeypatch):
    from tuner.run.workers import device_plan

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    envs, line = device_plan(3, "cuda")
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["2", "5", "2"]
    assert "w0: GPU 2, w1: GPU 5, w2: GPU 2" in line and "more workers than GPUs" in line


def test_workers_on_a_cpu_are_told_they_share_the_cores():
    from tuner.run.workers import device_plan

    envs, line = device_plan(2, "cpu")
    assert envs == [{}, {}] and "share this machine's" in line and "take turns timing" in line
