"""What the tools carry of a config tuned on many ranks (``tuned_on.data_parallel``: DDP or FSDP2,
with ``config.data_parallel``'s settings, tuner/core/data_parallel.py), and what they cannot.

Read from the tools' own code: torchtitan's ``apply_ddp`` wraps with
``replicate(model, bucket_cap_mb=100)`` and sets ``optimize_ddp = "ddp_optimizer"`` when it
compiles (``python_reducer_without_compiled_forward`` with compiled autograd); its ``apply_fsdp``
takes ``parallelism.fsdp_reshard_after_forward`` (``default``: every block but the last reshards;
``always``; ``never``) for the blocks and reshards the root after forward. accelerate 1.15 builds DDP
from ``DistributedDataParallelKwargs(bucket_cap_mb=...)`` (Python only) and FSDP2 from its config
file's ``fsdp_config`` (``fsdp_version: 2``, ``fsdp_reshard_after_forward``); neither sets
``torch._dynamo.config.optimize_ddp``.
"""
from __future__ import annotations

from typing import Any

from ..core.data_parallel import resolved
from ._common import _lost, _View

#: torchtitan's fixed DDP bucket (apply_ddp).
TORCHTITAN_BUCKET_MB = 100


def settings_of(c: _View) -> dict[str, Any] | None:
    """Every data-parallel setting the config was measured with, or None for one process."""
    wrap = (c.tuned_on or {}).get("data_parallel")
    return resolved(c.data_parallel, wrap) if wrap else None


def _ranks(c: _View) -> tuple[int, int]:
    """``(ranks in all, machines)`` the config was measured on."""
    on = c.tuned_on or {}
    machines = int(on.get("nnodes") or 1)
    return int(on.get("nproc") or 1) * machines, machines


def torchtitan_parallelism(c: _View) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """``(parallelism fields, not carried, changes)`` for torchtitan."""
    dp = settings_of(c)
    if dp is None:
        return {}, [], []
    nproc, _ = _ranks(c)
    if dp["wrap"] == "fsdp2":
        policy = "always" if dp["reshard_after_forward"] else "never"
        return ({"data_parallel_shard_degree": nproc, "fsdp_reshard_after_forward": policy}, [],
                [_lost("root reshard_after_forward", True, "torchtitan reshards the root module after forward "
                       "whatever the policy; the measured run used the blocks' setting for the root too")]
                if not dp["reshard_after_forward"] else [])
    lost, changes = [], []
    if dp["bucket_cap_mb"] != TORCHTITAN_BUCKET_MB:
        changes.append(_lost("data_parallel.bucket_cap_mb", TORCHTITAN_BUCKET_MB, f"torchtitan's apply_ddp fixes DDP's "
                             f"bucket at {TORCHTITAN_BUCKET_MB} MB; the measured config ran {dp['bucket_cap_mb']:g} MB "
                             "(the overlap and, with ddp_optimizer, the graphs differ)"))
    if dp["optimize_ddp"] != "ddp_optimizer":
        lost.append(_lost("data_parallel.optimize_ddp", dp["optimize_ddp"], "torchtitan sets optimize_ddp to "
                          "ddp_optimizer whenever it compiles (python_reducer_without_compiled_forward with "
                          "compiled autograd)"))
    return {"data_parallel_replicate_degree": nproc, "data_parallel_shard_degree": 1}, lost, changes


def accelerate_parallelism(c: _View) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(accelerate config file and Python settings, not carried)``."""
    dp = settings_of(c)
    if dp is None:
        return {}, []
    nproc, machines = _ranks(c)
    if dp["wrap"] == "fsdp2":
        return {"num_processes": nproc, "num_machines": machines, "distributed_type": "FSDP",
                "fsdp_config": {"fsdp_version": 2, "fsdp_reshard_after_forward": dp["reshard_after_forward"],
                                "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP"}}, []
    lost = [_lost("data_parallel.optimize_ddp", dp["optimize_ddp"], "accelerate does not set "
                  "torch._dynamo.config.optimize_ddp; set it before building the Accelerator (torch's default is "
                  "ddp_optimizer)")] if dp["optimize_ddp"] != "ddp_optimizer" else []
    return {"num_processes": nproc, "num_machines": machines, "distributed_type": "MULTI_GPU or MULTI_CPU",
            "python": f"Accelerator(kwargs_handlers=[DistributedDataParallelKwargs(bucket_cap_mb="
                      f"{dp['bucket_cap_mb']:g})])"}, lost
