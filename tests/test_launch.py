"""Trials and workers start path-safe: a ``tuner/`` folder of the user's own, in the working
directory, replaces nothing inside them (tuner/system/launch.py)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import FAST, SPACES, WORKLOADS

from tuner.core.spec import TrialSpec
from tuner.isolation.isolated import run_isolated
from tuner.system.launch import python_command


@pytest.fixture
def users_folder(tmp_path, monkeypatch):
    """A working directory holding the user's own ``tuner`` package, which must never be imported."""
    (tmp_path / "tuner").mkdir()
    (tmp_path / "tuner" / "__init__.py").write_text("raise ImportError(\"the user's own tuner/ folder was imported\")\n")
    (tmp_path / "tuner" / "measure.py").write_text("raise ImportError(\"the user's own tuner/measure.py was imported\")\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_child_imports_this_package_whatever_the_working_directory_holds(users_folder):
    # Plain `python -m` would import the folder: that is what the launcher must avoid.
    plain = subprocess.run([sys.executable, "-m", "tuner._version"], capture_output=True, text=True)
    assert "the user's own tuner/ folder was imported" in plain.stderr
    safe = subprocess.run(python_command("tuner._version"), capture_output=True, text=True)
    assert safe.returncode == 0, safe.stderr


def test_a_childs_path_holds_the_folder_above_this_package_not_the_package_itself():
    """Where ``tuner/`` itself led the child's ``PYTHONPATH``, a ``tuner/packaging/`` (the .pt2
    package's home for a while) shadowed the ``packaging`` distribution (setuptools, imported by
    inductor's C++ builder, failed inside it). Any subpackage could shadow a top-level name."""
    import tuner
    from tuner.isolation.isolated import trial_env

    first = trial_env(None, None, None)["PYTHONPATH"].split(os.pathsep)[0]
    assert first == str(Path(tuner.__file__).resolve().parent.parent)
    pytest.importorskip("packaging.utils")
    code = "import packaging.utils; print(packaging.__file__)"
    env = trial_env(None, None, None)
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert found.returncode == 0 and "tuner" not in found.stdout, found.stdout + found.stderr


def test_a_trial_runs_beside_a_users_tuner_folder(users_folder):
    spec = TrialSpec(workload=str(WORKLOADS / "mlp.py"), config={"backend": "aot_eager"}, measure_seconds=0.3,
                     rounds=2)
    result = run_isolated(spec, timeout=300, work_dir=users_folder / "work")
    assert result["status"] == "ok", (result.get("failure"), result.get("log_tail"))


def test_compile_tune_tunes_correctly_beside_a_users_tuner_folder(users_folder):
    """The installed command, as a user runs it, in a folder with its own ``tuner/``."""
    command = shutil.which("compile-tune", path=str(Path(sys.executable).parent))
    assert command, "the compile-tune entry point is installed beside this Python"
    run = subprocess.run([command, str(WORKLOADS / "mlp.py"), "--space", str(SPACES / "logic.yaml"), "--trials", "2",
                          "--out", "out", *FAST], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    best = yaml.safe_load((users_folder / "out" / "best_config.yaml").read_text())
    assert best["verdict"] in ("compile", "stay_eager")
    trials = (users_folder / "out" / "trials.csv").read_text()
    assert "failed" not in trials, trials
