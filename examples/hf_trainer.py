"""Train GPT-2 with Hugging Face `Trainer` under a tuned config, or eagerly, and compare the losses.

    compile-tune examples/hf_trainer_gpt2.py --task train --space quick --trials 3 --steps 10000
    python examples/hf_trainer.py results/hf_trainer_gpt2             # the tuned config, real kernels
    python examples/hf_trainer.py results/hf_trainer_gpt2 --eager     # the same run, eagerly
    python examples/hf_trainer.py results/hf_trainer_gpt2 --compare   # both; loss step by step

How the config reaches Trainer: ``tuner.apply_config(model, "best_config.yaml")`` compiles the
model in place before Trainer gets it (the lossless path: every setting that was measured is
applied; ``compile-tune export --to hf-trainer`` carries only what ``TrainingArguments`` can say).
Trainer's own compile, ``TrainingArguments(torch_compile=...)`` or accelerate's
``ACCELERATE_DYNAMO_*`` settings, must stay off: it would compile the model a second time. The
script refuses to train when either is on.

What Trainer cannot carry: a compiled optimizer step (``compile_optimizer: true``). Trainer calls
``optimizer.step()`` itself, and its learning-rate schedule changes the rate every step, which
recompiles a step compiled with a plain-float rate. Such a config's optimizer step runs eagerly
here, and the script says so; examples/train_loop.py runs the whole config.

Dropout (GPT-2's default 0.1): inductor draws random numbers with its own kernels, so its dropout
masks differ from eager's and the two losses agree only on average, never step by step.
``--compare`` therefore compiles with ``torch._inductor.config.fallback_random = True`` (inductor
draws through eager's generator: the same masks), and both runs start from the same weights, batches
and random state; the losses then agree step by step to rounding. ``--no-dropout`` turns dropout
off instead. A plain run (no ``--compare``) uses inductor's own random kernels, the ones the tuner
timed.
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import hf_trainer_gpt2 as workload  # noqa: E402

import tuner  # noqa: E402

#: --compare passes when every step's loss is within this relative difference of eager's.
RTOL = 1e-3


@dataclasses.dataclass
class TrainRun:
    """What one Trainer run did."""

    label: str
    losses: list[float]
    """The loss of every optimizer step, as Trainer logged it (``logging_steps=1``)."""
    graphs: int
    """Graphs dynamo compiled during the run: 0 means the model ran eagerly."""
    runtime_s: float
    """Trainer's own ``train_runtime``, compile included."""


def config_file(results: str | Path) -> Path:
    """``best_config.yaml`` of a results folder (or the file itself)."""
    path = Path(results)
    return path / "best_config.yaml" if path.is_dir() else path


def dataset(n: int, seed: int = 0) -> list[dict]:
    """``n`` learnable sequences (a repeated random motif each), labels = inputs as for a causal LM."""
    g = torch.Generator().manual_seed(seed)
    return [{"input_ids": ids, "labels": ids} for ids in (workload.sequence(g) for _ in range(n))]


def train(config: Path | None, steps: int, *, dropout: bool = True, fallback_random: bool = False,
          seed: int = 0, lr: float = workload.LR) -> TrainRun:
    """Train a fresh model for ``steps`` with Trainer: eagerly when ``config`` is None, else under
    the tuned config applied with ``tuner.apply_config``."""
    from transformers import PrinterCallback, Trainer, TrainingArguments, set_seed

    model = workload.build_model(_model_config(dropout))
    label = "eager"
    if config is not None:
        tuned = tuner.load_tuned_config(config)
        model = tuner.apply_config(model, config)
        label = f"tuned ({tuned.config.describe()}, verdict {tuned.verdict})"
        if tuned.verdict == "compile" and tuned.config.compile_optimizer:
            print("note: the config compiles the optimizer step, which Trainer cannot carry (it steps its own "
                  "optimizer under a changing learning rate); the step runs eagerly here. "
                  "examples/train_loop.py runs the whole config.")
    with tempfile.TemporaryDirectory(prefix="hf-trainer-") as out:
        args = TrainingArguments(
            output_dir=out, max_steps=steps, per_device_train_batch_size=workload.BATCH, learning_rate=lr,
            logging_steps=1, save_strategy="no", report_to="none", disable_tqdm=True, seed=seed,
            dataloader_num_workers=0, dataloader_pin_memory=torch.cuda.is_available(),
            torch_compile=False,  # apply_config compiled the model already
        )
        trainer = Trainer(model=model, args=args, train_dataset=dataset(steps * workload.BATCH, seed))
        trainer.remove_callback(PrinterCallback)  # a line per step; the summary says what matters
        _refuse_second_compile(trainer)
        set_seed(seed)  # the same random state (dropout, data order) for every run
        before = _graphs()
        with torch._inductor.config.patch(fallback_random=fallback_random):
            result = trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    return TrainRun(label, losses, _graphs() - before, result.metrics["train_runtime"])


