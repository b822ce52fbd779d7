"""The subcommands that hand a run's result to other tools: ``compile-tune export`` (another
tool's own format) and ``compile-tune package`` (an AOTInductor ``.pt2``). tuner/cli.py dispatches."""
from __future__ import annotations

import argparse
import sys

from .core.errors import TunerError


def export_command(argv: list[str]) -> int:
    from pathlib import Path

    from .export import TARGETS, render
    from .export.best_config import load_tuned_config

    p = argparse.ArgumentParser(
        prog="compile-tune export",
        description="Print a run's tuned settings in another tool's own format, with the list of what that tool "
                    "cannot carry. tuner.apply_config(model, best_config.yaml) is the lossless path.")
    p.add_argument("dir", metavar="DIR", help="output folder of a tuning run, or its best_config.yaml")
    p.add_argument("--to", required=True, choices=TARGETS, help="the tool to export for")
    p.add_argument("--output", "-o", metavar="FILE", default=None, help="write to FILE instead of stdout")
    p.add_argument("--verbose", action="store_true", help="tracebacks for errors")
    args = p.parse_args(argv)
    path = Path(args.dir)
    if path.is_dir():
        path = path / "best_config.yaml"
        if not path.exists():
            hint = ("rebuild it with `compile-tune report DIR`" if (path.parent / "study.db").exists()
                    else "give the output folder of a compile-tune run (--out) or its best_config.yaml")
            raise TunerError(f"{args.dir}: no best_config.yaml in this folder", hint)
    elif not path.exists():
        raise TunerError(f"{args.dir}: no such folder or file",
                         "give the output folder of a compile-tune run (--out) or its best_config.yaml")
    tuned = load_tuned_config(path)
    words = tuned.verdict.replace("_", " ")
    label = (f"compile with {tuned.config.describe()}" if tuned.verdict == "compile"
             else f"{words}: eager (this export does not compile)")
    text, header = render(tuned.to_dict(), args.to, source=str(path), label=label)
    if args.output:
        Path(args.output).write_text(text)
        print(args.output)
    else:
        print(text, end="")
    if header and (args.output or args.to == "vllm"):  # the format has no comments, or the file holds them
        print("".join(f"# {line}\n" for line in header), file=sys.stderr, end="")
    return 0


def package_command(argv: list[str]) -> int:
    from pathlib import Path

    from .pt2.command import package_results
    from .pt2.machine import CHOICES

    p = argparse.ArgumentParser(
        prog="compile-tune package",
        description="Export the winner of an inference run with torch.export, compile it ahead of time with "
                    "AOTInductor into RESULTS/model.pt2 (tuner.load_package loads it with no compile), and check it "
                    "in a fresh process against eager; its figures go into best_config.yaml and the reports.")
    p.add_argument("dir", metavar="RESULTS", help="output folder of a compile-tune run")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds each of its two processes may run [1800]")
    p.add_argument("--best-compiled", action="store_true",
                   help="under a stay-eager verdict, package the run's best compiled config anyway")
    p.add_argument("--isa", choices=CHOICES, default=None,
                   help="the x86-64 level the package's C++ is built for: a CPU without that level's flags refuses "
                        "to load it (native: this CPU only) [the highest level this CPU has]")
    p.add_argument("--verbose", action="store_true", help="tracebacks for errors")
    args = p.parse_args(argv)
    if not (Path(args.dir) / "best_config.yaml").exists():
        raise TunerError(f"{args.dir}: no best_config.yaml in this folder",
                         "give the output folder of a compile-tune run (--out)")
    record = package_results(args.dir, timeout=args.timeout, best_compiled=args.best_compiled, isa=args.isa)
    print(Path(args.dir) / record["path"])
    return 0
