"""One trial, measured inside its own fresh process (``python -m tuner.measure SPEC OUT``).

What is measured, in order:

1. eager warm-up steps (an estimate of the eager step time);
2. the compiled model's first step (the compile) and its warm-up steps: compile time is the
   time to reach steady state minus what steady steps would have cost;
3. correctness of the first compiled step against eager (and float64) results;
4. steady step times, eager and compiled alternately, round by round, so machine drift hits
   both alike; the speedup is the ratio of medians measured side by side;
5. peak memory of eager and compiled steps over the post-setup baseline;
6. the input schedule, twice: recompiles, their cost and correctness on every shape.

The result is written as JSON to OUT as soon as each stage finishes, so that a crash late in
the trial still leaves what was measured before it.
"""
from __future__ import annotations

import copy
import json
import os
import statistics
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import CompileConfig, apply_config, target_modules
from .correctness import TOLERANCE, compare, to_float64
from .devices import PeakMemory, environment, limit_memory, memory_in_use, timed, to_device
from .diagnose import DynamoLogCapture, classify_exception, failure
from .steps import Stepper, sync_weights, timed_snapshot
from .workload import call_model, load_workload


@dataclass
class TrialSpec:
    """Everything the child needs; travels as JSON."""

    workload: str
    config: dict
    task: str = "infer"
    device: str = "cpu"
    threads: int = 1
    seed: int = 0
    warmup: int = 3
    rounds: int = 5
    measure_seconds: float = 6.0
    tolerance: float | None = None
    run_schedule: bool = True
    mode: str = "trial"
    """``trial`` measures a config; ``check`` runs the quick model check (tuner/check.py);
    ``startup`` times the first step of an applied config (tuner/warmstart.py)."""
    config_path: str | None = None
    """``startup`` mode: apply the config from this best_config.yaml, as a user would."""
    save_artifacts_to: str | None = None
    """``startup`` mode: write torch's compile cache artifacts here after the first step."""
    check_threads: int | None = None
    """``threads`` mode: how many threads call the model at once (tuner/threads.py)."""
    memory_limit_mb: float | None = None
    """A hard cap on the process's data memory: allocations beyond it fail instead of
    dragging the whole machine into the out-of-memory killer."""


