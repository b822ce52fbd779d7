"""vLLM 0.33: its ``compilation_config``, with everything vLLM changes beyond it said.

Read from vLLM 0.33.0 (vllm/config/compilation.py, vllm/v1/worker/gpu_model_runner.py,
vllm/compilation/wrapper.py, vllm/env_override.py; tests/data/ holds the field list the tests check
against). Mode 1, ``STOCK_TORCH_COMPILE``, is plain ``torch.compile``, the pipeline that was
measured: the model runner calls ``model.compile(fullgraph=True, backend=BACKEND)`` and nothing
else, so no mode, inductor option or ``dynamic`` setting reaches it (``inductor_compile_config``
is read only by modes 2 and 3). Mode 3, vLLM's default, splits the graph, captures CUDA graphs per
batch size and runs its own passes: not what was measured.

``cudagraph_mode`` is always pinned: its default differs between releases (PIECEWISE, then
FULL_AND_PIECEWISE from the optimization level), and vLLM main (vllm/config/vllm.py, read 2026)
turns a mode that needs piecewise compilation into NONE outside mode 3. So a config that ran CUDA
graphs (mode reduce-overhead or max-autotune, ``triton.cudagraphs``, the ``cudagraphs`` backend)
on a GPU gets FULL, vLLM's own graphs of the whole forward per batch size, which mode 1 allows; any
other gets NONE. The names are ``CUDAGraphMode``'s in vLLM 0.33.0 (tests/data/ holds them).
"""
from __future__ import annotations

from typing import Any

from ._common import _common_losses, _environment_losses, _lost, _mode_options, _refused, _View
from .parallelism import unsupported_parallelism

#: The vLLM release this export was read from.
VLLM_RELEASE = "0.33.0"
#: What vLLM does in every process beyond the compilation_config (``import vllm`` runs
#: vllm/env_override.py), and, in mode 1, around the compile: each changes what was measured.
VLLM_PROCESS_CHANGES = {
    "TORCHINDUCTOR_COMPILE_THREADS": ("1", "set by `import vllm` in every process: inductor compiles on one thread, "
                                           "so a cold compile takes longer than the one measured"),
    "fullgraph": (True, "the model runner compiles with fullgraph=True: a graph break fails the start-up instead of "
                        "running that code eagerly"),
    "custom_ops": ("none", "appended in mode 1 with inductor: vLLM's own kernels are off and its model's native torch "
                           "ops are compiled"),
}
#: What the other modes would add, and mode 1 does not (said so a reader of vLLM's source
#: does not take them for mode 1's): Dynamo's cache limits raised to 2048 / 8192 around each
#: compiled call, and ``fail_on_recompile`` after the first call when guards are evaluated.
VLLM_OTHER_MODES = ("cache_size_limit 2048 and accumulated_cache_size_limit 8192 around each compiled call, "
                    "set_stance('fail_on_recompile') after the first call (modes 2 and 3 only)")


def _vllm(c: _View) -> dict[str, Any]:
    """vLLM's ``compilation_config``: mode 1 with the measured backend and CUDA graphs, and what it
    drops and changes."""
    if c.precision:
        return _refused(c, "vLLM", "has no autocast or matmul-precision setting (its dtype casts the weights "
                        "themselves, which was not measured)")
    eager: dict[str, Any] = {"compilation_config": {"mode": 0, "cudagraph_mode": "NONE"}, "notes": [],
                             "not_carried": [], "changes_measured": []}
    block = _vllm_compile(c) if c.compiles else eager
    block["not_carried"] += unsupported_parallelism(c, "vLLM", launches=False) + _environment_losses(c, "vLLM")
    return block


def cuda_graphs(c: _View) -> bool:
    """Whether the measured compile ran CUDA graphs: on a GPU (or where the device is not
    recorded), with the cudagraphs backend or inductor's ``triton.cudagraphs`` (its modes set it)."""
    if c.on_cpu or not c.compiles:
        return False
    if c.backend == "cudagraphs":
        return True
    return bool(c.options.get("triton.cudagraphs", _mode_options(c.mode).get("triton.cudagraphs", False)))


def _vllm_compile(c: _View) -> dict[str, Any]:
    graphs = "FULL" if cuda_graphs(c) else "NONE"
    lost = []
    if c.target != "whole":
        lost.append(_lost("target", c.target, "vLLM compiles the forward of its own model as one graph; it has no "
                          "per-module targets"))
    if c.mode:
        lost.append(_lost("mode", c.mode, "mode 1 compiles with torch.compile(fullgraph=True, backend=...) alone: no "
                          "mode reaches it" + ("; its CUDA graphs stand as cudagraph_mode FULL, vLLM's own"
                                               if graphs == "FULL" else "")))
    for k, v in c.options.items():
        lost.append(_lost(f"options.{k}", v, "mode 1 passes no inductor options (inductor_compile_config is read by "
                          "modes 2 and 3 only); `compile-tune export --to env` sets the ones inductor reads from a "
                          "TORCHINDUCTOR_* variable"))
    if c.dynamic is not None:
        lost.append(_lost("dynamic", c.dynamic, "mode 1 passes no dynamic setting; torch's default (None) runs"))
    lost += _common_losses(c, "vLLM")
    changes = [_lost(name, value, why) for name, (value, why) in VLLM_PROCESS_CHANGES.items()
               if not (name == "fullgraph" and c.fullgraph) and not (name == "custom_ops" and c.backend != "inductor")]
    if graphs == "FULL":
        changes.append(_lost("cudagraph_mode", "FULL", "vLLM captures the whole forward once per batch size (its "
                             "capture sizes) and pads a batch up to one; with an attention backend that cannot capture "
                             "mixed prefill-decode batches it lowers FULL to FULL_DECODE_ONLY. The measured CUDA "
                             "graphs were inductor's, recorded per input shape"))
    notes = [f"read from vLLM {VLLM_RELEASE}: mode 1 (STOCK_TORCH_COMPILE) is plain torch.compile, as measured; "
             "vLLM's default mode 3 (VLLM_COMPILE: piecewise graphs, CUDA graphs, custom passes) was not measured",
             f"cudagraph_mode {graphs} is pinned: the default differs between vLLM releases, and outside mode 3 "
             "vLLM turns PIECEWISE and FULL_AND_PIECEWISE into NONE",
             "vLLM runs its own implementation of the model, not the workload file's: the measured speedup is a guide",
             f"not in mode 1: {VLLM_OTHER_MODES}"]
    return {"compilation_config": {"mode": 1, "backend": c.backend, "cudagraph_mode": graphs}, "notes": notes,
            "not_carried": lost, "changes_measured": changes}
