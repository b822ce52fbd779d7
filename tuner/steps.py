"""One step of the user's workload, as a trial runs it: a no_grad forward for inference, or
forward + loss + backward + optimizer step for training; and the copies of its results that
correctness checks compare."""
from __future__ import annotations

from typing import Any

from .config import CompileConfig
from .devices import timed
from .workload import call_model


class Stepper:
    """One step of the user's workload: inference (no_grad forward) or a training step."""

    def __init__(self, model, task: str, workload, config: CompileConfig | None = None) -> None:
        import torch

        from .config import optimizer_step

        self.model, self.task, self.workload = model, task, workload
        self.optimizer = None
        self.optimizer_step = None
        if task == "train":
            model.train()
            if workload.build_optimizer is not None:
                self.optimizer = workload.build_optimizer(model)
            else:
                # Documented default: AdamW, the common choice for the transformer-like models we target.
                self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
            self.optimizer_step = optimizer_step(self.optimizer, config) if config else self.optimizer.step
        else:
            model.eval()

    def __call__(self, inputs, inspect=None):
        import torch

        if self.task != "train":
            with torch.no_grad():
                out = call_model(self.model, inputs)
            if inspect:
                inspect(out, None)
            return out
        self.optimizer.zero_grad(set_to_none=True)
        out = call_model(self.model, inputs)
        loss = self.workload.loss_fn(out, inputs)
        loss.backward()
        if inspect:
            inspect(out, loss)
        self.optimizer_step()
        return loss


def _grads(model) -> dict:
    return {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}


def _snapshot(model, out, loss):
    # Results must be copied before the optimizer step (and the next step) changes them.
    import torch

    def detach(v):
        if isinstance(v, torch.Tensor):
            return v.detach().clone()
        if isinstance(v, dict):
            return {k: detach(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return type(v)(detach(x) for x in v)
        return v

    snap = {"output": detach(out)}
    if loss is not None:
        snap["loss"] = loss.detach().clone()
        snap["grads"] = _grads(model)
    return snap


def timed_snapshot(stepper, inputs, device):
    """A timed step whose results are kept (copied before the optimizer step changes them)."""
    box: dict[str, Any] = {}
    t, _ = timed(
        lambda: stepper(inputs, inspect=lambda out, loss: box.update(snap=_snapshot(stepper.model, out, loss))),
        device,
    )
    return t, box["snap"]


def sync_weights(eager: "Stepper", compiled: "Stepper") -> None:
    """Training changes the weights every step, and the two models have taken different numbers
    of steps by now: start each schedule step from the compiled model's state so the results
    are comparable. In-place compile keeps the state_dict keys identical."""
    if eager.task != "train" or eager is compiled:
        return
    eager.model.load_state_dict(compiled.model.state_dict())
    eager.optimizer.load_state_dict(compiled.optimizer.state_dict())
