"""The compile config (what to compile and how) and a tuned result, as values.

A :class:`CompileConfig` is the unit the tuner searches over and the thing a user gets back;
which modules it targets is tuner/core/targets.py, applying it to a model tuner/runtime/apply.py,
and the ``best_config.yaml`` a :class:`TunedConfig` is written to tuner/export/best_config.py.
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .data_parallel import check_data_parallel, describe_data_parallel
from .errors import ConfigError
from .precision import PRECISIONS
from .precision import label as precision_label

#: target values with a fixed meaning; any other string is a module-name glob pattern.
NO_COMPILE = "none"
WHOLE = "whole"
BLOCKS = "blocks"

BACKENDS_WITH_MODES = ("inductor",)
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
Verdict = Literal["compile", "stay_eager", "undecided"]


@dataclass(frozen=True)
class CompileConfig:
    """One way to run a model under ``torch.compile``.

    Example:
        >>> cfg = CompileConfig(target="blocks", backend="inductor", mode="default")
        >>> CompileConfig.from_dict(cfg.to_dict()) == cfg
        True
    """

    target: str = WHOLE
    """``whole`` (the model), ``blocks`` (every instance of the repeated block class, found
    automatically), ``none`` (stay eager), or a glob over module names such as ``layers.*``."""
    backend: str = "inductor"
    """A ``torch._dynamo`` backend name: inductor, aot_eager, eager, cudagraphs, ..."""
    mode: str | None = None
    """Inductor mode; ``None`` means the backend default. Ignored by other backends."""
    dynamic: bool | None = None
    """``torch.compile(dynamic=...)``: None = automatic dynamic after a recompile."""
    fullgraph: bool = False
    """Fail instead of graph-breaking."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """Inductor config overrides, e.g. ``{"freezing": True}``."""
    compile_optimizer: bool = False
    """Training only: also compile the optimizer step (see :func:`optimizer_step`)."""
    mark_dynamic: Mapping[str, Mapping[int, Any]] = field(default_factory=dict)
    """Per-dimension dynamic shapes, whole-model target only: input (positional index or keyword
    name) -> dimension -> ``[min, max]`` seen over the input schedule. Those dimensions, and only
    those, are marked dynamic on every call (``torch._dynamo.mark_dynamic``; ``maybe_mark_dynamic``
    where the range reaches 0 or 1, which Dynamo specialises); the range is recorded, not passed
    as bounds (a bound makes a size outside it an error); see tuner/runtime/marks.py."""
    mark_unbacked: Mapping[str, Mapping[int, Any]] = field(default_factory=dict)
    """Like ``mark_dynamic``, for dimensions whose range reaches 0 or 1: marked with
    ``torch._dynamo.decorators.mark_unbacked``, so sizes 0 and 1 are not specialised and run the
    same graph as every other size (``dynamic: marked_unbacked``; tuner/core/shapes.py)."""
    dynamo: Mapping[str, Any] = field(default_factory=dict)
    """``torch._dynamo.config`` overrides for this model's compiled code, any backend, e.g.
    ``{"capture_scalar_outputs": True}``: YAML scalars, or lists of dotted names for the settings
    that hold callables (``{"ignore_logging_functions": ["logging.Logger.info"]}``); applied around
    every call of the compiled forward (tuner/runtime/dynamo.py)."""
    precision: str | None = None
    """``None``: the model's own numerics. ``bf16``: the whole model's forward under
    ``torch.autocast(dtype=torch.bfloat16)``; ``tf32``: float32 matmuls on TF32 tensor cores
    (``torch.set_float32_matmul_precision("high")``, process-wide, CUDA only). Either *changes
    numerics*: searched only with ``--allow-precision-change`` (tuner/core/precision.py)."""
    data_parallel: Mapping[str, Any] = field(default_factory=dict)
    """Training on many ranks (``--nproc``): how the model is wrapped around its compiled code, e.g.
    ``{"wrap": "ddp", "optimize_ddp": "ddp_optimizer", "bucket_cap_mb": 25}`` or ``{"wrap": "fsdp2",
    "reshard_after_forward": true}``; empty for one process (tuner/runtime/parallel_wrap.py)."""

    def __post_init__(self) -> None:
        if not isinstance(self.target, str) or not self.target:
            raise ConfigError(f"`target` must be a non-empty string, got {self.target!r}")
        if not isinstance(self.backend, str) or not self.backend:
            raise ConfigError(f"`backend` must be a non-empty string, got {self.backend!r}")
        if self.mode is not None and self.mode not in MODES:
            raise ConfigError(f"`mode` must be one of {', '.join(MODES)} or null, got {self.mode!r}")
        if self.dynamic not in (None, True, False):
            raise ConfigError(f"`dynamic` must be true, false or null, got {self.dynamic!r}")
        if not isinstance(self.fullgraph, bool):
            raise ConfigError(f"`fullgraph` must be true or false, got {self.fullgraph!r}")
        if not isinstance(self.compile_optimizer, bool):
            raise ConfigError(f"`compile_optimizer` must be true or false, got {self.compile_optimizer!r}")
        if not isinstance(self.options, Mapping):
            raise ConfigError(f"`options` must be a mapping, got {type(self.options).__name__}")
        # Freeze the mapping so the dataclass stays hashable-by-key and safe to share.
        object.__setattr__(self, "options", dict(sorted(self.options.items())))
        object.__setattr__(self, "dynamo", _dynamo_settings(self.dynamo))
        object.__setattr__(self, "mark_dynamic", _marks(self.mark_dynamic, "mark_dynamic"))
        object.__setattr__(self, "mark_unbacked", _marks(self.mark_unbacked, "mark_unbacked"))
        object.__setattr__(self, "data_parallel", check_data_parallel(self.data_parallel))
        if self.precision is not None and self.precision not in PRECISIONS:
            raise ConfigError(f"`precision` must be one of {', '.join(PRECISIONS)} or null, got {self.precision!r}")
        if self.precision is not None and self.target == NO_COMPILE:
            raise ConfigError(f"`precision: {self.precision}` applies to a compiled model; target none runs eager "
                              "in the model's own dtypes", "drop precision, or set a target")
        for marks in ("mark_dynamic", "mark_unbacked"):
            if getattr(self, marks) and self.target != WHOLE:
                raise ConfigError(f"`{marks}` marks the model's inputs, so it needs `target: whole`, got "
                                  f"{self.target!r}", f"drop {marks}, or compile the whole model")
        twice = sorted(f"{name}[{dim}]" for name, dims in self.mark_unbacked.items() for dim in dims
                       if dim in self.mark_dynamic.get(name, {}))
        if twice:
            raise ConfigError(f"an input dimension is either in `mark_dynamic` or in `mark_unbacked`, got "
                              f"{', '.join(twice)} in both", "keep each dimension in one of them")

    @property
    def compiles(self) -> bool:
        return self.target != NO_COMPILE

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "backend": self.backend,
            "mode": self.mode,
            "dynamic": self.dynamic,
            "fullgraph": self.fullgraph,
            "options": dict(self.options),
            "compile_optimizer": self.compile_optimizer,
            **({"dynamo": {k: list(v) if isinstance(v, list) else v for k, v in self.dynamo.items()}}
               if self.dynamo else {}),  # absent when empty: older configs keep their keys
            **{marks: {k: {d: list(r) for d, r in dims.items()} for k, dims in getattr(self, marks).items()}
               for marks in ("mark_dynamic", "mark_unbacked") if getattr(self, marks)},  # absent when empty
            **({"precision": self.precision} if self.precision else {}),  # absent when null: keys unchanged
            **({"data_parallel": dict(self.data_parallel)} if self.data_parallel else {}),  # absent for one process
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CompileConfig:
        if not isinstance(data, Mapping):
            raise ConfigError(f"a compile config must be a mapping, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(
                f"unknown compile config key(s) {', '.join(unknown)}; "
                f"known keys are {', '.join(sorted(known))}"
            )
        return cls(**{k: data[k] for k in known if k in data})

    def key(self) -> str:
        """A canonical string: two configs that compile the same way have the same key."""
        if not self.compiles:
            return NO_COMPILE
        d = self.to_dict()
        if not self.compile_optimizer:
            del d["compile_optimizer"]  # keeps keys of configs from before this field stable
        for marks in ("mark_dynamic", "mark_unbacked"):
            if marks in d:  # JSON keys are strings: the dims too
                d[marks] = {k: {str(dim): r for dim, r in dims.items()} for k, dims in d[marks].items()}
        if self.backend not in BACKENDS_WITH_MODES:
            # Other backends ignore mode and options (torch logs and drops them).
            d["mode"], d["options"] = None, {}
        elif d["mode"] == "default":
            d["mode"] = None
        return json.dumps(d, sort_keys=True)

    def describe(self) -> str:
        """A short human label, e.g. ``blocks/inductor/max-autotune dyn=True +freezing``."""
        if not self.compiles:
            return "eager (no compile)"
        parts = [self.target, self.backend]
        if self.backend in BACKENDS_WITH_MODES:
            parts.append(self.mode or "default")
        label = "/".join(parts)
        if self.dynamic is not None:
            label += f" dynamic={self.dynamic}"
        if self.mark_dynamic:
            label += " dynamic=" + ",".join(f"{k}[{d}]" for k, dims in self.mark_dynamic.items() for d in dims)
        if self.mark_unbacked:
            label += " unbacked=" + ",".join(f"{k}[{d}]" for k, dims in self.mark_unbacked.items() for d in dims)
        if self.fullgraph:
            label += " fullgraph"
        for k, v in self.options.items():
            label += f" {k}={v}"
        if self.compile_optimizer:
            label += " +optimizer"
        for k, v in self.dynamo.items():
            label += " " + describe_dynamo(k, v)
        if self.precision:
            label += " " + precision_label(self.precision)
        if self.data_parallel:
            label += " " + describe_data_parallel(self.data_parallel)
        return label

    @property
    def changes_numerics(self) -> bool:
        """True when the config computes in a lower precision than the model (``precision``)."""
        return self.precision is not None

    def compile_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``torch.compile``.

        torch refuses ``mode`` and ``options`` together, so a mode with options is spelled
        as the mode's own option set plus the overrides.
        """
        kwargs: dict[str, Any] = {
            "backend": self.backend,
            "dynamic": self.dynamic,
            "fullgraph": self.fullgraph,
        }
        if self.backend not in BACKENDS_WITH_MODES:
            return kwargs
        mode = None if self.mode in (None, "default") else self.mode
        if self.options:
            import torch._inductor

            merged = dict(torch._inductor.list_mode_options(mode)) if mode else {}
            merged.update(self.options)
            kwargs["options"] = merged
        elif mode:
            kwargs["mode"] = mode
        return kwargs


