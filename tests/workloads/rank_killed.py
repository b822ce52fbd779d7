"""Rank 1 of a multi-rank trial is killed (SIGKILL, as the out-of-memory killer does) while its
model is compiled; eager runs untouched. For tests/test_ranks.py."""
import os
import signal

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        if torch.compiler.is_compiling() and os.environ.get("RANK") == "1":
            os.kill(os.getpid(), signal.SIGKILL)  # Dynamo breaks the graph here and runs it
        return self.lin(x)


def build_model():
    torch.manual_seed(0)
    return Net()


def example_inputs():
    return (torch.randn(4, 8, generator=torch.Generator().manual_seed(0)),)


def loss_fn(out, inputs):
    return out.pow(2).mean()
