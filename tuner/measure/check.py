"""``compile-tune check``: what a user should know before tuning, in seconds.

Traces the model with Dynamo only (``backend="eager"``: no code generation, so it is quick) and
reports graph breaks with their user source lines, numpy code that Dynamo traces (found by a
second trace with numpy tracing off), data-dependent Python, whether ``fullgraph=True`` can
work, and the recompiles each ``dynamic`` setting causes over the input schedule (the marked
choices of tuner/core/shapes.py included, and ``dynamic=False`` with the raised ``recompile_limit`` the
space adds when the default one is hit). Runs in its own process like a trial, so its Dynamo state
is never shared with anything else.
"""
from __future__ import annotations

import copy
from dataclasses import asdict
from typing import Any

from ..core.shapes import (
    MARKED,
    MARKED_UNBACKED,
    RECOMPILE_LIMIT,
    merge_check_parts,
    reaches_one,
    schedule_settings,
    split_marks,
)
from ..core.spec import TrialSpec
from ..runtime.marks import distinct_shapes, marked, varying_dims
from ..user.diagnose import DynamoLogCapture
from ..user.workload import call_model
from .setup import prepare

DYNAMIC_SETTINGS = (None, False, True)


def _trace(model, inputs_list, *, dynamic=None, trace_numpy=True, train=False, marks=None, unbacked=None,
           dynamo=None) -> dict[str, Any]:
    import torch
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    m = copy.deepcopy(model)
    compiled = torch.compile(m.forward, backend="eager", dynamic=dynamic)
    if marks or unbacked:
        compiled = marked(compiled, marks or {}, unbacked)
        # a mark stays on the tensor: copies keep it from the traces that follow this one
        inputs_list = [torch.utils._pytree.tree_map_only(torch.Tensor, torch.Tensor.clone, i) for i in inputs_list]
    error = None
    with torch._dynamo.config.patch(trace_numpy=trace_numpy, **(dynamo or {})), DynamoLogCapture() as logs:
        ctx = torch.enable_grad() if train else torch.no_grad()
        with ctx:
            for inputs in inputs_list:
                try:
                    call_model(_Forward(compiled), inputs)
                except Exception as exc:  # reported, not fatal: the check is advice
                    error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
                    break
    return {
        "breaks": [asdict(b) for b in logs.breaks.values()],
        "recompiles": logs.recompiles,
        "recompile_limit_hit": logs.recompile_limit_hit,
        "graphs": int(counters["stats"].get("unique_graphs", 0)),
        "error": error,
    }


def _sees_numpy(model) -> bool:
    """Whether a module defining one of the model's classes has numpy (or part of it) in its namespace."""
    import sys
    import types

    for name in {type(m).__module__ for m in model.modules()}:
        module = sys.modules.get(name)
        for value in vars(module).values() if module else ():
            origin = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
            if isinstance(origin, str) and origin.split(".")[0] == "numpy":
                return True
    return False


class _Forward:
    """Lets ``call_model`` call a compiled bound ``forward`` like a module."""

    def __init__(self, fn) -> None:
        self.fn = fn

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


def run_check(spec: TrialSpec) -> dict[str, Any]:
    """The check's findings as a JSON-able dict (see :func:`format_check`); with ``check_parts``
    above 1, only this part's traces (:func:`tuner.core.shapes.merge_check_parts` joins them)."""
    import time

    start = time.perf_counter()
    ready = prepare(spec)
    model, inputs, schedule = ready.model, ready.inputs, ready.schedule
    train = spec.task == "train"
    # The traces, in order: the plain one (breaks, numpy), then one per `dynamic` setting over
    # the schedule. Part k of n runs every n-th, so the parts take about the same time.
    traces: list[tuple[str, dict]] = [("breaks", {})]
    if schedule:
        traces += [(str(d).lower() if d is not None else "null", {"dynamic": d}) for d in DYNAMIC_SETTINGS]
        marks = varying_dims([inputs, *schedule])
        if marks:  # what `dynamic: marked` does: exactly the dimensions that vary, from the start
            traces.append((MARKED, {"marks": marks}))
        if reaches_one(marks):  # `marked_unbacked`: no graph of its own for size 0 or 1
            split = split_marks(marks, unbacked=True)
            traces.append((MARKED_UNBACKED, {"marks": split["mark_dynamic"], "unbacked": split["mark_unbacked"],
                                             "shown": split["mark_unbacked"]}))
    mine = [t for i, t in enumerate(traces) if i % spec.check_parts == spec.check_part]
    result: dict[str, Any] = {"schedule": None}
    per_dynamic: dict[str, dict] = {}
    for key, how in mine:
        if key == "breaks":
            result.update(_breaks(model, inputs, train))
            continue
        assert schedule is not None  # every trace but the plain one is over the schedule
        shown = how.pop("shown", how.get("marks"))
        traced = _trace(model, schedule, train=train, **how)
        per_dynamic[key] = {**_over_schedule(traced), **({"marks": shown} if shown else {})}
        if key == "false" and per_dynamic["false"]["recompile_limit_hit"]:  # the limit the space adds
            per_dynamic.update(_raised_limit(model, schedule, distinct_shapes([inputs, *schedule]), train))
    if schedule:
        result["schedule"] = {"length": len(schedule), "dynamic": per_dynamic}
    result["seconds"] = time.perf_counter() - start
    return merge_check_parts([result]) if spec.check_parts == 1 else result


