"""A tiny model whose rank 1 misbehaves while the model is compiled, as ``RANK_FAULT`` says; eager
runs untouched. For tests/test_ranks.py:

- ``kill``: rank 1 is killed with SIGKILL (as the out-of-memory killer does);
- ``drift``: rank 1 nudges a weight outside autograd every step, so the ranks' models drift apart
  although DDP all-reduces every gradient;
- ``hang``: rank 1 stalls for a minute, so rank 0 waits in its first compiled step's all-reduce
  for a rank that does not come.

Dynamo breaks the graph at each of these calls and runs it.
"""
import os
import signal
import time

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        if torch.compiler.is_compiling() and os.environ.get("RANK") == "1":
            fault = os.environ.get("RANK_FAULT")
            if fault == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            elif fault == "drift":
                with torch.no_grad():
                    self.lin.bias.add_(1e-3)
            elif fault == "hang":
                time.sleep(60)
        return self.lin(x)


def build_model():
    torch.manual_seed(0)
    return Net()


def example_inputs():
    return (torch.randn(4, 8, generator=torch.Generator().manual_seed(0)),)


def loss_fn(out, inputs):
    return out.pow(2).mean()
