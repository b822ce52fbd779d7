"""Dynamo settings (``CompileConfig.dynamo``) in the user's process, scoped to the compiled model.

Why a patch around every call rather than ``torch._dynamo.config.X = value`` once: in torch 2.13 a
config value set by assignment is thread-local (a ``ContextVar``), so it reaches only the thread
that called ``apply_config``; the same model called from another thread (a serving pool, the
tuner's own thread check) would be traced without it, and which graph you get would depend on
which thread called first. An assignment would also change every other ``torch.compile`` in that
thread. ``torch._dynamo.config.patch`` entered around each call of the compiled forward holds in
whichever thread calls, for this model only, and is in effect whenever Dynamo traces: the first
call, a recompile, the code after a graph break. Dynamo reads these settings while tracing, not
when ``torch.compile()`` is called. The cost is about 10 microseconds per call (measured: 9-11 us for
one or two settings on a 2-core CPU), which a trial measures like any other cost of the config. The optimizer step
(``compile_optimizer``) is compiled without them.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from ..core.errors import ConfigError
from ..space.dynamo_settings import canonical_name, known_settings, resolve_name


def resolved(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``CompileConfig.dynamo`` as ``torch._dynamo.config`` values: aliases to their own names,
    lists of dotted names to sets of the objects they name.

    Example:
        >>> resolved({"ignore_logger_methods": ["logging.Logger.info"]})  # doctest: +ELLIPSIS
        {'ignore_logging_functions': {<function Logger.info at ...>}}
    """
    import difflib

    known = known_settings()
    out: dict[str, Any] = {}
    for name, value in settings.items():
        if name not in known:
            close = difflib.get_close_matches(name, list(known), n=1)
            raise ConfigError(f"`dynamo.{name}` is not a torch._dynamo.config setting in torch "
                              f"{_torch_version()}" + (f"; did you mean `{close[0]}`?" if close else ""),
                              "drop it from the config, or re-tune with this torch")
        if isinstance(value, list):
            try:
                value = {resolve_name(dotted) for dotted in value}
            except LookupError as exc:
                raise ConfigError(f"`dynamo.{name}`: {exc}") from None
        out[canonical_name(name)] = value
    return out


def scoped(forward: Callable, settings: Mapping[str, Any]) -> Callable:
    """``forward`` (compiled) behind a function that holds ``settings`` (:func:`resolved`) in
    Dynamo's config for the duration of each call (see the module docstring for why per call)."""
    import torch

    patch = torch._dynamo.config.patch(dict(settings))  # one object, entered per call (re-entrant)

    @functools.wraps(forward)
    def forward_with_dynamo_settings(*args, **kwargs):
        with patch:
            return forward(*args, **kwargs)

    return forward_with_dynamo_settings


def _torch_version() -> str:
    import torch

    return str(torch.__version__)
