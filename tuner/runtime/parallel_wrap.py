"""Wrap a model for training on many ranks, with a config's data-parallel settings
(tuner/core/data_parallel.py): ``DistributedDataParallel``, or FSDP2's ``fully_shard`` on every
repeated block and then on the model (torchtitan's sharding, :func:`shard`).

Used by a trial's ranks (tuner/ranks/rank.py) and by ``apply_config`` inside a user's
``torchrun`` script, so the model trains wrapped exactly as it was measured.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.config import BLOCKS
from ..core.data_parallel import resolved
from ..core.errors import ConfigError
from ..core.targets import target_modules


def wrap(model, settings: Mapping[str, Any], device: str | None = None):
    """The model wrapped for data-parallel training; call it (not ``model``) in the training step.

    DDP returns the ``DistributedDataParallel`` around ``model``; FSDP2 shards ``model`` in place
    and returns it. ``torch._dynamo.config.optimize_ddp`` is set process-wide: Dynamo reads it when
    it compiles a frame under DDP's forward (the first compiled call), not per model.
    """
    import torch
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        raise ConfigError(f"this config trains on many ranks ({settings.get('wrap')}), but torch.distributed has "
                          "no process group", "call apply_config after dist.init_process_group() in the script "
                          "torchrun starts, or drop `data_parallel` from the config")
    full = resolved(settings, settings["wrap"])
    device = device or _default_device()
    if full["wrap"] == "ddp":
        torch._dynamo.config.optimize_ddp = full["optimize_ddp"]
        from torch.nn.parallel import DistributedDataParallel

        ids = [torch.device(device).index or 0] if device.startswith("cuda") else None
        return DistributedDataParallel(model, device_ids=ids, bucket_cap_mb=full["bucket_cap_mb"])
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cuda" if device.startswith("cuda") else "cpu", (dist.get_world_size(),))
    return shard(model, mesh, full["reshard_after_forward"], full["keep_last_block_gathered"])


def shard(model, mesh, reshard_after_forward: bool, keep_last_block_gathered: bool = False):
    """FSDP2 as torchtitan's ``apply_fsdp`` applies it: ``fully_shard`` on each repeated block with
    ``reshard_after_forward``, then on the model with fully_shard's default for a root, which keeps
    the root's parameters gathered after forward: backward needs them at once, so resharding them
    would only gather them again (torch's docstring; every trial, eager included, would pay it).
    ``keep_last_block_gathered``: the last block keeps its parameters too, for the same reason
    (torchtitan keeps the layers after its last block so: its ``reshard_after_forward=False``)."""
    from torch.distributed.fsdp import fully_shard

    blocks = [module for _, module in target_modules(model, BLOCKS)]
    for i, block in enumerate(blocks):
        keep = keep_last_block_gathered and i == len(blocks) - 1
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard_after_forward and not keep)
    fully_shard(model, mesh=mesh)  # the root: reshard_after_forward=None, fully_shard's False for a root
    return model


def is_wrapped(model) -> bool:
    """Whether ``model`` is wrapped for many ranks already (DDP around it, or FSDP2's sharded class)."""
    name = type(model).__name__
    return name == "DistributedDataParallel" or name.startswith("FSDP")


def local_rank() -> int:
    """This process's rank on its machine, as torchrun sets it (0 outside torchrun)."""
    import os

    return int(os.environ.get("LOCAL_RANK", "0"))


def _default_device() -> str:
    import torch

    return f"cuda:{local_rank()}" if torch.cuda.is_available() else "cpu"
