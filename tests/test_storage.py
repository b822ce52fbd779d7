"""Storage URLs, redaction, and finding trials whose worker died, on real Optuna storages."""
import os
import socket
import subprocess
import sys
import time

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState

from tuner.study import TrialStore, fail_stale_trials, open_store
from tuner.system.storage import BEAT_ATTR, OWNER_ATTR, dead_trials, open_storage, owner, redact, scrub


@pytest.mark.parametrize("url, shown", [
    ("postgresql://tuner:s3cret@db.example.com:5432/tune", "postgresql://tuner:***@db.example.com:5432/tune"),
    ("postgresql+psycopg2://tuner:p%40ss@db/tune", "postgresql+psycopg2://tuner:***@db/tune"),
    ("postgresql://tuner@db/tune?sslmode=require&password=s3cret", "postgresql://tuner@db/tune?sslmode=require&password=***"),
    ("postgresql://tuner@db/tune", "postgresql://tuner@db/tune"),
    ("sqlite:////tmp/study.db", "sqlite:////tmp/study.db"),
    ("journal:///shared/study.log", "journal:///shared/study.log"),
])
def test_redact_hides_the_password_and_nothing_else(url, shown):
    assert redact(url) == shown


def test_scrub_removes_the_password_wherever_a_driver_quotes_it():
    url = "postgresql://tuner:p%40ss-word@db/tune"
    text = 'FATAL: password "p@ss-word" rejected for postgresql://tuner:p%40ss-word@db/tune'
    assert "p@ss-word" not in scrub(text, url) and "p%40ss-word" not in scrub(text, url)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_database_is_one_redacted_error_line(cli, workloads, tmp_path):
    url = f"postgresql://tuner:Pa55word-xyz@127.0.0.1:{free_port()}/tune"
    proc = cli(str(workloads / "mlp.py"), "--storage", url, "--out", str(tmp_path / "out"), "--no-progress")
    assert proc.returncode == 2
    first = proc.stderr.splitlines()[0]
    assert first.startswith("error: cannot open the study storage postgresql://tuner:***@127.0.0.1:"), proc.stderr
    assert "Connection refused" in first
    assert proc.stderr.splitlines()[1].startswith("hint: check that the database server is running")
    assert "Pa55word-xyz" not in proc.stdout + proc.stderr


def test_a_bad_storage_url_says_which_forms_work(cli, workloads, tmp_path):
    proc = cli(str(workloads / "mlp.py"), "--storage", "mysqlx://u:Pa55word-xyz@h/db", "--out", str(tmp_path), "--no-progress")
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: cannot open the study storage mysqlx://u:***@h/db")
    assert "postgresql://USER[:PASSWORD]@HOST[:PORT]/DB" in proc.stderr and "Pa55word-xyz" not in proc.stderr


def running_trial(store, who: dict, **system_attrs) -> int:
    """A trial left running by ``who``, as a worker leaves it when it dies mid-trial."""
    trial = optuna.trial.create_trial(
        state=TrialState.RUNNING, params={"backend": "eager"},
        distributions={"backend": CategoricalDistribution(["eager", "aot_eager"])},
        user_attrs={"role": "search", "config_key": "k", "config_label": "whole/eager"},
        system_attrs={OWNER_ATTR: who, **system_attrs})
    return store.create(trial)


def dead_process() -> dict:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    start = open(f"/proc/{child.pid}/stat").read().rsplit(")", 1)[1].split()[19]
    child.wait()
    return dict(owner(), pid=child.pid, start=int(start))


def test_a_trial_of_a_dead_local_process_is_failed_and_queued_again(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'study.db'}", "s", seed=0)
    alive = running_trial(store, owner())
    dead = running_trial(store, dead_process())
    assert dead_trials(store.study, store.storage, local_processes=False) == [], "heartbeats are fresh"
    assert fail_stale_trials(store) == 1
    trials = store.study.get_trials(deepcopy=False)
    by_id = {t.number: t for t in trials}
    assert by_id[alive].state == TrialState.RUNNING
    assert by_id[dead].state == TrialState.FAIL and by_id[dead].user_attrs["interrupted"]
    assert "is gone" in by_id[dead].user_attrs["failure_explanation"]
    retry = [t for t in trials if t.state == TrialState.WAITING]
    assert len(retry) == 1 and retry[0].system_attrs["fixed_params"] == {"backend": "eager"}
    assert retry[0].user_attrs["retry_of"] == by_id[dead].number


def test_journal_storage_detects_a_silent_worker_on_another_machine(tmp_path):
    url = f"journal:///{tmp_path}/shared/study.log"
    store = open_store(url, "s", seed=0, heartbeat_s=1)
    far = dict(owner(), host="other-machine", pid=1)
    silent = running_trial(store, far, **{BEAT_ATTR: time.time() - 60})
    beating = running_trial(store, far, **{BEAT_ATTR: time.time()})
    # A second process reading the same file (a plain Optuna client) sees the same verdict.
    backend = open_storage(url)
    again = TrialStore(optuna.load_study(study_name="s", storage=backend), backend)
    assert [(t.number, "no heartbeat" in why) for t, why in dead_trials(again.study, backend, heartbeat_s=1)] == [
        (silent, True)]
    assert fail_stale_trials(again, heartbeat_s=1) == 1
    assert store.get(beating).state == TrialState.RUNNING
    assert os.path.exists(tmp_path / "shared" / "study.log")


def test_postgres_heartbeats_are_optunas_and_a_silent_trial_goes_stale(postgres_url):
    name = f"hb-{os.getpid()}-{time.time_ns()}"
    store = open_store(postgres_url, name, seed=0, heartbeat_s=1)
    far = dict(owner(), host="other-machine", pid=1)
    number = running_trial(store, far)
    with store.heartbeat(number, interval=1):
        time.sleep(2.5)
        assert dead_trials(store.study, store.storage, heartbeat_s=1) == [], "beating"
    time.sleep(7.5)
    assert [t.number for t, _ in dead_trials(store.study, store.storage, heartbeat_s=1)] == [number]
