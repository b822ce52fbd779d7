"""accelerate (its config file, ACCELERATE_DYNAMO_* variables, TorchDynamoPlugin) and the Hugging
Face Trainer (TrainingArguments, which builds the same plugin)."""
from __future__ import annotations

from typing import Any

from ._common import _common_losses, _environment_losses, _lost, _mode_options, _option_losses, _View
from .parallelism import accelerate_parallelism, trainer_parallelism

#: The backends accelerate's ``TorchDynamoPlugin`` accepts (its ``DynamoBackend``, accelerate
#: 1.16.0); the Hugging Face Trainer builds the same plugin. tests/test_export.py checks the list
#: against the installed accelerate.
ACCELERATE_BACKENDS = (
    "eager", "aot_eager", "inductor", "aot_ts_nvfuser", "nvprims_nvfuser", "cudagraphs", "ofi", "fx2trt",
    "onnxrt", "tensorrt", "aot_torchxla_trace_once", "torchxla_trace_once", "tvm", "hpu_backend", "neuron",
)


#: accelerate's ``mixed_precision`` for a config's precision. For tf32 it stays "no": accelerate
#: itself sets ``torch.backends.cuda.matmul.allow_tf32 = True`` (= float32 matmul precision "high")
#: when it compiles on CUDA with mixed_precision "no" (accelerate/state.py, AcceleratorState).
_ACCELERATE_MIXED_PRECISION = {"bf16": "bf16", "tf32": "no"}
_ACCELERATE_NOTES = {
    "bf16": "mixed_precision bf16 (in Python: Accelerator(mixed_precision=\"bf16\", ...)): accelerate runs the "
            "model's forward under torch.autocast(dtype=torch.bfloat16), as measured, and converts its outputs to "
            "float32 (the same values)",
    "tf32": "precision tf32: accelerate turns on TF32 matmuls itself when it compiles on CUDA with mixed_precision "
            "no, as measured",
}


