"""Reading a search-space file: what a name resolves to (a bundled space or a path), and its
dimensions validated, each error one line that names the file, the line and the key, with a hint.

:func:`tuner.space.search_space.load_space` turns the fields into a :class:`~tuner.space.search_space.SearchSpace`.
"""
from __future__ import annotations

import difflib
import importlib.resources
from pathlib import Path
from typing import Any, NoReturn

import yaml

from ..core.config import MODES, NO_COMPILE
from ..core.errors import ConfigError, SpaceError
from ..core.known_truth import is_stand_in
from ..core.known_truth import parse as parse_stand_in
from ..core.precision import FLAG as PRECISION_FLAG
from ..core.precision import PRECISIONS
from ..core.shapes import DYNAMIC_CHOICES, MARKED, MARKED_UNBACKED
from ..system.config_defaults import Opaque, inductor_defaults, matches_default_type
from .dynamo_settings import validate_section as dynamo_validate_section

#: The package whose data files are the bundled spaces (the repository's ``search_spaces/``).
BUNDLED_PACKAGE = "tuner.search_spaces"
DIMENSIONS = ("target", "backend", "mode", "dynamic", "fullgraph", "compile_optimizer", "options", "dynamo",
              "precision")
TOP_LEVEL_KEYS = ("description",) + DIMENSIONS


def resolve_space_path(name_or_path: str) -> Path:
    """``quick`` -> the bundled ``search_spaces/quick.yaml``; anything else is a path."""
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") or candidate.exists():
        if not candidate.is_file():
            raise SpaceError(f"{candidate}: no such search-space file", _bundled_hint())
        return candidate
    bundled = bundled_dir() / f"{name_or_path}.yaml"
    if not bundled.is_file():
        raise SpaceError(f"unknown search space {name_or_path!r}", _bundled_hint())
    return bundled


def bundled_dir() -> Path:
    """The folder of the bundled spaces, wherever the package is installed.

    >>> (bundled_dir() / "quick.yaml").is_file()
    True
    """
    try:
        # Installed from a wheel or in editable mode, the package is a plain folder; Path()
        # states that assumption (a zipped install would fail here, loudly).
        return Path(str(importlib.resources.files(BUNDLED_PACKAGE)))
    except ModuleNotFoundError:
        pass
    # A source checkout run without installing (PYTHONPATH=repo, as scripts/gpu_check.sh does):
    # the folder that the package is built from.
    source = Path(__file__).resolve().parents[2] / "search_spaces"
    if source.is_dir():
        return source
    raise SpaceError(f"the bundled search spaces are not installed (no package {BUNDLED_PACKAGE})",
                     "reinstall compile-tune, or pass --space the path of a .yaml file")


def bundled_spaces() -> list[str]:
    return sorted(p.stem for p in bundled_dir().glob("*.yaml"))


def _bundled_hint() -> str:
    # `auto` is no file: tuner/space/autospace.py builds it for the model (the default of --space)
    return f"use auto, a bundled space ({', '.join(bundled_spaces())}) or the path of a .yaml file"


