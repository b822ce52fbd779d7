"""A near tie for the calibration benchmark: two 1024-wide matmuls over 512 rows with a GELU
between them. The matmuls (about 1 GFLOP a step) run the same library kernels eager or compiled;
compile can only fuse the bias adds and the GELU, a few per cent of the step. So torch.compile is
within a few per cent of eager, where the verdict's repeat rate says the most."""
import torch
from torch import nn


def build_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(1024, 1024), nn.GELU(), nn.Linear(1024, 1024))


def example_inputs():
    return (torch.randn(512, 1024, generator=torch.Generator().manual_seed(0)),)
