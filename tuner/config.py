"""The compile config: what to compile and how, its YAML form, and applying it to a model.

A :class:`CompileConfig` is the unit the tuner searches over and the thing a user gets back.
``apply_config(model, "results/<name>/best_config.yaml")`` is the one call training code needs.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import json
import types
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping

import yaml

from .errors import ConfigError

#: target values with a fixed meaning; any other string is a module-name glob pattern.
NO_COMPILE = "none"
WHOLE = "whole"
BLOCKS = "blocks"

BACKENDS_WITH_MODES = ("inductor",)
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
Verdict = Literal["compile", "stay_eager"]


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
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "CompileConfig":
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
        if self.fullgraph:
            label += " fullgraph"
        for k, v in self.options.items():
            label += f" {k}={v}"
        if self.compile_optimizer:
            label += " +optimizer"
        return label

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


EAGER = CompileConfig(target=NO_COMPILE)
PLAIN_COMPILE = CompileConfig()


# --------------------------------------------------------------------------- targets


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


def apply_config(model, config: "CompileConfig | str | Path | Mapping[str, Any]", *, warm_start: bool = True):
    """Return the model to use under ``config`` (compiled in place; same object, same
    ``state_dict`` keys, so optimizers and checkpoints keep working).

    ``config`` is a :class:`CompileConfig`, a mapping, or a path to a ``best_config.yaml``.
    A "stay eager" verdict returns the model uncompiled. A model compiled before (by
    ``torch.compile(model)`` or an earlier ``apply_config``) is uncompiled first, with a warning,
    and the module itself is returned. Given a path, the compile cache saved
    beside it (``compile_cache/``) is loaded first, so the first call starts warm
    (``warm_start=False`` skips it).

    Example:
        >>> model = tuner.apply_config(model, "results/mlp/best_config.yaml")  # doctest: +SKIP
    """
    cfg = _coerce_config(config)
    if isinstance(config, (str, Path)):
        _warn_on_thread_mismatch(load_tuned_config(config).tuned_on, config)
    elif isinstance(config, Mapping) and isinstance(config.get("tuned_on"), Mapping):
        _warn_on_thread_mismatch(config["tuned_on"], "the config")
    model = _uncompiled(model)
    if not cfg.compiles:
        return model
    if warm_start and isinstance(config, (str, Path)):
        from .warmstart import load_warm_start

        load_warm_start(Path(config), dict(load_tuned_config(config).tuned_on))
    regions = target_modules(model, cfg.target)
    if not regions:
        hint = (
            "the model has no repeated submodule class"
            if cfg.target == BLOCKS
            else "list names with [n for n, _ in model.named_modules()]"
        )
        raise ConfigError(f"target {cfg.target!r} matches no module of {type(model).__name__}", hint)
    kwargs = cfg.compile_kwargs()
    for _, module in regions:
        compile_in_place(module, kwargs)
    return model


def _uncompiled(model):
    """``model`` with every earlier ``torch.compile`` undone, so a config is never compiled on top
    of another compile (nested compiles time and behave like neither config).

    An ``OptimizedModule`` (``torch.compile(model)``) gives way to the module it wraps; a compiled
    ``forward`` left by an earlier :func:`apply_config` gives way to the module's own ``forward``.
    Each undo warns, naming what was undone.
    """
    import torch

    if isinstance(model, torch._dynamo.eval_frame.OptimizedModule):
        warnings.warn(
            f"apply_config got a torch.compile'd model (OptimizedModule around {type(model._orig_mod).__name__}); "
            "the config is applied to the original module, which is returned: use the returned model",
            stacklevel=3,
        )
        model = model._orig_mod
    undone = []
    for name, module in model.named_modules():
        forward = vars(module).get("forward")
        original = getattr(forward, "_torchdynamo_orig_callable", None)
        if original is None:
            continue
        del module.forward
        function = getattr(original, "__func__", original)  # dynamo may keep the bound or the plain function
        if function is not getattr(type(module), "forward", None):
            module.forward = types.MethodType(function, module)  # an instance forward of the user's own
        undone.append(name or type(module).__name__)
    if undone:
        warnings.warn(
            f"apply_config got a model already compiled by an earlier apply_config ({', '.join(undone)}); "
            "the earlier compile was undone and only this config is applied",
            stacklevel=3,
        )
    return model


def _warn_on_thread_mismatch(tuned_on: Mapping[str, Any], path) -> None:
    """The verdict was measured at ``tuned_on.threads`` torch threads; at another count the
    fastest config (or "stay eager") may differ."""
    import torch

    tuned = tuned_on.get("threads")
    here = torch.get_num_threads()
    if isinstance(tuned, int) and tuned != here:
        warnings.warn(
            f"{path} was tuned at {tuned} torch thread(s), this process runs {here}: the verdict holds only at "
            f"the measured thread count; call torch.set_num_threads({tuned}) (or set OMP_NUM_THREADS={tuned}), "
            f"or re-tune with --threads {here}",
            stacklevel=3,
        )


def compile_in_place(module, kwargs: dict[str, Any]) -> None:
    """Compile ``module.forward`` and keep the module object (and its state_dict keys).

    ``nn.Module.compile()`` compiles ``_call_impl``, and torch 2.13 silently skips that frame
    for classes defined inside ``torch.nn`` (``nn.Sequential``, ``nn.TransformerEncoderLayer``):
    nothing gets compiled. Wrapping the bound ``forward`` works for every class.
    """
    import torch

    module.forward = torch.compile(module.forward, **kwargs)


def optimizer_step(optimizer, config: "CompileConfig | str | Path | Mapping[str, Any]"):
    """The function to call for an optimizer step under ``config``: ``optimizer.step`` itself,
    or a compiled step when the config says ``compile_optimizer: true``.

    The optimizer's own code calls ``torch._dynamo.graph_break()`` on purpose, so the step is
    never compiled with ``fullgraph=True``.

    Example:
        >>> step = tuner.optimizer_step(optimizer, "results/m/best_config.yaml")  # doctest: +SKIP
        >>> loss.backward(); step(); optimizer.zero_grad()  # doctest: +SKIP
    """
    cfg = _coerce_config(config)
    if not (cfg.compiles and cfg.compile_optimizer):
        return optimizer.step
    import torch

    kwargs = {**cfg.compile_kwargs(), "fullgraph": False}

    @torch.compile(**kwargs)
    def step():
        optimizer.step()

    return step


def _coerce_config(config) -> CompileConfig:
    if isinstance(config, CompileConfig):
        return config
    if isinstance(config, (str, Path)):
        return load_config(config)
    if isinstance(config, Mapping):
        return CompileConfig.from_dict(config.get("config", config))
    raise ConfigError(f"expected a CompileConfig, a mapping or a path, got {type(config).__name__}")


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
        data = {
            "verdict": self.verdict,
            "config": self.config.to_dict(),
            "measured": dict(self.measured),
            "tuned_on": dict(self.tuned_on),
        }
        if self.thread_check is not None:
            data["thread_check"] = dict(self.thread_check)
        return data


def save_tuned_config(tuned: TunedConfig, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (
        "# compile-tune result. Use it with:\n"
        "#   model = tuner.apply_config(model, \"%s\")\n" % path.as_posix()
    )
    # A JSON round trip turns str subclasses (torch's TorchVersion) and tuples into plain YAML types.
    plain = json.loads(json.dumps(tuned.to_dict(), default=str))
    path.write_text(header + yaml.safe_dump(plain, sort_keys=False))
    return path


def load_tuned_config(path: str | Path) -> TunedConfig:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file", "run compile-tune first, or check the path")
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({_first_line(exc)})")
    if not isinstance(data, dict) or "config" not in data:
        raise ConfigError(f"{path}: expected a mapping with a `config` key (a best_config.yaml)")
    try:
        cfg = CompileConfig.from_dict(data["config"])
    except (ConfigError, TypeError) as exc:
        raise ConfigError(f"{path}: {exc}")
    verdict = data.get("verdict", "compile")
    if verdict not in ("compile", "stay_eager"):
        raise ConfigError(f"{path}: `verdict` must be compile or stay_eager, got {verdict!r}")
    return TunedConfig(cfg, verdict, data.get("measured") or {}, data.get("tuned_on") or {}, data.get("thread_check"))


def load_config(path: str | Path) -> CompileConfig:
    """Read a ``best_config.yaml``; warn when it was tuned on another torch or device.

    Example:
        >>> cfg = tuner.load_config("results/mlp/best_config.yaml")  # doctest: +SKIP
    """
    tuned = load_tuned_config(path)
    _warn_on_environment_mismatch(tuned, path)
    return tuned.config


def _warn_on_environment_mismatch(tuned: TunedConfig, path) -> None:
    import torch

    tuned_torch = tuned.tuned_on.get("torch")
    if tuned_torch and tuned_torch != torch.__version__:
        warnings.warn(
            f"{path} was tuned with torch {tuned_torch}, this is torch {torch.__version__}; "
            "the measured speedup may not hold, re-tune to be sure",
            stacklevel=3,
        )
    tuned_device = tuned.tuned_on.get("device")
    if tuned_device and tuned_device.startswith("cuda") and not torch.cuda.is_available():
        warnings.warn(f"{path} was tuned on {tuned_device}, but CUDA is not available here", stacklevel=3)
    elif tuned_device == "cpu" and torch.cuda.is_available():
        warnings.warn(f"{path} was tuned on the CPU; on this CUDA machine re-tune for the GPU", stacklevel=3)


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
