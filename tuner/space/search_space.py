"""Search spaces: ``search_spaces/*.yaml`` -> validated dimensions -> Optuna suggestions.

A space file lists, per dimension, the values to try::

    description: what this space is for
    target: [whole, blocks]          # or module-name globs such as "layers.*"
    backend: [inductor, aot_eager]
    mode: [default, max-autotune-no-cudagraphs]   # inductor only
    dynamic: [null, true, false, marked, marked_unbacked]   # marked: exactly the inputs' dims that vary
    fullgraph: [false, true]
    compile_optimizer: [false, true]  # training only: also compile the optimizer step
    options:                          # inductor config overrides, inductor only
      freezing: [false, true]
    dynamo:                           # torch._dynamo.config overrides, every backend
      capture_scalar_outputs: [false, true]
    precision: [null, bf16]           # changes numerics: searched only with --allow-precision-change

A scalar means "always this value". Choices that cannot work on the device or task
(CUDA graphs on a CPU, ``freezing`` for training) are dropped before the search, not tried; the
Dynamo settings an input schedule calls for (``recompile_limit``, ``automatic_dynamic_shapes``) are
added (:meth:`SearchSpace.restrict`, tuner/core/shapes.py).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any

from ..core.config import BLOCKS, WHOLE, CompileConfig
from ..core.errors import SpaceError
from ..core.precision import FLAG as PRECISION_FLAG
from ..core.precision import PRECISIONS
from ..core.precision import offered as offered_precisions
from ..core.shapes import MARKED, MARKED_UNBACKED, reaches_one, schedule_settings, split_marks
from ..core.shapes import choice_of as dynamic_choice_of
from ..core.shapes import matters as shape_setting_matters
from ..system.config_defaults import inductor_defaults
from . import data_parallel_dims as dp_dims
from .dynamo_settings import combinations as dynamo_combinations
from .dynamo_settings import drop_defaults as dynamo_drop_defaults
from .dynamo_settings import from_param as dynamo_from_param
from .dynamo_settings import known_settings as dynamo_known_settings
from .dynamo_settings import neighbours as dynamo_neighbours
from .dynamo_settings import param as dynamo_param
from .space_file import read_space

#: Choices that need CUDA; on a CPU they either do nothing (reduce-overhead) or duplicate
#: another choice (max-autotune == max-autotune-no-cudagraphs), so trying them wastes trials.
CUDA_ONLY_BACKENDS = {"cudagraphs"}
CUDA_ONLY_MODES = {"reduce-overhead", "max-autotune"}
#: Inductor options that change Triton (GPU) code only; on a CPU every choice compiles the same.
CUDA_ONLY_OPTION_PREFIXES = ("triton.", "cuda.")
CUDA_ONLY_OPTIONS = {"coordinate_descent_tuning"}
#: Why max-autotune is not searched on a CPU without frozen weights (:meth:`SearchSpace.pointless`).
CPU_AUTOTUNE_NEEDS_FREEZING = ("max-autotune without freezing on a CPU: its C++ GEMM templates need frozen weights, "
                               "so it compiles default's kernels")
#: Which GEMM backends max-autotune compares: ATEN and CPP are the CPU's, the others GPU ones.
GEMM_BACKENDS = "max_autotune_gemm_backends"
INFERENCE_ONLY_OPTIONS = {"freezing"}


@dataclass
class SearchSpace:
    """Validated choices per dimension; ``skipped`` says what was dropped and why."""

    source: str
    description: str = ""
    target: list = field(default_factory=lambda: [WHOLE])
    backend: list = field(default_factory=lambda: ["inductor"])
    mode: list = field(default_factory=lambda: ["default"])
    dynamic: list = field(default_factory=lambda: [None])
    fullgraph: list = field(default_factory=lambda: [False])
    compile_optimizer: list = field(default_factory=lambda: [False])
    options: dict[str, list] = field(default_factory=dict)
    dynamo: dict[str, list] = field(default_factory=dict)
    """torch._dynamo.config name -> choices (any backend); the model check's repairs land here too."""
    precision: list = field(default_factory=lambda: [None])
    """``CompileConfig.precision`` choices; other than null only with ``--allow-precision-change``
    (:meth:`restrict`), which adds every precision the device supports when the YAML lists none."""
    precision_listed: bool = False
    """Whether the YAML lists ``precision`` (then the flag keeps its list instead of adding all)."""
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Choices kept but worth a word (bf16 emulated on this CPU)."""
    marks: dict = field(default_factory=dict)
    """What ``dynamic: marked`` marks: the input dimensions that vary over the schedule (set by
    :meth:`restrict`; tuner/runtime/marks.py)."""
    shape_settings: list[str] = field(default_factory=list)
    """The ``dynamo`` settings :meth:`restrict` added for the input schedule. Each matters only with
    some ``dynamic`` choices (tuner/core/shapes.py ``matters``); with the others it stays at Dynamo's
    default, so configs that would differ only there are one config."""
    data_parallel: dict[str, list] = field(default_factory=dict)
    """On many ranks (``--nproc``): the DDP or FSDP2 settings searched (tuner/space/data_parallel_dims.py)."""
    wrap: str | None = None
    """``ddp`` or ``fsdp2`` on many ranks, else None."""
    reasons: dict[str, str] = field(default_factory=dict)
    """Why :meth:`restrict` added a dimension (``dynamo.recompile_limit`` -> why), for ``compile-tune space``."""
    device: str = ""
    """The device :meth:`restrict` fitted the space to (what :meth:`pointless` judges by)."""

    def pointless(self, cfg: CompileConfig) -> str | None:
        """Why ``cfg`` cannot differ from a config already in the space on this device, or None.
        On a CPU, max-autotune's only search is inductor's C++ GEMM templates, which run only with
        constant (frozen) weights: without ``freezing`` no autotune ran and the kernels were
        default's (../shared/TORCH_COMPILE_FACTS.md, measured on this machine's torch 2.13). The
        zoo's ViT-B/16 raced exactly such a config as its only finalist (measurement 12)."""
        if not self.device.startswith("cpu") or cfg.backend != "inductor" or not str(cfg.mode or "").startswith(
                "max-autotune") or cfg.options.get("freezing"):
            return None
        return CPU_AUTOTUNE_NEEDS_FREEZING

    def suggest(self, trial) -> CompileConfig:
        """Ask an Optuna trial for one config; mode and options only exist under inductor."""
        target = trial.suggest_categorical("target", self.target)
        backend = trial.suggest_categorical("backend", self.backend)
        mode, options = None, {}
        if backend == "inductor":
            mode = trial.suggest_categorical("mode", self.mode)
            for name, choices in self.options.items():
                options[name] = trial.suggest_categorical(f"options.{name}", choices)
        dynamic = trial.suggest_categorical("dynamic", self.dynamic)
        fullgraph = trial.suggest_categorical("fullgraph", self.fullgraph)
        compile_optimizer = trial.suggest_categorical("compile_optimizer", self.compile_optimizer)
        dynamo = {n: dynamo_from_param(trial.suggest_categorical(
            f"dynamo.{n}", [dynamo_param(c) for c in cs]), cs) for n, cs in self.dynamo.items()}
        # asked only when searched, so studies without precision keep their parameters
        precision = trial.suggest_categorical("precision", self.precision) if self.precision != [None] else None
        data_parallel = dp_dims.settings(self.wrap, {n: trial.suggest_categorical(f"data_parallel.{n}", cs)
                                                     for n, cs in self.data_parallel.items()})
        return self._fit(CompileConfig(target, backend, mode, fullgraph=fullgraph, options=_drop_defaults(options),
                                       compile_optimizer=compile_optimizer, **self._dynamic(dynamic, target),
                                       dynamo=dynamo_drop_defaults(dynamo), precision=precision,
                                       data_parallel=data_parallel))

    def _dynamic(self, choice, target: str) -> dict[str, Any]:
        """The config fields of a ``dynamic`` choice; ``marked`` and ``marked_unbacked`` mark the
        model's inputs, so with another target they are plain automatic dynamic (``null``)."""
        if choice not in (MARKED, MARKED_UNBACKED):
            return {"dynamic": choice, "mark_dynamic": {}, "mark_unbacked": {}}
        if target != WHOLE:
            return {"dynamic": None, "mark_dynamic": {}, "mark_unbacked": {}}
        return {"dynamic": None, **split_marks(self.marks, unbacked=choice == MARKED_UNBACKED)}

    def _fit(self, cfg: CompileConfig) -> CompileConfig:
        """``cfg`` without the schedule settings that change nothing under its ``dynamic`` choice."""
        idle = [n for n in self.shape_settings if n in cfg.dynamo and not shape_setting_matters(n, cfg)]
        return replace(cfg, dynamo={k: v for k, v in cfg.dynamo.items() if k not in idle}) if idle else cfg

    def params_for(self, cfg: CompileConfig) -> dict[str, Any]:
        """The Optuna params that make :meth:`suggest` return ``cfg`` (for enqueue_trial)."""
        params: dict[str, Any] = {
            "target": cfg.target, "backend": cfg.backend, "fullgraph": cfg.fullgraph,
            "dynamic": dynamic_choice_of(cfg),
            "compile_optimizer": cfg.compile_optimizer,
        }
        if self.precision != [None]:
            params["precision"] = cfg.precision if cfg.precision in self.precision else self.precision[0]
        for name in self.data_parallel:
            params[f"data_parallel.{name}"] = dp_dims.value_of(dict(cfg.data_parallel), self.wrap or "", name)
        dynamo_defaults = dynamo_known_settings() if self.dynamo else {}
        for name in self.dynamo:
            params[f"dynamo.{name}"] = dynamo_param(cfg.dynamo.get(name, dynamo_defaults.get(name)))
        if cfg.backend == "inductor":
            params["mode"] = cfg.mode if cfg.mode in self.mode else "default"
            if params["mode"] not in self.mode:
                params["mode"] = self.mode[0]
            defaults = inductor_defaults()
            for name in self.options:
                params[f"options.{name}"] = cfg.options.get(name, defaults.get(name))
        return params

    def neighbours(self, cfg: CompileConfig) -> list[CompileConfig]:
        """Configs of this space that differ from ``cfg`` in one setting, in the order the
        settings usually matter: target, backend, mode, dynamic, options, dynamo, precision, fullgraph,
        optimizer."""
        base = replace(cfg, mode=cfg.mode or "default")
        # a schedule setting changed under a dynamic choice it does not matter for is no neighbour
        out: dict[str, CompileConfig] = {base.key(): base}
        for changed in map(self._fit, self._neighbours(base)):
            out.setdefault(changed.key(), changed)
        return [c for c in list(out.values())[1:] if self.pointless(c) is None]

    def _neighbours(self, base: CompileConfig) -> list[CompileConfig]:
        out: list[CompileConfig] = []
        for dim in ("target", "backend", "mode", "dynamic"):
            if dim == "mode" and base.backend != "inductor":
                continue
            for value in getattr(self, dim):
                if dim == "dynamic":
                    changed = replace(base, **self._dynamic(value, base.target))
                    if changed.key() != base.key():
                        out.append(changed)
                    continue
                if value != getattr(base, dim):
                    drop_marks: dict[str, Any] = ({"mark_dynamic": {}, "mark_unbacked": {}}
                                                  if dim == "target" and value != WHOLE else {})
                    changed = replace(base, **{dim: value}, **drop_marks)
                    if dim == "backend" and value != "inductor":
                        changed = replace(changed, mode=None, options={})
                    elif dim == "backend":
                        changed = replace(changed, mode=self.mode[0])
                    out.append(changed)
        if base.backend == "inductor":
            defaults = inductor_defaults()
            for name, values in self.options.items():
                current = base.options.get(name, defaults.get(name))
                for value in values:
                    if value != current:
                        out.append(replace(base, options=_drop_defaults({**base.options, name: value})))
        out += [replace(base, dynamo=d) for d in dynamo_neighbours(base.dynamo, self.dynamo)]
        out += [replace(base, precision=p) for p in self.precision if p != base.precision]
        out += [replace(base, data_parallel=d) for d in dp_dims.neighbours(dict(base.data_parallel),
                                                                           self.data_parallel, self.wrap)]
        for dim in ("fullgraph", "compile_optimizer"):
            for value in getattr(self, dim):
                if value != getattr(base, dim):
                    out.append(replace(base, **{dim: value}))
        return out

    def configs(self) -> list[CompileConfig]:
        """Every distinct config in the space (what an exhaustive sweep measures)."""
        seen: dict[str, CompileConfig] = {}
        option_names = list(self.options)
        dynamo_sets = dynamo_combinations(self.dynamo)
        for target, backend, dynamic, fullgraph, compile_optimizer in itertools.product(
            self.target, self.backend, self.dynamic, self.fullgraph, self.compile_optimizer
        ):
            modes = self.mode if backend == "inductor" else [None]
            option_sets = (
                itertools.product(*(self.options[n] for n in option_names))
                if backend == "inductor"
                else [()]
            )
            for mode, values in itertools.product(modes, list(option_sets)):
                opts = _drop_defaults(dict(zip(option_names, values)))
                cfg = CompileConfig(target, backend, mode, fullgraph=fullgraph, options=opts,
                                    compile_optimizer=compile_optimizer, **self._dynamic(dynamic, target))
                for dynamo, precision, dp in itertools.product(
                        dynamo_sets, self.precision, dp_dims.combinations(self.data_parallel, self.wrap)):
                    with_dynamo = self._fit(replace(cfg, dynamo=dynamo, precision=precision, data_parallel=dp))
                    seen.setdefault(with_dynamo.key(), with_dynamo)
        return [c for c in seen.values() if self.pointless(c) is None]

    def restrict(self, *, device: str, task: str, has_blocks: bool, varying_dims: dict | None = None,
                 shapes: int = 1, allow_precision_change: bool = False, blocks_note: str = "",
                 data_parallel: str | None = None) -> SearchSpace:
        """Drop choices that cannot work here; record each drop in ``skipped``. ``varying_dims``:
        the input dimensions that vary over the schedule (what ``dynamic: marked`` marks);
        ``shapes``: how many distinct input shapes it has. Both decide the ``dynamo`` settings the
        schedule calls for, which are added with a reason in ``reasons`` (tuner/core/shapes.py).
        ``allow_precision_change`` (``--allow-precision-change``): search ``precision``, the YAML's
        choices or else every one the device supports; without it every precision is dropped.
        ``blocks_note``: why the model has no block (``targets.find_blocks``), for the drop of ``blocks``.
        ``data_parallel`` (``--data-parallel``): search that wrap's settings too, each with its reason."""
        cuda = device.startswith("cuda")
        self.device = device
        if not cuda:
            self._drop("backend", CUDA_ONLY_BACKENDS, "needs CUDA")
            self._drop("mode", CUDA_ONLY_MODES, "needs CUDA (same as another choice on CPU)")
            autotune = {m for m in self.mode if str(m).startswith("max-autotune")}
            if autotune and (task == "train" or True not in self.options.get("freezing", [])):
                # every such config would be pointless: drop the mode itself (its configs leave the space)
                self._drop("mode", autotune, CPU_AUTOTUNE_NEEDS_FREEZING.split(": ", 1)[1]
                           + (" (training never freezes)" if task == "train" else " (freezing is not searched)"))
            elif autotune:
                self.skipped.append(f"mode={'/'.join(sorted(autotune))} without freezing: "
                                    + CPU_AUTOTUNE_NEEDS_FREEZING.split(": ", 1)[1])
            for name in [n for n in self.options if n.startswith(CUDA_ONLY_OPTION_PREFIXES) or n in CUDA_ONLY_OPTIONS]:
                self.skipped.append(f"options.{name}: needs CUDA (changes GPU code only)")
                del self.options[name]
            gemm = self.options.get(GEMM_BACKENDS, [])
            if gemm and not any("CPP" in str(v).upper().split(",") for v in gemm):
                self.skipped.append(f"options.{GEMM_BACKENDS}: no choice names CPP, the CPU's GEMM templates, so on a "
                                    "CPU every choice is ATen alone")
                del self.options[GEMM_BACKENDS]
        if task != "train" and True in self.compile_optimizer:
            self.skipped.append("compile_optimizer=True: training only")
            self.compile_optimizer = [False]
        if task == "train":
            for name in [n for n in self.options if n in INFERENCE_ONLY_OPTIONS]:
                self.skipped.append(f"options.{name}: inference only")
                del self.options[name]
        if not has_blocks:
            self._drop("target", {BLOCKS}, blocks_note or "the model has no repeated submodule class")
        self._restrict_dynamic(dict(varying_dims or {}), shapes)
        self._restrict_precision(device, allow_precision_change)
        if data_parallel:
            self.wrap, self.data_parallel = data_parallel, dp_dims.dims(data_parallel)
            self.reasons.update(dp_dims.reasons(data_parallel))
            self.skipped += dp_dims.LEFT_OUT[data_parallel]
        for dim in ("target", "backend", "mode"):
            if not getattr(self, dim):
                raise SpaceError(
                    f"{self.source}: no `{dim}` choice is usable here ({'; '.join(self.skipped)})",
                    f"add a `{dim}` value that works on {device}",
                )
        return self

    def _drop(self, dim: str, bad: set, why: str) -> None:
        """The ``bad`` choices of ``dim`` dropped, each noted in ``skipped`` with ``why``."""
        values = getattr(self, dim)
        self.skipped += [f"{dim}={_yaml(v)}: {why}" for v in values if v in bad]
        setattr(self, dim, [v for v in values if v not in bad])

    def _restrict_dynamic(self, marks: dict, shapes: int) -> None:
        """The marked choices where they can mark something; the schedule's Dynamo settings added."""
        self.marks = marks
        both = {MARKED, MARKED_UNBACKED}
        if not marks:
            self._drop("dynamic", both, "no input dimension varies over the input schedule")
        elif WHOLE not in self.target:
            self._drop("dynamic", both, "it marks the model's inputs: needs target whole")
        elif not reaches_one(marks):
            self._drop("dynamic", {MARKED_UNBACKED}, "no varying input dimension reaches 0 or 1 (which "
                       "mark_dynamic specialises): the same marks as marked")
        self.dynamic = self.dynamic or [None]
        added, skipped = schedule_settings(self.dynamic, shapes=shapes, varies=bool(marks), listed=self.dynamo,
                                           recompile_limit=dynamo_known_settings()["recompile_limit"])
        for setting in added:
            self.dynamo[setting.name] = setting.values
            self.shape_settings.append(setting.name)
            self.reasons[f"dynamo.{setting.name}"] = setting.reason
        self.skipped += skipped

    def _restrict_precision(self, device: str, allowed: bool) -> None:
        """Precisions change numerics: none without the flag (each listed one noted as skipped),
        with it the listed ones (or all) that the device supports (tuner/core/precision.py)."""
        if not allowed:
            for p in self.precision:
                if p is not None:
                    self.skipped.append(f"precision={p}: changes numerics; pass {PRECISION_FLAG} to search it")
            self.precision = [None]
            return
        if not self.precision_listed:
            self.precision = [None, *PRECISIONS]
        kept, why = offered_precisions(device)
        for p in self.precision:
            if p is not None and p not in kept:
                self.skipped.append(f"precision={p}: {why.get(p, f'not supported on {device}')}")
            elif p is not None and p in why:
                self.notes.append(f"precision={p}: {why[p]}")
        self.precision = [p for p in self.precision if p is None or p in kept] or [None]


def _yaml(value: Any) -> str:
    """A choice as the YAML file writes it; others (backend names, modes) as they are."""
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def _drop_defaults(options: dict[str, Any]) -> dict[str, Any]:
    """Options equal to inductor's default are left out, so equal configs get equal keys."""
    if not options:
        return options
    defaults = inductor_defaults()
    return {k: v for k, v in options.items() if defaults.get(k, object()) != v}


def load_space(name_or_path: str) -> SearchSpace:
    """A bundled space by name (``quick``) or a YAML file, validated (tuner/space/space_file.py)."""
    return SearchSpace(**read_space(name_or_path))
