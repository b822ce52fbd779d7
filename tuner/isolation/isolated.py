"""Run one trial in a process of its own and turn whatever happens into a measurement.

A process per trial means no Dynamo state, no threads and no in-memory kernels shared between
trials; a fresh ``TORCHINDUCTOR_CACHE_DIR`` means the compile time is the cold cost a user pays
on a first run. The process is forked from a launcher that has imported torch and the workload's
packages and compiled nothing (tuner/isolation/forkserver.py), so a trial skips seconds of imports. The
child may crash (segfault, OOM kill) or hang: the parent kills its whole process group on
timeout and records the failure; the study goes on.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ..core.shapes import merge_check_parts
from ..core.spec import TrialSpec, rank_path
from ..ranks.board import Board
from ..ranks.board import board as rank_board
from ..ranks.group import hang_lines, read_ranks
from ..ranks.group import merge as merge_ranks
from ..ranks.group import start as start_ranks
from ..system.interrupts import interruptible
from ..system.launch import python_command
from ..system.thread_count import fresh_process_threads
from ..user.diagnose import failure, killed_by
from .forkserver import launcher_threads
from .forkserver import preload as preload_forked
from .forkserver import prestart as prestart_forked
from .forkserver import start as start_forked


def run_isolated(spec: TrialSpec, **options) -> dict:
    """Measure ``spec`` in a child process; always returns a result dict with ``status``.
    ``options``: those of :func:`start_isolated`."""
    return start_isolated(spec, **options).finish()


@dataclass
class Running:
    """A child process started by :func:`start_isolated`; :meth:`finish` waits for its result."""

    proc: Any
    spec_path: Path
    out_path: Path
    log_path: Path
    cache: Path
    own_cache: bool
    keep_cache: bool
    timeout: float
    compile_budget_s: float | None
    start: float
    world: int = 1
    """Ranks in all (``TrialSpec.world``); more than 1: the result is their results merged."""
    board: Board | None = None
    """Ranks on other machines too: the tuner's board, where they post (tuner/ranks/board.py)."""
    remote_log: str = ""
    """The other machines' launchers' log tails, once they ended."""

    def finish(self) -> dict:
        """Wait for the child (killing it at its timeout), clean up, and return its result."""
        proc, out_path, log_path = self.proc, self.out_path, self.log_path
        timed_out = False
        pruned_after = None
        try:
            # Ctrl-C lands here, not in Popen: a child started but not yet bound to `proc`
            # would be left running (see tuner.system.interrupts).
            with interruptible():
                pruned_after = _wait(proc, rank_path(out_path, 0) if self.world > 1 else out_path, self.start,
                                     self.timeout, self.compile_budget_s)
            timed_out = proc.poll() is None and pruned_after is None
            kill_group(proc)
        finally:
            if proc.poll() is None:
                kill_group(proc)
            kill_group(proc)  # leftover compile workers in the group
        wall = time.perf_counter() - self.start
        if self.board is not None:  # the other machines' launchers end with this one's, or are stopped
            if timed_out or pruned_after is not None:
                self.board.stop(self.trial_id)
            self.remote_log = self.board.wait_ended(self.trial_id, 30.0)
            self.board.stop(self.trial_id)
        result = self._result(timed_out)
        result["trial_wall_s"] = wall
        if pruned_after is not None:
            result.update(status="pruned", pruned_reason=(
                f"stopped after {pruned_after:.1f} s of compiling: the compile alone already exceeds the best total "
                f"time so far ({self.compile_budget_s:.1f} s), so this config cannot win"))
        elif timed_out:
            result.update(status="failed", failure=failure(
                "timeout", f"no result after {self.timeout:.0f} s (stage: {result.get('stage', 'startup')})").to_dict())
        elif result.get("status") != "failed" and (proc.returncode != 0 or result.get("status") == "running"):
            result.update(status="failed", failure=_death(proc.returncode, result, log_path).to_dict())
        result["log_tail"] = log_tail(log_path) if result.get("status") == "failed" else ""
        for path in self._files():
            path.unlink(missing_ok=True)
        if self.own_cache and not self.keep_cache:
            shutil.rmtree(self.cache, ignore_errors=True)
        elif self.own_cache:
            result["cache_dir"] = str(self.cache)
        return result

    def _result(self, timed_out: bool) -> dict:
        """The child's result; on many ranks, the ranks' results merged (tuner/ranks/group.py)."""
        if self.world <= 1:
            return _read_result(self.out_path)
        ranks = read_ranks(self.out_path, self.world, self.board.posted(self.trial_id) if self.board else None)
        if timed_out:  # where each rank was
            where = ", ".join(f"rank {i} at stage {r.get('stage', 'startup')}" for i, r in enumerate(ranks))
            if self.board is not None and all(r.get("stage", "startup") == "startup" for r in ranks):
                where += (f"; no rank started: {self.board.joined()} of the {self.board.nnodes - 1} other machine(s) "
                          f"on the board, each must run `compile-tune node --rdzv-endpoint {self.board.endpoint}`")
            return {**ranks[0], "status": "running", "stage": where}
        log = hang_lines(self.log_path) + log_tail(self.log_path, 20000) + "\n" + self.remote_log
        return merge_ranks(ranks, self.proc.returncode, log)

    @property
    def trial_id(self) -> str:
        """The trial's name on the board and at the rendezvous (unique: its spec file's)."""
        return self.spec_path.stem

    def _files(self) -> list[Path]:
        ranks = [rank_path(self.out_path, r) for r in range(self.world)] if self.world > 1 else []
        return [self.spec_path, self.out_path, self.log_path, *ranks]

    def kill(self) -> None:
        """Stop the child and clean up, its result unread (another part failed or was interrupted)."""
        kill_group(self.proc)
        if self.board is not None:
            self.board.stop(self.trial_id)
        for path in self._files():
            path.unlink(missing_ok=True)
        if self.own_cache:
            shutil.rmtree(self.cache, ignore_errors=True)


