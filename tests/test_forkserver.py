"""Trials forked from the pre-imported launcher: they skip the imports, yet each gets its own
environment, working directory and process group, and a dead launcher is replaced."""
import os
import signal
from pathlib import Path

from conftest import WORKLOADS

from tuner.core.spec import TrialSpec
from tuner.isolation import forkserver
from tuner.isolation.isolated import preload_workload, prestart_launcher, run_isolated
from tuner.measure import launcher as forkserver_module

MARK = "COMPILE_TUNE_TEST_MARK"

#: A workload that fails unless its trial sees the environment and working directory it was given.
CHECKS_ITS_PROCESS = '''
import os
import torch

def build_model():
    assert os.environ.get("{mark}") == os.path.basename(os.getcwd()), (os.environ.get("{mark}"), os.getcwd())
    return torch.nn.Linear(4, 4)

def example_inputs():
    return (torch.randn(2, 4),)
'''


def spec(workload: Path) -> TrialSpec:
    return TrialSpec(workload=str(workload), config={"target": "whole", "backend": "eager"}, task="infer",
                     device="cpu", threads=1, measure_seconds=0.2, rounds=1)


def test_a_forked_trial_skips_the_imports_that_a_fresh_interpreter_pays(tmp_path, monkeypatch):
    forked = run_isolated(spec(WORKLOADS / "mlp.py"), timeout=300, work_dir=tmp_path)
    assert forked["status"] == "ok" and forked["child_import_s"] < 0.05, forked.get("child_import_s")
    monkeypatch.setenv(forkserver.SWITCH_ENV, "0")
    fresh = run_isolated(spec(WORKLOADS / "mlp.py"), timeout=300, work_dir=tmp_path)
    assert fresh["status"] == "ok" and fresh["child_import_s"] > 0.3, fresh.get("child_import_s")


def test_each_forked_trial_gets_its_own_environment_and_working_directory(tmp_path, monkeypatch):
    workload = tmp_path / "checks.py"
    workload.write_text(CHECKS_ITS_PROCESS.format(mark=MARK))
    for name in ("first", "second"):
        where = tmp_path / name
        where.mkdir()
        monkeypatch.chdir(where)
        result = run_isolated(spec(workload), timeout=300, work_dir=tmp_path / "work", env_extra={MARK: name})
        assert result["status"] == "ok", result.get("failure")
        assert result["child_import_s"] < 0.05, "forked, not a fresh interpreter"
    wrong = run_isolated(spec(workload), timeout=300, work_dir=tmp_path / "work", env_extra={MARK: "elsewhere"})
    assert wrong["status"] == "failed", "the check in the workload can fail"


def test_a_killed_launcher_is_started_again_and_the_study_goes_on(tmp_path):
    assert run_isolated(spec(WORKLOADS / "mlp.py"), timeout=300, work_dir=tmp_path)["status"] == "ok"
    launcher = forkserver._server
    assert launcher is not None and launcher.alive
    os.kill(launcher.proc.pid, signal.SIGKILL)
    launcher.proc.wait(timeout=10)
    result = run_isolated(spec(WORKLOADS / "mlp.py"), timeout=300, work_dir=tmp_path)
    assert result["status"] == "ok" and result["child_import_s"] < 0.05, result.get("failure")
    assert forkserver._server is not launcher and forkserver._server.alive


def test_a_forked_trial_that_segfaults_is_a_crash_and_its_group_is_gone(tmp_path):
    workload = tmp_path / "segfault.py"
    workload.write_text("import ctypes, torch\n\ndef build_model():\n    ctypes.string_at(0)\n\n"
                        "def example_inputs():\n    return (torch.randn(2, 4),)\n")
    result = run_isolated(spec(workload), timeout=300, work_dir=tmp_path)
    assert result["status"] == "failed" and result["failure"]["category"] == "crashed", result.get("failure")
    assert "SIGSEGV" in result["failure"]["raw"]


def test_a_workload_that_cannot_run_twice_in_one_process_still_runs(tmp_path):
    """The launcher imports what the workload imports, never the file itself (a backend or custom
    op registered at import would be registered twice)."""
    workload = tmp_path / "once.py"
    workload.write_text("import torch\nimport torch._dynamo\n\n@torch._dynamo.register_backend\n"
                        "def only_once_backend(gm, inputs):\n    return gm.forward\n\n"
                        "def build_model():\n    return torch.nn.Linear(4, 4)\n\n"
                        "def example_inputs():\n    return (torch.randn(2, 4),)\n")
    assert run_isolated(spec(workload), timeout=300, work_dir=tmp_path)["status"] == "ok"
    assert forkserver_module.workload_imports(str(workload)) == ["torch", "torch._dynamo"]


def fresh_launcher(work_dir: Path) -> None:
    """A launcher started now, in this test's environment (one from an earlier test may hold another)."""
    forkserver._shutdown()
    forkserver._server = None
    prestart_launcher(work_dir)


