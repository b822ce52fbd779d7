"""Marks the batch dimension dynamic, then specializes on it in forward: a dynamic-shape error."""
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)

    def forward(self, x):
        if x.shape[0] == 4:  # specializes the dimension marked dynamic below
            return self.a(x) * 2
        return self.a(x)


def build_model():
    torch.manual_seed(0)
    return Net()


def example_inputs():
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
    torch._dynamo.mark_dynamic(x, 0)
    return (x,)
