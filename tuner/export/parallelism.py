"""What the tools carry of a config tuned on many ranks (``tuned_on.data_parallel``: DDP or FSDP2,
with ``config.data_parallel``'s settings, tuner/core/data_parallel.py), and what they cannot.

Read from the tools' own code:

- accelerate 1.16: the config file holds ``num_processes``, ``num_machines``, ``distributed_type``
  and FSDP2's ``fsdp_config`` (``fsdp_version: 2``, ``fsdp_reshard_after_forward``,
  ``fsdp_auto_wrap_policy``, ``fsdp_transformer_layer_cls_to_wrap``); DDP's bucket size exists only
  in Python (``DistributedDataParallelKwargs(bucket_cap_mb=...)``, 25 MB by default, DDP's own).
  ``accelerate launch`` starts many CPU processes only through mpirun (``mpirun_config``): without
  it a MULTI_CPU config runs one process. Under FSDP with ``mixed_precision: bf16`` it also casts
  the parameters (``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=bf16)``) besides autocast.
  Its ``fsdp2_prepare_model`` shards the root differently by release: up to 1.13 it ends with
  ``fully_shard(model, **fsdp2_kwargs)``, so the root takes ``fsdp_reshard_after_forward`` too
  (resharded after forward where it is true, gathered again as backward starts); from 1.14
  (huggingface/accelerate#4015) the root gets fully_shard's default, kept gathered as measured, but
  a Hugging Face model's input embeddings become a unit of their own with that setting, and the
  last ``*Norm*`` child with the output layer another, kept gathered. The Trainer shards through it.
- transformers 5.x ``TrainingArguments``: ``ddp_bucket_cap_mb``, ``ddp_find_unused_parameters``
  (left unset, the Trainer passes ``find_unused_parameters=True`` for a model that is not a
  ``PreTrainedModel``), ``fsdp``/``fsdp_config``; the processes come from the launcher.
- torchtitan 0.3.0 (and its main branch, read 2026): no DDP and no ``bucket_cap_mb``:
  ``data_parallel_replicate_degree`` runs FSDP2's ``fully_shard`` over a replicate mesh
  (``apply_fsdp_to_decoder``), so gradients are all-reduced per sharded unit (each block, the
  embeddings, the norm and output together), not in DDP buckets, and nothing sets
  ``torch._dynamo.config.optimize_ddp``. ``parallelism.fsdp_reshard_after_forward`` (``always``,
  ``never``) applies to the blocks; the root's ``fully_shard`` takes fully_shard's default, which
  keeps the root's parameters gathered after forward, as the tuner's own FSDP2 wrap does since
  2026-12-04; torchtitan keeps the norm and output gathered, never the last block.
"""
from __future__ import annotations

from typing import Any

from ..core.data_parallel import describe_data_parallel, resolved
from ._common import _lost, _View, launch_line

#: accelerate's ``DistributedDataParallelKwargs`` defaults for the DDP settings the tuner measures
#: or leaves at DDP's own default (accelerate 1.16; tests/test_export.py checks them).
ACCELERATE_DDP_DEFAULTS = {"bucket_cap_mb": 25, "find_unused_parameters": False, "gradient_as_bucket_view": False,
                           "static_graph": False, "broadcast_buffers": True}
_FIND_BLOCKS = "tuner.find_block_classes(model) names it"
#: The first accelerate release whose fsdp2_prepare_model leaves the root at fully_shard's default
#: (tests/test_export.py checks the installed accelerate's against it).
ACCELERATE_ROOT_KEPT = "1.14"
#: torch's FSDPModule method, on the root alone: gathered after forward, as the measured run kept it.
KEEP_ROOT_GATHERED = "model.set_reshard_after_forward(False, recurse=False)"
_KEEP_EMBEDDINGS = ["embed = model.get_input_embeddings() if hasattr(model, 'get_input_embeddings') else None",
                    "if hasattr(embed, 'set_reshard_after_forward'):  # a unit of its own (accelerate >= 1.14)",
                    "    embed.set_reshard_after_forward(False)"]
