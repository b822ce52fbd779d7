"""The data-parallel settings a multi-rank training search tries (``--nproc N --data-parallel
ddp|fsdp2``), and why it leaves the others out. The settings themselves: tuner/core/data_parallel.py.

A config keeps only the settings that differ from DDP's or FSDP2's defaults (``wrap`` with them),
so a config at the defaults is the plain one, with one key; the verdict adds the wrap to the config
it writes (tuner/decide/verdict.py), so ``apply_config`` wraps the model as it was measured.
"""
from __future__ import annotations

import itertools
from typing import Any

from ..core.data_parallel import DEFAULTS, OPTIMIZE_DDP

#: wrap -> setting -> the values searched, and why
SEARCHED: dict[str, dict[str, tuple[list, str]]] = {
    "ddp": {
        "optimize_ddp": (list(OPTIMIZE_DDP), "DDPOptimizer splits the graph at bucket boundaries so gradients are "
                         "all-reduced while backward runs; no_optimization compiles one graph"),
        "bucket_cap_mb": ([25, 100], "DDP's default and torchtitan's: the overlap, and with ddp_optimizer the "
                          "number of graphs"),
    },
    "fsdp2": {
        "reshard_after_forward": ([True, False], "the blocks free their gathered parameters after forward (gather "
                                  "again in backward) or keep them: memory against communication"),
        "keep_last_block_gathered": ([False, True], "with resharding, the last block keeps its parameters anyway: "
                                     "backward starts with it and would gather them again at once (torchtitan "
                                     "keeps its last layers so)"),
    },
}
#: wrap -> what is not searched, and why
LEFT_OUT: dict[str, list[str]] = {
    "ddp": ["data_parallel.optimize_ddp=python_reducer: compiled autograd must run backward, which compile-tune "
            "does not compile; not offered yet",
            "compile order: torch.compile traces at the first call, after wrapping whichever order the calls are "
            "written in, and DDP's hooks run outside the compiled forward: both orders compile the same graphs"],
    "fsdp2": ["compile order: torch.compile traces at the first call, after fully_shard whichever order the calls "
              "are written in, and FSDP2's hooks run around the compiled forward: both orders compile the same "
              "graphs (compile-tune compiles the blocks first, as torchtitan does)"],
}


def dims(wrap: str | None) -> dict[str, list]:
    return {name: list(values) for name, (values, _) in SEARCHED.get(wrap or "", {}).items()}


def reasons(wrap: str | None) -> dict[str, str]:
    return {f"data_parallel.{name}": why for name, (_, why) in SEARCHED.get(wrap or "", {}).items()}


def settings(wrap: str | None, chosen: dict[str, Any]) -> dict[str, Any]:
    """A config's ``data_parallel``: the chosen values that differ from the defaults, with the wrap;
    ``{}`` when none differs. A setting that changes nothing under the others is left out
    (the last block kept gathered when no block reshards), so one wrap has one key."""
    if not wrap:
        return {}
    if wrap == "fsdp2" and chosen.get("reshard_after_forward") is False:
        chosen = {k: v for k, v in chosen.items() if k != "keep_last_block_gathered"}
    differ = {k: v for k, v in chosen.items() if DEFAULTS[wrap].get(k) != v}
    return {"wrap": wrap, **differ} if differ else {}


def value_of(config_settings: dict[str, Any], wrap: str, name: str) -> Any:
    return config_settings.get(name, DEFAULTS[wrap][name])


def neighbours(config_settings: dict[str, Any], searched: dict[str, list], wrap: str | None) -> list[dict[str, Any]]:
    """Each setting changed alone."""
    if not wrap:
        return []
    current = {name: value_of(config_settings, wrap, name) for name in searched}
    return [settings(wrap, {**current, name: v}) for name, values in searched.items() for v in values
            if v != current[name]]


def combinations(searched: dict[str, list], wrap: str | None) -> list[dict[str, Any]]:
    if not wrap or not searched:
        return [{}]
    names = list(searched)
    return [settings(wrap, dict(zip(names, values))) for values in itertools.product(*searched.values())]
