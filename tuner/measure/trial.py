"""One trial, measured inside its own fresh process (``mode="trial"``, see ``__main__.py``).

The process holds the model once; eager and compiled steps run on that one object (see
tuner/measure/steps.py). What is measured, in order:

1. eager warm-up steps over the shape mix (tuner/mix.py): a step-time estimate per shape, the
   eager peak memory, and whether a step draws random numbers (dropout);
2. the compile: the first compiled step, warm-up steps, then the input schedule once (its
   recompiles and their cost); compile time and compile-time peak memory;
3. steady step times over the shape mix, eager and compiled in turn, step by step, so
   machine drift hits both alike (or the config's own side alone, for confirmation), the input
   schedule in arrival order (tuner/measure/timing.py);
   A race process of a candidate beyond plain compile also compiles plain compile (its rival),
   after the candidate's compile is measured and from plain compile's kept cache, and steps it as
   a third side: the candidate against plain compile in one process (tuner/measure/timing.py);
4. steady peak memory of compiled steps over the mix (with a rival, before the rival compiles:
   the config's own figure);
5. correctness, last, so that nothing it allocates is charged to the config's memory: every
   distinct input, eager and compiled from the same weights and the same random state; in
   training the loss, every gradient and every parameter after the optimizer step. A model that
   draws random numbers is checked with inductor's ``fallback_random`` (the same random numbers
   as eager), in a compile of its own; the timed steps run the real kernels. A config with a
   ``precision`` (bf16 autocast, TF32 matmuls) runs it on the compiled side only: eager stays the
   float32 reference, and the check uses that precision's tolerance (tuner/measure/correctness.py).

The result is written as JSON to OUT as soon as each stage finishes, so that a crash late in
the trial still leaves what was measured before it.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ..core.config import CompileConfig
from ..core.spec import TrialSpec
from ..ranks.rank import agree_max, check_ranks, line_up, wrap_for_ranks
from ..system.caches import link_tree
from ..user.diagnose import DynamoLogCapture, failure
from ..user.workload import call_model
from .contention import CoreWait
from .correctness import PRECISION_TOLERANCE, TOLERANCE, compare, flatten, to_float64
from .devices import PeakMemory, memory_in_use, timed
from .mix import timing_mix
from .setup import prepare, seed_all
from .slot import pin, timing_slot
from .steps import (
    RIVAL,
    Step,
    TrainingState,
    checked_step,
    consumed_random_numbers,
    fresh_start,
    rng_state,
    timed_steps,
)
from .timing import time_steps


class Recorder:
    """The result dict, flushed to disk after every stage."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = {"status": "running", "stage": "setup", "stage_s": {}}
        self._spent: dict[str, float] = {}
        self._began = time.perf_counter()

    def start_clock(self) -> float:
        """The process's measured wall time starts now, and so does its first stage: the stages
        never hold more than ``child_wall_s``."""
        self._began = time.perf_counter()
        return self._began

    def stage(self, name: str) -> None:
        """A new stage begins: the one before it gets its seconds (``stage_s``: where a process's
        wall time goes, what the --budget's estimates are made of)."""
        now = time.perf_counter()
        stage = self.data["stage"]
        self._spent[stage] = self._spent.get(stage, 0.0) + now - self._began
        # milliseconds rounded down: the stages' sum stays within the wall time it is part of
        self.data["stage_s"][stage] = math.floor(self._spent[stage] * 1000) / 1000
        self._began = now
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
    pin(spec.compile_cores)  # lanes: everything untimed runs off the timing cores
    config = CompileConfig.from_dict(spec.config)
    device = spec.device
    tol = spec.tolerance or TOLERANCE[spec.task]
    ready = _prepare(spec, rec)
    workload, model, inputs, schedule = ready.workload, ready.model, ready.inputs, ready.schedule
    mix = timing_mix(inputs, schedule)
    # many ranks: the wrapper around the model, and the state every rank's check starts from
    step = Step(model, spec.task, workload, runner=wrap_for_ranks(spec, config, model))
    saved = TrainingState(step) if spec.world > 1 else None
    rec.update(config=config.to_dict(), config_label=config.describe(), regions=None,
               mix=[{"input": e.label, "weight": round(e.weight, 4)} for e in mix],
               baseline_memory_mb=memory_in_use(device) / 2**20)

    # 1. eager warm-up over the mix: estimates, eager's peak memory, and whether steps are random
    rec.stage("eager_warmup")
    before = rng_state(device)
    with PeakMemory(device) as eager_mem:
        first_eager, _ = timed(lambda: step(inputs), device)
        stochastic = consumed_random_numbers(before, rng_state(device))
        estimates = [statistics.median(timed_steps(step, e.inputs, max(2, spec.warmup - 1), device)) for e in mix]
        estimates = agree_max(estimates, spec)  # ranks size their timed blocks alike
    rec.update(stochastic=stochastic, eager_peak_memory_mb=eager_mem.peak_mb)

    compiled = _compile(step, config, inputs, schedule, spec, rec) if config.compiles else None
    if compiled is None:
        rec.update(compile_time_s=0.0, first_call_s=first_eager, correct=True)
    rival = False
    if compiled is not None and spec.rival and spec.timing == "beside":
        _steady_memory(step, mix, device, rec)  # 4. before the rival compiles: the config's own
        rival = _hold_rival(step, spec, inputs, schedule, rec)

    line_up(spec)  # many ranks: the timed stages start on every rank at once
    # 3-4 hold the machine's timing slot where lanes run (--parallel): the only stages whose
    # figures another trial's compile would disturb
    with timing_slot(spec, rec):
        # 3. steady steps over the mix, eager and compiled alternately (or the config alone)
        rec.stage("timing")
        with CoreWait(spec.threads) as waited:
            timing = time_steps(step, mix, schedule, spec.rounds, spec.measure_seconds, estimates, device,
                                alone=spec.timing == "alone", rival=rival)
        rec.update(**timing.figures(), **waited.figures())
        if compiled is not None:
            rec.update(compile_time_s=_compile_time(step, timing, inputs, schedule, compiled, device, rec))
            if not rival:
                _steady_memory(step, mix, device, rec)
        else:
            rec.update(steady_peak_memory_mb=eager_mem.peak_mb, peak_memory_mb=eager_mem.peak_mb)

    # 5. correctness, on every distinct input, from the same weights and random state
    if config.compiles and spec.check_correctness:
        rec.stage("correctness")
        if not _correct(step, saved, config, mix, stochastic, spec, tol, rec):
            return
    elif config.compiles:
        rec.update(correctness_check="not checked here: a confirmation process (the search checked this config)")
    rec.stage("done")
    rec.update(status="ok")


