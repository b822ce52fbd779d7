"""vLLM: its ``compilation_config``."""
from __future__ import annotations

from typing import Any

from ..system.config_defaults import inductor_defaults
from ._common import _common_losses, _lost, _mode_options, _refused, _View

#: Inductor options vLLM's ``CompilationConfig.__post_init__`` sets when they are not given
#: (vllm/config/compilation.py at commit ee525ce4, late 2026): pinned to torch's defaults, as measured.
VLLM_INJECTED_OPTIONS = {
    "enable_auto_functionalized_v2": "vLLM sets it False (its custom passes need version 1)",
    "combo_kernels": "vLLM sets it True on a GPU with torch >= 2.9",
    "benchmark_combo_kernel": "vLLM sets it True on a GPU with torch >= 2.9",
}


def _vllm(c: _View) -> dict[str, Any]:
    """vLLM's ``compilation_config``, as documented in vllm-project/vllm vllm/config/compilation.py
    (``CompilationConfig``: ``mode`` 0 NONE / 1 STOCK_TORCH_COMPILE / 3 VLLM_COMPILE, ``backend``,
    ``inductor_compile_config``, ...). Mode 1 is plain torch.compile, the pipeline that was measured;
    vLLM passes ``inductor_compile_config`` as its ``options`` when the backend is inductor."""
    if not c.compiles:
        return {"compilation_config": {"mode": 0}, "notes": [], "not_carried": []}
    if c.precision:
        return _refused(c, "vLLM", "has no autocast or matmul-precision setting (its dtype casts the weights "
                        "themselves, which was not measured)")
    lost = []
    if c.target != "whole":
        lost.append(_lost("target", c.target, "vLLM compiles the forward of its own model as one graph; it has no "
                          "per-module targets"))
    if c.dynamic is not None:
        lost.append(_lost("dynamic", c.dynamic, "vLLM marks the token dimension dynamic itself"))
    if not c.fullgraph:
        lost.append(_lost("fullgraph", False, "vLLM captures the model's forward as one full graph"))
    options = {**_mode_options(c.mode), **c.options}
    if "triton.cudagraphs" in options:
        lost.append(_lost("options.triton.cudagraphs", options.pop("triton.cudagraphs"),
                          "CUDA graphs in vLLM are its own cudagraph_mode, captured per batch size"))
    lost += _common_losses(c, "vLLM")
    settings: dict[str, Any] = {"mode": 1, "backend": c.backend}
    if c.backend == "inductor":
        defaults = inductor_defaults()
        pinned = {k: defaults[k] for k in VLLM_INJECTED_OPTIONS if k not in options and k in defaults}
        options.update(pinned)
    if options:
        settings["inductor_compile_config"] = options
    notes = ["mode 1 (STOCK_TORCH_COMPILE) is plain torch.compile, as measured; vLLM's default mode 3 "
             "(VLLM_COMPILE: piecewise graphs, CUDA graphs, custom passes) was not measured",
             "vLLM runs its own implementation of the model, not the workload file's: the measured speedup is a guide"]
    if c.backend == "inductor":
        notes.append("pinned to torch's defaults, as measured: " + "; ".join(
            f"{k} ({why})" for k, why in VLLM_INJECTED_OPTIONS.items()))
    return {"compilation_config": settings, "notes": notes, "not_carried": lost}
