"""Load the user's workload file (``model.py``) and check it follows the contract.

The contract (README.md, "The workload file"):

- ``build_model() -> torch.nn.Module`` (required)
- ``example_inputs() -> tuple | dict`` (required): positional or keyword args for ``model(...)``
- ``loss_fn(output, inputs) -> Tensor`` (optional): enables ``--task train``
- ``input_schedule() -> list[tuple | dict]`` (optional): inputs of varying shapes
- ``build_optimizer(model) -> torch.optim.Optimizer`` (optional): for ``--task train``
- ``input_dims() -> {input: {dim: (min, max)}}`` (optional): the sizes a served input may take, for
  ``compile-tune package`` (an input is its keyword, or its position as ``"0"``, ``"1"``, ...)
"""
from __future__ import annotations

import importlib.util
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import WorkloadError

REQUIRED = ("build_model", "example_inputs")
OPTIONAL = ("loss_fn", "input_schedule", "build_optimizer", "input_dims")


@dataclass
class Workload:
    """The user's functions, loaded from one file."""

    path: Path
    build_model: Callable[[], Any]
    example_inputs: Callable[[], Any]
    loss_fn: Callable[[Any, Any], Any] | None = None
    input_schedule: Callable[[], list] | None = None
    build_optimizer: Callable[[Any], Any] | None = None
    input_dims: Callable[[], dict] | None = None

    @property
    def name(self) -> str:
        return self.path.stem

    def make_model(self):
        import torch

        model = self._call("build_model")
        if not isinstance(model, torch.nn.Module):
            raise WorkloadError(
                f"{self.path}: build_model() returned {type(model).__name__}, not a torch.nn.Module",
                "return the model instance, e.g. `return MyModel()`",
            )
        return model

    def make_inputs(self):
        return check_inputs(self._call("example_inputs"), self.path, "example_inputs()")

    def make_schedule(self) -> list | None:
        if self.input_schedule is None:
            return None
        schedule = self._call("input_schedule")
        if not isinstance(schedule, (list, tuple)) or not schedule:
            raise WorkloadError(
                f"{self.path}: input_schedule() must return a non-empty list of inputs, "
                f"got {type(schedule).__name__}",
                "return e.g. [(torch.randn(8, 16),), (torch.randn(32, 16),)]",
            )
        return [check_inputs(item, self.path, f"input_schedule()[{i}]") for i, item in enumerate(schedule)]

    def make_input_dims(self) -> dict[str, dict[int, list[int]]] | None:
        """``input_dims()`` checked: ``{input: {dim: [min, max]}}`` with whole sizes, 1 <= min <= max."""
        if self.input_dims is None:
            return None
        declared = self._call("input_dims")
        fix = 'return e.g. {"input_ids": {0: (1, 32), 1: (2, 512)}}: an input by keyword or position, its dims'
        if not isinstance(declared, dict):
            raise WorkloadError(f"{self.path}: input_dims() must return a dict, got {type(declared).__name__}", fix)
        out: dict[str, dict[int, list[int]]] = {}
        for name, dims in declared.items():
            if not isinstance(dims, dict):
                raise WorkloadError(f"{self.path}: input_dims()[{name!r}] must be a dict of dim -> (min, max)", fix)
            for dim, bounds in dims.items():
                ok = (isinstance(dim, int) and dim >= 0 and isinstance(bounds, (tuple, list)) and len(bounds) == 2
                      and all(isinstance(b, int) and not isinstance(b, bool) for b in bounds)
                      and 1 <= bounds[0] <= bounds[1])
                if not ok:
                    raise WorkloadError(f"{self.path}: input_dims()[{name!r}][{dim!r}] = {bounds!r}: a dim needs "
                                        "whole (min, max) sizes with 1 <= min <= max", fix)
                out.setdefault(str(name), {})[dim] = [int(bounds[0]), int(bounds[1])]
        return out

    def _call(self, name: str, *args):
        try:
            return getattr(self, name)(*args)
        except WorkloadError:
            raise
        except Exception as exc:
            raise WorkloadError(
                f"{self.path}: {name}() raised {type(exc).__name__}: {_one_line(exc)}",
                f"fix {name}() so it runs on its own; --verbose shows the traceback",
            ) from exc