def _prepare(spec: TrialSpec, rec: Recorder):
    """The workload's model and inputs; ``setup_s``, the seconds it took, is part of every fresh
    process, the warm start's too (the --budget's plan: tuner/run/budget.py)."""
    began = time.perf_counter()
    ready = prepare(spec, schedule=spec.run_schedule)
    rec.update(setup_s=round(time.perf_counter() - began, 3))
    return ready


def _correct(step: Step, saved, config: CompileConfig, mix, stochastic: bool, spec: TrialSpec, tol: float,
             rec: Recorder) -> bool:
    """5. the config against eager (on many ranks: every rank, from the state saved before its first step)."""
    from torch._dynamo.utils import counters

    began = time.perf_counter()
    hits, misses = (counters["inductor"].get(f"fxgraph_cache_{k}", 0) for k in ("hit", "miss"))
    checks = spec.check_cache_dir if stochastic else None
    if checks and os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        # the check resets Dynamo, so the compiled optimizer step compiles again: from its own graphs
        link_tree(Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]), Path(checks))
    # a stochastic check compiles its forwards again (fallback_random): into the run's check cache
    with inductor_cache(checks):
        if saved is not None:
            problem, how = check_ranks(step, saved, config, mix[0].inputs, stochastic, spec, tol)
            dtypes = None
        else:
            problem, how, dtypes = _check_correctness(step, config, mix, stochastic, spec, tol)
    hits = int(counters["inductor"].get("fxgraph_cache_hit", 0) - hits)
    misses = int(counters["inductor"].get("fxgraph_cache_miss", 0) - misses)
    if checks and hits:
        how += f" ({hits} graph(s) found compiled, {misses} compiled for the check)"
    # correctness_s: confirmation's processes skip the check, and the --budget plans them without it
    rec.update(correct=problem is None, correctness_error=problem, correctness_check=how,
               compiled_output_dtypes=dtypes, correctness_s=round(time.perf_counter() - began, 3),
               check_cache_hits=hits, check_cache_misses=misses)
    if problem:
        category = "ranks_disagree" if "parameters differ from" in problem else "wrong_results"
        rec.update(status="failed", failure=failure(category, problem).to_dict())
    return problem is None


@contextmanager
def inductor_cache(path: str | None) -> Iterator[None]:
    """Inductor compiles into ``path`` (its cache directory) inside the block, where one is given:
    inductor reads ``TORCHINDUCTOR_CACHE_DIR`` at each use, so a process may compile part of its
    work from another cache than its own (the rival's kept one; the run's check cache)."""
    own = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if path:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = path
    try:
        yield
    finally:
        if own is not None:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = own
        elif path:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)


