"""Exports of a tuned config for the tools people train and serve with: accelerate, the Hugging
Face ``Trainer``, environment variables, torchtitan, vLLM, and JSON.

Each tool can carry part of a config. An export gives the tool what it can carry, in the tool's
own format, and names everything it cannot (``not_carried``: the setting, its value, why), so that
nobody runs a different config than the one measured without being told.
``tuner.apply_config`` stays the lossless path.

A config with a ``precision`` (tuner/precision.py) *changes numerics*: a tool that has the same
setting gets it (accelerate's ``mixed_precision``, the Trainer's ``bf16``/``tf32``, torchtitan's
``mixed_precision_param``), and a tool that has none refuses the export (``refused``: why), since
running it in float32 would be another config, timed and checked differently.

This module reads the mapping form of ``best_config.yaml`` (``TunedConfig.to_dict()``), not the
config classes, so that ``config.save_tuned_config`` can write these blocks under ``exports:``
while this module stays below it.

Example:
    >>> tuned = {"verdict": "compile", "config": {"target": "blocks", "backend": "inductor"}}
    >>> exports(tuned)["hf-trainer"]["training_args"]
    {'torch_compile': True, 'torch_compile_backend': 'inductor'}
"""
from __future__ import annotations

import ast
import functools
import json
import shlex
from collections.abc import Mapping
from typing import Any

import yaml

from .config_defaults import torch_file
from .errors import ConfigError
from .heap import ENV as HEAP_ENV
from .heap import PINNED_NOTE
from .precision import CHANGES_NUMERICS
from .precision import MEANING as PRECISION_MEANING

TARGETS = ("accelerate", "hf-trainer", "env", "torchtitan", "vllm", "json")

#: The backends accelerate's ``TorchDynamoPlugin`` accepts (its ``DynamoBackend``, accelerate
#: 1.15.0); the Hugging Face Trainer builds the same plugin. tests/test_export.py checks the list
#: against the installed accelerate.
ACCELERATE_BACKENDS = (
    "eager", "aot_eager", "inductor", "aot_ts_nvfuser", "nvprims_nvfuser", "cudagraphs", "ofi", "fx2trt",
    "onnxrt", "tensorrt", "aot_torchxla_trace_once", "torchxla_trace_once", "tvm", "hpu_backend", "neuron",
)

_ENV_HINT = "`compile-tune export --to env` sets the ones inductor reads from a TORCHINDUCTOR_* variable"


class _View:
    """The fields of a best_config.yaml mapping that exports read, with the tuner's rules applied:
    mode and options count for inductor only, and ``default`` is no mode."""

    def __init__(self, tuned: Mapping[str, Any]) -> None:
        cfg = tuned.get("config") or {}
        self.target = cfg.get("target", "whole")
        self.compiles = tuned.get("verdict", "compile") == "compile" and self.target != "none"
        self.backend = cfg.get("backend", "inductor")
        inductor = self.backend == "inductor"
        self.mode = cfg.get("mode") if inductor and cfg.get("mode") != "default" else None
        self.options = dict(cfg.get("options") or {}) if inductor else {}
        self.dynamic = cfg.get("dynamic")
        self.heap_pinned = (tuned.get("tuned_on") or {}).get("heap") == PINNED_NOTE
        self.fullgraph = bool(cfg.get("fullgraph", False))
        self.compile_optimizer = bool(cfg.get("compile_optimizer", False))
        self.precision = cfg.get("precision") if self.compiles else None
        self.marks = {kind: cfg[kind] for kind in ("mark_dynamic", "mark_unbacked") if cfg.get(kind)}
        self.dynamo = dict(cfg.get("dynamo") or {})
        self.measured = tuned.get("measured") or {}


def _refused(c: _View, tool: str, why: str) -> dict[str, Any]:
    """The block of a tool that cannot carry the config's precision: no settings, the reason."""
    assert c.precision is not None  # callers refuse a config that sets one
    return {"refused": f"precision {c.precision} ({PRECISION_MEANING[c.precision]}) {CHANGES_NUMERICS}, and "
                       f"{tool} {why}", "not_carried": [_lost("precision", c.precision, f"{tool} {why}")]}