def test_the_launcher_reports_the_thread_count_a_fresh_process_of_the_user_gets(tmp_path, monkeypatch):
    from tuner.system.thread_count import fresh_process_threads as asked_of_a_fresh_interpreter

    for omp in ("1", None):
        if omp is None:
            monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        else:
            monkeypatch.setenv("OMP_NUM_THREADS", omp)
        fresh_launcher(tmp_path / "work")
        assert forkserver.launcher_threads(os.environ) == asked_of_a_fresh_interpreter()
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert forkserver.launcher_threads(os.environ) is None, "a launcher started with other thread variables does not answer"


#: Says whether the launcher imported its package (``wave``, which nothing else here imports) before the fork.
NEEDS_PRELOAD = '''
import sys
PRELOADED = "wave" in sys.modules
import wave
import torch

def build_model():
    assert PRELOADED, "the launcher did not import this file's packages"
    return torch.nn.Linear(4, 4)

def example_inputs():
    return (torch.randn(2, 4),)
'''


def test_on_the_cpu_the_launcher_imports_the_workloads_packages_once_for_all_trials(tmp_path):
    workload = tmp_path / "needs_preload.py"
    workload.write_text(NEEDS_PRELOAD)
    fresh_launcher(tmp_path / "work")
    preload_workload(str(workload), "cuda")  # on a GPU they might initialise CUDA: not imported
    assert run_isolated(spec(workload), timeout=300, work_dir=tmp_path)["status"] == "failed"
    fresh_launcher(tmp_path / "work")
    preload_workload(str(workload), "cpu")
    result = run_isolated(spec(workload), timeout=300, work_dir=tmp_path)
    assert result["status"] == "ok" and result["child_import_s"] < 0.05, result.get("failure")


#: Writes whether inductor was imported when the file ran: before the fork, by the launcher.
SEES_INDUCTOR = '''
import os
import sys
import torch

with open(os.environ["{mark}"], "a") as marks:
    marks.write(f"{{'torch._inductor.compile_fx' in sys.modules}}\\n")

def build_model():
    return torch.nn.Linear(4, 4)

def example_inputs():
    return (torch.randn(2, 4),)
'''


def test_the_model_check_starts_while_the_launcher_still_imports_inductor(tmp_path):
    """The check needs Dynamo only: it is forked as soon as Dynamo is imported, so its tracing
    overlaps inductor's import; a trial is forked once everything is imported."""
    workload, marks = tmp_path / "sees_inductor.py", tmp_path / "marks"
    workload.write_text(SEES_INDUCTOR.format(mark=MARK))
    fresh_launcher(tmp_path / "work")
    assert not forkserver._server.ready, "asked before the launcher imported everything (seconds)"
    check = TrialSpec(workload=str(workload), config={}, task="infer", device="cpu", threads=1, mode="check")
    result = run_isolated(check, timeout=300, work_dir=tmp_path / "work", env_extra={MARK: str(marks)})
    assert result["status"] == "ok" and result["child_import_s"] < 0.05, result.get("failure")
    assert marks.read_text().split() == ["False"]
    result = run_isolated(spec(workload), timeout=300, work_dir=tmp_path / "work", env_extra={MARK: str(marks)})
    assert result["status"] == "ok", result.get("failure")
    assert marks.read_text().split() == ["False", "True"]


def _addresses_in_a_fork(shift_seed: int | None) -> list[int]:
    """Where a forked child's next Python object, heap block and large block land."""
    import ctypes
    import json
    import random

    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]

    def probe():
        return [id(object()), libc.malloc(3000), libc.malloc(1 << 20)]

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            found = probe() if shift_seed is None else forkserver_module.shifted(probe, random.Random(shift_seed))
            os.write(write, json.dumps(found).encode())
        finally:
            os._exit(0)
    os.close(write)
    data = os.read(read, 4096)
    os.close(read)
    os.waitpid(pid, 0)
    return json.loads(data)


def test_each_forked_trial_starts_from_a_memory_layout_of_its_own():
    # Forks of one process put their blocks at the same addresses, a layout every trial of a run
    # would share; shifted, each child's land elsewhere, as a fresh interpreter's do. A parent
    # that freed large blocks (torch's imports, or earlier tests here) leaves holes a large block
    # fits in every fork alike: the shift must move those too.
    import ctypes

    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.free(libc.malloc(8 << 20))  # mapped, then freed: later blocks up to 8 MiB come from the heap
    big, fence = libc.malloc(3 << 20), libc.malloc(64)
    libc.free(big)  # a 3 MiB hole below the fence
    plain = [_addresses_in_a_fork(None) for _ in range(3)]
    assert len({a[2] for a in plain}) < 3, plain  # the premise: the large block takes the hole alike
    shifted = [_addresses_in_a_fork(seed) for seed in range(4)]
    for kind in range(3):
        assert len({a[kind] for a in shifted}) >= 3, (kind, shifted)
    assert forkserver_module.shifted(lambda: 42, __import__("random").Random(0)) == 42
    libc.free(fence)