@dataclass
class _Compiled:
    """What the compile stage timed: the first call, the warm-up steps, the schedule's first pass."""

    first: float
    warm: list[float]
    first_pass: list[float]


def _compile(step: Step, config: CompileConfig, inputs, schedule, spec: TrialSpec, rec: Recorder) -> _Compiled:
    """2. compile: the first call, warm-up steps beyond steady state, then the schedule once (its
    recompiles); Dynamo's graphs, breaks and recompiles, and the compile's peak memory."""
    rec.stage("compile")
    regions = step.compile(config)
    rec.update(regions=len(regions), region_names=[n or "<model>" for n, _ in regions][:50])
    first_pass: list[float] = []
    # the compile's own core wait: a compile crowded by another job reads high, like a crowded step
    # (inductor's compile workers are processes of their own and not counted: the share is a floor)
    with DynamoLogCapture() as logs, PeakMemory(spec.device) as compile_mem, CoreWait(spec.threads) as waited:
        first, _ = timed(lambda: step(inputs), spec.device)
        rec.update(first_call_s=first)
        warm = timed_steps(step, inputs, spec.warmup, spec.device)
        if schedule:
            rec.stage("schedule")
            first_pass = [timed(lambda x=item: step(x), spec.device)[0] for item in schedule]
    rec.update(compile_peak_memory_mb=compile_mem.peak_mb, compile_wait_share=waited.share)
    _record_dynamo(rec, logs)
    return _Compiled(first, warm, first_pass)


def _steady_memory(step: Step, mix, device: str, rec: Recorder) -> None:
    """4. steady peak memory over the mix (compiled steps)."""
    rec.stage("memory")
    with PeakMemory(device) as steady_mem:
        for entry in mix:
            for _ in range(2):
                step(entry.inputs)
    rec.update(steady_peak_memory_mb=steady_mem.peak_mb,
               peak_memory_mb=max(rec.data["compile_peak_memory_mb"], steady_mem.peak_mb))


def _hold_rival(step: Step, spec: TrialSpec, inputs, schedule, rec: Recorder) -> bool:
    """Compile the rival (plain compile) beside the config, its first calls and the schedule's
    first pass too, so that no step the timing measures compiles. From the rival's kept cache where
    there is one (warm: seconds), after the config's own cold compile was measured, so that compile
    found nothing of the rival's. Whether the process steps it: a rival that fails is left out and
    the process is an ordinary pair, as is one whose config hit Dynamo's recompile limit (the two
    configs' graphs count against one limit per code object, and a frame past it runs eager for both)."""
    import torch

    if rec.data.get("recompile_limit_hit"):
        rec.update(rival_left_out="the config hit Dynamo's recompile limit")
        return False
    rec.stage("rival")
    began = time.perf_counter()
    # the config compiled every input already: the rival's graphs get a limit's worth of their own
    torch._dynamo.config.recompile_limit *= 2
    try:
        with inductor_cache(spec.rival_cache_dir):
            step.hold_rival(CompileConfig.from_dict(cast("dict", spec.rival)))
            with step.mode(RIVAL):
                timed_steps(step, inputs, 1 + spec.warmup, spec.device)
                for item in schedule or []:
                    step(item)
    except Exception as e:  # noqa: BLE001 - the rival is a yardstick: its failure is not the config's
        step.drop_rival()
        rec.update(rival_left_out=f"{type(e).__name__}: {str(e)[:300]}")
        return False
    rec.update(rival=spec.rival, rival_compile_s=round(time.perf_counter() - began, 3))
    return True


def _compile_time(step: Step, timing, inputs, schedule, compiled: _Compiled, device: str, rec: Recorder) -> float:
    """The compile's cost: the first call and warm-up steps beyond as many steady steps, plus the
    schedule's first pass beyond its steady steps (its recompiles)."""
    steady_example = timing.compiled_median_for(inputs)
    if steady_example is None:  # the example's shape is not in the schedule: time it on its own
        steady_example = statistics.median(timed_steps(step, inputs, 5, device))
    compile_time = compiled.first + sum(compiled.warm) - (1 + len(compiled.warm)) * steady_example
    recompile_cost = 0.0
    if schedule:
        # never None: the arrival windows time every input of the schedule compiled (timing.py)
        steady = cast("list[float]", [timing.compiled_median_for(item) for item in schedule])
        recompile_cost = max(0.0, sum(compiled.first_pass) - sum(steady))
        rec.update(schedule_len=len(schedule), recompile_time_s=recompile_cost,
                   schedule_step_s=timing.compiled_mix_s, schedule_eager_step_s=timing.eager_mix_s)
    return max(compile_time, 0.0) + recompile_cost


