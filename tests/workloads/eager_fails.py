"""example_inputs() has the wrong feature size: the model fails even without compile."""
import torch


def build_model():
    return torch.nn.Linear(4, 4)


def example_inputs():
    return (torch.randn(2, 5),)
