"""The pre-imported trial launcher: ``python -m tuner.measure.launcher [WORKLOAD] [check=N]``.

A trial in a fresh interpreter spends seconds importing torch, Dynamo, inductor and the
workload's own imports (transformers: seconds more) before it measures anything. This process
imports them once, then forks one child per trial. A child is as isolated as a fresh process
where it matters: nothing was compiled here, so no Dynamo cache, no kernel and no inductor
cache directory is shared; each child gets its own session (killable as a group), its own log,
environment (its own ``TORCHINDUCTOR_CACHE_DIR``) and working directory. The workload file is
executed in every child (``load_workload``), never here, so its module state is fresh; only the
packages it imports are loaded already (read from its source).

What a fork does not give is a fresh memory layout: every child starts from this process's heap,
memory map and stack, so its tensors, Python objects and C stack land at the same addresses in
every trial, where fresh interpreters get them shifted at random (address randomization, their
own allocation histories). A layout can favour one side of a paired process over the other; one
shared by every process of a race is a bias no interval sees. Eager against itself under another
name (tuner/measure/stand_in.py) read +0.21 % (se 0.04 %) in 14 forked processes, +0.2 to +3.7 %
per race in 40 A/A races of a tiny convnet at 2bf319c, 10 of them "compile"; in fresh interpreters
-0.09 % (se 0.07 %). So each child shifts its own layout at random before the trial (``shifted``):
blocks of random sizes taken on the heap (half given back, so the holes this process left move
too), in the memory map and among Python's small objects, and the trial called a random number
of C frames deep. Shifted forks read -0.03 % (se 0.04 %); in 16 A/A races each, taken in turn on
the tiny convnet, forked as they were +0.61 % (se 0.28 %), shifted -0.43 % (se 0.29 %); over
real races (docs/benchmarks.md) false "compile" fell from 12 of 162 to 3 of 162, and to 1 of
144 with the heap groomed.
``COMPILE_TUNE_LAYOUT_SHIFT=0`` turns it off, for the benchmark that compares the two.

Protocol (the client is tuner/isolation/forkserver.py): one JSON object per line. This process says
``{"threads": N}`` once torch is imported (``torch.get_num_threads()`` here, in the user's
environment: the thread count the user's own run gets), ``{"dynamo": true}`` once Dynamo is and
``{"ready": true}`` once everything is. The parent writes ``{"preload": WORKLOAD}`` (import that
file's packages now: the device is known to be the CPU) and ``{"id", "argv", "env", "cwd", "log",
"stage"}`` (start a trial once that stage is reached: the model check needs only ``dynamo``, so it
traces while inductor is imported; it may be sent before the launcher is ready; with ``check=N``
the launcher waits for the N parts of a model check once Dynamo is imported); this process
answers ``{"id", "pid"}`` when a child is started and ``{"id", "exit"}`` (the exit code, negative
for a signal, as ``subprocess`` reports it) when it ends. It exits when the parent closes its
stdin, and dies with the parent (``die_with_parent``); its children die with it.
"""
from __future__ import annotations

import functools
import importlib
import json
import os
import random
import select
import signal
import sys
import traceback

from ..system.launch import PARENT_ENV, die_with_parent

LAYOUT_SHIFT_ENV = "COMPILE_TUNE_LAYOUT_SHIFT"
#: The most random C frames a trial is called under: a frame of the eval loop is a few hundred
#: bytes, so the stack moves by up to several pages.
MOST_FRAMES = 32
#: Heap blocks a child takes at random before its trial (half given back).
GROOMING_BLOCKS = 64


def import_dynamo() -> None:
    """What the model check needs: Dynamo and the trial's own modules (it never compiles code)."""
    import torch._dynamo  # noqa: F401

    from .__main__ import main as _trial_main  # noqa: F401  (the trial's own modules)


def import_inductor(workload: str | None) -> None:
    """The rest of what every trial imports. Nothing is compiled or run on a device here."""
    import torch._inductor.compile_fx  # noqa: F401  (inductor: about a second of each trial's start)

    preload_workload(workload)


def preload_workload(workload: str | None) -> None:
    """Import the packages the workload file imports (on a GPU they might initialise CUDA, which
    a forked child could not use: the parent asks for this only when trials run on the CPU)."""
    for name in workload_imports(workload):
        try:
            importlib.import_module(name)
        except BaseException:  # noqa: BLE001 - the trial imports it again and reports what fails
            pass


def workload_imports(workload: str | None) -> list[str]:
    """The packages the workload file imports at its top level (``transformers``, ...), read from
    its source, not by running it: a file executed twice may fail where once works (a backend or
    custom op registered twice), and each trial executes it afresh anyway. Modules beside the file
    are left out (they are not on this process's path): they are the user's code too."""
    import ast

    if not workload:
        return []
    try:
        tree = ast.parse(open(workload, encoding="utf-8").read())
    except (OSError, SyntaxError, ValueError):
        return []
    names = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return list(dict.fromkeys(names))


#: What a request needs imported before it can be forked: the model check (``"stage": "dynamo"``)
#: starts before inductor is imported, and imports overlap its tracing; a trial needs everything.
STAGES = ("torch", "dynamo", "ready")


