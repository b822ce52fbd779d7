"""The storage URL given to compile-tune works unchanged in Optuna's own tools (real PostgreSQL)."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import FAST, ROOT, SPACES, WORKLOADS


def optuna_cli(*args: str) -> subprocess.CompletedProcess:
    """Optuna's own command line, installed beside this Python with optuna."""
    exe = Path(sys.executable).parent / "optuna"
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120)


def test_the_optuna_cli_reads_a_study_compile_tune_wrote_with_the_same_postgresql_url(postgres_url, tmp_path):
    name = f"interop-{os.getpid()}-{time.time_ns()}"
    tune = subprocess.run(
        [sys.executable, "-m", "tuner", str(WORKLOADS / "blocks.py"), "--space", str(SPACES / "logic.yaml"),
         "--out", str(tmp_path / "out"), "--storage", postgres_url, "--study", name, "--trials", "1", *FAST],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert tune.returncode == 0, tune.stdout[-3000:] + tune.stderr[-3000:]

    studies = optuna_cli("studies", "--storage", postgres_url, "-f", "json")
    assert studies.returncode == 0, studies.stderr
    assert name in [s["name"] for s in json.loads(studies.stdout)]

    trials = optuna_cli("trials", "--storage", postgres_url, "--study-name", name, "-f", "json")
    assert trials.returncode == 0, trials.stderr
    roles = {t["user_attrs"]["role"] for t in json.loads(trials.stdout)}
    assert {"eager", "search"} <= roles, roles