#: The Trainer prepares the model inside train(); a callback's on_train_begin runs after that, before
#: the first forward, and gets the sharded root (FSDP2 shards in place, so it is the model passed in).
TRAINER_KEEP_GATHERED = ["from transformers import TrainerCallback",
                         "class KeepGathered(TrainerCallback):  # Trainer(..., callbacks=[KeepGathered()])",
                         "    def on_train_begin(self, args, state, control, model=None, **kwargs):",
                         f"        {KEEP_ROOT_GATHERED}",
                         *(f"        {line}" for line in _KEEP_EMBEDDINGS)]


def settings_of(c: _View) -> dict[str, Any] | None:
    """Every data-parallel setting the config was measured with, or None for one process."""
    wrap = (c.tuned_on or {}).get("data_parallel")
    return resolved(c.data_parallel, wrap) if wrap else None


def _total(c: _View) -> int:
    return c.nproc * c.nnodes


def _optimize_ddp_lost(dp: dict[str, Any], tool: str) -> list[dict[str, Any]]:
    if dp.get("optimize_ddp", "ddp_optimizer") == "ddp_optimizer":
        return []  # FSDP2, or torch's default, which a tool that does not touch it keeps
    return [_lost("data_parallel.optimize_ddp", dp["optimize_ddp"], f"{tool} does not set "
                  "torch._dynamo.config.optimize_ddp (torch's default is ddp_optimizer); set it before the first "
                  "compiled call", [f'torch._dynamo.config.optimize_ddp = "{dp["optimize_ddp"]}"'])]


def _last_block_lost(dp: dict[str, Any], why: str) -> list[dict[str, Any]]:
    """The measured FSDP2 run kept its last block gathered after forward (backward needs it first)."""
    if not dp.get("keep_last_block_gathered"):
        return []
    return [_lost("data_parallel.keep_last_block_gathered", True, f"{why}; tuner.apply_config shards as measured",
                  ["model = tuner.apply_config(model, BEST_CONFIG)"])]


def _block_class_lost(c: _View, key: str, tool: str) -> list[dict[str, Any]]:
    if c.block_class:
        return []
    return [_lost(key, None, f"the measured run sharded every instance of the model's repeated block class, then the "
                  f"model; {tool} wraps the classes named here, else a Hugging Face model's _no_split_modules, else "
                  f"none (every parameter in one unit). Name the class ({_FIND_BLOCKS})",
                  [f"{key}: BlockClassName"])]


def _bf16_cast(c: _View, dp: dict[str, Any], tool: str) -> list[dict[str, Any]]:
    if dp["wrap"] != "fsdp2" or c.precision != "bf16":
        return []
    return [_lost("fsdp mixed precision policy", "param_dtype=bfloat16, reduce_dtype=bfloat16", f"{tool} gives FSDP2 "
                  "a MixedPrecisionPolicy under bf16: parameters are cast to bfloat16 and gradients reduced in it, "
                  "besides the autocast; the measured config ran autocast alone (float32 parameters and reductions)")]


def _fsdp2_units(dp: dict[str, Any], tool: str, root_fix: list[str], embeddings_fix: list[str]
                 ) -> list[dict[str, Any]]:
    """What accelerate's ``fsdp2_prepare_model`` (so the Trainer too) shards otherwise than the measured
    run, which sharded the blocks, then the root with fully_shard's default: kept gathered after
    forward, since backward needs it at once (tuner/runtime/parallel_wrap.py: shard)."""
    if dp["wrap"] != "fsdp2":
        return []
    changes = []
    if dp["reshard_after_forward"]:
        changes.append(_lost(
            "root reshard_after_forward", True, f"before accelerate {ACCELERATE_ROOT_KEPT}, {tool} shards the root "
            "last, with fully_shard(model, reshard_after_forward=True) (fsdp2_prepare_model passes it "
            "fsdp_reshard_after_forward): "
            "the root's parameters are freed after forward and all-gathered again as backward starts; the measured "
            f"run kept them gathered (fully_shard's default for a root, which accelerate {ACCELERATE_ROOT_KEPT} and "
            "later keep). Restore it with torch's FSDPModule.set_reshard_after_forward, a no-op where the root is "
            "kept already", root_fix))
        changes.append(_lost(
            "input embeddings reshard_after_forward", True, f"from accelerate {ACCELERATE_ROOT_KEPT}, {tool} "
            "shards a Hugging Face model's input embeddings (get_input_embeddings(), not tied to the output "
            "layer) as a unit of their own with fsdp_reshard_after_forward: freed after forward and all-gathered "
            "again in backward; the measured run had them in the root's unit, kept gathered"
            + ("" if embeddings_fix else " (the lines under root reshard_after_forward keep them so too)"),
            embeddings_fix))
    changes.append(_lost(
        "fsdp units", "+ the last *Norm* child with the output layer", f"from accelerate "
        f"{ACCELERATE_ROOT_KEPT}, {tool} also shards the model's last direct child whose class name holds 'Norm' "
        "(a Hugging Face model's: its base model's) with the output layer (get_output_embeddings()) as one more "
        "unit, kept gathered after forward; the measured run had them in the root's unit: the same parameters "
        "gathered, in one more all-gather and reduce-scatter a step"))
    return changes