class Recorder:
    """The result dict, flushed to disk after every stage."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = {"status": "running", "stage": "setup"}

    def stage(self, name: str) -> None:
        self.data["stage"] = name
        self.flush()

    def update(self, **values) -> None:
        self.data.update(values)
        self.flush()

    def flush(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, default=str))
        os.replace(tmp, self.path)


# --------------------------------------------------------------------------- the trial


def run_trial(spec: TrialSpec, rec: Recorder) -> None:
    import torch

    torch.set_num_threads(spec.threads)
    torch.manual_seed(spec.seed)
    config = CompileConfig.from_dict(spec.config)
    device = spec.device
    workload = load_workload(spec.workload)
    tol = spec.tolerance or TOLERANCE[spec.task]

    base_model = workload.make_model().to(device)
    inputs = to_device(workload.make_inputs(), device)
    schedule = to_device(workload.make_schedule(), device) if spec.run_schedule else None
    eager = Stepper(copy.deepcopy(base_model), spec.task, workload)
    rec.update(config=config.to_dict(), config_label=config.describe(), regions=None)

    # 1. eager warm-up; the first step's results are the reference
    rec.stage("eager_warmup")
    baseline = memory_in_use(device)
    with PeakMemory(device, baseline) as eager_warm_mem:
        t0, eager_ref = timed_snapshot(eager, inputs, device)
        eager_times = [t0] + [timed(lambda: eager(inputs), device)[0] for _ in range(spec.warmup - 1)]
    eager_step_estimate = statistics.median(eager_times)
    fp64_ref = _fp64_reference(base_model, inputs) if spec.task == "infer" else None

    if not config.compiles:
        compiled = eager
        rec.update(compile_time_s=0.0, first_call_s=eager_times[0], correct=True)
    else:
        compiled_model = copy.deepcopy(base_model)
        regions = target_modules(compiled_model, config.target)
        rec.update(regions=len(regions), region_names=[n or "<model>" for n, _ in regions][:50])
        apply_config(compiled_model, config)
        compiled = Stepper(compiled_model, spec.task, workload, config)

        # 2. compile = first call + warm-up beyond steady state
        rec.stage("compile")
        with DynamoLogCapture() as logs, PeakMemory(device, baseline) as compile_mem:
            first, compiled_snap = timed_snapshot(compiled, inputs, device)
            rec.update(first_call_s=first)
            warm = [timed(lambda: compiled(inputs), device)[0] for _ in range(spec.warmup)]
        rec.update(compile_peak_memory_mb=compile_mem.peak_bytes / 2**20)
        _record_dynamo(rec, logs)

        # 3. correctness of the first compiled step
        rec.stage("correctness")
        problem = _check(eager_ref, compiled_snap, fp64_ref, tol, spec.task)
        rec.update(correct=problem is None, correctness_error=problem)
        if problem:
            rec.update(status="failed", failure=failure("wrong_results", problem).to_dict())
            return

    # 4. steady steps, eager and compiled alternately
    rec.stage("timing")
    eager_steps, compiled_steps, ratios = _alternate(eager, compiled, inputs, spec, eager_step_estimate, device)
    eager_median = statistics.median(eager_steps)
    compiled_median = statistics.median(compiled_steps)
    rec.update(
        eager_step_s=eager_median,
        step_s=compiled_median,
        step_spread=_spread(compiled_steps),
        eager_step_spread=_spread(eager_steps),
        speedup=eager_median / compiled_median if compiled_median > 0 else None,
        round_ratios=ratios,
        timed_steps=len(compiled_steps),
    )
    if config.compiles:
        compile_time = first + sum(warm) - (1 + len(warm)) * compiled_median
        rec.update(compile_time_s=max(compile_time, 0.0))

    # 5. memory of steady steps
    rec.stage("memory")
    n_mem = max(2, min(5, len(eager_steps) // max(spec.rounds, 1)))
    with PeakMemory(device, baseline) as compiled_mem:
        for _ in range(n_mem):
            compiled(inputs)
    mb = 2**20
    # Eager's peak comes from its warm-up, before anything was compiled: later in the process the
    # resident set still holds compile-time memory, which is the compiled config's cost, not eager's.
    eager_peak = eager_warm_mem.peak_bytes
    compiled_peak = max(rec.data.get("compile_peak_memory_mb", 0.0) * mb, compiled_mem.peak_bytes) \
        if config.compiles else eager_peak
    rec.update(
        eager_peak_memory_mb=eager_peak / mb,
        peak_memory_mb=compiled_peak / mb,
        steady_peak_memory_mb=compiled_mem.peak_bytes / mb,
    )

    # 6. the input schedule
    if schedule and config.compiles:
        rec.stage("schedule")
        _run_schedule(rec, eager, compiled, schedule, tol, device)
        if rec.data.get("status") == "failed":
            return
    rec.update(status="ok", stage="done")


def _fp64_reference(model, inputs):
    import torch

    try:
        m64 = to_float64(model).eval()
        with torch.no_grad():
            return call_model(m64, to_float64(inputs))
    except Exception:  # some models cannot run in float64 (e.g. int-only paths); fall back to allclose
        return None


def _check(eager_ref, compiled_snap, fp64_ref, tol, task) -> str | None:
    problem = compare(eager_ref["output"], compiled_snap["output"], fp64_reference=fp64_ref, tol=tol)
    if problem or task != "train":
        return problem
    problem = compare(eager_ref["loss"], compiled_snap["loss"], tol=tol)
    if problem:
        return "loss " + problem
    # Regional compile wraps nothing in the names (in-place compile), so names line up.
    return compare(eager_ref["grads"], compiled_snap["grads"], tol=tol)


def _alternate(eager, compiled, inputs, spec, step_estimate, device):
    """Round by round, k eager then k compiled steps (order flipped every round)."""
    rounds = max(1, spec.rounds)
    per_round = int(spec.measure_seconds / (2 * rounds * max(step_estimate, 1e-5)))
    per_round = max(3, min(per_round, 50))
    eager_all, compiled_all, ratios = [], [], []
    for r in range(rounds):
        order = [(eager, eager_all), (compiled, compiled_all)]
        if r % 2:
            order.reverse()
        this_round = {}
        for stepper, sink in order:
            times = [timed(lambda: stepper(inputs), device)[0] for _ in range(per_round)]
            sink.extend(times)
            this_round[id(stepper)] = statistics.median(times)
        ratios.append(this_round[id(eager)] / this_round[id(compiled)] if this_round[id(compiled)] else None)
    return eager_all, compiled_all, ratios


def _spread(times: list[float]) -> float:
    """Interquartile range relative to the median: robust to the odd slow step."""
    if len(times) < 4:
        return 0.0
    q = statistics.quantiles(times, n=4)
    med = statistics.median(times)
    return (q[2] - q[0]) / med if med else 0.0


def _record_dynamo(rec: Recorder, logs: DynamoLogCapture) -> None:
    from torch._dynamo.utils import counters

    rec.update(
        graphs=int(counters["stats"].get("unique_graphs", 0)),
        graph_breaks=len(logs.breaks),
        graph_break_events=logs.break_events,
        library_graph_breaks=logs.library_breaks,
        graph_break_details=[vars(b) for b in logs.breaks.values()],
        recompiles=len(logs.recompiles),
        recompile_details=logs.recompiles[:50],
        recompile_limit_hit=logs.recompile_limit_hit,
    )


def _run_schedule(rec, eager, compiled, schedule, tol, device) -> None:
    """First pass pays the recompiles; the second pass is steady. Their difference is the
    recompile cost the user's real run would pay, added to the compile time."""
    with DynamoLogCapture() as logs:
        first_pass, second_pass, eager_pass = [], [], []
        for i, item in enumerate(schedule):
            sync_weights(eager, compiled)
            t, snap = timed_snapshot(compiled, item, device)
            first_pass.append(t)
            te, ref = timed_snapshot(eager, item, device)
            eager_pass.append(te)
            problem = compare(ref["output"], snap["output"], tol=tol)
            if problem:
                rec.update(status="failed", correct=False, correctness_error=f"input_schedule()[{i}]: {problem}",
                           failure=failure("wrong_results", f"input_schedule()[{i}]: {problem}").to_dict())
                return
        for item in schedule:
            second_pass.append(timed(lambda: compiled(item), device)[0])
    before = rec.data.get("graph_break_details") or []
    known = {(b["file"], b["line"]) for b in before}
    extra = [vars(b) for b in logs.breaks.values() if (b.file, b.line) not in known]
    from torch._dynamo.utils import counters

    recompile_cost = max(0.0, sum(first_pass) - sum(second_pass))
    rec.update(
        schedule_len=len(schedule),
        recompiles=rec.data.get("recompiles", 0) + len(logs.recompiles),
        recompile_details=(rec.data.get("recompile_details") or []) + logs.recompiles[:50],
        recompile_limit_hit=rec.data.get("recompile_limit_hit") or logs.recompile_limit_hit,
        graphs=int(counters["stats"].get("unique_graphs", 0)),
        graph_breaks=len(before) + len(extra),
        graph_break_details=before + extra,
        recompile_time_s=recompile_cost,
        schedule_step_s=statistics.median(second_pass),
        schedule_eager_step_s=statistics.median(eager_pass),
        compile_time_s=rec.data.get("compile_time_s", 0.0) + recompile_cost,
    )


