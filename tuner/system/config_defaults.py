"""The names and defaults of inductor's and Dynamo's config options, without importing them in every run.

Importing ``torch._inductor.config`` or ``torch._dynamo.config`` imports Dynamo: about 1.5 s on
2 cores, in the tuner's own process, before the first trial can start (trials import it in
their launcher anyway). The tuner needs only the names and default values: to validate a space,
to keep a config's key free of settings at their default, to know Dynamo's recompile limit. So
the first run on an install imports the module and writes those to a cache file; later runs
read the file (milliseconds).

A file is keyed by what the defaults depend on: the config module's file (path, size, mtime),
the environment variables torch reads when it is imported (``TORCHINDUCTOR_*`` and the other
``TORCH*`` ones), and the CPUs this process may use. A cache that cannot be read or written is
ignored: the import is always the fallback.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

from .user_cache import cache_file, write_whole

#: Bumped when a file's layout changes.
FORMAT = 1


class Opaque:
    """A default that JSON cannot hold as itself (a tuple, a function, an enum): its type and text.
    It equals nothing a space can give, which is what the tuner's comparisons need."""

    def __init__(self, type_name: str, text: str) -> None:
        self.type_name, self.text = type_name, text

    def __repr__(self) -> str:
        return self.text


@functools.lru_cache(maxsize=1)
def inductor_defaults() -> dict[str, Any]:
    """``{option: default}`` for every option of ``torch._inductor.config`` in this torch."""
    def read() -> dict:
        from torch._inductor import config

        return {"values": config.get_config_copy()}

    return cached("torch._inductor.config", "_inductor/config.py", read)["values"]


def matches_default_type(value: Any, default: Any) -> bool:
    """Whether a space's ``value`` has the type of the option's ``default`` (None: any)."""
    if default is None:
        return True
    if isinstance(default, Opaque):
        return type(value).__name__ == default.type_name
    return isinstance(value, type(default))


def cached(module: str, relative: str, read) -> dict:
    """``read()`` (which imports ``module``, torch's file ``relative``) through the cache file."""
    path = _cache_path(module, relative)
    if path is not None:
        try:
            data = json.loads(path.read_text())
            if data.get("format") == FORMAT:
                return _decode(data["data"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
    # Only a fresh import holds the defaults: in a process that imported the module already (a
    # user's, a trial's) its values may have been changed.
    fresh = module not in sys.modules
    encoded = _encode(read())
    if path is not None and fresh:
        write_whole(path, {"format": FORMAT, "module": module, "data": encoded})
    return _decode(encoded)  # the same values as a run that reads the file gets


def _encode(value: Any) -> Any:
    """JSON for values JSON gives back as they are; an ``{"opaque": type, "text": repr}`` otherwise."""
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"mapping": {k: _encode(v) for k, v in value.items()}}
    try:
        back = json.loads(json.dumps(value))
        if back == value and type(back) is type(value):
            return value
    except (TypeError, ValueError):
        pass
    return {"opaque": type(value).__name__, "text": repr(value)[:200]}


def _decode(value: Any) -> Any:
    if isinstance(value, dict) and "mapping" in value:
        return {k: _decode(v) for k, v in value["mapping"].items()}
    if isinstance(value, dict):
        return Opaque(value["opaque"], value["text"])
    return value


def torch_file(relative: str) -> Path | None:
    """A source file of the installed torch (``_inductor/config.py``), found without importing torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / relative


def _cache_path(module: str, relative: str) -> Path | None:
    source = torch_file(relative)
    if source is None:
        return None
    try:
        stat = source.stat()
    except OSError:
        return None
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith(("TORCH", "PYTORCH", "INDUCTOR")))
    key = [FORMAT, module, str(source), stat.st_size, stat.st_mtime_ns, env, cpus]
    return cache_file(module.replace(".", "-"), key)
