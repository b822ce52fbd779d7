"""What a config compiles: the whole model, every instance of its repeated block ("regional
compilation"), or the submodules a name pattern matches.
"""
from __future__ import annotations

import fnmatch
from typing import Any

from .config import BLOCKS, WHOLE


def find_block_classes(model) -> list[type]:
    """The repeated building block of a model: e.g. its transformer layer class.

    Among module classes with two or more non-leaf instances, pick the one whose instances hold
    the most parameters together; that is the outermost repeated unit (a transformer block
    rather than the MLP inside it). Compiling each instance is "regional compilation": torch
    compiles the class's code once and reuses it for every instance.
    """
    import torch

    by_class: dict[type, list] = {}
    for name, module in model.named_modules():
        if name == "" or not any(True for _ in module.children()):
            continue
        if isinstance(module, (torch.nn.ModuleList, torch.nn.ModuleDict)):
            continue
        by_class.setdefault(type(module), []).append(module)
    best, best_params = [], 0
    for cls, instances in by_class.items():
        if len(instances) < 2:
            continue
        n_params = sum(p.numel() for m in instances for p in m.parameters())
        if n_params > best_params:
            best, best_params = [cls], n_params
    return best


def target_modules(model, target: str) -> list[tuple[str, Any]]:
    """``(name, module)`` pairs that ``target`` compiles, outermost first, none nested."""
    if target == WHOLE:
        return [("", model)]
    if target == BLOCKS:
        classes = tuple(find_block_classes(model))
        matches = [(n, m) for n, m in model.named_modules() if classes and isinstance(m, classes)]
    else:
        matches = [(n, m) for n, m in model.named_modules() if n and fnmatch.fnmatchcase(n, target)]
    chosen: list[tuple[str, Any]] = []
    for name, module in matches:
        if not any(name.startswith(parent + ".") for parent, _ in chosen):
            chosen.append((name, module))
    return chosen
