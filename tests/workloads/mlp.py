"""A tiny, clean MLP: compiles in seconds."""
import torch
from torch import nn


def build_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))


def example_inputs():
    return (torch.randn(8, 16, generator=torch.Generator().manual_seed(0)),)


def loss_fn(out, inputs):
    return out.pow(2).mean()


def input_schedule():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(b, 16, generator=g),) for b in (8, 16, 32, 8)]
