"""One step of the user's workload, as a trial runs it: a no_grad forward for inference, or
forward + loss + backward + optimizer step for training; run eagerly or compiled on ONE model.

A trial holds the model once. Compiling replaces ``forward`` of the target modules with an
instance attribute (see ``config.compile_in_place``); an eager step sets that attribute to the
class's own ``forward`` bound to the module for its duration, so nothing wraps the model's code
(``set_stance("force_eager")`` would do the same but adds ~90 us of wrapper per call: a bias
against eager). The attribute's value is swapped, never the attribute itself, so the module's
instance dict keeps its keys. (a4965f8 credited this with a bias of eager against itself under
another name, tuner/measure/stand_in.py, of a median 0.9 % a process on a tiny convnet; it was the
memory layout forked processes share, and stayed after the swap: see tuner/measure/launcher.py.)
Swapping causes no recompile: the compiled code does not guard on it.
Holding one model means eager and compiled steps are charged the same memory for weights,
gradients and optimizer state, so their memory figures differ only by what compiling costs.
A config's ``precision`` belongs to its compiled side only: the bf16 autocast around the model's
forward is one more swapped attribute, and the process-wide TF32 matmul setting is switched with
the mode, so eager stays the float32 reference it is timed and checked as.

A race process may hold a second compiled config, its **rival** (:meth:`Step.hold_rival`): plain
``torch.compile`` beside the candidate, a third side stepped in turn with eager and the candidate,
so the candidate is compared with plain compile inside one process (tuner/measure/timing.py). Its
forwards are swapped in the same way; each side's own optimizer step and matmul precision go with
it.
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

from ..core.config import CompileConfig
from ..core.known_truth import parse as stand_in_of
from ..core.targets import target_modules
from ..runtime.apply import apply_config, optimizer_step
from ..runtime.apply_precision import MARK as PRECISION_MARK
from ..user.workload import call_model
from .devices import timed
from .setup import seed_all
from .stand_in import stand_in
from .tree import map_tensors

#: The third side of a process that holds a rival (:meth:`Step.hold_rival`); eager is False and the
#: config True, as ``Step.mode`` takes them.
RIVAL = "rival"


@dataclasses.dataclass
class _Side:
    """One compiled config's swapped attributes: what stepping it switches in."""

    forwards: list[tuple[Any, Any, Any]]  # (module, its compiled forward, its own bound)
    optimizer_step: Any = None
    matmul_precision: dict[bool, str] = dataclasses.field(default_factory=dict)