def describe_dynamo(name: str, value: Any) -> str:
    """``+capture_scalar_outputs``, ``-trace_numpy``, ``recompile_limit=4``,
    ``ignore_logging_functions=[Logger.info]``."""
    if value is True:
        return f"+{name}"
    if value is False:
        return f"-{name}"
    if isinstance(value, list):
        return f"{name}=[{','.join(_short_dotted(v) for v in value)}]"
    return f"{name}={value}"


def _short_dotted(dotted: str) -> str:
    """``logging.Logger.info`` -> ``Logger.info``; ``builtins.print`` -> ``print``."""
    return ".".join(dotted.removeprefix("builtins.").split(".")[-2:])


def _marks(marks, field_name: str) -> dict[str, dict[int, list[int]]]:
    """``mark_dynamic`` (or ``mark_unbacked``) checked and in one canonical form: {input: {dim: [min, max]}}."""
    if not isinstance(marks, Mapping):
        raise ConfigError(f"`{field_name}` must map inputs to {{dim: [min, max]}}, got {type(marks).__name__}")
    out: dict[str, dict[int, list[int]]] = {}
    for name, dims in sorted(marks.items(), key=lambda kv: str(kv[0])):
        if not isinstance(dims, Mapping) or not dims:
            raise ConfigError(f"`{field_name}.{name}` must map dimensions to [min, max], got {dims!r}")
        try:
            ordered = sorted(dims.items(), key=lambda kv: int(kv[0]))
            out[str(name)] = {int(d): [int(r[0]), int(r[1])] for d, r in ordered}
        except (TypeError, ValueError, IndexError, KeyError):
            raise ConfigError(f"`{field_name}.{name}` must map dimensions to [min, max], got {dims!r}") from None
    return out


