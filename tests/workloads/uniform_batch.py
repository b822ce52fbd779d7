"""A batch of one value throughout (every element 1.0): shuffled for each rank, it stays the same
batch, so the ranks' gradients agree without DDP's all-reduce. For tests/test_ranks.py."""
import torch
from torch import nn


def build_model():
    torch.manual_seed(0)
    return nn.Linear(8, 8)


def example_inputs():
    return (torch.ones(4, 8),)


def loss_fn(out, inputs):
    return out.pow(2).mean()