#: accelerate's ``mixed_precision`` for a config's precision. For tf32 it stays "no": accelerate
#: itself sets ``torch.backends.cuda.matmul.allow_tf32 = True`` (= float32 matmul precision "high")
#: when it compiles on CUDA with mixed_precision "no" (accelerate/state.py, AcceleratorState).
_ACCELERATE_MIXED_PRECISION = {"bf16": "bf16", "tf32": "no"}
_ACCELERATE_NOTES = {
    "bf16": "mixed_precision bf16 (in Python: Accelerator(mixed_precision=\"bf16\", ...)): accelerate runs the "
            "model's forward under torch.autocast(dtype=torch.bfloat16), as measured, and converts its outputs to "
            "float32 (the same values)",
    "tf32": "precision tf32: accelerate turns on TF32 matmuls itself when it compiles on CUDA with mixed_precision "
            "no, as measured",
}


def _lost(setting: str, value: Any, why: str) -> dict[str, Any]:
    return {"setting": setting, "value": value, "why": why}


_MARKERS = {"mark_dynamic": "torch._dynamo.mark_dynamic", "mark_unbacked": "torch._dynamo.decorators.mark_unbacked"}


def _common_losses(c: _View, tool: str) -> list[dict[str, Any]]:
    """What no tool but compile-tune's own runtime carries: the optimizer compile and the warm start."""
    lost = []
    for kind, dims in c.marks.items() if c.compiles else ():
        lost.append(_lost(kind, dims, f"{tool} calls torch.compile only; the measured config marks these input "
                          f"dimensions on every call ({_MARKERS[kind]}), which tuner.apply_config does; "
                          "without the marks the first new size recompiles"))
    for name, value in c.dynamo.items() if c.compiles else ():
        lost.append(_lost(f"dynamo.{name}", value, f"{tool} has no setting for torch._dynamo.config; the measured "
                          f"config sets it around every compiled call, which tuner.apply_config does (or wrap the "
                          f"calls in torch._dynamo.config.patch({name}={value!r}))"))
    if c.compile_optimizer:
        lost.append(_lost("compile_optimizer", True, f"{tool} compiles the model only; compile the optimizer step "
                          "with tuner.optimizer_step(optimizer, PATH_TO_best_config.yaml)"))
    if c.measured.get("warm_start_s") is not None:
        cold, warm = c.measured.get("cold_start_s", 0), c.measured["warm_start_s"]
        lost.append(_lost("warm_start", "compile_cache/", "the compile cache saved beside best_config.yaml is loaded "
                          "only by tuner.apply_config; without it the first step compiles cold "
                          f"(measured: {cold:.1f} s cold, {warm:.1f} s warm)"))
    return lost


def _option_losses(c: _View, tool: str) -> list[dict[str, Any]]:
    return [_lost(f"options.{k}", v, f"{tool} has no setting for inductor options; {_ENV_HINT}")
            for k, v in c.options.items()]


# --------------------------------------------------------------------------- accelerate family