def _dynamo_settings(settings) -> dict[str, Any]:
    """``dynamo`` checked and canonical: names sorted, name lists sorted; callables as dotted names."""
    if not isinstance(settings, Mapping):
        raise ConfigError(f"`dynamo` must map torch._dynamo.config names to values, got {type(settings).__name__}")
    out: dict[str, Any] = {}
    for name, value in sorted(settings.items(), key=lambda kv: str(kv[0])):
        if not isinstance(name, str) or not name.isidentifier():
            raise ConfigError(f"`dynamo` keys must be torch._dynamo.config names, got {name!r}")
        if isinstance(value, (list, tuple, set, frozenset)):
            if not all(isinstance(v, str) for v in value):
                raise ConfigError(f"`dynamo.{name}` must list dotted names such as logging.Logger.info, got {value!r}",
                                  "write a callable as module.attribute (builtins.print, logging.Logger.info)")
            value = sorted(set(value))
        elif not isinstance(value, (bool, int, float, str, type(None))):
            raise ConfigError(f"`dynamo.{name}` must be a YAML scalar or a list of dotted names, got {value!r}")
        out[name] = value
    return out


EAGER = CompileConfig(target=NO_COMPILE)
PLAIN_COMPILE = CompileConfig()


# --------------------------------------------------------------------------- best_config.yaml


@dataclass(frozen=True)
class TunedConfig:
    """The content of ``best_config.yaml``: the config, the verdict and what was measured."""

    config: CompileConfig
    verdict: Verdict = "compile"
    measured: Mapping[str, Any] = field(default_factory=dict)
    tuned_on: Mapping[str, Any] = field(default_factory=dict)
    thread_check: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"verdict": self.verdict}
        if self.config.changes_numerics:  # said where a reader looks first; loading derives it from the config
            data["changes_numerics"] = True
        data.update({
            "config": self.config.to_dict(),
            "measured": dict(self.measured),
            "tuned_on": dict(self.tuned_on),
        })
        if self.thread_check is not None:
            data["thread_check"] = dict(self.thread_check)
        return data
