import definitely_not_a_real_package  # noqa: F401
import torch


def build_model():
    return torch.nn.Linear(4, 4)


def example_inputs():
    return (torch.randn(2, 4),)
