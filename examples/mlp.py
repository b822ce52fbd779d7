"""A plain MLP classifier: few, large matmuls. Tune it with:

    compile-tune examples/mlp.py --space quick --trials 6
"""
import torch
from torch import nn
from torch.nn import functional as F


def build_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(256, 512), nn.GELU(), nn.LayerNorm(512),
        nn.Linear(512, 512), nn.GELU(), nn.LayerNorm(512),
        nn.Linear(512, 10),
    )


def example_inputs():
    g = torch.Generator().manual_seed(1)
    return (torch.randn(64, 256, generator=g),)


def loss_fn(logits, inputs):
    labels = torch.arange(logits.shape[0]) % 10
    return F.cross_entropy(logits, labels)