def _check_correctness(step: Step, config: CompileConfig, mix, stochastic: bool, spec: TrialSpec, tol: float):
    """``(problem or None, how it was checked, the compiled outputs' dtypes)``.

    A step that draws random numbers (dropout in training) is compared from the same random
    state; inductor generates its random numbers its own way by design, so for the check it is
    compiled again with ``fallback_random`` (eager's generator), the way PyTorch's accuracy
    harness separates accuracy runs from performance runs. Other backends call eager's own
    random ops. Everything timed is done by now, so resetting Dynamo costs the timing nothing.
    A training check starts from freshly built weights: a config that corrupts the weights while it is
    timed (a miscompiled optimizer step) would otherwise leave NaN on both sides of the
    comparison, and NaN compares equal.
    """
    import torch

    how = "same inputs, weights and random state as eager"
    if config.precision:
        how += (f"; precision {config.precision} on the compiled side only, compared with float32 eager at "
                f"tolerance {max(tol, PRECISION_TOLERANCE[config.precision]):g}")
    if stochastic and config.backend == "inductor":
        torch._dynamo.reset()
        step.recompile_forwards(dataclasses.replace(config, options={**config.options, "fallback_random": True}))
        how += "; forwards recompiled with fallback_random=True (inductor's own random numbers differ from eager's)"
    saved, dtypes = None, None
    if step.task == "train":  # inference leaves the weights alone (and freezing has folded them in)
        fresh_start(step, spec.seed)
        saved = TrainingState(step)
    for entry in mix:
        if saved:
            saved.restore()
        with step.eager():
            reference = checked_step(step, entry.inputs, spec.seed)
        if saved:
            saved.restore()
        result = checked_step(step, entry.inputs, spec.seed)
        fp64 = None if step.task == "train" else (lambda e=entry: _fp64_reference(step, e.inputs, spec.seed))
        dtypes = dtypes or sorted({str(t.dtype).removeprefix("torch.") for t in flatten(result["output"]).values()})
        problem = _compare_steps(reference, result, fp64, tol, config.precision)
        if problem:
            where = "" if len(mix) == 1 else f"{entry.label}: "
            return where + problem, how, dtypes
    return None, how, dtypes


def _fp64_reference(step: Step, inputs, seed: int):
    import torch

    try:
        with step.eager():
            m64 = to_float64(step.model).eval()
        seed_all(seed)
        with torch.no_grad():
            return call_model(m64, to_float64(inputs))
    except Exception:  # some models cannot run in float64 (e.g. int-only paths); fall back to allclose
        return None


def _compare_steps(reference: dict, result: dict, fp64, tol: float, precision: str | None = None) -> str | None:
    problem = compare(reference["output"], result["output"], fp64_reference=fp64, tol=tol, precision=precision)
    if problem or "loss" not in reference:
        return problem
    problem = compare(reference["loss"], result["loss"], tol=tol, precision=precision)
    if problem:
        return "loss " + problem
    # In-place compile keeps parameter names, so they line up.
    problem = compare(reference["grads"], result["grads"], tol=tol, precision=precision)
    if problem:
        return "gradient " + problem
    problem = compare(reference["params"], result["params"], tol=tol, precision=precision)
    return "after the optimizer step, " + problem if problem else None


def _record_dynamo(rec: Recorder, logs: DynamoLogCapture) -> None:
    from torch._dynamo.utils import counters

    rec.update(
        graphs=int(counters["stats"].get("unique_graphs", 0)),
        # the graphs AOTAutograd handed the backend: more than Dynamo's where DDPOptimizer split them at buckets
        backend_graphs=int(counters["aot_autograd"].get("total", 0)),
        # inductor's FX graph cache: on many ranks, a rank that finds a graph another rank compiled
        fxgraph_cache_hits=int(counters["inductor"].get("fxgraph_cache_hit", 0)),
        fxgraph_cache_misses=int(counters["inductor"].get("fxgraph_cache_miss", 0)),
        graph_breaks=len(logs.breaks),
        graph_break_events=logs.break_events,
        library_graph_breaks=logs.library_breaks,
        graph_break_details=[vars(b) for b in logs.breaks.values()],
        recompiles=len(logs.recompiles),
        recompile_details=logs.recompiles[:50],
        recompile_limit_hit=logs.recompile_limit_hit,
    )
