"""The blocks model with dropout on, as stock Hugging Face configs have it (p=0.1): every
training step draws random numbers."""
import bad_backends  # noqa: F401  (registers wrong_backend, a miscompiling backend, for the tests)
import blocks
import torch
from blocks import example_inputs, loss_fn  # noqa: F401  (the workload contract)
from torch import nn


class DropoutBlock(blocks.Block):
    def __init__(self, d):
        super().__init__(d)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Dropout(0.1), nn.Linear(2 * d, d))
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return x + self.drop(self.ff(self.norm(x)))


def build_model():
    torch.manual_seed(0)
    net = blocks.Net(d=16, n=2)
    net.layers = nn.ModuleList(DropoutBlock(16) for _ in range(2))
    return net