def check_inputs(inputs, path, what: str):
    if isinstance(inputs, list):
        inputs = tuple(inputs)
    if not isinstance(inputs, (tuple, dict)):
        raise WorkloadError(
            f"{path}: {what} must return a tuple of positional args or a dict of keyword args, "
            f"got {type(inputs).__name__}",
            "wrap a single tensor in a tuple: `return (x,)`",
        )
    return inputs


def split_inputs(inputs) -> tuple[tuple, dict]:
    """``inputs`` as ``(args, kwargs)``: a dict is keyword inputs, a tuple or list positional ones,
    anything else one positional input."""
    if isinstance(inputs, dict):
        return (), dict(inputs)
    return (tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)), {}


def call_model(model, inputs):
    """``model(*inputs)`` or ``model(**inputs)``."""
    return model(**inputs) if isinstance(inputs, dict) else model(*inputs)


def load_workload(path: str | Path) -> Workload:
    """Import ``path`` as a module and collect the contract functions.

    Example:
        >>> w = load_workload("examples/mlp.py")  # doctest: +SKIP
        >>> model, inputs = w.make_model(), w.make_inputs()  # doctest: +SKIP
    """
    path = Path(path)
    if not path.is_file():
        raise WorkloadError(f"{path}: no such model file", "pass the path of a .py file that defines build_model()")
    module_name = f"_compile_tune_workload_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise WorkloadError(f"{path}: cannot be imported as a Python module", "pass a .py file")
    module = importlib.util.module_from_spec(spec)
    # The workload may import helpers that sit next to it.
    sys.path.insert(0, str(path.resolve().parent))
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise WorkloadError(
            f"{path}:{exc.lineno}: syntax error: {exc.msg}", "fix the file so `python FILE` runs"
        ) from exc
    except Exception as exc:
        where = _user_frame(exc, path)
        raise WorkloadError(
            f"{path}{where}: importing the file raised {type(exc).__name__}: {_one_line(exc)}",
            "fix the file so `python FILE` runs; --verbose shows the traceback",
        ) from exc
    finally:
        sys.path.remove(str(path.resolve().parent))
    functions: dict[str, Any] = {}
    for name in REQUIRED + OPTIONAL:
        fn = getattr(module, name, None)
        if fn is not None and not callable(fn):
            raise WorkloadError(f"{path}: `{name}` must be a function, got {type(fn).__name__}")
        if fn is None and name in REQUIRED:
            raise WorkloadError(
                f"{path}: missing function `{name}()`",
                "define build_model() -> nn.Module and example_inputs() -> tuple (see README, 'The workload file')",
            )
        functions[name] = fn
    return Workload(path=path, **functions)


def validate_workload(workload: Workload, task: str = "infer") -> None:
    """Build the model and run the example inputs (and the schedule) through it eagerly."""
    import torch

    model = workload.make_model()
    inputs = workload.make_inputs()
    if task == "train" and workload.loss_fn is None:
        raise WorkloadError(
            f"{workload.path}: --task train needs a `loss_fn(output, inputs)` function",
            "define loss_fn returning a scalar tensor, or tune with --task infer",
        )
    ctx = torch.enable_grad() if task == "train" else torch.no_grad()
    with ctx:
        out = _run_eager(model, inputs, workload.path, "example_inputs()")
        if task == "train":
            loss = workload._call("loss_fn", out, inputs)
            if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
                raise WorkloadError(
                    f"{workload.path}: loss_fn() must return a scalar tensor, got "
                    f"{type(loss).__name__}{tuple(loss.shape) if isinstance(loss, torch.Tensor) else ''}",
                    "return e.g. out.float().pow(2).mean()",
                )
            if not loss.requires_grad:
                raise WorkloadError(
                    f"{workload.path}: loss_fn() returned a tensor that does not require grad",
                    "compute the loss from the model output",
                )
        for i, item in enumerate(workload.make_schedule() or []):
            _run_eager(model, item, workload.path, f"input_schedule()[{i}]")


def _run_eager(model, inputs, path, what):
    try:
        return call_model(model, inputs)
    except Exception as exc:
        raise WorkloadError(
            f"{path}: the model fails in eager mode on {what}: {type(exc).__name__}: {_one_line(exc)}",
            "make `model(*example_inputs())` run without torch.compile first; --verbose shows the traceback",
        ) from exc


def _user_frame(exc: BaseException, path: Path) -> str:
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if Path(frame.filename).resolve() == path.resolve():
            return f":{frame.lineno}"
    return ""


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else "(no message)"