class Launcher:
    """The requests read so far, the children started, and how far the imports have got."""

    def __init__(self, requests: int, answers: int) -> None:
        self.requests, self.answers = requests, answers
        self.stage = "torch"
        self.children: dict[int, int] = {}  # pid -> request id
        self.held: list[dict] = []  # requests that need a later stage
        self.asked = 0  # trial requests read so far
        self.pending = b""

    def reached(self, stage: str) -> None:
        self.stage = stage
        _answer(self.answers, {stage: True})
        held, self.held = self.held, []
        for request in held:
            self.handle(request)

    def handle(self, request: dict) -> None:
        if "preload" in request:
            preload_workload(request["preload"])
            return
        self.asked += 1
        if STAGES.index(request.get("stage", "ready")) > STAGES.index(self.stage):
            self.held.append(request)
        else:
            pid = os.fork()
            if pid == 0:
                _child(request, self.requests, self.answers)
            try:
                os.setpgid(pid, pid)  # its own group before anyone learns its pid (see _child)
            except OSError:
                pass  # it made its own session already
            self.children[pid] = request["id"]
            _answer(self.answers, {"id": request["id"], "pid": pid})

    def read(self, timeout: float | None) -> bool:
        """Handle the requests that arrive within ``timeout``; False once the parent closed its end."""
        ready, _, _ = select.select([self.requests], [], [], timeout)
        if ready:
            chunk = os.read(self.requests, 1 << 16)
            if not chunk:
                return False  # the parent is gone or done: children are killed with us (PDEATHSIG)
            self.pending += chunk
            while b"\n" in self.pending:
                line, self.pending = self.pending.split(b"\n", 1)
                self.handle(json.loads(line))
        self.reap()
        return True

    def reap(self) -> None:
        while self.children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            if pid in self.children:
                _answer(self.answers, {"id": self.children.pop(pid), "exit": os.waitstatus_to_exitcode(status)})

    def serve(self) -> None:
        while self.read(0.05 if self.children else None):
            pass


def _child(request: dict, requests: int, answers: int) -> None:
    """In the forked child: become a trial process, run it, never return."""
    code = 1
    try:
        os.close(requests)
        os.close(answers)
        try:
            os.setsid()  # a session and group of its own: killpg reaches its compile workers
        except OSError:
            pass  # the server made it a group leader first: the group is its own anyway
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ[PARENT_ENV] = str(os.getppid())  # die with this server, which dies with the tuner
        sys.argv = ["tuner.measure", *request["argv"]]
        from .__main__ import main

        if os.environ.get(LAYOUT_SHIFT_ENV, "1") == "0":
            main(request["argv"])
        else:
            shifted(lambda: main(request["argv"]), random.Random(os.urandom(16)))
        code = 0
    except BaseException:  # noqa: BLE001 - goes to the trial's log; the parent reads the exit code
        traceback.print_exc()
    finally:
        import logging

        logging.shutdown()  # flushes the TORCH_TRACE files
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # no interpreter teardown: see tuner/measure/__main__.py


def shifted(run, rng: random.Random):
    """Call ``run`` from a memory layout of its own, as a fresh interpreter would start from (see
    the module's docstring): its stack starts a random number of frames down, and its allocations
    land elsewhere than its siblings'. The heap is groomed: blocks of random sizes (16 bytes to
    4 MiB, log-uniform) are taken and a random half given back, so every size class's free
    blocks, the holes this process left (a large block fits one the same way in every fork) and
    the heap's top move; blocks in the memory map and among Python's small objects likewise.
    What is kept is mostly untouched pages: nothing resident, nothing in a peak memory figure."""
    import mmap

    kept: list = [mmap.mmap(-1, mmap.PAGESIZE * rng.randrange(1, 257)),  # the memory map (large tensors)
                  [object() for _ in range(rng.randrange(1, 4096))]]  # Python's small-object pools
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
        libc.free.restype, libc.free.argtypes = None, [ctypes.c_void_p]
        blocks = [libc.malloc(int(2 ** rng.uniform(4, 22))) for _ in range(GROOMING_BLOCKS)]
        for block in blocks:
            if rng.random() < 0.5:
                libc.free(block)  # a hole of random size, at a random place
            else:
                kept.append(block)  # never freed: the process ends with the trial
    except (OSError, AttributeError):
        pass  # no C library to ask: the pools and the map still move
    return _frames_deep(rng.randrange(MOST_FRAMES), run)  # ``kept`` held until it returns


def _frames_deep(depth: int, run):
    """``run()`` under ``depth`` more C stack frames: a call from C code (``functools.reduce``) into
    Python enters the eval loop anew; a Python call to Python would not move the C stack."""
    if depth <= 0:
        return run()
    return functools.reduce(lambda _, __: _frames_deep(depth - 1, run), [0], None)


def _answer(fd: int, message: dict) -> None:
    os.write(fd, (json.dumps(message) + "\n").encode())


def main(argv: list[str]) -> None:
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the tuner's to handle
    answers = os.dup(1)
    os.dup2(2, 1)  # a stray print of an import must not corrupt the protocol
    import torch

    # Asked before anything could change it: the count a fresh process of the user's gets
    # (OMP_NUM_THREADS if set, else torch's rule for this build and this CPU affinity).
    _answer(answers, {"threads": torch.get_num_threads()})
    launcher = Launcher(0, answers)
    import_dynamo()
    launcher.reached("dynamo")
    # A model check starts now, and traces while inductor is imported. A run that starts with one
    # says so (argument "check=N", its N parts): their requests are waited for, as the check takes
    # longer than the import; fewer come only when the parent gave up on the check, so the wait
    # also ends with any other request (a library caller's next run may have no check).
    due = int(argv[1].partition("=")[2] or 1) if len(argv) > 1 and argv[1].startswith("check") else 0
    if not launcher.read(0):
        os._exit(0)  # the parent is gone or done
    while launcher.asked < due and not launcher.held:
        if not launcher.read(None):
            os._exit(0)
    import_inductor(argv[0] if argv and argv[0] else None)
    launcher.reached("ready")
    launcher.serve()
    sys.stderr.flush()
    os._exit(0)  # tearing down torch, Dynamo and inductor takes a second the tuner would wait for


if __name__ == "__main__":
    main(sys.argv[1:])
