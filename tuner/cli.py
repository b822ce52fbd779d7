"""``compile-tune``: argument parsing, printing, and mapping errors to exit codes.

    compile-tune MODEL.py [options]     tune (or resume) and write results/<model>/
    compile-tune show DIR               print the verdict and the top trials of a finished run

Exit codes: 0 success, 2 bad input (one ``error:`` line and a ``hint:``), 130 interrupted.
"""
from __future__ import annotations

import argparse
import os
import sys
import traceback
import warnings

from . import __version__
from .errors import TunerError
from .storage import HEARTBEAT_S, scrub

SUBCOMMANDS = ("show",)


def _tune_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="compile-tune",
        description="Measure which torch.compile settings make MODEL.py fastest, against eager.",
        epilog="Other commands: `compile-tune show DIR`. The model file defines build_model() and "
               "example_inputs(); see README.md.",
    )
    p.add_argument("workload", metavar="MODEL.py", help="file defining build_model() and example_inputs()")
    p.add_argument("--space", default="default", help="bundled space name (default, quick) or a YAML path [default]")
    p.add_argument("--trials", type=int, default=20, help="search trials to measure, baselines not counted [20]")
    p.add_argument("--steps", type=int, default=10_000,
                   help="steps your real run takes; total time = compile + steps x step time [10000]")
    p.add_argument("--task", choices=("infer", "train"), default="infer",
                   help="infer: no_grad forward; train: forward+loss+backward+optimizer step [infer]")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N [auto]")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads in every trial [half the CPUs, at least 1]")
    p.add_argument("--out", default=None, help="output folder [results/<model file name>]")
    p.add_argument("--storage", default=None,
                   help="study storage: sqlite:///PATH, postgresql://USER@HOST/DB or journal:///PATH; "
                        "workers on one study share it [sqlite:///OUT/study.db]")
    p.add_argument("--study", dest="study_name", default=None, help="study name [model file name]")
    p.add_argument("--workers", type=int, default=1,
                   help="worker processes on this machine, one device each, all on one study [1]")
    p.add_argument("--heartbeat", type=int, default=HEARTBEAT_S,
                   help="seconds between heartbeats of a running trial; one silent for 6 of them is "
                        "failed and measured again by another worker [10]")
    p.add_argument("--seed", type=int, default=0, help="sampler seed [0]")
    p.add_argument("--trial-timeout", type=float, default=900.0, help="seconds before a trial is killed [900]")
    p.add_argument("--max-memory", dest="max_memory_mb", type=float, default=None,
                   help="peak memory bound in MB; configs above it are never chosen")
    p.add_argument("--measure-seconds", type=float, default=6.0, help="timing budget per trial [6]")
    p.add_argument("--resume", action="store_true",
                   help="continue the study in OUT (the default when it exists; kept for clarity)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--verbose", action="store_true", help="tracebacks for errors")
    p.add_argument("--version", action="version", version=f"compile-tune {__version__}")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    verbose = "--verbose" in argv
    secret = _storage_arg(argv)  # scrubbed from everything printed
    try:
        if argv and argv[0] == "show":
            return _show(argv[1:])
        return _tune(argv)
    except TunerError as exc:
        if verbose:
            print(scrub(traceback.format_exc(), secret), file=sys.stderr, end="")
        print(f"error: {scrub(exc.message, secret)}", file=sys.stderr)
        if exc.hint:
            print(f"hint: {exc.hint}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception:
        if secret is None:
            raise
        print(scrub(traceback.format_exc(), secret), file=sys.stderr, end="")  # as Python would, minus the password
        return 1


def _storage_arg(argv: list[str]) -> str | None:
    for i, arg in enumerate(argv):
        if arg.startswith("--storage="):
            return arg.split("=", 1)[1]
        if arg == "--storage" and i + 1 < len(argv):
            return argv[i + 1]
    return None


def _tune(argv: list[str]) -> int:
    from .tune import TuneOptions, tune

    args = _tune_parser().parse_args(argv)
    options = {k: v for k, v in vars(args).items() if k not in ("resume", "no_progress", "verbose")}
    opts = TuneOptions(**options, progress=not args.no_progress, argv=["compile-tune", *argv])
    if not args.verbose:
        warnings.filterwarnings("ignore", module="optuna")
    result = tune(opts)
    print()
    print(result.summary)
    print()
    print(_verdict_text(result.tuned.to_dict(), result.out_dir))
    for note in result.run.notes:
        print(f"note: {note}")
    from .study import hardware_mismatch

    mismatch = hardware_mismatch(result.run.study)
    if mismatch:
        print(f"warning: {mismatch}")
    return 130 if result.run.interrupted else 0


def _verdict_text(tuned: dict, out_dir) -> str:
    m = tuned.get("measured") or {}
    path = os.path.join(str(out_dir), "best_config.yaml")
    if tuned.get("verdict") == "stay_eager":
        best = m.get("best_compiled")
        extra = f" (best compiled: {best}, {m.get('best_compiled_total_time_s'):.1f} s)" if best else ""
        return (f"verdict: stay eager: no config beat eager's {m.get('total_time_s', 0):.1f} s "
                f"over the scored steps{extra}.\n  {path} says so; apply_config leaves the model uncompiled.")
    cfg = tuned["config"]
    vs_plain = m.get("speedup_vs_plain_compile")
    label = "/".join(str(cfg[k]) for k in ("target", "backend") if cfg.get(k)) + (
        f"/{cfg['mode']}" if cfg.get("mode") else "")
    lines = [
        f"verdict: compile with {label}" + (f" dynamic={cfg['dynamic']}" if cfg.get("dynamic") is not None else "")
        + (" fullgraph" if cfg.get("fullgraph") else "") + "".join(f" {k}={v}" for k, v in cfg["options"].items()),
        f"  {m['speedup_vs_eager']:.2f}x faster steps than eager"
        + (f", {vs_plain:.2f}x vs plain torch.compile" if vs_plain else "")
        + f"; compile {m['compile_time_s']:.1f} s, pays off after {m['break_even_steps']} steps",
        f"  total {m['total_time_s']:.1f} s vs eager {m['eager_total_time_s']:.1f} s",
        f"  use it: model = tuner.apply_config(model, \"{path}\")",
    ]
    return "\n".join(lines)


def _show(argv: list[str]) -> int:
    import yaml

    from .config import load_tuned_config

    p = argparse.ArgumentParser(prog="compile-tune show", description="Print the verdict and top trials of a run.")
    p.add_argument("dir", help="output folder of a tuning run")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args(argv)
    tuned = load_tuned_config(os.path.join(args.dir, "best_config.yaml"))
    csv_path = os.path.join(args.dir, "trials.csv")
    if os.path.exists(csv_path):
        import pandas as pd

        from .report import summary_table

        print(summary_table(pd.read_csv(csv_path)))
        print()
    print(_verdict_text(yaml.safe_load(yaml.safe_dump(tuned.to_dict())), args.dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
