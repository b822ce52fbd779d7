"""The fusable elementwise chain served over requests of 160 to 256 rows: compiling wins by a wide
margin, and the rows vary, so a package exports them as a dynamic dimension."""
import torch
from torch import nn


class Chain(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1024))

    def forward(self, x):
        for _ in range(6):
            x = torch.sin(x) * 1.01 + torch.cos(x) * 0.5
        return x * self.scale


def build_model():
    torch.manual_seed(0)
    return Chain()


def example_inputs():
    return (torch.randn(256, 1024, generator=torch.Generator().manual_seed(0)),)


def input_schedule():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(rows, 1024, generator=g),) for rows in (160, 256, 192, 224, 256, 160)]
