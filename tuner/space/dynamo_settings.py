"""Dynamo settings as search-space values: the names of ``torch._dynamo.config``, their defaults,
the ``dynamo:`` section of a space YAML, and how a value travels through Optuna.

A value is a YAML scalar or, for a setting whose Dynamo value is a set of callables
(``ignore_logging_functions``, ``reorderable_logging_functions``), a list of dotted names such as
``logging.Logger.info`` or ``builtins.print``, resolved to the objects when the config is applied
(tuner/runtime/dynamo.py). Settings equal to Dynamo's default are left out of a config, so a
config that searched ``capture_scalar_outputs: false`` has the same key as one that never did.
Nothing here runs a model; torch is imported only to read the config module's names.
"""
from __future__ import annotations

import difflib
import functools
import importlib
import itertools
from collections.abc import Callable, Mapping
from typing import Any

from ..system.config_defaults import cached

#: The prefix of a setting's full name; an alias to another module keeps its own name.
CONFIG_MODULE = "torch._dynamo.config"
SCALARS = (bool, int, float, str, type(None))


def _config():
    import torch._dynamo.config as config

    return config


@functools.lru_cache(maxsize=1)
def _defaults() -> dict:
    """The defaults as space values, and the aliases: from a cache file after the first run
    (tuner/system/config_defaults.py: importing the config module imports Dynamo, seconds)."""
    def read() -> dict:
        config = _config()
        return {"values": {k: canonical_value(v) for k, v in config.get_config_copy().items()},
                "aliases": {k: e.alias for k, e in config._config.items() if getattr(e, "alias", None)}}

    return cached(CONFIG_MODULE, "_dynamo/config.py", read)


def known_settings() -> dict[str, Any]:
    """Every ``torch._dynamo.config`` name -> its default in this torch; aliases
    (``ignore_logger_methods``, ``cache_size_limit``) included, with their target's value."""
    values = dict(_defaults()["values"])
    for name in _defaults()["aliases"]:
        if name not in values:
            values[name] = values.get(canonical_name(name))  # read without touching it: reads warn
    return values


def canonical_name(name: str) -> str:
    """An alias inside ``torch._dynamo.config`` -> the name it stands for
    (``ignore_logger_methods`` -> ``ignore_logging_functions``); any other name unchanged."""
    alias = _defaults()["aliases"].get(name)
    if alias and alias.startswith(CONFIG_MODULE + "."):
        return alias[len(CONFIG_MODULE) + 1:]
    return name


def canonical_value(value: Any) -> Any:
    """Sets and lists become a sorted list of dotted names (callables by their dotted name)."""
    if isinstance(value, (set, frozenset, list, tuple)):
        return sorted({v if isinstance(v, str) else dotted_name(v) for v in value})
    return value


def dotted_name(obj: Any) -> str:
    """``logging.Logger.info`` for the function, ``builtins.print`` for print."""
    return f"{getattr(obj, '__module__', None) or 'builtins'}.{getattr(obj, '__qualname__', repr(obj))}"


def resolve_name(dotted: str) -> Any:
    """The object a dotted name names: the longest importable module prefix, then attributes.

    >>> resolve_name("logging.Logger.info").__qualname__
    'Logger.info'
    """
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
            return obj
        except AttributeError:
            break
    raise LookupError(f"{dotted!r} names no importable object (write module.attribute, e.g. logging.Logger.info)")


def drop_defaults(settings: dict[str, Any], defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """``settings`` without the ones equal to Dynamo's default, so equal configs get equal keys."""
    if not settings:
        return {}
    defaults = known_settings() if defaults is None else defaults
    return {k: v for k, v in settings.items() if canonical_value(v) != defaults.get(k, object())}


def param(value: Any) -> Any:
    """A value as an Optuna categorical choice (scalars only): a list becomes ``a,b``."""
    return ",".join(value) if isinstance(value, list) else value


def from_param(encoded: Any, choices: list) -> Any:
    return {repr(param(c)): c for c in choices}[repr(encoded)]


def combinations(section: dict[str, list]) -> list[dict[str, Any]]:
    """Every combination of the section's choices, defaults left out (what ``configs()`` crosses)."""
    if not section:
        return [{}]
    defaults = known_settings()
    names = list(section)
    return [drop_defaults(dict(zip(names, values)), defaults) for values in itertools.product(*section.values())]


def neighbours(current: Mapping[str, Any], section: dict[str, list]) -> list[dict[str, Any]]:
    """The settings that differ from ``current`` in one name of the section."""
    if not section:
        return []
    defaults = known_settings()
    out = []
    for name, values in section.items():
        now = current.get(name, defaults.get(name))
        out += [drop_defaults({**current, name: v}, defaults) for v in values if canonical_value(v) != now]
    return out


def validate_section(section: dict, fail: Callable[..., Any]) -> dict[str, list]:
    """The ``dynamo:`` section of a space, checked: name -> its choices (canonical names and values).

    ``fail(key, message, hint)`` raises the space's error (with the file and line)."""
    known = known_settings()
    out: dict[str, list] = {}
    for raw_name, value in section.items():
        key = f"dynamo.{raw_name}"
        name = str(raw_name)
        if name not in known:
            close = difflib.get_close_matches(name, list(known), n=1)
            fail(key, "is not a torch._dynamo.config setting" + (f"; did you mean `{close[0]}`?" if close else ""),
                 "the names are those of torch._dynamo.config, e.g. capture_scalar_outputs, "
                 "capture_dynamic_output_shape_ops, ignore_logging_functions")
        default = known[name]
        if isinstance(default, dict):
            fail(key, "is a mapping in Dynamo; a search space cannot set it")
        if isinstance(default, list):  # a set of callables: each choice is a list of dotted names
            listed = isinstance(value, list) and value and all(isinstance(v, list) for v in value)
            choices = value if listed else [value]
            checked = [_names(key, c, fail) for c in choices]
        else:
            checked = value if isinstance(value, list) else [value]
            for v in checked:
                _check_scalar(key, v, default, fail)
        if not checked:
            fail(key, "has no choices", "list at least one value")
        if len({repr(c) for c in checked}) != len(checked):
            fail(key, f"lists a value twice: {checked}")
        name = canonical_name(name)
        if name in out:
            fail(key, f"sets `{name}` a second time (under another of its names)")
        out[name] = checked
    return out


def _names(key: str, choice, fail) -> list[str]:
    if not isinstance(choice, list) or not all(isinstance(n, str) for n in choice):
        fail(key, f"choices must be lists of dotted names such as [logging.Logger.info], got {choice!r}")
    for dotted in choice:
        try:
            resolve_name(dotted)
        except LookupError as exc:
            fail(key, str(exc))
    return sorted(set(choice))


def _check_scalar(key: str, value, default, fail) -> None:
    if not isinstance(value, SCALARS):
        fail(key, f"values must be YAML scalars, got {value!r}")
    if default is None or value is None:
        return
    kinds = (int, float) if isinstance(default, float) else (type(default),)
    if type(value) is bool and type(default) is not bool or not isinstance(value, kinds):
        fail(key, f"values must be {type(default).__name__} like Dynamo's default {default!r}, got {value!r}")
