"""A tiny convnet served at a fixed batch of images: under max-autotune on CPU, AOTInductor
refuses to package it with runtime constant folding ("Not all constant gets mapped for constant
folding graph"), so `compile-tune package` falls back to the nearest config it takes."""
import torch
from torch import nn


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.BatchNorm2d(8)
        self.head = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        return self.head(torch.relu(self.norm(self.conv(x))).flatten(1))


def build_model():
    torch.manual_seed(0)
    return ConvNet()


def example_inputs():
    return (torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(0)),)