def accelerate_parallelism(c: _View) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]],
                                               list[str]]:
    """``(config file keys and the Python line, not carried, changes, notes)`` for accelerate."""
    dp = settings_of(c)
    if dp is None:
        return {}, [], [], []
    keys: dict[str, Any] = {"num_processes": _total(c), "num_machines": c.nnodes,
                            "distributed_type": "MULTI_CPU" if c.on_cpu else "MULTI_GPU"}
    lost, notes = _optimize_ddp_lost(dp, "accelerate"), []
    if dp["wrap"] == "fsdp2":
        keys["distributed_type"] = "FSDP"
        keys["fsdp_config"] = {"fsdp_version": 2, "fsdp_reshard_after_forward": dp["reshard_after_forward"],
                               "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP"}
        if c.block_class:
            keys["fsdp_config"]["fsdp_transformer_layer_cls_to_wrap"] = c.block_class
        lost += _block_class_lost(c, "fsdp_transformer_layer_cls_to_wrap", "accelerate")
        lost += _last_block_lost(dp, "accelerate's fsdp_config has one fsdp_reshard_after_forward for every "
                                 "wrapped layer")
    else:
        line = f"Accelerator(kwargs_handlers=[DistributedDataParallelKwargs(bucket_cap_mb={dp['bucket_cap_mb']:g})])"
        keys["python"] = line
        fix = ["from accelerate.utils import DistributedDataParallelKwargs", line]
        if dp["bucket_cap_mb"] != ACCELERATE_DDP_DEFAULTS["bucket_cap_mb"]:
            lost.insert(0, _lost("data_parallel.bucket_cap_mb", dp["bucket_cap_mb"], "accelerate's config file has no "
                                 "DDP bucket size (accelerate's default is 25 MB); build the Accelerator with it",
                                 fix))
        else:
            notes.append(f"DDP bucket {dp['bucket_cap_mb']:g} MB is accelerate's default, as measured (to pin it: "
                         f"{line})")
    if c.on_cpu:
        lost.insert(0, _lost("processes", _total(c), "on CPU, accelerate launch starts the processes only through "
                             "mpirun (mpirun_config: {mpirun_hostfile: FILE}); without it it starts one. Or start "
                             "them with torchrun, with the ACCELERATE_* variables above set (the config file is read "
                             "by accelerate launch only)",
                             [f"ACCELERATE_USE_CPU=true {launch_line(c)}"]))
    if c.nnodes > 1:
        notes.append("on each machine, add machine_rank (0 to machines - 1), main_process_ip and main_process_port")
    prepared = "after model = accelerator.prepare(model)"
    units = _fsdp2_units(dp, "accelerate", [f"{KEEP_ROOT_GATHERED}  # {prepared}"],
                         [f"{_KEEP_EMBEDDINGS[0]}  # {prepared}", *_KEEP_EMBEDDINGS[1:]])
    return keys, lost, _bf16_cast(c, dp, "accelerate") + units, notes