def _accelerate_settings(c: _View, tool: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The TorchDynamoPlugin fields (backend, mode, fullgraph, dynamic, use_regional_compilation)
    that accelerate and the HF Trainer carry, or None for "do not compile", and what they lose."""
    if not c.compiles:
        return None, []
    if c.backend not in ACCELERATE_BACKENDS:
        return None, [_lost("backend", c.backend, f"not a backend accelerate's TorchDynamoPlugin accepts "
                            f"({', '.join(ACCELERATE_BACKENDS)}); this export does not compile")]
    lost = []
    regional = c.target == "blocks"
    if regional:
        lost.append(_lost("target", "blocks", "accelerate's regional compilation compiles each module of every "
                          "ModuleList of same-class modules and also every other submodule, each separately; the "
                          "measured config compiled only the repeated blocks and ran the rest eagerly. It finds "
                          "blocks only in an nn.ModuleList of one class: a model whose blocks sit in an "
                          "nn.Sequential (or in attributes of their own) gets the whole model compiled instead"))
    elif c.target != "whole":
        lost.append(_lost("target", c.target, f"{tool} compiles the whole model or, regionally, its repeated "
                          "blocks, never chosen modules; this export compiles the whole model"))
    lost += _option_losses(c, tool) + _common_losses(c, tool)
    plugin = {"backend": c.backend, "mode": c.mode or "default", "fullgraph": c.fullgraph, "dynamic": c.dynamic,
              "use_regional_compilation": regional}
    return plugin, lost


def _dynamo_env(plugin: dict[str, Any] | None) -> tuple[dict[str, str], list[str]]:
    """The ACCELERATE_DYNAMO_* variables TorchDynamoPlugin() reads, and those to unset: an unset
    ACCELERATE_DYNAMO_USE_DYNAMIC is how the plugin keeps dynamic=None."""
    if plugin is None:
        return {"ACCELERATE_DYNAMO_BACKEND": "NO"}, []
    env = {
        "ACCELERATE_DYNAMO_BACKEND": plugin["backend"].upper(),
        "ACCELERATE_DYNAMO_MODE": plugin["mode"],
        "ACCELERATE_DYNAMO_USE_FULLGRAPH": str(plugin["fullgraph"]),
        "ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION": str(plugin["use_regional_compilation"]),
    }
    if plugin["dynamic"] is None:
        return env, ["ACCELERATE_DYNAMO_USE_DYNAMIC"]
    env["ACCELERATE_DYNAMO_USE_DYNAMIC"] = str(plugin["dynamic"])
    return env, []


def _accelerate(c: _View) -> dict[str, Any]:
    """accelerate's config file (every key of it the measured config sets, checked against
    accelerate's ``ClusterConfig``), the ACCELERATE_* variables and the plugin for runs without
    ``accelerate launch``, and what none of them carries."""
    block = _accelerate_compile(c)
    keys, dp_lost, dp_changes, notes = accelerate_parallelism(c)
    if keys:  # tuned on many ranks (tuner/export/parallelism.py)
        block["parallelism"] = keys
    block["config_file"] = {
        "compute_environment": "LOCAL_MACHINE", "distributed_type": "NO", "num_processes": 1, "num_machines": 1,
        **{k: v for k, v in keys.items() if k != "python"}, **({"use_cpu": True} if c.on_cpu else {}),
        "mixed_precision": block.get("mixed_precision", "no"), "dynamo_config": block.pop("dynamo_config")}
    block["not_carried"] = block["not_carried"] + dp_lost + _environment_losses(c, "accelerate")
    block["changes_measured"] = block.get("changes_measured", []) + dp_changes
    block["notes"] = block.get("notes", []) + notes
    return block


def _accelerate_compile(c: _View) -> dict[str, Any]:
    plugin, lost = _accelerate_settings(c, "accelerate")
    env, unset = _dynamo_env(plugin)
    if plugin is None:
        return {"dynamo_config": {"dynamo_backend": "NO"}, "env": env, "unset": unset, "plugin": {"backend": "no"},
                "not_carried": lost}
    dynamo_config = {"dynamo_backend": plugin["backend"].upper(), "dynamo_mode": plugin["mode"],
                     "dynamo_use_fullgraph": plugin["fullgraph"]}
    notes = []
    if c.dynamic is None:  # absent, accelerate launch 1.16 leaves ACCELERATE_DYNAMO_USE_DYNAMIC unset: None holds
        notes.append("dynamic=None: dynamo_use_dynamic is left out, which accelerate launch 1.16 passes on as None "
                     "(older releases passed False)")
    else:
        dynamo_config["dynamo_use_dynamic"] = c.dynamic
    dynamo_config["dynamo_use_regional_compilation"] = plugin["use_regional_compilation"]
    if c.options:
        # TorchDynamoPlugin(options=...) reaches torch.compile (its to_kwargs() passes the fields that differ
        # from the defaults); torch.compile takes a mode or options, not both, so the mode's options go in too
        plugin = {**plugin, "mode": "default", "options": {**_mode_options(c.mode), **c.options}}
        only_plugin = ("carried by `plugin` only (Python: TorchDynamoPlugin(options=...)); accelerate's config file "
                       "and its ACCELERATE_DYNAMO_* variables have no setting for inductor options")
        lost = [dict(x, why=only_plugin) if x["setting"].startswith("options.") else x for x in lost]
    block = {"dynamo_config": dynamo_config, "env": env, "unset": unset, "plugin": plugin, "not_carried": lost,
             "changes_measured": _accelerate_tf32(c, "accelerate")}
    if c.precision:  # a top-level key of accelerate's config file; Accelerator() reads the variable
        block["mixed_precision"] = env["ACCELERATE_MIXED_PRECISION"] = _ACCELERATE_MIXED_PRECISION[c.precision]
        notes.append(_ACCELERATE_NOTES[c.precision])
    block["notes"] = notes
    return block


def _hf_trainer(c: _View) -> dict[str, Any]:
    """TrainingArguments: the compile fields, precision and the DDP/FSDP2 fields; the launcher
    starts the processes, and the environment holds what neither says (the heap pin, threads)."""
    block = _trainer_compile(c)
    fields, dp_lost, dp_changes = trainer_parallelism(c)
    block["training_args"].update(fields)
    block["not_carried"] = block["not_carried"] + dp_lost + _environment_losses(c, "the Trainer")
    block["changes_measured"] = block.get("changes_measured", []) + dp_changes
    return block


def _trainer_compile(c: _View) -> dict[str, Any]:
    """TrainingArguments carry backend and mode; the Trainer's TorchDynamoPlugin reads fullgraph,
    dynamic and regional compilation from ACCELERATE_DYNAMO_* (transformers 5.x, Trainer)."""
    plugin, lost = _accelerate_settings(c, "the Hugging Face Trainer")
    if plugin is None:
        return {"training_args": {"torch_compile": False}, "env": {}, "unset": [], "not_carried": lost}
    args: dict[str, Any] = {"torch_compile": True, "torch_compile_backend": c.backend}
    if c.mode:
        args["torch_compile_mode"] = c.mode
    env, unset = _dynamo_env(plugin)
    env = {k: v for k, v in env.items() if k not in ("ACCELERATE_DYNAMO_BACKEND", "ACCELERATE_DYNAMO_MODE")}
    if c.precision == "bf16":
        # The Trainer's accelerator autocasts the forward; tf32 False, because with torch_compile and bf16 the
        # Trainer would also turn TF32 matmuls on (TrainingArguments.__post_init__), which was not measured.
        args.update(bf16=True, tf32=False)
    elif not c.precision:
        # float32 as measured: with torch_compile and tf32 left None, TrainingArguments.__post_init__ turns TF32 on
        # for every float32 op, convolutions included (transformers 5.24, on CUDA compute capability >= 8.0)
        args["tf32"] = False
    changes = _accelerate_tf32(c, "the Trainer (through accelerate)")
    if c.precision == "tf32":
        args["tf32"] = True
        changes.append(_lost("tf32", True, "TrainingArguments(tf32=True) sets torch.backends.fp32_precision = "
                             "'tf32' (transformers 5.x, torch >= 2.9): TF32 for every float32 operation, cuDNN "
                             "convolutions included; the measured config set torch.set_float32_matmul_precision"
                             "('high'), matmuls only"))
    return {"training_args": args, "env": env, "unset": unset, "not_carried": lost, "changes_measured": changes}


def _accelerate_tf32(c: _View, tool: str) -> list[dict[str, Any]]:
    """accelerate's AcceleratorState turns TF32 matmuls on whenever it compiles on CUDA with
    mixed_precision "no" (accelerate/state.py, 1.16): a float32 config then runs TF32 matmuls."""
    if not c.compiles or c.precision:
        return []
    return [_lost("torch.backends.cuda.matmul.allow_tf32", True, f"on CUDA, {tool} sets it whenever it compiles with "
                  "mixed_precision 'no' (TF32 matmuls); the measured config ran float32 matmuls. Set it back to "
                  "False after the Accelerator is built to run what was measured")]

