"""Graph breaks in a chain of elementwise ops on a large tensor: logging calls and an ``.item()``
whose scalar is used in tensor math, which Dynamo settings lift (``ignore_logging_functions``,
``capture_scalar_outputs``), and a branch on a tensor's value, which no setting lifts. Each break
cuts the chain, so the compiled code writes and reads the tensor once more per break: lifting the
logging breaks makes the compiled step several times faster."""
import logging

import torch
from torch import nn

log = logging.getLogger(__name__)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.linspace(0.5, 1.5, 2048))

    def stage(self, h):
        return (h * self.w + 0.1) * 0.9 - 0.05

    def forward(self, x):
        h = self.stage(x)
        log.info("forward on %d rows", x.shape[0])
        h = self.stage(h)
        log.debug("stage 2 done")
        h = self.stage(h)
        log.debug("stage 3 done")
        h = self.stage(h)
        log.debug("stage 4 done")
        h = self.stage(h)
        scale = h.abs().mean().item()
        h = h * (1.0 + scale) - h * self.w
        if h.sum() > 0:
            h = h * 0.5
        return h * self.w + 1.0


def build_model():
    torch.manual_seed(0)
    return Net()


def example_inputs():
    return (torch.randn(512, 2048, generator=torch.Generator().manual_seed(0)),)


def loss_fn(out, inputs):
    return out.pow(2).mean()
