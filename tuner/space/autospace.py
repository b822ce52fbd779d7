"""The ``auto`` search space (``--space auto``, the default): the broad choices of
``search_spaces/default.yaml`` and ``cpu.yaml``, kept only where they fit this model and this
run, each dimension with the one-line reason it is searched or fixed.

A run measures ``--trials`` search trials (20 by default), so the space keeps the few dimensions
that most often decide a verdict rather than every knob; the rest are left out with a reason
(``compile-tune space MODEL.py`` lists both), and the named spaces still search them:

- ``target``: ``blocks`` only when a submodule class with code of its own repeats in few enough
  structures that one compile per structure serves every instance (``targets.find_blocks``:
  never a container such as ``nn.Sequential``); what a transformer's compile time needs.
- ``backend``: inductor only; it is the backend that generates code. ``aot_eager`` traces
  without code generation and rarely beats eager, the ``cudagraphs`` backend is CUDA graphs
  without inductor's kernels (mode ``reduce-overhead`` gives both).
- ``mode``: on a CPU, max-autotune's GEMM template search; on a GPU also CUDA graphs.
- ``dynamic``: null, true, false and marked only when the input schedule varies a dimension (with
  one shape every choice compiles the same graph), and marked_unbacked when a varying dimension
  reaches 0 or 1 (tuner/core/shapes.py). The Dynamo settings the schedule calls for
  (``recompile_limit`` when it has more shapes than Dynamo compiles graphs) are added by
  :meth:`~tuner.space.search_space.SearchSpace.restrict`, as for any space.
- ``fullgraph``: false only; ``true`` makes no kernel faster (the same graph without breaks, an
  error with them).
- ``compile_optimizer``: training only.
- ``options``: ``freezing`` for inference of a model with parameters (weights as constants: the
  largest CPU win), ``cpp_wrapper`` on a CPU (less overhead per call), and
  ``coordinate_descent_tuning`` on a GPU (Triton block sizes). Options the installed torch
  lacks are left out; ``--space cpu`` and ``--space gpu`` search more of them.

Graph-break repairs join after the model check (:func:`tuner.space.repair.add_repairs`), as for any
space. The facts come in as plain data (:class:`ModelFacts`), so nothing here runs a model.

Example:
    >>> space, choices = build_auto_space(ModelFacts(device="cpu", task="infer"))
    >>> space.target, space.dynamic
    (['whole'], [None])
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.config import BLOCKS, WHOLE
from ..core.shapes import MARKED, MARKED_UNBACKED, reaches_one
from ..system.config_defaults import inductor_defaults
from .search_space import SearchSpace

AUTO = "auto"


@dataclass(frozen=True)
class ModelFacts:
    """What the auto space is built from: the run's device and task, and facts about the model."""

    device: str
    task: str
    blocks: dict[str, int] = field(default_factory=dict)
    """The repeated block class (``targets.find_blocks``) -> its number of instances."""
    block_note: str = ""
    """Why the model has that block, or none (``targets.BlockFinding.reason``)."""
    varying_dims: dict = field(default_factory=dict)
    """The input dimensions that vary over the input schedule (``runtime.marks.varying_dims``)."""
    has_parameters: bool = True


@dataclass(frozen=True)
class Choice:
    """One dimension of the auto space: its values and why."""

    dimension: str
    values: list
    reason: str = ""

    def text(self) -> str:
        return f"{self.dimension}: {_values(self.values)}" + (f" - {self.reason}" if self.reason else "")


def build_auto_space(facts: ModelFacts) -> tuple[SearchSpace, list[Choice]]:
    """The ``auto`` space for this model and run, and one :class:`Choice` per dimension; the choices
    left out are in ``space.skipped``, each with its reason."""
    cuda = facts.device.startswith("cuda")
    space = SearchSpace(source=AUTO, description="built for this model (tuner/space/autospace.py)")
    choices = [
        _target(space, facts),
        _backend(space, cuda),
        _mode(space, cuda),
        _dynamic(space, facts),
        _fullgraph(space),
        _compile_optimizer(space, facts.task),
        *_options(space, facts, cuda),
    ]
    return space, choices


def _target(space: SearchSpace, facts: ModelFacts) -> Choice:
    if not facts.blocks:
        space.target = [WHOLE]
        why = facts.block_note or "the model has no repeated submodule class"
        space.skipped.append(f"target={BLOCKS}: {why}")
        return Choice("target", space.target, "no block to compile once for all its instances")
    space.target = [WHOLE, BLOCKS]
    repeated = facts.block_note or ", ".join(f"{name} x{count}" for name, count in facts.blocks.items())
    return Choice("target", space.target, f"regional compilation: {repeated}")


def _backend(space: SearchSpace, cuda: bool) -> Choice:
    space.backend = ["inductor"]
    space.skipped.append("backend=aot_eager: traces without generating code, so it rarely beats eager")
    space.skipped.append("backend=cudagraphs: " + ("mode reduce-overhead gives CUDA graphs with inductor's kernels"
                                                   if cuda else "needs CUDA"))
    return Choice("backend", space.backend, "the backend that generates code")


