"""Exports of a tuned config for the tools people train and serve with: accelerate, the Hugging
Face ``Trainer``, environment variables, torchtitan, vLLM, and JSON.

Each tool can carry part of a config. An export gives the tool what it can carry, in the tool's
own format, and names everything it cannot (``not_carried``: the setting, its value, why), so that
nobody runs a different config than the one measured without being told.
``tuner.apply_config`` stays the lossless path.

A config with a ``precision`` (tuner/core/precision.py) *changes numerics*: a tool that has the same
setting gets it (accelerate's ``mixed_precision``, the Trainer's ``bf16``/``tf32``, torchtitan's
``mixed_precision_param``), and a tool that has none refuses the export (``refused``: why), since
running it in float32 would be another config, timed and checked differently.

This module reads the mapping form of ``best_config.yaml`` (``TunedConfig.to_dict()``), not the
config classes, so that ``best_config.save_tuned_config`` can write these blocks under ``exports:``
while this module stays below it.

Example:
    >>> tuned = {"verdict": "compile", "config": {"target": "blocks", "backend": "inductor"}}
    >>> exports(tuned)["hf-trainer"]["training_args"]
    {'torch_compile': True, 'torch_compile_backend': 'inductor'}
"""
from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any

import yaml

from ..core.errors import ConfigError
from ..core.precision import CHANGES_NUMERICS
from ..core.precision import MEANING as PRECISION_MEANING
from ._common import _View
from .accelerate import ACCELERATE_BACKENDS, _accelerate, _hf_trainer
from .env import _env, inductor_env_forms
from .torchtitan import TORCHTITAN_PROCESS_SETTINGS, _torchtitan, torchtitan_arguments
from .vllm import VLLM_PROCESS_CHANGES, VLLM_RELEASE, _vllm

__all__ = ["ACCELERATE_BACKENDS", "TARGETS", "TORCHTITAN_PROCESS_SETTINGS", "VLLM_PROCESS_CHANGES", "VLLM_RELEASE",
           "export", "exports", "inductor_env_forms", "render", "torchtitan_arguments"]

TARGETS = ("accelerate", "hf-trainer", "env", "torchtitan", "vllm", "json")

_BUILDERS = {"accelerate": _accelerate, "hf-trainer": _hf_trainer, "env": _env, "torchtitan": _torchtitan,
             "vllm": _vllm}


