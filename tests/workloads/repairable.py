"""Three graph breaks: a logging call and an ``.item()`` whose scalar is used in tensor math, which
Dynamo settings lift (``ignore_logging_functions``, ``capture_scalar_outputs``), and a branch on a
tensor's value, which no setting lifts."""
import logging

import torch
from torch import nn

log = logging.getLogger(__name__)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 16)
        self.b = nn.Linear(16, 16)
        self.c = nn.Linear(16, 4)

    def forward(self, x):
        h = torch.relu(self.a(x))
        log.info("forward on %d rows", x.shape[0])
        scale = h.abs().mean().item()
        h = self.b(h) * (1.0 + scale)
        if h.sum() > 0:
            h = h * 0.5
        return self.c(torch.tanh(h))


def build_model():
    torch.manual_seed(0)
    return Net()


def example_inputs():
    return (torch.randn(8, 16, generator=torch.Generator().manual_seed(0)),)


def loss_fn(out, inputs):
    return out.pow(2).mean()
