"""Rank 1 of a multi-rank trial stalls for a minute while its model is compiled, so rank 0 waits
in its first compiled step's all-reduce for a rank that does not come. For tests/test_ranks.py."""
import os
import time

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        if torch.compiler.is_compiling() and os.environ.get("RANK") == "1":
            time.sleep(60)  # Dynamo breaks the graph here and runs it
        return self.lin(x)


def build_model():
    torch.manual_seed(0)
    return Net()


def example_inputs():
    return (torch.randn(4, 8, generator=torch.Generator().manual_seed(0)),)


def loss_fn(out, inputs):
    return out.pow(2).mean()