def _accelerate_settings(c: _View, tool: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The TorchDynamoPlugin fields (backend, mode, fullgraph, dynamic, use_regional_compilation)
    that accelerate and the HF Trainer carry, or None for "do not compile", and what they lose."""
    if not c.compiles:
        return None, []
    if c.backend not in ACCELERATE_BACKENDS:
        return None, [_lost("backend", c.backend, f"not a backend accelerate's TorchDynamoPlugin accepts "
                            f"({', '.join(ACCELERATE_BACKENDS)}); this export does not compile")]
    lost = []
    regional = c.target == "blocks"
    if regional:
        lost.append(_lost("target", "blocks", "accelerate's regional compilation compiles each module of every "
                          "ModuleList of same-class modules and also every other submodule, each separately; the "
                          "measured config compiled only the repeated blocks and ran the rest eagerly"))
    elif c.target != "whole":
        lost.append(_lost("target", c.target, f"{tool} compiles the whole model or, regionally, its repeated "
                          "blocks, never chosen modules; this export compiles the whole model"))
    lost += _option_losses(c, tool) + _common_losses(c, tool)
    plugin = {"backend": c.backend, "mode": c.mode or "default", "fullgraph": c.fullgraph, "dynamic": c.dynamic,
              "use_regional_compilation": regional}
    return plugin, lost


def _dynamo_env(plugin: dict[str, Any] | None) -> tuple[dict[str, str], list[str]]:
    """The ACCELERATE_DYNAMO_* variables TorchDynamoPlugin() reads, and those to unset: an unset
    ACCELERATE_DYNAMO_USE_DYNAMIC is how the plugin keeps dynamic=None."""
    if plugin is None:
        return {"ACCELERATE_DYNAMO_BACKEND": "NO"}, []
    env = {
        "ACCELERATE_DYNAMO_BACKEND": plugin["backend"].upper(),
        "ACCELERATE_DYNAMO_MODE": plugin["mode"],
        "ACCELERATE_DYNAMO_USE_FULLGRAPH": str(plugin["fullgraph"]),
        "ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION": str(plugin["use_regional_compilation"]),
    }
    if plugin["dynamic"] is None:
        return env, ["ACCELERATE_DYNAMO_USE_DYNAMIC"]
    env["ACCELERATE_DYNAMO_USE_DYNAMIC"] = str(plugin["dynamic"])
    return env, []


def _accelerate(c: _View) -> dict[str, Any]:
    plugin, lost = _accelerate_settings(c, "accelerate")
    env, unset = _dynamo_env(plugin)
    if plugin is None:
        return {"dynamo_config": {"dynamo_backend": "NO"}, "env": env, "unset": unset, "plugin": {"backend": "no"},
                "not_carried": lost}
    dynamo_config = {"dynamo_backend": plugin["backend"].upper(), "dynamo_mode": plugin["mode"],
                     "dynamo_use_fullgraph": plugin["fullgraph"]}
    if c.dynamic is None:
        lost.insert(0, _lost("dynamic", None, "`accelerate launch` always sets ACCELERATE_DYNAMO_USE_DYNAMIC from "
                             "dynamo_use_dynamic (false when absent), so a launched run compiles with dynamic=False; "
                             "without accelerate launch, `env` and `plugin` keep dynamic=None"))
    else:
        dynamo_config["dynamo_use_dynamic"] = c.dynamic
    dynamo_config["dynamo_use_regional_compilation"] = plugin["use_regional_compilation"]
    block = {"dynamo_config": dynamo_config, "env": env, "unset": unset, "plugin": plugin, "not_carried": lost}
    if c.precision:  # a top-level key of accelerate's config file; Accelerator() reads the variable
        block["mixed_precision"] = env["ACCELERATE_MIXED_PRECISION"] = _ACCELERATE_MIXED_PRECISION[c.precision]
        block["notes"] = [_ACCELERATE_NOTES[c.precision]]
    return block


def _hf_trainer(c: _View) -> dict[str, Any]:
    """TrainingArguments carry backend and mode; the Trainer's TorchDynamoPlugin reads fullgraph,
    dynamic and regional compilation from ACCELERATE_DYNAMO_* (transformers 5.x, Trainer)."""
    plugin, lost = _accelerate_settings(c, "the Hugging Face Trainer")
    if plugin is None:
        return {"training_args": {"torch_compile": False}, "env": {}, "unset": [], "not_carried": lost}
    args = {"torch_compile": True, "torch_compile_backend": c.backend}
    if c.mode:
        args["torch_compile_mode"] = c.mode
    env, unset = _dynamo_env(plugin)
    env = {k: v for k, v in env.items() if k not in ("ACCELERATE_DYNAMO_BACKEND", "ACCELERATE_DYNAMO_MODE")}
    if c.precision == "bf16":
        # The Trainer's accelerator autocasts the forward; tf32 False, because with torch_compile and bf16 the
        # Trainer would also turn TF32 matmuls on (TrainingArguments.__post_init__), which was not measured.
        args.update(bf16=True, tf32=False)
    elif c.precision == "tf32":
        args["tf32"] = True
    return {"training_args": args, "env": env, "unset": unset, "not_carried": lost}


# --------------------------------------------------------------------------- environment variables


@functools.lru_cache(maxsize=1)
def inductor_env_forms() -> dict[str, tuple[str, dict[bool, str]]]:
    """Boolean inductor options that inductor reads from a TORCHINDUCTOR_* variable:
    ``{option: (variable, {True: "1", False: "0"})}``, read from the installed torch's
    ``torch/_inductor/config.py`` source (without importing torch).

    Only the plain forms count: ``os.environ.get("TORCHINDUCTOR_X", ...) == "1"`` (or ``!=``) and
    ``Config(env_name_force="TORCHINDUCTOR_X", default=<bool>)``; an option whose variable is mixed
    with other logic is not carried.
    """
    path = torch_file("_inductor/config.py")
    if path is None:
        return {}
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError):
        return {}
    found: dict[str, tuple[str, dict[bool, str]]] = {}
    _scan_config(tree.body, "", found)
    return found


def _scan_config(body: list[ast.stmt], prefix: str, found: dict) -> None:
    for node in body:
        if isinstance(node, ast.ClassDef):  # nested option groups: ``class triton:`` -> ``triton.*``
            _scan_config(node.body, f"{prefix}{node.name}.", found)
            continue
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        form = _bool_env_form(value)
        if isinstance(target, ast.Name) and form:
            found[prefix + target.id] = form


def _bool_env_form(expr: ast.expr) -> tuple[str, dict[bool, str]] | None:
    if isinstance(expr, ast.Compare) and len(expr.ops) == 1 and isinstance(expr.ops[0], (ast.Eq, ast.NotEq)):
        var, const = _env_read(expr.left), expr.comparators[0]
        if var and isinstance(const, ast.Constant) and const.value in ("0", "1"):
            other = "0" if const.value == "1" else "1"
            true = const.value if isinstance(expr.ops[0], ast.Eq) else other  # the value that makes it True
            return var, {True: true, False: "0" if true == "1" else "1"}
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "Config":
        kw = {k.arg: k.value for k in expr.keywords}
        default = kw.get("default")
        if not (isinstance(default, ast.Constant) and isinstance(default.value, bool)):
            return None
        for key in ("env_name_force", "env_name_default"):  # torch reads "1"/"0" (utils/_config_module.py)
            name = kw.get(key)
            value = name.value if isinstance(name, ast.Constant) else None
            if isinstance(value, str) and value.startswith("TORCHINDUCTOR_"):
                return value, {True: "1", False: "0"}
    return None


def _env_read(expr: ast.expr) -> str | None:
    """The variable name of ``os.environ.get("TORCHINDUCTOR_X", ...)`` or ``os.getenv(...)``."""
    if not (isinstance(expr, ast.Call) and expr.args and isinstance(expr.args[0], ast.Constant)):
        return None
    func = ast.unparse(expr.func)
    name = expr.args[0].value
    if func in ("os.environ.get", "os.getenv") and isinstance(name, str) and name.startswith("TORCHINDUCTOR_"):
        return name
    return None


def _mode_options(mode: str | None) -> dict[str, Any]:
    if not mode:
        return {}
    import torch._inductor  # only for a mode: its option set is torch's own

    return dict(torch._inductor.list_mode_options(mode))


def _env(c: _View) -> dict[str, Any]:
    plugin, lost = _accelerate_settings(c, "TorchDynamoPlugin")
    variables, unset = _dynamo_env(plugin)
    lost = [x for x in lost if not x["setting"].startswith("options.")]
    forms, by_mode = inductor_env_forms(), _mode_options(c.mode) if plugin else {}
    for key, value in (c.options.items() if plugin else ()):
        form = forms.get(key)
        if key in by_mode and by_mode[key] != value:
            lost.append(_lost(f"options.{key}", value, f"mode {c.mode} sets {key}={by_mode[key]} at compile time, "
                              "over any environment variable"))
        elif isinstance(value, bool) and form:
            variables[form[0]] = form[1][value]
        else:
            lost.append(_lost(f"options.{key}", value, "inductor reads no TORCHINDUCTOR_* variable for it "
                              "(only boolean options in their plain environment form are carried)"))
    notes = ["ACCELERATE_DYNAMO_* are read by accelerate's TorchDynamoPlugin() (Accelerator, the Hugging Face "
             "Trainer); `accelerate launch` replaces them with its config file's dynamo_config"]
    if c.precision and plugin:
        variables["ACCELERATE_MIXED_PRECISION"] = _ACCELERATE_MIXED_PRECISION[c.precision]
        notes.append("ACCELERATE_MIXED_PRECISION is read by Accelerator() without a mixed_precision argument; "
                     + _ACCELERATE_NOTES[c.precision])
    if c.heap_pinned:
        variables.update(HEAP_ENV)
        notes.append("MALLOC_* pin glibc malloc's thresholds, as every trial was measured (CPU step times otherwise "
                     "depend on what the process ran before); glibc reads them when the process starts")
    if any(k.startswith("TORCHINDUCTOR_") for k in variables):
        notes.append("TORCHINDUCTOR_* are read once, when torch is imported, and apply to every compile in the process")
    return {"variables": variables, "unset": unset, "notes": notes, "not_carried": lost}


# --------------------------------------------------------------------------- torchtitan and vLLM


def _torchtitan(c: _View) -> dict[str, Any]:
    """torchtitan's ``[compile]`` section, as documented in pytorch/torchtitan
    torchtitan/config/job_config.py (``class Compile``: ``enable``, ``components`` of "model" and
    "loss", ``backend``); its ``apply_compile`` compiles each TransformerBlock of ``model.layers``
    with ``torch.compile(block, backend=..., fullgraph=True)`` and nothing else."""
    if not c.compiles:
        return {"compile": {"enable": False}, "not_carried": []}
    if c.precision == "tf32":
        return _refused(c, "torchtitan", "has no setting for the float32 matmul precision")
    lost = []
    if c.target != "blocks":
        lost.append(_lost("target", c.target, "torchtitan compiles each TransformerBlock separately (regional "
                          "compilation), never the whole model or modules chosen by name"))
    if not c.fullgraph:
        lost.append(_lost("fullgraph", False, "torchtitan compiles every block with fullgraph=True: a graph break "
                          "fails the run instead of falling back to eager"))
    if c.mode:
        lost.append(_lost("mode", c.mode, "torchtitan's [compile] has no mode; the default mode runs"))
    if c.dynamic is not None:
        lost.append(_lost("dynamic", c.dynamic, "torchtitan's [compile] has no dynamic setting"))
    lost += _option_losses(c, "torchtitan") + _common_losses(c, "torchtitan")
    # "loss" is left out: the tuner measured the model's compile, not a compiled loss function.
    block: dict[str, Any] = {"compile": {"enable": True, "components": ["model"], "backend": c.backend},
                             "not_carried": lost}
    if c.precision == "bf16":
        block["training"] = {"mixed_precision_param": "bfloat16"}
        block["notes"] = ["mixed_precision_param bfloat16 is torch.autocast(dtype=torch.bfloat16) on a single device "
                          "or under DDP, as measured; under FSDP (data_parallel_shard_degree > 1) fully_shard casts "
                          "the parameters to bfloat16 instead, which rounds differently from what was measured"]
    return block


def _vllm(c: _View) -> dict[str, Any]:
    """vLLM's ``compilation_config``, as documented in vllm-project/vllm vllm/config/compilation.py
    (``CompilationConfig``: ``mode`` 0 NONE / 1 STOCK_TORCH_COMPILE / 3 VLLM_COMPILE, ``backend``,
    ``inductor_compile_config``, ...). Mode 1 is plain torch.compile, the pipeline that was measured;
    vLLM passes ``inductor_compile_config`` as its ``options`` when the backend is inductor."""
    if not c.compiles:
        return {"compilation_config": {"mode": 0}, "notes": [], "not_carried": []}
    if c.precision:
        return _refused(c, "vLLM", "has no autocast or matmul-precision setting (its dtype casts the weights "
                        "themselves, which was not measured)")
    lost = []
    if c.target != "whole":
        lost.append(_lost("target", c.target, "vLLM compiles the forward of its own model as one graph; it has no "
                          "per-module targets"))
    if c.dynamic is not None:
        lost.append(_lost("dynamic", c.dynamic, "vLLM marks the token dimension dynamic itself"))
    if not c.fullgraph:
        lost.append(_lost("fullgraph", False, "vLLM captures the model's forward as one full graph"))
    options = {**_mode_options(c.mode), **c.options}
    if "triton.cudagraphs" in options:
        lost.append(_lost("options.triton.cudagraphs", options.pop("triton.cudagraphs"),
                          "CUDA graphs in vLLM are its own cudagraph_mode, captured per batch size"))
    lost += _common_losses(c, "vLLM")
    settings: dict[str, Any] = {"mode": 1, "backend": c.backend}
    if options:
        settings["inductor_compile_config"] = options
    notes = ["mode 1 (STOCK_TORCH_COMPILE) is plain torch.compile, as measured; vLLM's default mode 3 "
             "(VLLM_COMPILE: piecewise graphs, CUDA graphs, custom passes) was not measured",
             "vLLM runs its own implementation of the model, not the workload file's: the measured speedup is a guide"]
    return {"compilation_config": settings, "notes": notes, "not_carried": lost}


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


# --------------------------------------------------------------------------- text in each tool's format

_USAGE = {
    "accelerate": ["put `dynamo_config` into your accelerate config file (accelerate launch --config_file FILE),",
                   "or, for `python train.py` without accelerate launch, set the ACCELERATE_DYNAMO_* variables below,",
                   "or in Python: Accelerator(dynamo_plugin=TorchDynamoPlugin(**plugin)) with `plugin` below"],
    "hf-trainer": ["TrainingArguments(**these, output_dir=...),",
                   "or HfArgumentParser(TrainingArguments).parse_yaml_file(FILE)"],
    "env": ["`source FILE` before starting training"],
    "torchtitan": ["merge into your torchtitan job config (.toml)"],
    "vllm": ["vllm serve MODEL --compilation-config '<this JSON>', or LLM(MODEL, compilation_config=<this dict>)"],
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
    lost = block["not_carried"]
    if lost:
        header.append("NOT CARRIED: a run from this export differs from the measured config in:")
        header += [f"  - {x['setting']}={_value(x['value'])}: {x['why']}" for x in lost]
    else:
        header.append("carries every setting of the measured config")
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


def _value(value: Any) -> str:
    return "null" if value is None else str(value)


def _comments(header: list[str]) -> str:
    return "".join(f"# {line}\n" for line in header)


def _toml(section: str, table: Mapping[str, Any]) -> str:
    # JSON spells strings, booleans and lists of strings as TOML does.
    return f"[{section}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in table.items())


_BODIES = {
    "accelerate": lambda b, h: _comments(h) + yaml.safe_dump(
        {"dynamo_config": b["dynamo_config"], **({"mixed_precision": b["mixed_precision"]} if "mixed_precision" in b
                                                 else {})}, sort_keys=False),
    "hf-trainer": lambda b, h: _comments(h) + yaml.safe_dump(b["training_args"], sort_keys=False),
    "env": lambda b, h: _comments(h) + "".join(f"export {k}={shlex.quote(v)}\n" for k, v in b["variables"].items())
    + "".join(f"unset {k}\n" for k in b["unset"]),
    "torchtitan": lambda b, h: _comments(h) + _toml("compile", b["compile"])
    + (_toml("training", b["training"]) if "training" in b else ""),
    "vllm": lambda b, h: json.dumps(b["compilation_config"]) + "\n",
}