def _mode(space: SearchSpace, cuda: bool) -> Choice:
    if cuda:
        space.mode = ["default", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune"]
        return Choice("mode", space.mode, "CUDA graphs cut launch overhead; max-autotune searches kernels; "
                                        "max-autotune does both")
    space.mode = ["default", "max-autotune-no-cudagraphs"]
    space.skipped.append("mode=reduce-overhead, max-autotune: need CUDA (on a CPU the same as another choice)")
    return Choice("mode", space.mode, "max-autotune-no-cudagraphs searches inductor's C++ GEMM templates against ATen")


def _dynamic(space: SearchSpace, facts: ModelFacts) -> Choice:
    space.marks = dict(facts.varying_dims)
    if not space.marks:
        space.dynamic = [None]
        space.skipped.append(f"dynamic=true, false, {MARKED}, {MARKED_UNBACKED}: inputs never change shape")
        return Choice("dynamic", space.dynamic, "inputs never change shape")
    space.dynamic = [None, True, False, MARKED]
    why = (f"the input schedule varies {_dims(space.marks)}: recompile on change, all dims dynamic, a graph per "
           "shape, or only those dims marked")
    if reaches_one(space.marks):
        space.dynamic.append(MARKED_UNBACKED)
        why += "; marked_unbacked: those reaching 0 or 1 unbacked, so size 1 needs no graph of its own"
    else:
        space.skipped.append(f"dynamic={MARKED_UNBACKED}: no varying input dimension reaches 0 or 1 (which "
                             "mark_dynamic specialises): the same marks as marked")
    return Choice("dynamic", space.dynamic, why)


def _fullgraph(space: SearchSpace) -> Choice:
    space.fullgraph = [False]
    space.skipped.append("fullgraph=true: no faster kernel; the same graph without breaks, an error with them")
    return Choice("fullgraph", space.fullgraph, "a graph break splits the graph instead of failing the trial")


def _compile_optimizer(space: SearchSpace, task: str) -> Choice:
    if task == "train":
        space.compile_optimizer = [False, True]
        return Choice("compile_optimizer", space.compile_optimizer,
                    "training: a compiled optimizer step fuses the per-parameter updates")
    space.compile_optimizer = [False]
    space.skipped.append("compile_optimizer=true: training only")
    return Choice("compile_optimizer", space.compile_optimizer, "inference has no optimizer step")


def _options(space: SearchSpace, facts: ModelFacts, cuda: bool) -> list[Choice]:
    """Inductor options: (name, values, reason) where they fit, else a skipped note."""
    wanted: list[tuple[str, list, str]] = []
    if facts.task == "train":
        space.skipped.append("options.freezing: inference only (training updates the weights)")
    elif not facts.has_parameters:
        space.skipped.append("options.freezing: the model has no parameters to freeze")
    else:
        wanted.append(("freezing", [False, True], "inference: weights as constants, folded and prepacked"
                       + ("" if cuda else " (unlocks the CPU GEMM templates)")))
    if cuda:
        wanted.append(("coordinate_descent_tuning", [False, True], "tunes Triton kernels' block sizes further"))
        space.skipped.append("options.cpp_wrapper: on a GPU reduce-overhead removes the per-call overhead")
        space.skipped.append("options.max_autotune_gemm_backends, epilogue_fusion: rarely decisive, each doubles "
                             "the space (--space gpu searches them)")
    else:
        wanted.append(("cpp_wrapper", [False, True],
                       "C++ instead of Python around the kernels: less overhead per call"))
        space.skipped.append("options.coordinate_descent_tuning: Triton kernels only (needs CUDA)")
    space.skipped.append("options.shape_padding: on by default" + ("" if cuda else "; it pads GPU matmuls only"))
    if not cuda:
        space.skipped.append("options.aggressive_fusion, epilogue_fusion: rarely decisive, each doubles the space "
                             "(--space cpu searches them)")
    known = _inductor_options()
    lines = []
    for name, values, reason in wanted:
        if name not in known:
            space.skipped.append(f"options.{name}: not an option of the installed torch")
            continue
        space.options[name] = values
        lines.append(Choice(f"options.{name}", values, reason))
    return lines


def _inductor_options() -> set[str]:
    return set(inductor_defaults())


def _dims(marks: dict) -> str:
    """``input 0 dim 0 (8-32)``: the varying dimensions as a person reads them."""
    return ", ".join(f"input {name} dim {dim} ({low}-{high})"
                     for name, dims in marks.items() for dim, (low, high) in sorted(dims.items()))


def _values(values: list) -> str:
    return "[" + ", ".join(_value(v) for v in values) + "]"


def _value(value: Any) -> str:
    """Values as a space YAML file writes them (null, true, false)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def space_text(space: SearchSpace, choices: list[Choice], name: str) -> str:
    """Every dimension of ``space`` with its values and why, the number of configs and what was
    left out: what ``compile-tune space`` prints. A named space's dimensions come from its file,
    named in the first line; its reasons are the file's comments."""
    why = {**space.reasons, **{c.dimension: c.reason for c in choices}}
    dims: list[tuple[str, list]] = [(d, getattr(space, d)) for d in
                                    ("target", "backend", "mode", "dynamic", "fullgraph", "compile_optimizer")]
    dims += [(f"options.{n}", v) for n, v in space.options.items()]
    dims += [(f"dynamo.{n}", v) for n, v in space.dynamo.items()]
    dims += [(f"data_parallel.{n}", v) for n, v in space.data_parallel.items()]  # on many ranks
    if space.precision != [None]:  # searched only with --allow-precision-change
        dims.append(("precision", space.precision))
    source = "" if name == AUTO else f" ({space.source})"
    out = [f"space '{name}'{source}: {len(space.configs())} configs"]
    out += ["  " + Choice(d, v, why.get(d, "")).text() for d, v in dims]
    if space.skipped:
        out.append("left out:")
        out += [f"  {note}" for note in space.skipped]
    out += [f"note: {note}" for note in space.notes]
    return "\n".join(out)
