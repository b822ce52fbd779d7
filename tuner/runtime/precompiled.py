"""Start with no trace at all: torch's ahead-of-time precompile of the whole model's forward.

The warm-start bundle (tuner/runtime/warmstart.py) saves the compiler's caches, but Dynamo still
traces the model at the first call. torch can also save the traced and compiled forward itself
(``torch.compile(model.forward, fullgraph=True).aot_compile(...)``, loaded with
``torch.compiler.load_compiled_function``; experimental in torch 2.13 and 2.14). tuner/ship/bundle.py
saves one beside the bundle where a config allows it, times both warm starts, and records the
faster as ``measured.warm_start_with``; :func:`install` puts it in place of ``torch.compile``.

A precompiled forward has no Dynamo behind it: a call whose inputs fail its guards (a shape or
dtype it was not compiled for) raises instead of recompiling. The forward installed here catches
that one error, warns once, and from then on runs the model under ``torch.compile`` with the
config (the bundle's caches make that compile warm where the graphs match).
"""
from __future__ import annotations

import importlib.util
import re
import sys
import threading
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..core.config import WHOLE, CompileConfig

PRECOMPILED = "precompiled.bin"
"""The saved precompiled forward, inside ``compile_cache/`` (covered by the bundle's hash)."""
CHOICE_KEY = "warm_start_with"
"""``measured.warm_start_with``: ``precompiled`` or ``bundle``, the faster warm start as timed."""
MODULE_KEY = "precompiled_module"
"""``measured.precompiled_module``: the module the model's class was imported as when it was saved."""
_GUARD_FAILED = "GuardManager check failed"


def not_precompilable(config: CompileConfig, task: str, graph_breaks: Any = None) -> str | None:
    """Why ``config`` cannot start from a precompiled forward; None when it can.

    One graph is needed: ``fullgraph: true``, or a search trial that traced the whole model with
    ``graph_breaks: 0`` (the same graph; the forward is then precompiled with ``fullgraph=True``)."""
    import torch

    if not hasattr(torch.compiler, "load_compiled_function"):
        return f"torch {torch.__version__} has no torch.compiler.load_compiled_function"
    one_graph = config.fullgraph or graph_breaks == 0
    reasons = [
        (task != "infer", "training (the precompiled forward is saved for inference)"),
        (config.target != WHOLE, f"target {config.target!r} (the whole model only)"),
        (not one_graph, "graph breaks (one graph only: fullgraph, or none seen)"),
        (config.backend != "inductor", f"backend {config.backend} (inductor only)"),
        (bool(config.precision), f"precision {config.precision}"),
        (bool(config.mark_dynamic or config.mark_unbacked), "marked dynamic dimensions"),
        (bool(config.dynamo), "dynamo settings"),
        (bool(config.data_parallel), "data parallel"),
    ]
    why = [text for hit, text in reasons if hit]
    return ", ".join(why) if why else None


def save(model, config: CompileConfig, args: tuple, kwargs: Mapping[str, Any], path: Path):
    """Trace and compile ``model``'s forward ahead of time at ``(args, kwargs)`` and save it to
    ``path``; return the compiled function (callable as ``fn(model, *args, **kwargs)``)."""
    import torch

    traced: Any = torch.compile(model.forward, **{**config.compile_kwargs(), "fullgraph": True})
    compiled = traced.aot_compile((tuple(args), dict(kwargs)))
    compiled.save_compiled_function(str(path))
    return compiled


