"""A chain of elementwise ops on a large tensor: eager makes a memory pass per op, inductor
fuses them into one kernel. Compiling wins by a wide margin, fast."""
import torch
from torch import nn


class Chain(nn.Module):
    def forward(self, x):
        for _ in range(6):
            x = torch.sin(x) * 1.01 + torch.cos(x) * 0.5
        return x


def build_model():
    return Chain()


def example_inputs():
    return (torch.randn(256, 1024, generator=torch.Generator().manual_seed(0)),)
