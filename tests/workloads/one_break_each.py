"""Tiny modules with one graph break each, for the graph-break repair tests: four that a Dynamo
setting lifts and one (a branch on a tensor's value) that none does."""
import logging

import torch

log = logging.getLogger(__name__)


class Item(torch.nn.Module):
    def forward(self, x):
        return x * (1.0 + x.abs().mean().item())


class Mask(torch.nn.Module):
    def forward(self, x):
        return x[x > 0].sum() + x.mean()


class Log(torch.nn.Module):
    def forward(self, x):
        x = x + 1
        log.info("rows %d", x.shape[0])
        return x * 2


class Print(torch.nn.Module):
    def forward(self, x):
        x = x + 1
        print("forward")
        return x * 2


class Branch(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            x = x * 2
        return x + 1


#: setting -> (the module with the break it lifts, the setting's repair value)
LIFTED = {"capture_scalar_outputs": (Item, True), "capture_dynamic_output_shape_ops": (Mask, True),
          "ignore_logging_functions": (Log, ["logging.Logger.info"]),
          "reorderable_logging_functions": (Print, ["builtins.print"])}


def build_model():
    return Item()


def example_inputs():
    return (torch.randn(8, 4),)