def exports(tuned: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Every tool's block (all targets but ``json``) for a best_config.yaml mapping."""
    c = _View(tuned)
    return {name: build(c) for name, build in _BUILDERS.items()}


def export(tuned: Mapping[str, Any], target: str) -> dict[str, Any]:
    """One target's block; ``json`` is the whole best_config.yaml mapping plus every block."""
    if target == "json":
        return {**{k: v for k, v in tuned.items() if k != "exports"}, "exports": exports(tuned)}
    if target not in _BUILDERS:
        raise ValueError(f"unknown export target {target!r}; known: {', '.join(TARGETS)}")
    return _BUILDERS[target](_View(tuned))



_USAGE = {
    "accelerate": ["save this as FILE and run: accelerate launch --config_file FILE train.py",
                   "(or merge its keys into your accelerate config file);",
                   "or, for `python train.py` without accelerate launch, set the ACCELERATE_* variables below,",
                   "or in Python: Accelerator(dynamo_plugin=TorchDynamoPlugin(**plugin)) with `plugin` below"],
    "hf-trainer": ["TrainingArguments(**these, output_dir=...),",
                   "or HfArgumentParser(TrainingArguments).parse_yaml_file(FILE)"],
    "env": ["`source FILE` before starting training"],
    "torchtitan": ["torchtitan 0.3 (configs are Python dataclasses): add these overrides to your launch command",
                   "(torchrun ... -m torchtitan.train --module M --config C <these>), or set the same fields",
                   "on the Trainer.Config your config_registry function returns"],
    "vllm": ["vllm serve MODEL --compilation-config '<this JSON>', or LLM(MODEL, compilation_config=<this dict>)",
             "(read from vLLM 0.33.0; a later release may change what mode 1 does)"],
}


def render(tuned: Mapping[str, Any], target: str, *, source: str, label: str) -> tuple[str, list[str]]:
    """The export as text in the tool's own format, and its header lines (usage, notes, what is not
    carried, the lossless path): inside the text as comments where the format has comments (all
    but vllm and json), so the caller prints them to the terminal for vllm."""
    block = export(tuned, target)
    if target == "json":
        return json.dumps(block, indent=2, default=str) + "\n", []
    if block.get("refused"):
        carry = [t for t, b in exports(tuned).items() if not b.get("refused")]
        raise ConfigError(f"{source}: cannot export for {target}: {block['refused']}",
                          f'use model = tuner.apply_config(model, "{source}") (lossless), export for a tool that '
                          f"carries it ({', '.join(carry)}), or re-tune without --allow-precision-change")
    header = [f"compile-tune export for {target}, from {source}", f"measured: {label}", *_USAGE[target]]
    precision = _View(tuned).precision
    if precision:
        header.append(f"{CHANGES_NUMERICS.upper()}: precision {precision} ({PRECISION_MEANING[precision]}); "
                      "carried below")
    header += _env_lines(block, target) + [f"note: {n}" for n in block.get("notes", [])]
    lost, changes = block["not_carried"], block.get("changes_measured") or []
    if lost:
        header.append("NOT CARRIED: a run from this export differs from the measured config in:")
        header += _listed(lost)
    elif changes:  # every setting is in it, and still a run through the tool is not the measured one
        header.append("holds every setting of the measured config, but the tool runs it otherwise (below)")
    else:
        header.append("carries every setting of the measured config")
    if changes:
        header.append("CHANGES WHAT WAS MEASURED: the tool itself also sets:")
        header += _listed(changes)
    header.append(f'lossless: model = tuner.apply_config(model, "{source}")')
    return _BODIES[target](block, header), header


def _env_lines(block: Mapping[str, Any], target: str) -> list[str]:
    if target == "accelerate":
        return ([f"  export {k}={shlex.quote(v)}" for k, v in block["env"].items()]
                + [f"  unset {k}" for k in block["unset"]] + [f"plugin: {block['plugin']}"])
    if target == "hf-trainer" and (block["env"] or block["unset"]):
        return (["and set before the Trainer is built (its accelerate plugin reads them):"]
                + [f"  export {k}={shlex.quote(v)}" for k, v in block["env"].items()]
                + [f"  unset {k}" for k in block["unset"]])
    return []


def _listed(records: list[dict[str, Any]]) -> list[str]:
    """Each lost or changed setting, by name and value, with why and the exact lines that set it."""
    lines = []
    for x in records:
        lines.append(f"  - {x['setting']}={_value(x['value'])}: {x['why']}")
        lines += [f"      {line}" for line in x.get("fix", [])]
    return lines


def _value(value: Any) -> str:
    return "null" if value is None else str(value)


def _comments(header: list[str]) -> str:
    return "".join(f"# {line}\n" for line in header)


_BODIES = {
    "accelerate": lambda b, h: _comments(h) + yaml.safe_dump(b["config_file"], sort_keys=False),
    "hf-trainer": lambda b, h: _comments(h) + yaml.safe_dump(b["training_args"], sort_keys=False),
    "env": lambda b, h: _comments(h) + "".join(f"export {k}={shlex.quote(v)}\n" for k, v in b["variables"].items())
    + "".join(f"unset {k}\n" for k in b["unset"]),
    "torchtitan": lambda b, h: _comments(h) + " ".join(torchtitan_arguments(b)) + "\n",
    "vllm": lambda b, h: json.dumps(b["compilation_config"]) + "\n",
}
