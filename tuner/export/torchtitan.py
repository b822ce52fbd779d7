"""torchtitan 0.3: ``Trainer.Config``'s ``compile``, ``training`` and ``parallelism`` fields, as
command-line overrides.

Read from torchtitan 0.3.0 (torchtitan/distributed/compile.py, torchtitan/distributed/fsdp.py,
torchtitan/models/llama3/parallelize.py): every model is wrapped by ``fully_shard`` with a
``MixedPrecisionPolicy`` built from ``training.mixed_precision_param``, one device included; no
``torch.autocast`` runs (0.2 autocast on one device and under DDP).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._common import _common_losses, _environment_losses, _lost, _option_losses, _refused, _View, launch_line
from .parallelism import torchtitan_parallelism

#: What torchtitan's ``apply_compile`` sets for the whole process before it compiles
#: (torchtitan/distributed/compile.py, torchtitan 0.3.0).
TORCHTITAN_PROCESS_SETTINGS = {
    "capture_scalar_outputs": "needed, it says, for data-dependent shapes in mixture-of-experts dispatch",
    "skip_fwd_side_effects_in_bwd_under_checkpoint": "skips replaying forward side effects under activation "
                                                     "checkpointing",
}


def _torchtitan(c: _View) -> dict[str, Any]:
    """torchtitan 0.3's ``Trainer.Config`` fields, as command-line overrides: ``compile``
    (``CompileConfig``: ``enable``, ``components``, ``backend``), ``training.mixed_precision_param``
    and, tuned on many ranks, ``parallelism``'s data-parallel degrees. Its ``apply_compile`` compiles
    each block of ``model.layers`` with ``torch.compile(block, backend=..., fullgraph=True)`` and
    nothing else, after setting two Dynamo flags for the whole process
    (:data:`TORCHTITAN_PROCESS_SETTINGS`)."""
    if c.precision == "tf32":
        return _refused(c, "torchtitan", "has no setting for the float32 matmul precision")
    eager: dict[str, Any] = {"compile": {"enable": False}, "not_carried": [], "changes_measured": []}
    block = _titan_compile(c) if c.compiles else eager
    # The parameter dtype is pinned: torchtitan defaults mixed_precision_param to bfloat16 and applies it on every
    # run (FSDP2's MixedPrecisionPolicy, one device included), which was not measured in float32, eager included.
    block["training"] = {"mixed_precision_param": "bfloat16" if c.precision == "bf16" else "float32"}
    parallelism, dp_lost, dp_changes = torchtitan_parallelism(c)
    if parallelism:  # tuned on many ranks: the data-parallel degree and settings (tuner/export/parallelism.py)
        block["parallelism"] = parallelism
    block["not_carried"] += dp_lost + _environment_losses(c, "torchtitan")
    block["changes_measured"] += dp_changes
    if c.precision == "bf16":
        block["changes_measured"].append(_lost(
            "training.mixed_precision_param", "bfloat16", "torchtitan 0.3 applies it as FSDP2's MixedPrecisionPolicy "
            "on every run, one device included (fully_shard at degree 1): the parameters are cast to bfloat16 and "
            "every op computes in it, norms, softmax and the loss included; the measured config ran "
            "torch.autocast(dtype=torch.bfloat16), which keeps those in float32. It rounds differently from what was "
            "measured"))
        block["notes"] = ["precision bf16 is carried as torchtitan's nearest setting, mixed_precision_param "
                          "bfloat16, which is not autocast (see CHANGES WHAT WAS MEASURED)"]
    else:
        block["notes"] = ["training.mixed_precision_param is pinned to float32, as measured: torchtitan's default "
                          "is bfloat16, applied by FSDP2's MixedPrecisionPolicy even on one device"]
    if parallelism:
        block["notes"].append(f"start the measured processes: {launch_line(c, '-m torchtitan.train ...')} (torchtitan "
                              "checks that the degrees above multiply to the processes started)")
    return block


def _titan_compile(c: _View) -> dict[str, Any]:
    """The ``compile`` section, what it drops of the measured compile and what torchtitan adds."""
    lost = []
    if c.target != "blocks":
        lost.append(_lost("target", c.target, "torchtitan compiles each block of model.layers separately (regional "
                          "compilation), never the whole model or modules chosen by name"))
    if not c.fullgraph:
        lost.append(_lost("fullgraph", False, "torchtitan compiles every block with fullgraph=True: a graph break "
                          "fails the run instead of falling back to eager"))
    if c.mode:
        lost.append(_lost("mode", c.mode, "torchtitan's CompileConfig has no mode; the default mode runs"))
    if c.dynamic is not None:
        lost.append(_lost("dynamic", c.dynamic, "torchtitan's CompileConfig has no dynamic setting"))
    lost += _option_losses(c, "torchtitan") + _common_losses(c, "torchtitan")
    changes = [_lost(f"dynamo.{name}", True, f"torchtitan's apply_compile sets it for the whole process ({why}); "
                     "the measured config ran with torch's default")
               for name, why in TORCHTITAN_PROCESS_SETTINGS.items() if c.dynamo.get(name) is not True]
    # "loss" is left out of the components: the tuner measured the model's compile, not a compiled loss function.
    return {"compile": {"enable": True, "components": ["model"], "backend": c.backend}, "not_carried": lost,
            "changes_measured": changes}


def torchtitan_arguments(block: Mapping[str, Any]) -> list[str]:
    """The torchtitan block as its command-line overrides (tyro: ``--section.field value``)."""
    args = []
    for section in ("compile", "training", "parallelism"):  # the sections a block holds (Trainer.Config's)
        for name, value in (block.get(section) or {}).items():
            flag = f"--{section}.{name}"
            if isinstance(value, bool):
                args.append(flag if value else f"--{section}.no-{name}")
            elif isinstance(value, list):
                args += [flag, *map(str, value)]
            else:
                args += [flag, str(value)]
    return args