class Step:
    """One step of the user's workload on one model object, eager or compiled."""

    def __init__(self, model, task: str, workload, runner=None) -> None:
        import torch

        self.model, self.task, self.workload = model, task, workload
        #: What a step calls: the model, or its data-parallel wrapper on many ranks (DDP around it)
        self.runner = model if runner is None else runner
        self.optimizer = None
        self._forwards: list[tuple[Any, Any, Any]] = []  # (module, its compiled forward, its own bound)
        self._compiled_optimizer_step = None
        self._matmul_precision: dict[bool, str] = {}  # eager/compiled -> float32 matmul precision (tf32)
        self._rival: _Side | None = None
        self._optimizer_step = None  # the stepped side's compiled optimizer step (None: optimizer.step)
        self.compiled = False
        self.side: bool | str = False
        """What steps run now: False (eager), True (the config), :data:`RIVAL`."""
        if task == "train":
            model.train()
            if workload.build_optimizer is not None:
                self.optimizer = workload.build_optimizer(model)
            else:
                # Documented default: AdamW, the common choice for the transformer-like models we target.
                self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        else:
            model.eval()

    def compile(self, config: CompileConfig) -> list[tuple[str, Any]]:
        """Apply ``config`` in place, as ``tuner.apply_config`` does in the user's process."""
        import torch

        self._restore_forwards()
        known = stand_in_of(config.backend)
        if known is not None:  # the error-rate benchmark's known truth (tuner/measure/stand_in.py)
            self._forwards = [stand_in(self.model, known)]
            self.adopt(config)
            return [("", self.model)]
        regions = target_modules(self.model, config.target)
        before = torch.get_float32_matmul_precision()
        # on many ranks the trial wrapped the model already (tuner/ranks/rank.py)
        apply_config(self.model, dataclasses.replace(config, data_parallel={}), warm_start=False)
        modules = [module for _, module in regions]
        if getattr(vars(self.model).get("forward"), PRECISION_MARK, None) and self.model not in modules:
            modules.append(self.model)  # bf16 autocast around the whole forward (target blocks or a pattern)
        self._forwards = [_swapped(module) for module in modules]
        after = torch.get_float32_matmul_precision()
        self._matmul_precision = {False: before, True: after} if after != before else {}
        self.adopt(config)
        return regions

    def recompile_forwards(self, config: CompileConfig) -> None:
        """Compile the forwards again under ``config``, the optimizer step kept as it was compiled:
        the check of a step that draws random numbers recompiles the forwards with ``fallback_random``
        (tuner/measure/trial.py), and an optimizer step draws none. Compiled again too, the step cost
        a training check a second cold compile of the optimizer: 42 s of GPT-2's 86 s check
        (docs/zoo.md, measurement 16)."""
        kept = self._compiled_optimizer_step
        self.compile(config)
        self._compiled_optimizer_step = self._optimizer_step = kept

    def adopt(self, config: CompileConfig) -> None:
        """The model was compiled by ``apply_config`` already (as a user's process does it):
        take the optimizer step the config asks for."""
        if self.optimizer is not None:
            self._compiled_optimizer_step = optimizer_step(self.optimizer, config)
        self._optimizer_step = self._compiled_optimizer_step
        self.compiled, self.side = True, True

    def hold_rival(self, config: CompileConfig) -> list[tuple[str, Any]]:
        """Compile ``config`` too, as a third side (:data:`RIVAL`) beside the config compiled already,
        which stays the config ``mode(True)`` steps. Compiled as ``apply_config`` would on a model
        never compiled: the config's forwards are taken off for the duration."""
        held = _Side(self._forwards, self._compiled_optimizer_step, self._matmul_precision)
        self._set(False)
        self._rival = None
        for module, _, _ in held.forwards:
            module.__dict__.pop("forward", None)
        self._forwards, self._compiled_optimizer_step, self._matmul_precision = [], None, {}
        try:
            regions = self.compile(config)
            self._rival = _Side(self._forwards, self._compiled_optimizer_step, self._matmul_precision)
        finally:
            for module, _, own in self._forwards:
                module.__dict__["forward"] = own
            self._forwards, self._compiled_optimizer_step = held.forwards, held.optimizer_step
            self._matmul_precision = held.matmul_precision
            self._set(True)
        return regions

    def drop_rival(self) -> None:
        """Step without the rival again (it failed after it compiled): the config stays."""
        self._set(False)
        self._rival = None
        self._set(True)

    def _restore_forwards(self) -> None:
        for module, _, _ in [*self._forwards, *(self._rival.forwards if self._rival else [])]:
            module.__dict__.pop("forward", None)
        if self._matmul_precision:
            _set_matmul_precision(self._matmul_precision[False])
        self._forwards, self._compiled_optimizer_step, self.compiled = [], None, False
        self._matmul_precision, self._rival, self.side = {}, None, False

    def eager(self):
        """Run the model's own code for the duration (nothing compiled is called)."""
        return self.mode(False)

    @contextlib.contextmanager
    def mode(self, side: bool | str):
        """Step ``side`` for the duration: False eager, True the config, :data:`RIVAL` the rival."""
        was = self.side
        self._set(side)
        try:
            yield self
        finally:
            self._set(was)

    def _set(self, side: bool | str) -> None:
        rival = self._rival if side == RIVAL else None
        active = rival.forwards if rival else self._forwards if side is True else []
        if self._rival is None:
            for module, forward, own in self._forwards:
                module.__dict__["forward"] = forward if side is True else own
        else:  # a module both configs compile: back to its own first, then the stepped side's
            # (the config's "own" last: a stand-in that slows eager keeps eager slowed beside a rival)
            for module, _, own in [*self._rival.forwards, *self._forwards]:
                module.__dict__["forward"] = own
            for module, forward, _ in active:
                module.__dict__["forward"] = forward
        precisions = [p for p in (self._matmul_precision, self._rival.matmul_precision if self._rival else {}) if p]
        if precisions:  # eager's is the process's own, the same in each
            stepped = (rival.matmul_precision if rival else self._matmul_precision if side is True else {})
            _set_matmul_precision(stepped.get(True) or precisions[0][False])
        self._optimizer_step = (rival.optimizer_step if rival else
                                self._compiled_optimizer_step if side is True else None)
        self.side = side
        self.compiled = bool(active)

    def __call__(self, inputs, inspect=None):
        import torch

        if self.task != "train":
            with torch.no_grad():
                out = call_model(self.runner, inputs)
            if inspect:
                inspect(out, None)
            return out
        assert self.optimizer is not None  # a train step always builds one
        self.optimizer.zero_grad(set_to_none=True)
        out = call_model(self.runner, inputs)
        loss = self.workload.loss_fn(out, inputs)
        loss.backward()
        if inspect:
            inspect(out, loss)
        if self.compiled and self._optimizer_step is not None:
            self._optimizer_step()
        else:
            self.optimizer.step()
        return loss