def start_isolated(
    spec: TrialSpec,
    *,
    timeout: float,
    work_dir: Path,
    cache_dir: Path | None = None,
    keep_cache: bool = False,
    env_extra: dict[str, str] | None = None,
    compile_budget_s: float | None = None,
) -> Running:
    """Start the child process of :func:`run_isolated` without waiting for it.

    ``compile_budget_s``: stop the trial once its compile stage alone has run this long (the
    study's best total time so far: such a config can no longer win). Its status is then
    ``pruned``, with the reason.
    """
    work_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="trial-", suffix=".json", dir=work_dir)
    os.close(fd)
    spec_path, out_path, log_path = Path(tmp), Path(tmp).with_suffix(".result.json"), Path(tmp).with_suffix(".log")
    spec_path.write_text(json.dumps(asdict(spec)))
    own_cache = cache_dir is None
    cache = Path(tempfile.mkdtemp(prefix="inductor-cache-", dir=work_dir)) if cache_dir is None else cache_dir
    env = trial_env(spec.threads, cache, env_extra)
    start = time.perf_counter()
    with open(log_path, "wb") as log:  # a fresh interpreter writes to its own copy of the descriptor
        argv = [str(spec_path), str(out_path)]
        board = None
        if spec.world > 1:  # the ranks share the trial's inductor cache (one compile for all, where it is one)
            nodes = None
            if spec.nnodes > 1:  # this launcher hosts the rendezvous; the other machines' start from the board
                board = rank_board(spec.rdzv_endpoint or "", spec.nnodes)
                nodes = [str(spec.nnodes), spec.rdzv_endpoint or "", spec_path.stem, "1"]
            proc = start_ranks(spec.nproc, argv, env, log, os.getcwd(), nodes)
            if board is not None:
                board.post(spec_path.stem, asdict(spec))
        else:
            proc = _start(spec, argv, env, log, log_path, traced="TORCH_TRACE" in env)
    return Running(proc=proc, spec_path=spec_path, out_path=out_path, log_path=log_path, cache=cache,
                   own_cache=own_cache, keep_cache=keep_cache, timeout=timeout, compile_budget_s=compile_budget_s,
                   start=start, world=spec.world, board=board)


def prestart_launcher(work_dir: Path, check: bool = False) -> None:
    """Start the trial launcher in the background (tuner/isolation/forkserver.py), in the user's environment
    (no thread pinning: it reports the default thread count, see :func:`default_threads`).
    ``check``: the run starts with the model check (:func:`check_model`)."""
    prestart_forked(trial_env(None, None, None), work_dir, check_parts() if check else 0)


def default_threads() -> int:
    """torch's default thread count in a fresh process of the user's: as the launcher found it once
    it imported torch, else asked of a fresh interpreter (seconds: it imports torch)."""
    return launcher_threads(os.environ) or fresh_process_threads()


def preload_workload(workload: str, device: str) -> None:
    """On the CPU, the launcher imports the workload's packages once for all trials (on a GPU they
    might initialise CUDA, which a forked child could not use)."""
    if device == "cpu":
        preload_forked(workload)


def _start(spec: TrialSpec, argv: list[str], env: dict[str, str], log, log_path: Path, traced: bool):
    """The trial process: forked from the pre-imported launcher (tuner/isolation/forkserver.py), or a fresh
    interpreter where the launcher is off or unavailable, and for a traced trial (``TORCH_TRACE``
    is read when torch is imported, so the launcher's import would not trace). A trial on a GPU
    always gets a fresh interpreter: a forked child cannot use CUDA once the launcher's imports
    have initialised it, which torch 2.11's inductor import does on the lent H200 (2026-12-04:
    "Cannot re-initialize CUDA in forked subprocess", every CUDA trial failed)."""
    if not traced and spec.device == "cpu":
        forked = start_forked(argv, env, log_path, workload=spec.workload,
                              server_env=trial_env(None, None, None),
                              stage="dynamo" if spec.mode == "check" else "ready")
        if forked is not None:
            return forked
    return subprocess.Popen(
        python_command("tuner.measure", *argv), stdout=log, stderr=subprocess.STDOUT, env=env, cwd=os.getcwd(),
        start_new_session=True,  # its own process group, so compile workers die with it
    )


