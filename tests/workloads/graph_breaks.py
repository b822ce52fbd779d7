"""A forward with the classic graph-break sources: a logging call, numpy, a data-dependent branch, .item()."""
import logging

import numpy as np
import torch
from torch import nn

log = logging.getLogger(__name__)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 4)

    def forward(self, x):
        h = self.a(x)
        log.info("forward called on %s", tuple(x.shape))
        h = h + torch.from_numpy(np.tanh(h.detach().numpy()))
        if h.sum() > 0:
            h = h * 0.5
        scale = h.abs().max().item()
        return self.b(h) / (1.0 + scale)


def build_model():
    torch.manual_seed(0)
    return Net()


def example_inputs():
    return (torch.randn(4, 8, generator=torch.Generator().manual_seed(0)),)


def input_schedule():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(b, 8, generator=g),) for b in (4, 8, 16, 4)]