def _breaks(model, inputs, train: bool) -> dict[str, Any]:
    """Graph breaks of one trace, numpy code Dynamo traces, data-dependent Python, fullgraph."""
    default = _trace(model, [inputs], train=train)
    # numpy code traces silently; a second trace with numpy tracing off finds it, and is skipped
    # when no module the model runs in has numpy to call
    without_numpy = _trace(model, [inputs], trace_numpy=False, train=train) if _sees_numpy(model) else default
    known = {(b["file"], b["line"]) for b in default["breaks"]}
    numpy_lines = sorted({(b["file"], b["line"], b["code"]) for b in without_numpy["breaks"]
                          if (b["file"], b["line"]) not in known and "numpy" in b["reason"].lower()})
    data_dependent = [b for b in default["breaks"] if "Data-dependent" in b["reason"] or ".item()" in b["reason"]]
    return {
        "graph_breaks": default["breaks"],
        "graphs": default["graphs"],
        "trace_error": default["error"],
        "numpy": [{"file": f, "line": n, "code": c} for f, n, c in numpy_lines],
        "data_dependent": data_dependent,
        "fullgraph_possible": not default["breaks"] and default["error"] is None,
    }


def _raised_limit(model, schedule, shapes: int, train: bool) -> dict[str, dict]:
    """``dynamic=False`` with the ``recompile_limit`` the space adds for ``shapes`` input shapes."""
    import torch

    added, _ = schedule_settings([False], shapes=shapes, varies=True, listed={},
                                 recompile_limit=torch._dynamo.config.recompile_limit)
    limit = next((s.values[-1] for s in added if s.name == RECOMPILE_LIMIT), None)
    if limit is None:
        return {}
    traced = _trace(model, schedule, dynamic=False, train=train, dynamo={RECOMPILE_LIMIT: limit})
    return {f"false {RECOMPILE_LIMIT}={limit}": _over_schedule(traced)}


def _over_schedule(traced: dict) -> dict[str, Any]:
    return {"recompiles": len(traced["recompiles"]), "graphs": traced["graphs"],
            "recompile_limit_hit": traced["recompile_limit_hit"],
            "reasons": sorted({r["reason"] for r in traced["recompiles"]})[:5], "error": traced["error"]}


def format_check(found: dict[str, Any], name: str) -> str:
    """The check as a person reads it in a terminal."""
    lines = [f"model check: {name} ({found.get('seconds', 0):.1f} s)"]
    breaks = found.get("graph_breaks") or []
    if found.get("trace_error"):
        lines.append(f"  tracing failed: {found['trace_error']}")
    if breaks:
        lines.append(f"  {len(breaks)} graph break(s): the model is split into {found.get('graphs')} graphs")
        for b in breaks:
            lines.append(f"    {_where(b)}  {b['code']}")
            lines.append(f"      why: {b['reason'][:160]}")
            lines.append(f"      fix: {b['hint']}")
    else:
        lines.append("  no graph breaks: the whole forward is one graph")
    for n in found.get("numpy") or []:
        lines.append(f"  numpy at {_where(n)}  {n['code']}")
        lines.append("      Dynamo traces it as torch ops (fine on CPU); torch ops are clearer and run on any device")
    lines.append("  fullgraph=True: " + ("can work" if found.get("fullgraph_possible")
                                         else "will fail until the breaks above are removed"))
    sched = found.get("schedule")
    if sched:
        lines.append(f"  input schedule ({sched['length']} inputs): recompiles by `dynamic` setting:")
        for key, v in sched["dynamic"].items():
            extra = " (hit the recompile limit: later shapes run eagerly)" if v["recompile_limit_hit"] else ""
            extra += f" error: {v['error']}" if v["error"] else ""
            reason = f"  e.g. {v['reasons'][0]}" if v["reasons"] else ""
            marks = " " + ", ".join(f"{k}[{d}] {r[0]}-{r[1]}" for k, dims in v["marks"].items()
                                    for d, r in dims.items()) if v.get("marks") else ""
            lines.append(f"    dynamic={key:5s} {v['recompiles']} recompile(s), {v['graphs']} graph(s)"
                         f"{extra}{reason}{marks}")
        rec = sched["recommended_dynamic"]
        why = {"null": "the default settles after few recompiles",
               "true": "fewest recompiles; static shapes recompile for every new shape",
               "false": "shapes do not vary enough to need dynamic kernels"}[rec]
        lines.append(f"    recommended: dynamic={rec} ({why}); the search measures which is fastest")
    return "\n".join(lines)


def _where(item: dict) -> str:
    from pathlib import Path

    return f"{Path(item['file']).name}:{item['line']}"
