"""SIGKILL at any moment, run the same command again: nothing finished is lost or repeated."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import FAST, ROOT, SPACES, WORKLOADS, load_study
from optuna.trial import TrialState


def measured(study):
    return [t for t in study.get_trials(deepcopy=False)
            if t.state in (TrialState.COMPLETE, TrialState.FAIL) and t.user_attrs.get("duplicate_of") is None
            and not t.user_attrs.get("interrupted")]


def alive(pid: str) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(params=["sqlite", "postgresql", "journal"])
def storage(request, tmp_path):
    """(URL or None for the default, study name) for each kind of storage."""
    name = f"resume-{os.getpid()}-{time.time_ns()}"
    if request.param == "sqlite":
        return None, f"sqlite:///{tmp_path / 'blocks' / 'study.db'}", name
    if request.param == "journal":
        url = f"journal:///{tmp_path}/shared/study.log"
        return url, url, name
    url = request.getfixturevalue("postgres_url")
    return url, url, name


def descendants(pid: int) -> list[str]:
    """Every process below ``pid`` whose command line runs our trial code."""
    found, todo = [], [str(pid)]
    while todo:
        children = subprocess.run(["pgrep", "-P", todo.pop()], capture_output=True, text=True).stdout.split()
        todo += children
        found += [c for c in children if "tuner.measure" in _cmdline(c)]
    return found


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def test_sigkill_of_a_run_then_the_same_command_keeps_every_finished_trial(storage, tmp_path):
    flag, url, name = storage
    args = [sys.executable, "-m", "tuner", str(WORKLOADS / "blocks.py"), "--space", str(SPACES / "logic.yaml"),
            "--trials", "2", "--out", str(tmp_path / "blocks"), "--study", name, *FAST]
    args += ["--storage", flag] if flag else []
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    victim, tree = None, []
    deadline = time.time() + 300
    # Trials are forked from the pre-imported launcher and take about a second: poll often, and
    # kill only once the launcher and a trial process are both seen running.
    while len(tree) < 2 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
        try:
            trials = load_study(url, name).get_trials(deepcopy=False)
        except Exception:  # the storage is not created yet
            continue
        searched = [t for t in trials if t.user_attrs.get("role") == "search"]
        victim = None
        if any(t.state == TrialState.COMPLETE for t in searched):
            victim = next((t for t in searched if t.state == TrialState.RUNNING and t.user_attrs.get("config_key")), None)
        tree = descendants(proc.pid) if victim is not None else []
    assert victim is not None and len(tree) >= 2, "one search trial finished and another runs in a forked trial process"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    for pid in tree:  # the launcher and the trial process die with their tuner
        for _ in range(60):
            if not alive(pid):
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"trial process {pid} outlived its killed tuner")
    before = {t.number: t for t in measured(load_study(url, name))}

    again = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "resumed: 1 interrupted trial(s) will be measured again" in again.stdout
    study = load_study(url, name)
    after = {t.number: t for t in measured(study)}
    for number, t in before.items():
        assert after[number].user_attrs == t.user_attrs and after[number].state == t.state, "finished trials intact"
    keys = [t.user_attrs["config_key"] for t in after.values()]
    assert len(keys) == len(set(keys)), "no config measured twice"
    assert [t.user_attrs["role"] for t in after.values()].count("search") == 2
    killed = study.trials[victim.number]
    assert killed.state == TrialState.FAIL and "is gone" in killed.user_attrs["failure_explanation"]
    assert any(t.user_attrs.get("retry_of") == victim.number for t in after.values()), "measured again"
    frame = pd.read_csv(tmp_path / "blocks" / "trials.csv")
    assert set(frame["number"]) == {t.number for t in study.trials}, "outputs rebuilt from the storage"


def test_ctrl_c_is_held_through_storage_writes_and_raised_where_the_run_waits():
    """tuner.system.interrupts: SIGINT during a storage write is raised at the next interruptible wait."""
    from tuner.system import interrupts

    reached = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts.deferred():
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # "a storage write": the handler runs here and must not raise
                sum(range(100))
            reached.append("write finished")
            assert interrupts.requested()
            with interrupts.interruptible():
                reached.append("never")
    assert reached == ["write finished"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

    with pytest.raises(KeyboardInterrupt):  # SIGTERM is held and raised the same way
        with interrupts.deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            sum(range(100))
            reached.append("term held")
            with interrupts.interruptible():
                reached.append("never")
    assert reached == ["write finished", "term held"]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    del reached[1:]

    with pytest.raises(KeyboardInterrupt):  # inside a wait: at once
        with interrupts.deferred():
            with interrupts.interruptible():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)
    with pytest.raises(KeyboardInterrupt):  # a second Ctrl-C does not wait
        with interrupts.deferred():
            os.kill(os.getpid(), signal.SIGINT)
            sum(range(100))
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
            reached.append("never")
    assert reached == ["write finished"]
