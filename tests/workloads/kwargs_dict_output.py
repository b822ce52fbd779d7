"""Keyword inputs and a dict-of-tuples output, like Hugging Face models."""
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class Output:
    logits: torch.Tensor
    hidden: tuple


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 3)

    def forward(self, x, scale=1.0):
        h = torch.relu(self.a(x)) * scale
        return Output(logits=self.b(h), hidden=(h, {"sum": h.sum(-1)}))


def build_model():
    torch.manual_seed(0)
    return Net()


def example_inputs():
    return {"x": torch.randn(4, 8, generator=torch.Generator().manual_seed(0)), "scale": 2.0}
