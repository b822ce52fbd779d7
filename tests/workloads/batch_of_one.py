"""A schedule whose batch size reaches 1. Dynamo specialises sizes 0 and 1, so a batch dimension
marked with mark_dynamic (maybe_mark_dynamic over a range reaching 1) still compiles a graph of its
own at size 1; marked unbacked, size 1 runs the same graph as every other size."""
import torch
from torch import nn


def build_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))


def example_inputs():
    return (torch.randn(4, 8, generator=torch.Generator().manual_seed(0)),)


def input_schedule():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(b, 8, generator=g),) for b in (4, 1, 8, 1, 16)]
