"""The configs a package build tries, nearest to the tuned one first: AOTInductor refuses some
configs that ``torch.compile`` takes (a small convnet under ``max-autotune`` on CPU: "Not all
constant gets mapped for constant folding graph", its GEMM template's packed weights clash with
runtime constant folding). The build (tuner/pt2/build.py) compiles each in turn until
one packages, and records what each that failed said.

The order, each a step further from what was measured:

1. the tuned config, its weights swappable (runtime constant folding, ``load_weights``);
2. the tuned config with its weights folded at build time (the same kernels; ``load_weights`` refuses);
3. the default mode instead of the tuned one (its options kept);
4. the default mode without one of the tuned options, for each option;
5. plain inductor.

Repeats (a mode whose options add nothing to a package, ``reduce-overhead`` on CPU) are tried once.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from ..core.config import CompileConfig


@dataclass(frozen=True)
class Attempt:
    """One config a package build tries."""

    config: CompileConfig
    fold_at_runtime: bool
    """AOTInductor's runtime constant folding: what it folds from the weights is folded again at
    load, so the weights stay swappable. Off, the folded constants are baked in."""
    change: str
    """How it differs from the tuned config, in words (``"as tuned"`` for the first)."""

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config.to_dict(), "config_label": self.config.describe(),
                "fold_at_runtime": self.fold_at_runtime, "change": self.change}


def package_attempts(config: CompileConfig) -> list[Attempt]:
    """The configs to try for ``config``, in order (the module's docstring says which).

    Example:
        >>> tuned = CompileConfig(mode="max-autotune", options={"epilogue_fusion": False})
        >>> [a.change for a in package_attempts(tuned)][:3]  # doctest: +SKIP
        ['as tuned', 'as tuned, weights folded at build time', 'mode default instead of max-autotune']
    """
    tried: list[Attempt] = [Attempt(config, True, "as tuned"),
                            Attempt(config, False, "as tuned, weights folded at build time")]
    default = dataclasses.replace(config, mode="default")
    if config.mode not in (None, "default"):
        tried.append(Attempt(default, True, f"mode default instead of {config.mode}"))
    if len(config.options) > 1:
        for name in config.options:
            fewer = {k: v for k, v in config.options.items() if k != name}
            tried.append(Attempt(dataclasses.replace(default, options=fewer), True, f"mode default, without {name}"))
    tried.append(Attempt(dataclasses.replace(default, options={}), True, "plain inductor"))
    seen: set[str] = set()
    unique = []
    for attempt in tried:
        key = json.dumps([inductor_configs(attempt.config), attempt.fold_at_runtime], sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            unique.append(attempt)
    return unique


def inductor_configs(config: CompileConfig) -> dict[str, Any]:
    """The config's inductor options for AOTInductor, the mode's own options folded in (a mode is
    a named set of options)."""
    if config.backend != "inductor":
        return {}
    options: dict[str, Any] = {}
    if config.mode and config.mode != "default":
        import torch._inductor

        options.update(torch._inductor.list_mode_options(config.mode))
    options.update(config.options)
    options.pop("triton.cudagraphs", None)  # CUDA graphs are the serving code's business, not the package's
    return options