def install(model, bundle: Path, measured: Mapping[str, Any], config: CompileConfig,
            fallback: Callable[[], None]) -> bool:
    """Put the precompiled forward saved in ``bundle`` in place of ``model.forward``; True if done.

    Called after the bundle was verified against its hash (tuner/runtime/warmstart.py). A forward
    that cannot be loaded here (another torch, the model's class not importable as it was when
    saved) is refused with a warning and ``apply_config`` compiles as usual.
    """
    import torch

    path = bundle / PRECOMPILED
    if not path.is_file():
        return False
    _alias_module(measured.get(MODULE_KEY), type(model))
    try:
        with open(path, "rb") as f:
            # the forward's own module globals: names the traced code reads (an output dataclass, a helper)
            fn = torch.compiler.load_compiled_function(f, f_globals=_globals_of(type(model).forward))
    except Exception as exc:  # noqa: BLE001  (experimental API: any failure means "compile instead")
        warnings.warn(f"{path}: not loading the precompiled forward: {type(exc).__name__}: "
                      f"{str(exc).splitlines()[0][:200] if str(exc) else ''}; compiling with torch.compile instead",
                      stacklevel=4)
        return False
    model.forward = PrecompiledForward(model, fn, fallback, str(path))
    return True


def _globals_of(forward) -> dict[str, Any]:
    return getattr(getattr(forward, "__func__", forward), "__globals__", {})


def _alias_module(saved_as: Any, model_class: type) -> None:
    """The precompiled guards and code name the model's class by the module it was imported as in
    the process that saved them (the tuner imports a workload file under a name of its own); here
    the same class lives in the user's module. Point the saved name at it when nothing else has it."""
    if not isinstance(saved_as, str) or not saved_as or saved_as in sys.modules:
        return
    if importlib.util.find_spec(saved_as.split(".")[0]) is not None:
        return  # a real importable module of that name: never shadow it
    here = sys.modules.get(model_class.__module__)
    if here is not None:
        sys.modules[saved_as] = here


def guard_failure(message: str) -> str:
    """The failed guards of torch's "GuardManager check failed" error, in one line: its
    ``verbose_code_parts`` (``GLOBAL_STATE changed: num_threads``, a tensor's size check)."""
    parts = re.search(r"verbose_code_parts=\[(.*)\],\s*num_guards_executed", message, re.S)
    found = parts.group(1) if parts else message.split("reason:", 1)[-1]
    return " ".join(found.strip("'\" ").split())[:200] or "a guard failed"


class PrecompiledForward:
    """``model.forward`` backed by a precompiled function; ``torch.compile`` once the inputs fall
    outside what it was compiled for.

    Two cases leave it: a call that fails its guards, and a call with gradients enabled (it was
    compiled under ``torch.no_grad``, and torch's saved guards leave out global state such as the
    grad mode, so nothing else would notice)."""

    def __init__(self, model, fn, fallback: Callable[[], None], source: str) -> None:
        self._model, self._fn, self._fallback, self._source = model, fn, fallback, source
        # what tuner/runtime/apply.py's undo looks for: the model's own forward
        self._torchdynamo_orig_callable = type(model).forward.__get__(model)
        self._lock = threading.Lock()
        self.fell_back: str | None = None

    def __call__(self, *args, **kwargs):
        import torch

        if self.fell_back is None:
            if torch.is_grad_enabled():
                return self._leave("called with gradients enabled; it was compiled for inference under torch.no_grad",
                                   args, kwargs)
            try:
                return self._fn(self._model, *args, **kwargs)
            except RuntimeError as exc:
                if _GUARD_FAILED not in str(exc):
                    raise
                reason = guard_failure(str(exc))
            return self._leave(f"these inputs are outside what it was precompiled for ({reason})", args, kwargs)
        return self._model.forward(*args, **kwargs)

    def _leave(self, why: str, args, kwargs):
        """Hand the model to ``torch.compile`` for good (once, whichever thread gets here first)."""
        with self._lock:
            if self.fell_back is None:
                self.fell_back = why
                warnings.warn(f"{self._source}: the precompiled forward is left: {why}; compiling with torch.compile "
                              "from here on", stacklevel=3)
                if vars(self._model).get("forward") is self:
                    del self._model.forward
                    self._fallback()
        return self._model.forward(*args, **kwargs)
