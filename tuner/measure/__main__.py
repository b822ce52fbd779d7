"""The trial process: ``python -m tuner.measure SPEC OUT`` (started by tuner/isolation/isolated.py through
tuner/system/launch.py). One entry point, four modes (``TrialSpec.mode``): ``trial`` measures a config
(tuner/measure/trial.py), ``check`` runs the model check (check.py), ``threads`` the thread check
(threads.py), ``startup`` times a cold or warm first step (startup.py).
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

from ..core.spec import TrialSpec
from ..pt2.build import build_package, check_package
from ..system.heap import DEFAULT, PINNED, pin_heap
from ..system.launch import die_with_parent
from ..user.diagnose import classify_exception
from .check import run_check
from .devices import environment, limit_memory
from .precompile_save import save_precompiled
from .startup import measure_start
from .threads import measure_threads
from .trial import Recorder, run_trial


def main(argv: list[str]) -> int:
    die_with_parent()  # a trial outlives no killed tuner
    spec_path, out_path = Path(argv[0]), Path(argv[1])
    spec = TrialSpec(**json.loads(spec_path.read_text()))
    measure(spec, Recorder(out_path))
    return 0


def measure(spec: TrialSpec, rec: Recorder, before=None, classify=classify_exception) -> bool:
    """Run ``spec`` in this process, its figures (or its failure) into ``rec``; True when it ran.
    ``before``: what to do once torch is imported and the threads are set (a rank joins its group);
    ``classify``: the failure an exception is (a rank reads a collective's timeout as a hang)."""
    start = rec.start_clock()
    try:
        import torch
        import torch._dynamo  # noqa: F401  (import cost is process overhead, not measurement)

        rec.data["child_import_s"] = time.perf_counter() - start
        torch.set_num_threads(spec.threads)
        limit_memory(spec.trial_memory_limit_mb)
        if before is not None:
            before()
        heap = pin_heap() if spec.heap == PINNED and not spec.device.startswith("cuda") else None
        rec.update(environment={**environment(spec.device), "heap": heap or DEFAULT})
        _run_mode(spec, rec)
        return True
    except BaseException as exc:  # the trial's failure is data for the parent
        fail = classify(exc)
        rec.data["traceback"] = traceback.format_exc()[-4000:]
        rec.update(status="failed", failure=fail.to_dict())
        return False
    finally:
        rec.update(child_wall_s=time.perf_counter() - start)


def _run_mode(spec: TrialSpec, rec: Recorder) -> None:
    if spec.mode == "check":
        rec.update(check=run_check(spec), status="ok", stage="done")
    elif spec.mode == "threads":
        measure_threads(spec, rec)
    elif spec.mode == "startup":
        measure_start(spec, rec)
    elif spec.mode == "precompile":
        save_precompiled(spec, rec)
    elif spec.mode == "package":
        build_package(spec, rec)
    elif spec.mode == "package_check":
        check_package(spec, rec)
    else:
        run_trial(spec, rec)


if __name__ == "__main__":
    main(sys.argv[1:])
    # The result is on disk. Skip the interpreter's teardown (torch's atexit hooks, inductor's
    # compile-worker pool): it costs about a second per trial and measures nothing.
    import logging

    logging.shutdown()  # flushes the TORCH_TRACE files
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
