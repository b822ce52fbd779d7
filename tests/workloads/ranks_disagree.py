"""Under compile, rank 1 nudges a weight outside autograd every step, so the ranks' models drift
apart although DDP all-reduces every gradient; eager keeps them equal. For tests/test_ranks.py."""
import os

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        if torch.compiler.is_compiling() and os.environ.get("RANK") == "1":
            with torch.no_grad():
                self.lin.bias.add_(1e-3)
        return self.lin(x)


def build_model():
    torch.manual_seed(0)
    return Net()


def example_inputs():
    return (torch.randn(4, 8, generator=torch.Generator().manual_seed(0)),)


def loss_fn(out, inputs):
    return out.pow(2).mean()
