"""What a config compiles: the whole model, every instance of its repeated block ("regional
compilation"), or the submodules a name pattern matches.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any

from .config import BLOCKS, WHOLE

#: Dynamo's default ``recompile_limit``: compiles of one function's code before it runs eager.
RECOMPILE_LIMIT = 8
#: A blocks config may need at most this many compiles of the block's code (one per distinct
#: structure): half the recompile limit, so that the input schedule's shapes still fit under it.
MAX_BLOCK_COMPILES = RECOMPILE_LIMIT // 2


@dataclass(frozen=True)
class BlockFinding:
    """The model's repeated block, or why it has none that regional compilation can use."""

    cls: type | None
    """The block class; None when no repeated class is worth compiling once for all."""
    instances: int = 0
    structures: int = 0
    """Distinct structures among the instances (submodules, their settings, parameter shapes):
    the compiles of the block's code a ``blocks`` config needs, since each one fails the guards of
    the others (recompiles count against Dynamo's ``recompile_limit``)."""
    reason: str = ""

    @property
    def name(self) -> str:
        return self.cls.__name__ if self.cls else ""


def find_blocks(model) -> BlockFinding:
    """The repeated building block of a model, e.g. its transformer layer class, and why.

    A block is a module class with two or more instances that has code of its own (never a
    container such as ``nn.Sequential``) and whose instances share few enough structures that
    compiling its code once per structure serves them all: at most :data:`MAX_BLOCK_COMPILES`,
    and at least two instances per compile. Among the classes that qualify, the one whose
    instances hold the most parameters is the outermost repeated unit (a transformer layer
    rather than the MLP inside it). Where the largest repeated class does not qualify (ResNet's
    bottleneck layers change width and stride with every stage) the finding says so, with the
    number of compiles it would need.
    """
    by_class: dict[type, list] = {}
    for name, module in model.named_modules():
        if name == "" or not any(True for _ in module.children()) or _is_container(module):
            continue
        by_class.setdefault(type(module), []).append(module)
    candidates = []
    for cls, instances in by_class.items():
        if len(instances) < 2:
            continue
        n_params = sum(p.numel() for m in instances for p in m.parameters())
        structures = len({_structure(m) for m in instances})
        candidates.append((n_params, cls, len(instances), structures))
    if not candidates:
        return BlockFinding(None, reason="no submodule class with code of its own repeats")
    candidates.sort(key=lambda c: (-c[0], -c[2]))  # ties: the class with more instances
    usable = [c for c in candidates if _one_compile_serves_many(c[2], c[3])]
    if usable:
        _, cls, count, structures = usable[0]
        how = "one compile serves all" if structures == 1 else (
            f"{structures} structures, so {structures} compiles of its code serve all (recompile limit "
            f"{RECOMPILE_LIMIT})")
        return BlockFinding(cls, count, structures, f"{cls.__name__} x{count}: {how}")
    _, cls, count, structures = candidates[0]
    return BlockFinding(None, count, structures, (
        f"{cls.__name__} x{count} comes in {structures} structures (its instances differ in width, stride or "
        f"submodules): regional compilation would compile its code {structures} times against the recompile "
        f"limit of {RECOMPILE_LIMIT}: more compiles than compiling one block once would save"))


def _one_compile_serves_many(instances: int, structures: int) -> bool:
    return structures <= MAX_BLOCK_COMPILES and instances >= 2 * structures


def _is_container(module) -> bool:
    """``nn.Sequential``, ``nn.ModuleList`` and the like, or a subclass that keeps their forward:
    they hold modules but have no code of their own (a Sequential's forward only loops)."""
    import torch.nn as nn

    for base in (nn.Sequential, nn.ModuleList, nn.ModuleDict, nn.ParameterList, nn.ParameterDict):
        if isinstance(module, base):
            return type(module).forward is base.forward
    return False


def _structure(module) -> tuple:
    """What Dynamo's guards on a module see: each submodule's class and settings, each parameter's
    and buffer's shape and dtype. Instances with one structure share one compile."""
    subs = tuple((name, type(m).__name__, m.extra_repr()) for name, m in module.named_modules())
    tensors = tuple((name, tuple(t.shape), str(t.dtype), t.requires_grad)
                    for name, t in [*module.named_parameters(), *module.named_buffers()])
    return subs, tensors


def find_block_classes(model) -> list[type]:
    """The block class of :func:`find_blocks` as a list: empty when the model has none."""
    found = find_blocks(model)
    return [found.cls] if found.cls else []


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
