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
