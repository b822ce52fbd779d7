"""Train with accelerate, its compile settings taken from a tuned config: regional compilation when
the tuned config compiles the repeated blocks.

    compile-tune examples/accelerate_regional.py --task train --space quick --trials 3
    python examples/accelerate_regional.py results/accelerate_regional            # 5 steps
    python examples/accelerate_regional.py results/accelerate_regional --steps 20

The script takes the `accelerate` export of the run (what `compile-tune export DIR --to
accelerate` prints, and what best_config.yaml holds under `exports:`), builds accelerate's own
``TorchDynamoPlugin`` from it and trains a small model of repeated blocks with
``Accelerator(dynamo_plugin=...)``, printing the loss of each step next to an eager twin's (same
weights, same batch: with ``aot_eager`` the two agree to rounding). This file is also a workload
(``build_model``, ``example_inputs``, ``loss_fn``), so the command above tunes this very model.

What accelerate cannot carry, so a run through accelerate is not exactly the measured config (the
script prints the list for the config at hand; ``tuner.apply_config`` is the lossless path):

- inductor options (``options:`` in best_config.yaml): accelerate has no setting for them;
- module targets other than the repeated blocks (a glob such as ``layers.*``): accelerate compiles
  the whole model or its repeated blocks;
- the difference between the two regional compilations: the tuner's ``blocks`` compiles only the
  repeated block class and runs the rest eagerly; accelerate compiles each module of every
  ``ModuleList`` of same-class modules, and every other submodule separately (here also ``inp``
  and ``out``);
- a compiled optimizer step (``compile_optimizer``; ``tuner.optimizer_step`` does it);
- the warm-start compile cache saved beside best_config.yaml (only ``apply_config`` loads it).

(``dynamic: null`` holds under ``accelerate launch`` too since accelerate 1.16: it sets
``ACCELERATE_DYNAMO_USE_DYNAMIC`` only where the config file or the command line names it; before,
it always passed dynamic=False.)
"""
from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tuner.export import export  # noqa: E402
from tuner.export.best_config import load_tuned_config  # noqa: E402

DIM, LAYERS, BATCH = 32, 4, 16


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        return x + self.ff(self.norm(x))


class Net(nn.Module):
    def __init__(self, d: int = DIM, n: int = LAYERS) -> None:
        super().__init__()
        self.inp = nn.Linear(d, d)
        self.layers = nn.ModuleList(Block(d) for _ in range(n))  # what accelerate compiles block by block
        self.out = nn.Linear(d, 1)

    def forward(self, x):
        x = self.inp(x)
        for layer in self.layers:
            x = layer(x)
        return self.out(x)


def build_model() -> nn.Module:
    torch.manual_seed(0)
    return Net()


def example_inputs():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(BATCH, DIM, generator=g),)


def loss_fn(output, inputs):
    return output.pow(2).mean()


def dynamo_plugin(best_config: Path):
    """accelerate's TorchDynamoPlugin from the run's accelerate export, and what the export says
    accelerate cannot carry."""
    from accelerate.utils import TorchDynamoPlugin

    block = export(load_tuned_config(best_config).to_dict(), "accelerate")
    return TorchDynamoPlugin(**block["plugin"]), block["not_carried"]


def main(argv: list[str] | None = None) -> int:
    from accelerate import Accelerator

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", help="output folder of a compile-tune run, or its best_config.yaml")
    p.add_argument("--steps", type=int, default=5)
    args = p.parse_args(argv)
    best = Path(args.results)
    best = best / "best_config.yaml" if best.is_dir() else best

    plugin, not_carried = dynamo_plugin(best)
    print(f"accelerate: backend={plugin.backend.value.lower()} mode={plugin.mode} fullgraph={plugin.fullgraph} "
          f"dynamic={plugin.dynamic} regional={plugin.use_regional_compilation}")
    for lost in not_carried:
        print(f"not carried: {lost['setting']}={lost['value']}: {lost['why']}")

    accelerator = Accelerator(cpu=not torch.cuda.is_available(), dynamo_plugin=plugin)
    model = build_model()
    twin = copy.deepcopy(model).to(accelerator.device)  # stays eager
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    twin_optimizer = torch.optim.AdamW(twin.parameters(), lr=1e-3)
    model, optimizer = accelerator.prepare(model, optimizer)
    compiled = [n for n, m in model.named_modules() if isinstance(m, torch._dynamo.eval_frame.OptimizedModule)]
    print(f"compiled regions: {len(compiled)} ({', '.join(compiled) or 'none'})")

    (x,) = example_inputs()
    x = x.to(accelerator.device)
    for step in range(args.steps):
        optimizer.zero_grad()
        loss = loss_fn(model(x), (x,))
        accelerator.backward(loss)
        optimizer.step()
        twin_optimizer.zero_grad()
        eager_loss = loss_fn(twin(x), (x,))
        eager_loss.backward()
        twin_optimizer.step()
        print(f"step {step} loss {loss.item():.6f} eager {eager_loss.item():.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
