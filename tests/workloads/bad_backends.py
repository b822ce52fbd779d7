"""A clean model plus custom backends that fail for real: crash, hang, raise.

Registering them here makes them valid backend names for a search space (the workload is
imported before the space is validated, in the parent and in every trial process).
"""
import ctypes
import time

import torch
from torch import nn


@torch._dynamo.register_backend
def segfault_backend(gm, example_inputs):
    ctypes.string_at(0)  # reads address 0: SIGSEGV in the trial process
    return gm


@torch._dynamo.register_backend
def hang_backend(gm, example_inputs):
    time.sleep(3600)
    return gm


@torch._dynamo.register_backend
def raising_backend(gm, example_inputs):
    raise RuntimeError("this backend always fails")


@torch._dynamo.register_backend
def wrong_backend(gm, example_inputs):
    """Runs the graph, then corrupts every floating output: a miscompile, for real."""
    def run(*args):
        outs = gm(*args)
        return type(outs)(o + 1 if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in outs)
    return run


@torch._dynamo.register_backend
def hog_backend(gm, example_inputs):
    """Every call allocates 16 GiB: over any sane --trial-memory-limit."""
    def run(*args):
        torch.ones(4 * 2**30, dtype=torch.float32)
        return gm(*args)
    return run


def build_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))


def example_inputs():
    return (torch.randn(4, 8, generator=torch.Generator().manual_seed(0)),)


@torch._dynamo.register_backend
def wrong_optimizer_backend(gm, example_inputs):
    """Runs the model's graphs faithfully; a graph that updates tensors in place (an optimizer
    step) also nudges every parameter it was given: a miscompiled optimizer step, for real."""
    in_place = any(str(getattr(n.target, "__name__", n.target)).endswith("_") and not str(n.target).startswith("_")
                   for n in gm.graph.nodes if n.op in ("call_method", "call_function"))
    if not in_place:
        return gm

    # Dynamo hands an optimizer's parameters to the graph as attributes of the graph module.
    held = [getattr(gm, n.target) for n in gm.graph.nodes if n.op == "get_attr"]
    params = [t for t in list(example_inputs) + held if isinstance(t, nn.Parameter)]

    def run(*args):
        outs = gm(*args)
        with torch.no_grad():
            for p in params:
                p.add_(0.5)
        return outs
    return run
