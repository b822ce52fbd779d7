"""Ten distinct batch sizes: with dynamic=False every one recompiles, past the recompile limit (8)."""
import torch
from torch import nn


def build_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))


def example_inputs():
    return (torch.randn(2, 8, generator=torch.Generator().manual_seed(0)),)


def input_schedule():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(b, 8, generator=g),) for b in range(2, 13)]
