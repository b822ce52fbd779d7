from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = Path(__file__).resolve().parent / "workloads"
SPACES = Path(__file__).resolve().parent / "spaces"


@pytest.fixture
def workloads() -> Path:
    return WORKLOADS


@pytest.fixture
def spaces() -> Path:
    return SPACES


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """``compile-tune ARGS`` in a real process, as a user runs it."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "tuner", *args], capture_output=True, text=True, cwd=cwd or ROOT,
        timeout=timeout, env=env,
    )


@pytest.fixture
def cli():
    return run_cli


def tune_one_inductor_trial(workload: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    """``compile-tune WORKLOAD`` over a space of plain inductor alone, one trial, scored over a million
    steps (a compile that wins clearly is chosen); no model check, warm start or progress bar."""
    space = out.with_name(out.name + "-space.yaml")
    space.write_text("backend: [inductor]\n")
    return run_cli(str(workload), "--space", str(space), "--trials", "1", "--out", str(out), "--measure-seconds",
                   "0.5", "--steps", "1000000", "--no-check", "--no-warm-start", "--no-progress", *extra)


#: Set by .ci/run, which starts a throwaway PostgreSQL server on loopback for the test session.
POSTGRES_ENV = "COMPILE_TUNE_TEST_POSTGRES_URL"
#: Many steps, so that no search trial's compile exceeds the best total (which prunes it); no
#: model check, confirmation or warm start: these tests are about storage and workers.
FAST = ["--measure-seconds", "0.5", "--steps", "10000000", "--no-progress", "--confirm", "0", "--no-check",
        "--no-warm-start"]


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """A PostgreSQL database the tests may create studies in (each test uses fresh study names)."""
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"{POSTGRES_ENV} is not set, so there is no PostgreSQL server to test against "
                    "(.ci/run installs and starts one on loopback and sets it)")
    return url


def load_study(url: str, name: str):
    """The study as a fresh process sees it (a plain Optuna client, not the tuner's objects)."""
    import optuna

    from tuner.system.storage import open_storage

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.load_study(study_name=name, storage=open_storage(url))


def _sigint_as_a_terminal_starts_python() -> None:
    """A session started in the background of a non-interactive shell (``pytest &`` in a script,
    a CI step started so) inherits SIGINT ignored, as POSIX has such shells do, and Python then
    installs no Ctrl-C handler of its own. The Ctrl-C tests would then see an ignored SIGINT in
    this process and in every child (compile-tune rightly leaves an ignored SIGINT alone), so the
    session starts with Python's handler, as in a terminal. (Found 2026-12-02: the suite run with
    `setsid nohup ... &` had SIGINT ignored from its first test on, set by no Python code.)"""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


_sigint_as_a_terminal_starts_python()


@pytest.fixture(autouse=True)
def sigint_as_python_starts():
    """Every test starts with Python's own Ctrl-C handler: a test that leaves another one is named
    in a warning and the handler put back, so a leak is found where it happens instead of failing
    the Ctrl-C tests far from it."""
    import signal
    import warnings

    yield
    current = signal.getsignal(signal.SIGINT)
    if current is not signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        warnings.warn(f"this test left SIGINT's handler as {current!r}; put back Python's default", stacklevel=1)


@pytest.fixture
def clean_env(monkeypatch):
    """No ACCELERATE_ or TORCHINDUCTOR_ variable of the caller's shell reaches an export test."""
    for name in list(os.environ):
        if name.startswith(("ACCELERATE_", "TORCHINDUCTOR_")):
            monkeypatch.delenv(name)
    return monkeypatch
