"""Environment variables: accelerate's ACCELERATE_DYNAMO_* and inductor's TORCHINDUCTOR_* (read
from torch's own source), glibc malloc's thresholds where the trials pinned them, and
OMP_NUM_THREADS at the thread count the trials ran at."""
from __future__ import annotations

import ast
import functools
from typing import Any

from ..system.config_defaults import torch_file
from ._common import _lost, _mode_options, _View, heap_variables, thread_variables
from .accelerate import _ACCELERATE_MIXED_PRECISION, _ACCELERATE_NOTES, _accelerate_settings, _dynamo_env
from .parallelism import unsupported_parallelism


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
        variables.update(heap_variables(c))
        notes.append("MALLOC_* pin glibc malloc's thresholds, as every trial was measured (CPU step times otherwise "
                     "depend on what the process ran before); glibc reads them when the process starts")
    if c.threads:
        variables.update(thread_variables(c))
        notes.append(f"OMP_NUM_THREADS={c.threads}: the torch thread count every trial ran at (the verdict holds at "
                     "it); set, it also keeps torchrun from starting each of many processes at 1 thread")
    if any(k.startswith("TORCHINDUCTOR_") for k in variables):
        notes.append("TORCHINDUCTOR_* are read once, when torch is imported, and apply to every compile in the process")
    lost += unsupported_parallelism(c, "environment variables", launches=True)
    return {"variables": variables, "unset": unset, "notes": notes, "not_carried": lost}