def main(argv: list[str]) -> int:
    from .workers import die_with_parent

    die_with_parent()  # a trial outlives no killed tuner
    spec_path, out_path = Path(argv[0]), Path(argv[1])
    spec = TrialSpec(**json.loads(spec_path.read_text()))
    rec = Recorder(out_path)
    start = time.perf_counter()
    try:
        import torch
        import torch._dynamo  # noqa: F401  (import cost is process overhead, not measurement)

        rec.data["child_import_s"] = time.perf_counter() - start
        torch.set_num_threads(spec.threads)
        limit_memory(spec.memory_limit_mb)
        rec.update(environment=environment(spec.device))
        if spec.mode == "check":
            from .check import run_check

            rec.update(check=run_check(load_workload(spec.workload), spec.task), status="ok", stage="done")
        elif spec.mode == "threads":
            from .threads import measure_threads

            measure_threads(spec, rec)
        elif spec.mode == "startup":
            from .warmstart import measure_start

            measure_start(spec, rec)
        else:
            run_trial(spec, rec)
    except BaseException as exc:  # the trial's failure is data for the parent
        fail = classify_exception(exc)
        rec.data["traceback"] = traceback.format_exc()[-4000:]
        rec.update(status="failed", failure=fail.to_dict())
    finally:
        rec.update(child_wall_s=time.perf_counter() - start)
    return 0


if __name__ == "__main__":
    main(sys.argv[1:])
    # The result is on disk. Skip the interpreter's teardown (torch's atexit hooks, inductor's
    # compile-worker pool): it costs about a second per trial and measures nothing.
    import logging

    logging.shutdown()  # flushes the TORCH_TRACE files
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
