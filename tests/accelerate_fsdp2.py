"""A model sharded on one gloo rank as accelerate's ``fsdp2_prepare_model`` shards it: the installed
accelerate's own function (1.14 and later: the root kept gathered after forward, the input embeddings
a unit of their own), or its 1.13 ending, ``fully_shard(model, **fsdp2_kwargs)``, which reshards the
root too. The FSDP2 export tests run the lines an export prints on it (tests/test_export.py,
tests/test_export_trainer.py). After forward a resharded unit holds DTensors, a gathered one
plain parameters (torch 2.13's FSDP2)."""
from __future__ import annotations

import contextlib
import types

import torch
import torch.distributed as dist
from torch import nn


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.ff = nn.Linear(d, d)

    def forward(self, x):
        return x + self.ff(x)


class LM(nn.Module):
    """The parts accelerate 1.14+ looks for: untied input and output embeddings, a final norm."""

    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.embed, self.mid = nn.Embedding(10, d), nn.Linear(d, d)
        self.layers = nn.ModuleList(Block(d) for _ in range(2))
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, 3)

    def get_input_embeddings(self):
        return self.embed

    def get_output_embeddings(self):
        return self.head

    def forward(self, x):
        x = self.mid(self.embed(x))
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x)) * 1  # not a view: FSDP2 warns about views


@contextlib.contextmanager
def one_rank():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def prepared(installed: bool) -> LM:
    """``LM`` sharded with ``fsdp_reshard_after_forward: true`` and the blocks named: by the installed
    accelerate's fsdp2_prepare_model, or (``installed=False``) as accelerate 1.13's ends."""
    from torch.distributed.fsdp import fully_shard

    model = LM()
    if not installed:
        for block in model.layers:
            fully_shard(block, reshard_after_forward=True)
        return fully_shard(model, reshard_after_forward=True)
    from accelerate.utils import FullyShardedDataParallelPlugin
    from accelerate.utils.fsdp_utils import fsdp2_prepare_model

    plugin = FullyShardedDataParallelPlugin(fsdp_version=2, reshard_after_forward=True,
                                            auto_wrap_policy="transformer_based_wrap",
                                            transformer_cls_names_to_wrap=["Block"])
    # The parts of an Accelerator fsdp2_prepare_model reads, for one CPU process in full precision.
    accelerator = types.SimpleNamespace(state=types.SimpleNamespace(fsdp_plugin=plugin), mixed_precision="no",
                                        is_main_process=True, device=torch.device("cpu"))
    return fsdp2_prepare_model(accelerator, model)


def after_forward(model: LM) -> dict[str, str]:
    """Which parts hold their shards (DTensor) or stay gathered (Parameter) after one forward."""
    model(torch.tensor([[1, 2, 3]]))
    parts = {"root": model.mid, "embeddings": model.embed, "block": model.layers[0].ff, "norm": model.norm,
             "head": model.head}
    return {name: type(part.weight).__name__ for name, part in parts.items()}
