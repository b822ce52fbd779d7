"""Applying a config in the user's process: compile the target modules in place, the
optimizer step, and undo an earlier compile. The one call training code needs is
``apply_config(model, "results/<name>/best_config.yaml")``.
"""
from __future__ import annotations

import types
import warnings
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..core.config import BLOCKS, EAGER, CompileConfig, TunedConfig
from ..core.errors import ConfigError
from ..core.targets import target_modules
from ..export.best_config import load_tuned_config
from ..system.heap import PINNED_NOTE, pinned_as_measured
from ..system.heap import pin_heap as pin_glibc_heap
from . import precompiled
from .apply_precision import INNER as PRECISION_INNER
from .apply_precision import MARK as PRECISION_MARK
from .apply_precision import autocast_forward, set_matmul_precision
from .dynamo import resolved, scoped
from .marks import marked
from .parallel_wrap import is_wrapped
from .parallel_wrap import wrap as data_parallel_wrap
from .warmstart import CACHE_DIRNAME, load_warm_start


def apply_config(model, config: CompileConfig | str | Path | Mapping[str, Any], *, warm_start: bool = True,
                 pin_heap: bool = True):
    """Return the model to use under ``config`` (compiled in place; same object, same
    ``state_dict`` keys, so optimizers and checkpoints keep working).

    ``config`` is a :class:`CompileConfig`, a mapping, or a path to a ``best_config.yaml``.
    A "stay eager" verdict returns the model uncompiled. A model compiled before (by
    ``torch.compile(model)`` or an earlier ``apply_config``) is uncompiled first, with a warning,
    and the module itself is returned. Given a path, the compile cache saved
    beside it (``compile_cache/``) is loaded first, so the first call starts warm
    (``warm_start=False`` skips it). That cache is compiled code: it is loaded only when it
    matches the hash in the YAML, into a cache directory of its own (tuner/runtime/warmstart.py).
    A config with ``precision`` *changes numerics*: ``bf16`` runs the model's whole forward under
    bfloat16 autocast (whatever the target), ``tf32`` sets ``torch.set_float32_matmul_precision("high")``
    for the whole process, with a warning (tuner/runtime/apply_precision.py). A config measured on CPU
    with glibc malloc's thresholds pinned (``tuned_on.heap``) pins them in this process too, for
    every verdict: the step times it quotes were measured so, not because the pin's own gain was
    decided (``measured.heap_pinned_because``; tuner/system/heap.py).

    Example:
        >>> model = tuner.apply_config(model, "results/mlp/best_config.yaml")  # doctest: +SKIP
    """
    tuned = load_tuned_config(config) if isinstance(config, (str, Path)) else None  # read once
    cfg = _as_measured(model, config, tuned, pin_heap)
    model = _uncompiled(model)
    if cfg.data_parallel:
        _refuse_wrapped(model)
    if not cfg.compiles:
        return data_parallel_wrap(model, cfg.data_parallel) if cfg.data_parallel else model
    if warm_start and tuned is not None and isinstance(config, (str, Path)):
        warm = load_warm_start(Path(config), dict(tuned.tuned_on), dict(tuned.measured))
        if warm and _precompiled(model, Path(config), tuned, cfg):  # verified bundle, no trace needed
            return model
    regions = target_modules(model, cfg.target)
    if not regions:
        hint = (
            "the model has no repeated submodule class"
            if cfg.target == BLOCKS
            else "list names with [n for n, _ in model.named_modules()]"
        )
        raise ConfigError(f"target {cfg.target!r} matches no module of {type(model).__name__}", hint)
    kwargs = cfg.compile_kwargs()
    dynamo = resolved(cfg.dynamo) if cfg.dynamo else None  # a bad name fails before anything compiles
    for _, module in regions:
        compile_in_place(module, kwargs, cfg.mark_dynamic, cfg.mark_unbacked)
        if dynamo:  # per call, for this model only: tuner/runtime/dynamo.py says why
            module.forward = scoped(module.forward, dynamo)
    if cfg.precision:  # around the whole model's forward, whatever the target: tuner/runtime/apply_precision.py
        forward = model.forward
        wrapped = autocast_forward(forward, model, cfg.precision)
        if wrapped is not forward:  # tf32 has no wrapper
            model.forward = wrapped
        set_matmul_precision(cfg.precision)
    # compiled first, then wrapped, as torchtitan orders it (tuner/core/data_parallel.py)
    return data_parallel_wrap(model, cfg.data_parallel) if cfg.data_parallel else model


def _precompiled(model, config_path: Path, tuned: TunedConfig, cfg: CompileConfig) -> bool:
    """Start from the precompiled forward saved in the verified bundle, where the bundle step
    timed it faster than the bundle alone (``measured.warm_start_with``: tuner/runtime/precompiled.py)."""
    if tuned.measured.get(precompiled.CHOICE_KEY) != "precompiled":
        return False
    if precompiled.not_precompilable(cfg, str(tuned.tuned_on.get("task", "infer")), tuned.measured.get("graph_breaks")):
        return False
    kwargs = cfg.compile_kwargs()
    return precompiled.install(model, config_path.parent / CACHE_DIRNAME, tuned.measured, cfg,
                               fallback=lambda: compile_in_place(model, kwargs))


def _refuse_wrapped(model) -> None:
    """A data-parallel config wraps the model itself, with its tuned settings: not twice."""
    if is_wrapped(model):
        raise ConfigError(f"apply_config got a model wrapped already ({type(model).__name__}), but this config "
                          "wraps it with its tuned data-parallel settings",
                          "pass the bare model to apply_config and use the model it returns")


