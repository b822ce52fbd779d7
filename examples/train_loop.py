"""A real training loop that uses a tuned config, next to the same loop in eager mode.

    compile-tune examples/tiny_transformer.py --task train --space train --steps 2000 --out results/tiny_transformer_train
    python examples/train_loop.py results/tiny_transformer_train/best_config.yaml

Both models start from the same weights and see the same batches; steps of the two are timed
alternately so that machine drift hits both alike. The tuned run pays its compile (or warm
start) on its first step, as a real job does. At the end: wall time of each run over the
horizon, and how closely the loss curves agree.
"""
from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import tiny_transformer as workload  # noqa: E402

import tuner  # noqa: E402


def batches(steps: int, seed: int = 0):
    """A learnable stream: each sequence repeats a random 8-token motif."""
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        motif = torch.randint(0, workload.VOCAB, (workload.BATCH, 8), generator=g)
        yield motif.repeat(1, workload.SEQ // 8)


def train_step(model, optimizer_step, optimizer, tokens) -> float:
    optimizer.zero_grad(set_to_none=True)
    logits = model(tokens)
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, workload.VOCAB), tokens[:, 1:].reshape(-1))
    loss.backward()
    optimizer_step()
    return loss.item()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("config", help="best_config.yaml from a --task train tuning run")
    p.add_argument("--steps", type=int, default=None, help="training steps [the horizon the config was tuned for]")
    p.add_argument("--lr", type=float, default=1e-3)
    args = p.parse_args()
    tuned = tuner.load_tuned_config(args.config)
    steps = args.steps or int(tuned.tuned_on.get("steps") or 500)
    torch.set_num_threads(int(tuned.tuned_on.get("threads") or 1))

    eager_model = workload.build_model().train()
    model = copy.deepcopy(eager_model)
    eager_opt = torch.optim.AdamW(eager_model.parameters(), lr=args.lr)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)

    start = time.perf_counter()
    model = tuner.apply_config(model, args.config)  # the one call training code needs
    step = tuner.optimizer_step(optimizer, args.config)
    setup = time.perf_counter() - start

    eager_losses, tuned_losses, eager_times, tuned_times = [], [], [], []
    for i, tokens in enumerate(batches(steps)):
        runs = [(eager_model, eager_opt.step, eager_opt, eager_losses, eager_times),
                (model, step, optimizer, tuned_losses, tuned_times)]
        for m, opt_step, opt, losses, times in (runs if i % 2 == 0 else reversed(runs)):
            t = time.perf_counter()
            losses.append(train_step(m, opt_step, opt, tokens))
            times.append(time.perf_counter() - t)
        if i % max(1, steps // 10) == 0:
            print(f"step {i:6d}  loss eager {eager_losses[-1]:.4f}  tuned {tuned_losses[-1]:.4f}")

    eager_total, tuned_total = sum(eager_times), setup + sum(tuned_times)
    # Compiled kernels round differently, and training amplifies tiny differences step by step,
    # so single steps drift apart; the curves must still agree window by window.
    window = max(1, steps // 20)
    means = [(statistics.mean(eager_losses[i:i + window]), statistics.mean(tuned_losses[i:i + window]))
             for i in range(0, steps, window)]
    diffs = [abs(a - b) / max(abs(a), 1e-8) for a, b in means]
    first_diverged = next((i for i, (a, b) in enumerate(zip(eager_losses, tuned_losses))
                           if abs(a - b) > 1e-3 * max(abs(a), 1e-8)), None)
    print(f"\nconfig: {tuned.config.describe()} (verdict {tuned.verdict}), {steps} steps")
    print(f"first step: eager {eager_times[0]:.2f} s, tuned {setup + tuned_times[0]:.2f} s (compile or warm start)")
    print(f"steady step (median): eager {statistics.median(eager_times[1:]) * 1e3:.2f} ms, "
          f"tuned {statistics.median(tuned_times[1:]) * 1e3:.2f} ms")
    print(f"total over the horizon: eager {eager_total:.1f} s, tuned {tuned_total:.1f} s, "
          f"tuned/eager {tuned_total / eager_total:.3f}")
    print(f"loss: first {eager_losses[0]:.4f} -> last eager {eager_losses[-1]:.4f}, tuned {tuned_losses[-1]:.4f}; "
          f"identical to 1e-3 until step {first_diverged if first_diverged is not None else steps}; "
          f"max relative difference of {window}-step window means {max(diffs):.2%}")
    agree = max(diffs) < 0.05
    print("loss curves agree (window means within 5 %)" if agree else "loss curves DIFFER by more than 5 %")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