def trainer_parallelism(c: _View) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """``(TrainingArguments fields, not carried, changes)`` for the Hugging Face Trainer."""
    dp = settings_of(c)
    if dp is None:
        return {}, [], []
    lost = [_lost("processes", _total(c), "TrainingArguments hold no process count: the launcher starts them "
                  f"({c.nnodes} machine(s)); launch the training script with", [launch_line(c),
                  f"or: accelerate launch --num_processes {_total(c)} --num_machines {c.nnodes} train.py"])]
    lost += _optimize_ddp_lost(dp, "the Trainer")
    if dp["wrap"] == "ddp":
        return {"ddp_bucket_cap_mb": dp["bucket_cap_mb"], "ddp_find_unused_parameters": False}, lost, []
    fsdp_config: dict[str, Any] = {"version": 2, "reshard_after_forward": dp["reshard_after_forward"],
                                   "auto_wrap_policy": "TRANSFORMER_BASED_WRAP"}
    if c.block_class:
        fsdp_config["transformer_layer_cls_to_wrap"] = [c.block_class]
    lost += _block_class_lost(c, "fsdp_config.transformer_layer_cls_to_wrap", "the Trainer")
    lost += _last_block_lost(dp, "the Trainer's fsdp_config has one reshard_after_forward for every wrapped layer")
    changes = _bf16_cast(c, dp, "the Trainer (through accelerate)")
    changes += _fsdp2_units(dp, "the Trainer", TRAINER_KEEP_GATHERED, [])
    return {"fsdp": True, "fsdp_config": fsdp_config}, lost, changes


def torchtitan_parallelism(c: _View) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """``(parallelism fields, not carried, changes)`` for torchtitan."""
    dp = settings_of(c)
    if dp is None:
        return {}, [], []
    if dp["wrap"] == "fsdp2":
        policy = "always" if dp["reshard_after_forward"] else "never"
        # The root is sharded with fully_shard's default in both (tuner/runtime/parallel_wrap.py: shard).
        lost = _last_block_lost(dp, "torchtitan 0.3 keeps the norm and output layers gathered after forward, "
                                "never the last block")
        return {"data_parallel_shard_degree": _total(c), "fsdp_reshard_after_forward": policy}, lost, []
    lost = [_lost("data_parallel.wrap", "ddp", "torchtitan 0.3 has no DistributedDataParallel: "
                  "data_parallel_replicate_degree runs FSDP2's fully_shard over a replicate mesh (the same "
                  "gradients, all-reduced per sharded unit)")]
    lost.append(_lost("data_parallel.optimize_ddp", dp["optimize_ddp"], "torchtitan runs no DDP, so Dynamo's DDP "
                      "graph splitting does not apply: each compiled block is one graph"))
    changes = [_lost("data_parallel.bucket_cap_mb", "per sharded unit", "torchtitan's replicate (FSDP2) all-reduces "
                     "the gradients of each block, of the embeddings and of the norm and output as one group each; "
                     f"the measured DDP used {dp['bucket_cap_mb']:g} MB buckets (the overlap differs)")]
    return {"data_parallel_replicate_degree": _total(c), "data_parallel_shard_degree": 1}, lost, changes


def unsupported_parallelism(c: _View, tool: str, launches: bool) -> list[dict[str, Any]]:
    """What a tool that wraps no model for many ranks loses of a config tuned on many: environment
    variables (``launches``: named with the torchrun line and apply_config, which do it) or vLLM,
    which serves inference and has no counterpart for a training wrap."""
    dp = settings_of(c)
    if dp is None:
        return []
    measured = f"{describe_data_parallel(dp)} on {_total(c)} processes ({c.nnodes} machine(s))"
    if not launches:
        return [_lost("data_parallel", measured, f"{tool} serves inference; it starts no training processes and "
                      "wraps no model for them")]
    return [_lost("processes", _total(c), f"{tool} start no processes; torchrun starts the measured ones",
                  [launch_line(c)]),
            _lost("data_parallel", describe_data_parallel(dp), f"{tool} wrap no model; tuner.apply_config(model, "
                  "PATH_TO_best_config.yaml) in the script torchrun starts wraps it as measured")]