def read_space(name_or_path: str) -> dict[str, Any]:
    """The validated fields of a space file (:class:`tuner.space.search_space.SearchSpace`'s), or a
    :class:`SpaceError` that names the file, the line and the key."""
    path = resolve_space_path(name_or_path)
    text = path.read_text()
    try:
        root = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        where = f", line {line + 1}" if line is not None else ""
        raise SpaceError(f"{path}{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from exc
    if not isinstance(data, dict):
        raise SpaceError(f"{path}: a search space must be a mapping of dimension -> choices")
    lines = _key_lines(root)
    return _validate(data, path, lines)


def _key_lines(node, prefix: str = "") -> dict[str, int]:
    """Dotted key -> 1-based line, from PyYAML's node marks."""
    lines: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = f"{prefix}{key_node.value}"
            lines[key] = key_node.start_mark.line + 1
            lines.update(_key_lines(value_node, key + "."))
    return lines


def _validate(data: dict, path: Path, lines: dict[str, int]) -> dict[str, Any]:
    def fail(key: str, message: str, hint: str | None = None) -> NoReturn:
        line = lines.get(key)
        where = f"{path}, line {line}" if line else str(path)
        raise SpaceError(f"{where}: `{key}` {message}", hint)

    for key in data:
        if key not in TOP_LEVEL_KEYS:
            close = difflib.get_close_matches(str(key), TOP_LEVEL_KEYS, n=1)
            fail(str(key), "is not a search-space key", f"did you mean `{close[0]}`?" if close else
                 f"known keys: {', '.join(TOP_LEVEL_KEYS)}")
    space = Fields(source=str(path), description=str(data.get("description", "")))
    for key, check in _CHECKS.items():
        if key in data:
            check(space, key, data[key], fail)
    return vars(space)


def _choices(key: str, value, fail) -> list:
    values = value if isinstance(value, list) else [value]
    if not values:
        fail(key, "has no choices", "list at least one value")
    if len({repr(v) for v in values}) != len(values):
        fail(key, f"lists a value twice: {values}")
    return values


def _target(space: Fields, key: str, value, fail) -> None:
    space.target = _choices(key, value, fail)
    for t in space.target:
        if not isinstance(t, str) or not t or t == NO_COMPILE:
            fail(key, f"values must be whole, blocks or a module-name pattern, got {t!r}",
                 "eager is always measured as the baseline; do not list `none`")


def _backend(space: Fields, key: str, value, fail) -> None:
    space.backend = _choices(key, value, fail)
    known = _known_backends([b for b in space.backend if not (isinstance(b, str) and is_stand_in(b))])
    for b in space.backend:
        if isinstance(b, str) and is_stand_in(b):  # the error-rate benchmark's configs of known truth
            try:
                parse_stand_in(b)
            except ConfigError as e:
                fail(key, f"has a malformed stand-in backend: {e.message}", e.hint)
        elif b not in known:
            close = difflib.get_close_matches(str(b), known, n=1)
            fail(key, f"has unknown backend {b!r}",
                 f"did you mean `{close[0]}`?" if close else f"known: {', '.join(known)}")


def _mode(space: Fields, key: str, value, fail) -> None:
    space.mode = _choices(key, value, fail)
    for m in space.mode:
        if m not in MODES:
            fail(key, f"has unknown mode {m!r}", f"use one of {', '.join(MODES)}")


def _dynamic(space: Fields, key: str, value, fail) -> None:
    space.dynamic = _choices(key, value, fail)
    for d in space.dynamic:
        if d not in DYNAMIC_CHOICES:
            fail(key, f"values must be null, true, false, {MARKED} or {MARKED_UNBACKED}, got {d!r}")


def _flag(space: Fields, key: str, value, fail) -> None:
    setattr(space, key, _choices(key, value, fail))
    for f in getattr(space, key):
        if not isinstance(f, bool):
            fail(key, f"values must be true or false, got {f!r}")


def _options(space: Fields, key: str, value, fail) -> None:
    if not isinstance(value, dict):
        fail(key, "must be a mapping of inductor option -> choices", "e.g. options: {freezing: [false, true]}")
    space.options = _validate_options(value, fail)


def _dynamo(space: Fields, key: str, value, fail) -> None:
    if not isinstance(value, dict):
        fail(key, "must be a mapping of torch._dynamo.config setting -> choices",
             "e.g. dynamo: {capture_scalar_outputs: [false, true]}")
    space.dynamo = dynamo_validate_section(value, fail)


def _precision(space: Fields, key: str, value, fail) -> None:
    space.precision, space.precision_listed = _choices(key, value, fail), True
    for p in space.precision:
        if p is not None and p not in PRECISIONS:
            fail(key, f"values must be null or one of {', '.join(PRECISIONS)}, got {p!r}",
                 f"bf16: bfloat16 autocast; tf32: TF32 matmuls (CUDA); both change numerics ({PRECISION_FLAG})")


class Fields:
    """The fields validated so far, as attributes (the validation reads like it sets a space's)."""

    # Declared for the type checker only: unset ones stay out of ``vars()``, the validated space.
    source: str
    description: str
    target: list
    backend: list
    mode: list
    dynamic: list
    fullgraph: list
    compile_optimizer: list
    options: dict[str, list]
    dynamo: dict[str, list]
    precision: list
    precision_listed: bool

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


#: Each key of a space file and its check, in the order they are checked.
_CHECKS = {"target": _target, "backend": _backend, "mode": _mode, "dynamic": _dynamic, "fullgraph": _flag,
           "compile_optimizer": _flag, "options": _options, "dynamo": _dynamo, "precision": _precision}


def _validate_options(options: dict, fail) -> dict[str, list]:
    defaults = inductor_defaults()
    out: dict[str, list] = {}
    for name, value in options.items():
        key = f"options.{name}"
        name = str(name).replace("-", "_")
        if name not in defaults:  # named in the error line itself: the option the user most likely meant
            close = difflib.get_close_matches(name, list(defaults), n=1)
            fail(key, f"is not an inductor option in torch {_torch_version()}"
                 + (f"; did you mean `{close[0]}`?" if close else ""),
                 f"the {len(defaults)} options are torch._inductor.list_options(); a space offers only those")
        values = value if isinstance(value, list) else [value]
        if not values:
            fail(key, "has no choices")
        default = defaults[name]
        for v in values:
            if not matches_default_type(v, default):
                kind = default.type_name if isinstance(default, Opaque) else type(default).__name__
                fail(key, f"values must be {kind} like the default {default!r}, got {v!r}")
        out[name] = values
    return out


def _torch_version() -> str:
    import torch

    return str(torch.__version__).split("+")[0]


#: Backends every torch 2.13 registers: naming one needs no look-up (importing Dynamo to list the
#: registered backends costs seconds, before the first trial can start).
BUILTIN_BACKENDS = frozenset({"inductor", "eager", "aot_eager", "aot_eager_decomp_partition", "cudagraphs"})


def _known_backends(names: list) -> list[str]:
    """The backends ``names`` are checked against: Dynamo's registry when one is not built in."""
    if all(n in BUILTIN_BACKENDS for n in names):
        return sorted(BUILTIN_BACKENDS)
    import torch._dynamo

    return sorted(torch._dynamo.list_backends(exclude_tags=()))