def load_config(path: str | Path) -> CompileConfig:
    """Read a ``best_config.yaml``; warn when it was tuned on another torch or device.

    Example:
        >>> cfg = tuner.load_config("results/mlp/best_config.yaml")  # doctest: +SKIP
    """
    tuned = load_tuned_config(path)
    warn_on_environment_mismatch(tuned, path)
    return tuned.config


def warn_on_environment_mismatch(tuned: TunedConfig, path) -> None:
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
        if original is None and getattr(forward, PRECISION_MARK, None):
            original = getattr(forward, PRECISION_INNER)  # bf16 autocast around the model's own forward (blocks)
        if original is None:
            continue
        if not hasattr(original, "__func__") and hasattr(getattr(original, "__wrapped__", None), "__func__"):
            original = original.__wrapped__  # Dynamo's wrapper around a torch.nn class's bound forward (Sequential)
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


def compile_in_place(module, kwargs: dict[str, Any], marks: Mapping[str, Any] | None = None,
                     unbacked: Mapping[str, Any] | None = None) -> None:
    """Compile ``module.forward`` and keep the module object (and its state_dict keys).

    ``nn.Module.compile()`` compiles ``_call_impl``, and torch 2.13 silently skips that frame
    for classes defined inside ``torch.nn`` (``nn.Sequential``, ``nn.TransformerEncoderLayer``):
    nothing gets compiled. Wrapping the bound ``forward`` works for every class. With ``marks``
    (``CompileConfig.mark_dynamic``) the inputs' varying dimensions are marked dynamic first, with
    ``unbacked`` (``CompileConfig.mark_unbacked``) marked unbacked.
    """
    import torch

    compiled = torch.compile(module.forward, **kwargs)
    module.forward = marked(compiled, marks or {}, unbacked) if marks or unbacked else compiled


def optimizer_step(optimizer, config: CompileConfig | str | Path | Mapping[str, Any]):
    """The function to call for an optimizer step under ``config``: ``optimizer.step`` itself,
    or a compiled step when the config says ``compile_optimizer: true``.

    The optimizer's own code calls ``torch._dynamo.graph_break()`` on purpose, so the step is
    never compiled with ``fullgraph=True``.

    Example:
        >>> step = tuner.optimizer_step(optimizer, "results/m/best_config.yaml")  # doctest: +SKIP
        >>> loss.backward(); step(); optimizer.zero_grad()  # doctest: +SKIP
    """
    cfg = coerce_config(config)
    if not (cfg.compiles and cfg.compile_optimizer):
        return optimizer.step
    import torch

    kwargs = {**cfg.compile_kwargs(), "fullgraph": False}

    @torch.compile(**kwargs)
    def step():
        optimizer.step()

    return step


def coerce_config(config) -> CompileConfig:
    """A :class:`CompileConfig` from a config, a mapping, or a path to a ``best_config.yaml``."""
    if isinstance(config, CompileConfig):
        return config
    if isinstance(config, (str, Path)):
        return load_config(config)
    if isinstance(config, Mapping):
        return CompileConfig.from_dict(config.get("config", config))
    raise ConfigError(f"expected a CompileConfig, a mapping or a path, got {type(config).__name__}")


def _as_measured(model, config, tuned: TunedConfig | None, pin_heap: bool) -> CompileConfig:
    """The config to apply (eager unless the verdict is ``compile``), after the warnings about
    where it was tuned and, with ``pin_heap``, glibc's heap pinned as it was measured."""
    if tuned is not None:
        warn_on_environment_mismatch(tuned, config)
        _warn_on_thread_mismatch(tuned.tuned_on, config)
        if pin_heap:
            _pin_heap_as_measured(tuned.tuned_on)
        # stay_eager, or undecided: eager until a measurement decides; on many ranks, wrapped as measured
        return _wrapped_as_measured(tuned.config if tuned.verdict == "compile" else EAGER, tuned.tuned_on)
    cfg = coerce_config(config)
    tuned_on = config.get("tuned_on") if isinstance(config, Mapping) else None
    if isinstance(tuned_on, Mapping):
        _warn_on_thread_mismatch(tuned_on, "the config")
    if pin_heap:
        _pin_heap_as_measured(tuned_on if isinstance(tuned_on, Mapping) else _default_heap(model))
    if isinstance(config, Mapping) and config.get("verdict") not in (None, "compile"):
        cfg = EAGER
    return _wrapped_as_measured(cfg, tuned_on if isinstance(tuned_on, Mapping) else {})


def _wrapped_as_measured(cfg: CompileConfig, tuned_on: Mapping[str, Any]) -> CompileConfig:
    """A config tuned on many ranks (``tuned_on.data_parallel``) with its wrap: DDP or FSDP2 around
    the model as its ranks ran it, eager included (DDP's and FSDP2's defaults)."""
    wrap = tuned_on.get("data_parallel")
    if not wrap:
        return cfg
    return replace(cfg, data_parallel={**cfg.data_parallel, "wrap": wrap})


def _default_heap(model) -> dict[str, str]:
    """How a config without ``tuned_on`` was measured: the tool's default (heap pinned), on the
    model's own device."""
    device = next((str(p.device) for p in getattr(model, "parameters", lambda: iter(()))()), "cpu")
    return {"heap": PINNED_NOTE, "device": device}


def _pin_heap_as_measured(tuned_on: Mapping[str, Any]) -> None:
    if pinned_as_measured(tuned_on):
        pin_glibc_heap()
