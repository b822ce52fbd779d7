"""The child side of benchmarks/remeasure.py: one fresh process of one kind (``eager``, ``eager2``,
``compiled``, ``beside``), timing its steps with a loop of its own.

    python benchmarks/remeasure_child.py SPEC_JSON      (started by remeasure.py, never by hand)

It writes its result as JSON to ``spec["out"]`` and prints it. The only tuner code it uses is what
user code would: ``tuner.apply_config`` (``tuner.optimizer_step``), ``tuner.user.workload.load_workload``
and ``call_model``.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SEED = 0


def _to_device(item: Any, device: str) -> Any:
    import torch

    if device == "cpu":
        return item
    if isinstance(item, torch.Tensor):
        return item.to(device)
    if isinstance(item, dict):
        return {k: _to_device(v, device) for k, v in item.items()}
    if isinstance(item, (list, tuple)):
        return type(item)(_to_device(v, device) for v in item)
    return item


def _build(w: Any, spec: dict, compiled: bool) -> tuple[Any, Callable[[Any], None], float]:
    """(model, one-step function, seconds apply_config took) for an eager or a compiled copy."""
    import torch

    torch.manual_seed(SEED)  # every copy starts from the same weights
    model = w.make_model().to(spec["device"])
    apply_s = 0.0
    if compiled:
        import tuner

        target = spec["config"]
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = tuner.apply_config(model, target, warm_start=spec["warm_start"]) if isinstance(target, str) \
                else tuner.apply_config(model, target)
        apply_s = time.perf_counter() - start
        # apply_config's own warnings (thread count, torch version...), not those of imports it triggers
        ours = (str(ROOT / "tuner"), str(Path(__file__).resolve()))
        spec.setdefault("warnings", []).extend(str(c.message) for c in caught
                                               if str(Path(c.filename).resolve()).startswith(ours))
    if spec["task"] != "train":
        model.eval()
        return model, _infer_step(model), apply_s
    if w.loss_fn is None:
        raise ValueError(f"{spec['workload']}: task train needs loss_fn(output, inputs)")
    model.train()
    optimizer = w.build_optimizer(model) if w.build_optimizer else torch.optim.AdamW(model.parameters(), lr=1e-4)
    step = optimizer.step
    if compiled and spec.get("compile_optimizer"):
        import tuner

        step = tuner.optimizer_step(optimizer, spec["config"])
    return model, _train_step(model, w.loss_fn, optimizer, step), apply_s


def _infer_step(model: Any) -> Callable[[Any], None]:
    import torch

    from tuner.user.workload import call_model

    def run(inputs: Any) -> None:
        with torch.no_grad():
            call_model(model, inputs)

    return run


def _train_step(model: Any, loss_fn: Callable, optimizer: Any, step: Callable[[], Any]) -> Callable[[Any], None]:
    from tuner.user.workload import call_model

    def run(inputs: Any) -> None:
        optimizer.zero_grad(set_to_none=True)
        loss_fn(call_model(model, inputs), inputs).backward()
        step()

    return run


def _timed(run: Callable[[Any], None], schedule: list, start: int, count: int, sync: Callable[[], None]) -> list[float]:
    """Seconds of each of ``count`` steps over ``schedule`` in arrival order, from index ``start``."""
    times = []
    for i in range(start, start + count):
        item = schedule[i % len(schedule)]
        sync()
        t0 = time.perf_counter()
        run(item)
        sync()
        times.append(time.perf_counter() - t0)
    return times


def _warm_up(run: Callable[[Any], None], schedule: list, warmup: int, sync: Callable[[], None]) -> dict:
    """One full pass (timed: compiles and recompiles land here), then ``warmup`` more steps."""
    first = _timed(run, schedule, 0, len(schedule), sync)
    _timed(run, schedule, len(schedule), warmup, sync)
    return {"first_step_s": first[0], "first_pass_s": sum(first)}


def _stats(times: list[float]) -> dict:
    return {"times": times, "mean_s": sum(times) / len(times), "median_s": statistics.median(times)}


def _single(kind: str, w: Any, schedule: list, spec: dict, sync: Callable[[], None]) -> dict:
    """``eager``/``eager2`` (no compile in the process) or ``compiled`` (nothing eager timed)."""
    compiled = kind == "compiled"
    _, run, apply_s = _build(w, spec, compiled)
    warm = _warm_up(run, schedule, spec["warmup"], sync)
    out = {**warm, **_stats(_timed(run, schedule, 0, spec["steps"], sync))}
    if compiled:
        # Compile wall time: the first pass (compiles and recompiles) less what its steps take once
        # warm; apply_config's own time (importing Dynamo, loading a saved cache) is kept apart.
        steady = len(schedule) * out["mean_s"]
        out.update(apply_s=apply_s, compile_s=max(0.0, warm["first_pass_s"] - steady))
    return out


def _beside(w: Any, schedule: list, spec: dict, sync: Callable[[], None]) -> dict:
    """The compiled model built and warmed up, then an eager copy, timed alternately in blocks."""
    _, run_c, apply_s = _build(w, spec, True)
    warm = _warm_up(run_c, schedule, spec["warmup"], sync)
    _, run_e, _ = _build(w, spec, False)
    _warm_up(run_e, schedule, spec["warmup"], sync)
    steps = spec["steps"]
    block = len(schedule) if len(schedule) > 1 else 10
    block = max(1, min(block, -(-steps // 4)))  # at least 4 blocks each, so the two really alternate
    eager: list[float] = []
    comp: list[float] = []
    for j, start in enumerate(range(0, steps, block)):
        n = min(block, steps - start)
        order = ((run_e, eager), (run_c, comp))
        for run, sink in order if j % 2 == 0 else order[::-1]:
            sink.extend(_timed(run, schedule, start, n, sync))
    e, c = _stats(eager), _stats(comp)
    return {**warm, "apply_s": apply_s, **e, "compiled_times": c["times"], "compiled_mean_s": c["mean_s"],
            "compiled_median_s": c["median_s"], "in_process_speedup": e["mean_s"] / c["mean_s"], "block": block}


def child(spec: dict) -> dict:
    """Run one process kind as ``spec`` says; return its figures."""
    import torch

    sys.path.insert(0, str(ROOT))
    from tuner.user.workload import load_workload

    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    w = load_workload(spec["workload"])
    schedule = [_to_device(x, spec["device"]) for x in (w.make_schedule() or [w.make_inputs()])]
    cuda = spec["device"].startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    kind = spec["kind"]
    out = _beside(w, schedule, spec, sync) if kind == "beside" else _single(kind, w, schedule, spec, sync)
    return {"kind": kind, **out, "schedule_len": len(schedule), "threads": torch.get_num_threads(),
            "torch": torch.__version__, "dynamo_loaded": "torch._dynamo" in sys.modules, "pid": os.getpid(),
            "warnings": sorted(set(spec.get("warnings", [])))}


def child_main(spec_json: str) -> None:
    spec = json.loads(spec_json)
    try:
        result = child(spec)
        code = 0
    except Exception as exc:  # the parent records the error and carries on
        traceback.print_exc()
        result, code = {"kind": spec.get("kind"), "error": f"{type(exc).__name__}: {exc}"[:500]}, 1
    Path(spec["out"]).write_text(json.dumps(result))
    print(json.dumps(result))
    sys.exit(code)


if __name__ == "__main__":
    child_main(sys.argv[1])