def _swapped(module) -> tuple[Any, Any, Any]:
    """A compiled module's entry: its compiled forward (the instance attribute compiling set) and
    the class's own forward bound to it, the value an eager step swaps in."""
    return module, module.__dict__["forward"], type(module).forward.__get__(module)


def _set_matmul_precision(value: str) -> None:
    import torch

    torch.set_float32_matmul_precision(value)


# --------------------------------------------------------------------------- checked steps


def rng_state(device: str):
    import torch

    state = [torch.get_rng_state()]
    if device.startswith("cuda"):
        state.append(torch.cuda.get_rng_state())
    return state


def consumed_random_numbers(before, after) -> bool:
    """True when a step drew random numbers (dropout in training, sampling in forward)."""
    import torch

    return any(not torch.equal(a, b) for a, b in zip(before, after))


def checked_step(step: Step, inputs, seed: int) -> dict:
    """A step from a known random state, with everything a correctness check compares: the
    output; in training also the loss, every gradient and every parameter after the optimizer
    step (so a compiled optimizer step is checked too)."""
    box: dict[str, Any] = {}
    seed_all(seed)
    step(inputs, inspect=lambda out, loss: box.update(_snapshot(step.model, out, loss)))
    if step.task == "train":
        box["params"] = {name: p.detach().clone() for name, p in step.model.named_parameters()}
    return box


def _snapshot(model, out, loss) -> dict:
    # Results must be copied before the optimizer step (and the next step) changes them.
    snap = {"output": map_tensors(lambda t: t.detach().clone(), out)}
    if loss is not None:
        snap["loss"] = loss.detach().clone()
        snap["grads"] = {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}
    return snap


class TrainingState:
    """Weights, buffers and optimizer state saved once and restored in place before each
    checked step, so the eager and the compiled step start from the same state. In place
    (``copy_``), so compiled code that guards on these tensors sees the same objects."""

    def __init__(self, step: Step) -> None:
        import torch

        self.step = step
        with torch.no_grad():
            self.tensors = [(t, t.detach().clone()) for t in _state_tensors(step)]
        opt = step.optimizer
        self.optimizer_state = {p: dict(s) for p, s in opt.state.items()} if opt is not None else {}
        self.optimizer_values = {(id(p), k): (v.detach().clone() if isinstance(v, torch.Tensor) else v)
                                 for p, s in self.optimizer_state.items() for k, v in s.items()}

    def restore(self) -> None:
        import torch

        with torch.no_grad():
            for live, saved in self.tensors:
                live.copy_(saved)
        opt = self.step.optimizer
        if opt is None:
            return
        for p in [p for p in opt.state if p not in self.optimizer_state]:
            del opt.state[p]  # state the optimizer created after the save
        for p, entries in self.optimizer_state.items():
            live = opt.state[p]
            for k, obj in entries.items():
                saved = self.optimizer_values[(id(p), k)]
                if isinstance(saved, torch.Tensor):
                    with torch.no_grad():
                        obj.copy_(saved)
                    live[k] = obj
                else:
                    live[k] = saved


def fresh_start(step: Step, seed: int) -> None:
    """Put freshly built weights (the trial's seed) into the model, in place, and zero the
    optimizer's state tensors (moments, step counts): a known, finite state, whatever the timed
    steps did to the model."""
    import torch

    seed_all(seed)
    fresh = step.workload.make_model()
    with torch.no_grad():
        step.model.load_state_dict(fresh.state_dict())  # copies into the live tensors
        if step.optimizer is not None:
            for state in step.optimizer.state.values():
                for value in state.values():
                    if isinstance(value, torch.Tensor):
                        value.zero_()


def _state_tensors(step: Step) -> list:
    return list(step.model.parameters()) + [b for b in step.model.buffers()]


def timed_steps(step: Step, inputs, n: int, device: str) -> list[float]:
    return [timed(lambda: step(inputs), device)[0] for _ in range(n)]