def _model_config(dropout: bool):
    if dropout:
        return workload.CONFIG
    config = copy.deepcopy(workload.CONFIG)
    config.resid_pdrop = config.embd_pdrop = config.attn_pdrop = 0.0
    return config


def _refuse_second_compile(trainer) -> None:
    """Trainer (through accelerate) compiles the whole model when asked; on top of apply_config's
    compile that runs a config nobody measured."""
    from accelerate.utils import DynamoBackend

    backend = trainer.accelerator.state.dynamo_plugin.backend
    if trainer.args.torch_compile or backend != DynamoBackend.NO:
        raise SystemExit(
            f"error: Trainer would compile the model again (torch_compile={trainer.args.torch_compile}, "
            f"accelerate dynamo backend {backend.value}) on top of the tuned config\n"
            "hint: keep TrainingArguments(torch_compile=False) and unset ACCELERATE_DYNAMO_BACKEND; "
            "apply_config already compiled the model")


def _graphs() -> int:
    return torch._dynamo.utils.counters["stats"]["unique_graphs"]


def compare(eager: TrainRun, tuned: TrainRun) -> float:
    """The largest relative difference between the two runs' losses at the same step."""
    if len(eager.losses) != len(tuned.losses):
        raise ValueError(f"the runs logged {len(eager.losses)} and {len(tuned.losses)} losses")
    return max(abs(a - b) / max(abs(a), 1e-8) for a, b in zip(eager.losses, tuned.losses))


def summary(run: TrainRun) -> str:
    tail = run.losses[-max(1, len(run.losses) // 10):]
    return (f"{run.label}: loss {run.losses[0]:.4f} -> {run.losses[-1]:.4f} (mean of the last {len(tail)} steps "
            f"{sum(tail) / len(tail):.4f}), {run.graphs} graph(s) compiled, Trainer runtime {run.runtime_s:.1f} s")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", help="results folder of a --task train tuning run (or its best_config.yaml)")
    p.add_argument("--steps", type=int, default=200, help="optimizer steps [200]")
    p.add_argument("--lr", type=float, default=workload.LR, help=f"learning rate [{workload.LR}]")
    p.add_argument("--seed", type=int, default=0)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--eager", action="store_true", help="train eagerly (the config is only read for its thread count)")
    mode.add_argument("--compare", action="store_true",
                      help="train eagerly, then with the config and fallback_random; compare the losses step by step")
    p.add_argument("--no-dropout", dest="dropout", action="store_false", help="train with dropout off")
    p.add_argument("--rtol", type=float, default=RTOL, help=f"--compare: largest relative loss difference [{RTOL}]")
    args = p.parse_args()
    config = config_file(args.results)
    tuned = tuner.load_tuned_config(config)
    torch.set_num_threads(int(tuned.tuned_on.get("threads") or torch.get_num_threads()))  # as it was tuned

    common = dict(dropout=args.dropout, seed=args.seed, lr=args.lr)
    if not args.compare:
        run = train(None if args.eager else config, args.steps, **common)
        print(summary(run))
        return 0
    eager = train(None, args.steps, **common)
    tuned_run = train(config, args.steps, fallback_random=True, **common)
    worst = compare(eager, tuned_run)
    print(summary(eager))
    print(summary(tuned_run))
    print(f"largest relative loss difference at one step over {args.steps} steps: {worst:.2e} "
          f"(dropout {'on, fallback_random' if args.dropout else 'off'}); tolerance {args.rtol:.0e}")
    if tuned.verdict == "compile" and tuned_run.graphs == 0:
        print("error: the tuned run compiled nothing: the config was not applied")
        return 1
    if worst > args.rtol:
        print("the losses DIFFER from eager's")
        return 1
    print("the losses match eager's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
