"""Inside the trial process (``mode="startup"``): the first step of an applied config, timed from
a fresh process, cold or from the warm-start bundle (tuner/ship/bundle.py writes and times both).
"""
from __future__ import annotations

import time
import warnings
from pathlib import Path

from ..core.config import CompileConfig
from ..export.best_config import load_tuned_config
from ..runtime import precompiled
from ..runtime.apply import apply_config
from ..user.workload import call_model
from .correctness import compare
from .devices import sync
from .setup import prepare
from .steps import Step


def cache_counters() -> dict[str, int]:
    """Inductor's FX-graph cache and AOTAutograd's cache: hits, misses and bypasses in this process
    so far (torch._dynamo.utils.counters), so a warm start is known to hit, not assumed to."""
    from torch._dynamo.utils import counters

    found = {f"fxgraph_{k}": counters["inductor"].get(f"fxgraph_cache_{k}", 0) for k in ("hit", "miss", "bypass")}
    found.update({f"autograd_{k}": counters["aot_autograd"].get(f"autograd_cache_{k}", 0)
                  for k in ("hit", "miss", "bypass")})
    return {k: int(v) for k, v in found.items()}


def _precompiled_use(model, caught, expected, out, tolerance: float | None) -> dict:
    """Whether the first step ran the precompiled forward, and whether it matched eager."""
    forward = vars(model).get("forward")
    if isinstance(forward, precompiled.PrecompiledForward) and forward.fell_back is None:
        return {"precompiled_used": True,
                "precompiled_mismatch": compare(expected, out, tol=tolerance if tolerance is not None else 1e-3)}
    refused = [str(w.message) for w in caught if "precompiled" in str(w.message)]
    return {"precompiled_used": False, "precompiled_refused": refused[0] if refused else "not installed"}


def measure_start(spec, rec) -> None:
    """First step of the applied config in this fresh process (``mode="startup"``).

    With ``spec.config_path`` the config is applied from the YAML file, exactly as a user does
    (loading the bundled cache); otherwise from ``spec.config``. With ``spec.save_artifacts_to``
    the mega-cache artifacts are written there after the first step.
    """
    import torch

    ready = prepare(spec, schedule=False)
    workload, model, inputs = ready.workload, ready.model, ready.inputs
    tuned = load_tuned_config(spec.config_path) if spec.config_path else None
    config = tuned.config if tuned else CompileConfig.from_dict(spec.config)
    expected = None
    if tuned and tuned.measured.get(precompiled.CHOICE_KEY) == "precompiled":
        with torch.no_grad():  # the precompiled forward is checked against eager: it is new code
            expected = call_model(model, inputs)
    sync(spec.device)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        apply_config(model, spec.config_path or config)
        loaded = time.perf_counter() - start
        stepper = Step(model, spec.task, workload)
        stepper.adopt(config)
        out = stepper(inputs)  # a precompiled forward that falls back to torch.compile warns here
        sync(spec.device)
        first = time.perf_counter() - start
    refused = [str(w.message) for w in caught if "not loading the saved compile cache" in str(w.message)]
    if expected is not None:
        rec.update(**_precompiled_use(model, caught, expected, out, spec.tolerance))
    rec.update(first_step_s=first, cache_load_s=loaded, cache_refused=refused[0] if refused else None,
               cache_counters=cache_counters())
    if spec.save_artifacts_to and hasattr(torch.compiler, "save_cache_artifacts"):
        saved = torch.compiler.save_cache_artifacts()
        if saved is not None:
            Path(spec.save_artifacts_to).write_bytes(saved[0])
    rec.update(status="ok", stage="done")
