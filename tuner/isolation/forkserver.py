"""Starting trial processes from the pre-imported launcher (tuner/measure/launcher.py).

One launcher per tuner process, started on the first trial and kept for the run; a trial
process started from it looks to tuner/isolation/isolated.py like a ``subprocess.Popen``
(:class:`ForkedProcess`: ``pid``, ``poll``, ``wait``, ``returncode``), in its own process group.
When the launcher cannot be started or dies, :func:`start` returns None and the caller starts
a fresh interpreter as before; ``COMPILE_TUNE_FORK_SERVER=0`` always does.
"""
from __future__ import annotations

import atexit
import itertools
import json
import os
import subprocess
import threading
from pathlib import Path

from ..system.launch import python_command

SWITCH_ENV = "COMPILE_TUNE_FORK_SERVER"
#: Importing torch, Dynamo and inductor takes a few seconds; a slow disk or a heavy workload more.
READY_TIMEOUT_S = 300.0


class ForkServerDown(RuntimeError):
    pass


class ForkServer:
    def __init__(self, workload: str | None, env: dict[str, str], log_path: Path, check: int = 0) -> None:
        self._cond = threading.Condition()
        self._ids = itertools.count()
        self._pids: dict[int, int] = {}
        self._exits: dict[int, int] = {}
        self.ready = False  # imported everything: any trial forks at once
        self.threads: int | None = None  # torch's default thread count in the launcher's environment
        # The variables that decide that count: it answers for a tuner whose own are the same.
        self.thread_env = thread_env(env)
        self.alive = True
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(
                python_command("tuner.measure.launcher", workload or "", *([f"check={check}"] if check else [])),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=log, env=env, cwd=os.getcwd(),
                start_new_session=True)  # a Ctrl-C is the tuner's to handle, not the launcher's
        self.log_path = log_path
        threading.Thread(target=self._read, name="compile-tune-forkserver", daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None  # stdout=PIPE
        for line in self.proc.stdout:
            message = json.loads(line)
            with self._cond:
                if message.get("ready"):
                    self.ready = True
                elif "threads" in message:
                    self.threads = message["threads"]
                elif "dynamo" in message:
                    pass  # a model check can be forked now; it was sent already
                elif "pid" in message:
                    self._pids[message["id"]] = message["pid"]
                else:
                    self._exits[message["id"]] = message["exit"]
                self._cond.notify_all()
        with self._cond:
            self.alive = False
            self._cond.notify_all()

    def wait_threads(self) -> int | None:
        """torch's default thread count, as soon as the launcher has imported torch; None if it died."""
        with self._cond:
            self._cond.wait_for(lambda: self.threads is not None or not self.alive,
                                timeout=READY_TIMEOUT_S)
            return self.threads

    def preload(self, workload: str) -> None:
        """Have the launcher import the workload's packages before it starts a trial."""
        with self._cond:
            self._send({"preload": workload})

    def _send(self, request: dict) -> None:
        if not self.alive:
            raise ForkServerDown("the trial launcher has exited")
        assert self.proc.stdin is not None  # stdin=PIPE
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
        except OSError as exc:
            raise ForkServerDown(f"the trial launcher has exited ({exc})") from exc

    def start(self, argv: list[str], env: dict[str, str], log_path: Path, stage: str = "ready") -> ForkedProcess:
        """Have the launcher fork a trial once it has imported what ``stage`` needs; sent at once, so
        a model check (``dynamo``) starts while the launcher still imports inductor."""
        with self._cond:
            number = next(self._ids)
            self._send({"id": number, "argv": argv, "env": env, "cwd": os.getcwd(), "log": str(log_path),
                        "stage": stage})
            # the launcher forks within milliseconds once ready, so the wait is for its imports
            self._cond.wait_for(lambda: number in self._pids or not self.alive,
                                timeout=READY_TIMEOUT_S if not self.ready else 60)
            if number not in self._pids:
                if not self.ready:
                    self.close()
                    raise ForkServerDown(f"the trial launcher did not start (see {self.log_path})")
                raise ForkServerDown("the trial launcher did not start the trial")
            return ForkedProcess(self, number, self._pids[number], argv)

    def exit_code(self, number: int) -> int | None:
        """The trial's exit code once it ended; a trial of a launcher that died was killed with it."""
        if number in self._exits:
            return self._exits[number]
        return None if self.alive else -9

    def close(self) -> None:
        assert self.proc.stdin is not None  # stdin=PIPE
        try:
            self.proc.stdin.close()  # the launcher exits on end of input
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class ForkedProcess:
    """A trial process started by the launcher, with the ``subprocess.Popen`` calls isolated.py uses."""

    def __init__(self, server: ForkServer, number: int, pid: int, argv: list[str]) -> None:
        self.server, self.number, self.pid, self.args = server, number, pid, argv

    @property
    def returncode(self) -> int | None:
        return self.server.exit_code(self.number)

    def poll(self) -> int | None:
        with self.server._cond:
            return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        with self.server._cond:
            if not self.server._cond.wait_for(lambda: self.returncode is not None, timeout=timeout):
                assert timeout is not None  # without one, wait_for returns only once the trial ended
                raise subprocess.TimeoutExpired(self.args, timeout)
            code = self.returncode
            assert code is not None  # seen set under the lock, and an exit code stays
            return code


_server: ForkServer | None = None
_failed = False
_lock = threading.Lock()


def thread_env(env) -> tuple[str | None, str | None]:
    return env.get("OMP_NUM_THREADS"), env.get("MKL_NUM_THREADS")


def prestart(server_env: dict[str, str], work_dir: Path, check: int = 0) -> None:
    """Start the launcher now, without waiting for it: its imports overlap the tuner's own.
    ``check``: a model check in that many parts comes first; the launcher waits for them once
    Dynamo is imported."""
    global _server
    if os.environ.get(SWITCH_ENV, "1") == "0":
        return
    with _lock:
        if _server is None or not _server.alive:
            try:
                work_dir.mkdir(parents=True, exist_ok=True)
                _server = ForkServer(None, server_env, work_dir / "forkserver.log", check)
            except OSError:
                pass  # start() tries again, and falls back to fresh interpreters


def launcher_threads(env) -> int | None:
    """torch's default thread count in a fresh process with ``env``'s thread variables, as the
    running launcher found it; None without a launcher started with the same variables."""
    with _lock:
        server = _server
    if server is None or not server.alive or server.thread_env != thread_env(env):
        return None
    return server.wait_threads()


def ready() -> bool:
    """Whether a trial could start from the launcher now (True without one: nothing to wait for)."""
    with _lock:
        server = _server
    return server is None or not server.alive or server.ready


def preload(workload: str) -> None:
    """Have the running launcher import the workload's packages (trials run on the CPU)."""
    with _lock:
        if _server is not None and _server.alive:
            try:
                _server.preload(workload)
            except ForkServerDown:
                pass  # start() starts another one, with the workload


def start(argv: list[str], env: dict[str, str], log_path: Path, workload: str | None,
          server_env: dict[str, str], stage: str = "ready") -> ForkedProcess | None:
    """Start ``python -m tuner.measure ARGV`` as a fork of the launcher once it reached ``stage``;
    None where a fresh interpreter must be used instead (switched off, or the launcher failed)."""
    global _server, _failed
    if os.environ.get(SWITCH_ENV, "1") == "0":
        return None
    with _lock:
        if _failed:
            return None
        for _attempt in range(2):  # a launcher that died (killed, out of memory) is started again once
            if _server is None or not _server.alive:
                try:
                    _server = ForkServer(workload, server_env, log_path.parent / "forkserver.log")
                except OSError:
                    _failed = True
                    return None
            try:
                return _server.start(argv, env, log_path, stage)
            except ForkServerDown:
                if not _server.ready:  # it never got going: fresh interpreters from now on
                    _failed = True
                    return None
                _server = None
        _failed = True
        return None


@atexit.register
def _shutdown() -> None:
    if _server is not None:
        _server.close()