def _wait(proc: subprocess.Popen, out_path: Path, start: float, timeout: float,
          compile_budget_s: float | None) -> float | None:
    """Wait for the child; return the compile seconds if it was stopped for the budget."""
    if compile_budget_s is None:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        return None
    compile_started = None
    while time.perf_counter() - start < timeout:
        try:
            proc.wait(timeout=0.1)
            return None
        except subprocess.TimeoutExpired:
            pass
        stage = _read_result(out_path).get("stage")
        if stage == "compile" and compile_started is None:
            compile_started = time.perf_counter()
        elif stage != "compile" and compile_started is not None:
            break  # past the compile: no budget applies any more
        if compile_started is not None and time.perf_counter() - compile_started > compile_budget_s:
            return time.perf_counter() - compile_started
    try:
        proc.wait(timeout=max(0.0, timeout - (time.perf_counter() - start)))
    except subprocess.TimeoutExpired:
        pass
    return None


def trial_env(threads: int | None, cache: Path | None, extra: dict[str, str] | None) -> dict[str, str]:
    env = dict(os.environ)
    if cache is not None:
        env["TORCHINDUCTOR_CACHE_DIR"] = str(cache)
    if threads is not None:  # pin every thread pool the same way for every trial, so trials are comparable
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    env.update(
        PYTHONUNBUFFERED="1",
        COMPILE_TUNE_PARENT_PID=str(os.getpid()),  # see workers.die_with_parent
    )
    # The child imports `tuner` from the same place as the parent: the folder that holds `tuner/`
    # (never `tuner/` itself, whose subpackages would shadow top-level names: a `tuner/packaging/`
    # once shadowed the `packaging` library, which inductor's C++ builder imports through setuptools).
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    env.update(extra or {})
    return env


def kill_group(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _read_result(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {"status": "running", "stage": "startup"}


def _death(returncode: int | None, result: dict, log_path: Path):
    stage = result.get("stage", "startup")
    tail = log_tail(log_path, 400)
    killed = killed_by(returncode)
    if killed:
        category, sig = killed
        if category == "out_of_memory":
            return failure(category, f"killed by {sig} during {stage} (likely the out-of-memory killer)")
        return failure(category, f"process died with {sig} during {stage}")
    if "MemoryError" in tail or "out of memory" in tail.lower():
        return failure("out_of_memory", f"exit code {returncode} during {stage}: {tail[-300:]}")
    return failure("crashed", f"exit code {returncode} during {stage}: {tail[-300:]}")


#: How much of a log's end :func:`log_tail` reads: a log can reach gigabytes (NCCL's debug dumps).
_TAIL_BYTES = 4 << 20


def log_tail(path: Path, chars: int = 2000) -> str:
    try:
        with open(path, "rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - max(_TAIL_BYTES, 4 * chars)))
            text = log.read().decode(errors="replace")
    except OSError:
        return ""
    # Dynamo's verbose graph-break/recompile lines are in the result already; keep the rest.
    lines = [line for line in text.splitlines() if "[__graph_breaks]" not in line and "[__recompiles]" not in line]
    return "\n".join(lines)[-chars:]


def check_parts() -> int:
    """The model check's traces run in two processes side by side where two cores are free."""
    return 2 if len(os.sched_getaffinity(0)) >= 2 else 1


def check_model(workload_path: str, task: str, work_dir: Path, device: str = "cpu", threads: int = 1,
                timeout: float = 600.0) -> dict:
    """Run the quick model check (tuner/measure/check.py) in its own processes: its traces split
    in two parts that run side by side where two cores are free (nothing is timed meanwhile)."""
    parts = check_parts()
    spec = TrialSpec(workload=str(Path(workload_path).resolve()), config={}, task=task, device=device,
                     threads=threads, mode="check", check_parts=parts)
    running = []
    try:
        for part in range(parts):
            running.append(start_isolated(replace(spec, check_part=part), timeout=timeout,
                                          work_dir=work_dir))
        results = []
        while running:
            results.append(running[0].finish())
            running.pop(0)
    finally:
        for rest in running:
            rest.kill()
    failed = next((r for r in results if r.get("status") != "ok"), None)
    if failed is not None:
        fail = failed.get("failure") or {}
        return {"graph_breaks": [], "trace_error": f"the check itself failed: {fail.get('category')}: "
                f"{(fail.get('raw') or '')[:200]}", "fullgraph_possible": False,
                "seconds": max(r.get("trial_wall_s", 0) for r in results)}
    return merge_check_parts([r["check"] for r in results])
