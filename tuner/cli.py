"""``compile-tune``: argument parsing, printing, and mapping errors to exit codes.

    compile-tune MODEL.py [options]     tune (or resume) and write results/<model>/
    compile-tune check MODEL.py         graph breaks, numpy, recompiles: what to know before tuning
    compile-tune space MODEL.py         the space a run would search, each dimension with why; no trials
    compile-tune show DIR               print the verdict and the top trials of a finished run
    compile-tune report DIR             rebuild report.html, report.md, trials.csv, best_config.yaml
    compile-tune export DIR --to TOOL   the tuned settings for accelerate, hf-trainer, env, torchtitan, vllm, json
    compile-tune node --rdzv-endpoint HOST:PORT   lend this machine's ranks to a run with --nnodes

Exit codes: 0 success, 2 bad input (one ``error:`` line and a ``hint:``), 130 interrupted.
"""
from __future__ import annotations

import argparse
import atexit
import os
import sys
import traceback
import warnings
from typing import NoReturn

from ._version import __version__
from .cli_ship import export_command as _export
from .cli_ship import package_command as _package
from .core.errors import TunerError
from .core.spec import Role
from .run.options import default
from .system.storage import scrub

SUBCOMMANDS = ("show", "check", "space", "report", "export", "package", "node")


def _tune_parser() -> argparse.ArgumentParser:
    """``compile-tune MODEL.py``: every default is TuneOptions' (tuner/run/options.py), shown in [brackets]."""
    p = argparse.ArgumentParser(
        prog="compile-tune",
        description="Measure which torch.compile settings make MODEL.py fastest, against eager.",
        epilog="Other commands: `compile-tune space MODEL.py`, `compile-tune show DIR`, `compile-tune report DIR`, "
               "`compile-tune export DIR --to TOOL`. The model file defines build_model() and example_inputs(); "
               "see README.md.",
    )
    p.add_argument("workload", metavar="MODEL.py", help="file defining build_model() and example_inputs()")
    _search_arguments(p.add_argument_group("what is searched and scored"))
    _measure_arguments(p.add_argument_group("how trials are measured"))
    _run_arguments(p.add_argument_group("where the run goes"))
    p.add_argument("--resume", action="store_true",
                   help="continue the study in OUT (the default when it exists; kept for clarity)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--verbose", action="store_true", help="tracebacks for errors")
    p.add_argument("--version", action="version", version=f"compile-tune {__version__}")
    return p


def _add(group, flag: str, help: str, shown: str | None = None, **kw) -> None:
    """An option whose default is TuneOptions' field of the same name (``dest``)."""
    dest = kw.pop("dest", flag.lstrip("-").replace("-", "_"))
    value = default(dest)
    text = shown if shown is not None else ("none" if value is None else str(value))
    group.add_argument(flag, dest=dest, default=value, help=f"{help} [{text}]", **kw)


def _search_arguments(g) -> None:
    _add(g, "--space", "auto (built for the model: `compile-tune space MODEL.py` shows it), a bundled space name "
         "(default, quick, ...) or a YAML path")
    _add(g, "--trials", "search trials to measure, baselines not counted", type=int)
    _add(g, "--steps", "steps your real run takes; total time = compile + steps x step time", type=int)
    _add(g, "--task", "infer: no_grad forward; train: forward+loss+backward+optimizer step", choices=("infer", "train"))
    _add(g, "--compile-cost", "score the compile time of a first run (cold) or of a restart with the cache kept "
         "(warm)", choices=("cold", "warm"))
    _add(g, "--objective", "time: fastest total time; pareto: the knee of the time/peak-memory Pareto front",
         choices=("time", "pareto"))
    _add(g, "--max-memory", "peak memory bound in MB; configs above it are never chosen", dest="max_memory_mb",
         type=float)
    _add(g, "--confirm", "re-measure the top K configs with eager and plain compile before deciding; 0 skips",
         type=int, metavar="K")
    _add(g, "--confirm-rounds", "the most interleaved rounds of fresh processes for --confirm; it stops at the first "
         "look (after rounds 2, 3, 5, 8, 12, 18, ...) whose 95%% intervals decide", type=int)
    _add(g, "--tie-margin", "a saving below this share of eager's total is a tie (stay eager), e.g. 0.02", type=float)
    g.add_argument("--allow-precision-change", action="store_true",
                   help="also search lower precision: bf16 autocast (CPU and GPU) and TF32 matmuls (CUDA, compute "
                        "capability >= 8.0). Such configs change numerics: checked against float32 eager at "
                        "that precision's tolerance and flagged in every output [off]")
    g.add_argument("--no-check", dest="check", action="store_false",
                   help="skip the quick model check before the search")


def _measure_arguments(g) -> None:
    _add(g, "--device", "auto, cpu, cuda or cuda:N")
    _add(g, "--threads", "torch threads in every trial", shown="torch's default in a fresh process: your run's count",
         type=int)
    _add(g, "--measure-seconds", "timing budget per trial", type=float)
    _add(g, "--trial-timeout", "seconds before a trial is killed", type=float,
         shown="scaled to the model: 4x plain torch.compile's trial, at least 120 s; 900 s before that is measured")
    _add(g, "--trial-memory-limit", "hard cap in MB on each trial's data memory; allocations beyond it fail the "
         "trial", dest="trial_memory_limit_mb", type=float)
    _add(g, "--heap", "CPU: pin glibc malloc's thresholds in every trial (steady step times whatever ran before; "
         "apply_config pins them too), or leave them as the C library starts", choices=("pinned", "default"))
    _add(g, "--parallel", "trials in flight on this machine: they compile side by side on the cores the timing "
         "does not use, and take turns timing", metavar="N", shown="auto: 1 + one per 2 free cores, at most 4")
    _add(g, "--nproc", "training on many ranks: each trial runs the step on N ranks launched by torch's elastic "
         "launcher (as torchrun does), scored on the slowest; needs --task train and --data-parallel", type=int,
         metavar="N")
    _add(g, "--nnodes", "with --nproc: machines each trial's ranks span, --nproc on each; every other machine "
         "runs `compile-tune node --rdzv-endpoint HOST:PORT`", type=int, metavar="N")
    _add(g, "--rdzv-endpoint", "with --nnodes: this machine's HOST:PORT, where the ranks meet (torch's c10d "
         "rendezvous); the tuner's board uses PORT+1", metavar="HOST:PORT")
    _add(g, "--data-parallel", "with --nproc: how the ranks train one model; its settings are searched",
         choices=("ddp", "fsdp2"))
    _add(g, "--check-threads", "after tuning, call the chosen config from N threads at once and compare with eager",
         type=int, metavar="N")
    g.add_argument("--trace", action="store_true",
                   help="keep each trial's structured compile trace (TORCH_TRACE) in OUT/traces/ for tlparse")


def _run_arguments(g) -> None:
    _add(g, "--out", "output folder", shown="results/<model file name>")
    _add(g, "--storage", "study storage: sqlite:///PATH, postgresql://USER@HOST/DB or journal:///PATH; workers on "
         "one study share it", shown="sqlite:///OUT/study.db")
    _add(g, "--study", "study name", dest="study_name", shown="model file name")
    _add(g, "--workers", "worker processes on this machine, one device each, all on one study", type=int)
    _add(g, "--heartbeat", "seconds between heartbeats of a running trial; one silent for 6 of them is failed and "
         "measured again by another worker", dest="heartbeat_s", type=int)
    _add(g, "--seed", "sampler seed", type=int)
    _add(g, "--budget", "bound the whole run, confirmation and warm start included, e.g. 20m, 90s, 1h30m; when it "
         "runs out the best verdict so far is written, its confidence stated", metavar="DURATION")
    g.add_argument("--no-warm-start", dest="warm_start", action="store_false",
                   help="do not save the best config's compile cache beside best_config.yaml")


def run() -> NoReturn:
    """The ``compile-tune`` command: :func:`main`, then the exit handlers (the trial launcher's
    shutdown, logging's flush), then exit without unloading the interpreter: torch, Dynamo,
    inductor and matplotlib take a second or more to tear down, and everything is written."""
    code = main()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`| head`): nothing more to say anyway
            pass
    os._exit(code if isinstance(code, int) else 1)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    verbose = "--verbose" in argv
    secret = _storage_arg(argv)  # scrubbed from everything printed
    try:
        subcommand = _SUBCOMMANDS.get(argv[0]) if argv else None
        return subcommand(argv[1:]) if subcommand else _tune(argv)
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
    import time

    started = time.time()  # a --budget counts from here: importing torch is part of the run
    from .run.pipeline import TuneOptions, tune

    args = _tune_parser().parse_args(argv)
    options = {k: v for k, v in vars(args).items() if k not in ("resume", "no_progress", "verbose")}
    opts = TuneOptions(**options, progress=not args.no_progress, argv=["compile-tune", *argv])
    if opts.budget is not None:
        assert not isinstance(opts.budget, str)  # TuneOptions parsed it to seconds
        opts.budget_deadline = started + opts.budget
    if not args.verbose:
        warnings.filterwarnings("ignore", module="optuna")
    result = tune(opts, log=print)
    assert result.tuned is not None  # only a --workers process (tuner/_worker.py) decides nothing
    print()
    print(result.summary)
    print()
    print(_diagnostics_text(result.run.study))
    print()
    print(_verdict_text(result.tuned, result.out_dir))
    print(result.timing)
    for note in result.run.notes:
        print(f"note: {note}")
    from .study import hardware_mismatch

    mismatch = hardware_mismatch(result.run.study)
    if mismatch:
        print(f"warning: {mismatch}")
    return 130 if result.run.interrupted else 0


def _diagnostics_text(study) -> str:
    from .core.shapes import choice_of as dynamic_choice_of
    from .space.repair import lines as repair_lines
    from .user.diagnose import format_breaks, unique_breaks

    attrs = [dict(t.user_attrs, number=t.number) for t in study.get_trials(deepcopy=False)]
    lines = [format_breaks(unique_breaks(attrs)), *repair_lines(attrs)]
    by_dynamic: dict[str, list[int]] = {}
    for a in attrs:
        if a.get("duplicate_of") is None and a.get("recompiles") is not None and a.get("role") != Role.EAGER:
            dyn = dynamic_choice_of(a.get("config") or {})
            by_dynamic.setdefault("null" if dyn is None else str(dyn).lower(), []).append(int(a["recompiles"]))
    if any(sum(v) for v in by_dynamic.values()):
        parts = [f"dynamic={k}: {max(v)} max" for k, v in sorted(by_dynamic.items())]
        lines.append("recompiles per trial by setting: " + ", ".join(parts))
    if any(a.get("recompile_limit_hit") for a in attrs):
        hit = [a.get("config_label") for a in attrs if a.get("recompile_limit_hit") and a.get("duplicate_of") is None]
        lines.append(f"recompile limit hit (later shapes ran eagerly) in: {', '.join(map(str, hit))}")
    return "\n".join(lines)


def _verdict_text(tuned, out_dir) -> str:
    """The verdict of a :class:`TunedConfig` as the terminal shows it (the reports' text)."""
    from .report import verdict_text

    return verdict_text(tuned, os.path.join(str(out_dir), "best_config.yaml"))


def _check(argv: list[str]) -> int:
    import tempfile
    from pathlib import Path

    from .isolation.isolated import check_model
    from .measure.check import format_check
    from .user.workload import load_workload, validate_workload

    p = argparse.ArgumentParser(prog="compile-tune check",
                                description="Trace the model once (seconds) and say what to know before tuning.")
    p.add_argument("workload", metavar="MODEL.py")
    p.add_argument("--task", choices=("infer", "train"), default="infer")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args(argv)
    workload = load_workload(args.workload)
    validate_workload(workload, args.task)
    with tempfile.TemporaryDirectory(prefix="compile-tune-check-") as tmp:
        found = check_model(str(workload.path), args.task, Path(tmp))
    print(format_check(found, workload.name))
    return 0


def _space(argv: list[str]) -> int:
    import tempfile
    from pathlib import Path

    from .isolation.isolated import check_model
    from .run.pipeline import TuneOptions, resolve_device, search_space
    from .space.autospace import AUTO, Choice, space_text
    from .space.repair import add_repairs
    from .user.workload import load_workload, validate_workload

    p = argparse.ArgumentParser(prog="compile-tune space",
                                description="Print the space a run would search and why; no trial is run.")
    p.add_argument("workload", metavar="MODEL.py")
    p.add_argument("--space", default=AUTO, help="auto, a bundled space name or a YAML path [auto]")
    p.add_argument("--task", choices=("infer", "train"), default="infer")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N [auto]")
    p.add_argument("--allow-precision-change", action="store_true", help="as for a run: lower precisions too")
    p.add_argument("--data-parallel", choices=("ddp", "fsdp2"), default=None,
                   help="as for a run on many ranks (--nproc 2 is assumed): that wrap's settings too")
    p.add_argument("--no-check", dest="check", action="store_false",
                   help="skip the model check (seconds), so no graph-break repair joins the space")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args(argv)
    workload = load_workload(args.workload)
    validate_workload(workload, args.task)
    device = resolve_device(args.device)
    opts = TuneOptions(args.workload, space=args.space, task=args.task,
                       allow_precision_change=args.allow_precision_change, data_parallel=args.data_parallel,
                       nproc=2 if args.data_parallel else 1)
    space, choices = search_space(opts, workload, device)
    print(f"compile-tune space: {workload.name} ({args.task}) on {device}; no trials are run")
    if args.check:
        print("running the model check for graph breaks a Dynamo setting can lift (--no-check skips it) ...",
              flush=True)
        with tempfile.TemporaryDirectory(prefix="compile-tune-space-") as tmp:
            found = check_model(str(workload.path), args.task, Path(tmp), device)
        before = set(space.dynamo)
        repairs = add_repairs(space, found)
        choices += [Choice(f"dynamo.{n}", space.dynamo[n], "repairs a graph break the model check found (above)")
                    for n in space.dynamo if n not in before]
        breaks = len(found.get("graph_breaks") or [])
        outcome = f"tracing failed: {found['trace_error']}" if found.get("trace_error") else f"{breaks} graph break(s)"
        print(f"model check ({found.get('seconds', 0):.1f} s): {outcome}")
        for line in repairs:
            print(line)
    else:
        print("model check skipped (--no-check): no graph-break repair in the space")
    print(space_text(space, choices, args.space))
    return 0


def _saved_run_parser(prog: str, description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("dir", help="output folder of a tuning run")
    p.add_argument("--storage", default=None, help="Optuna storage URL [sqlite:///DIR/study.db]")
    p.add_argument("--study", dest="study_name", default=None, help="study name [the only study in the storage]")
    p.add_argument("--verbose", action="store_true", help="tracebacks for errors")
    return p


def _show(argv: list[str]) -> int:
    from .export.best_config import load_tuned_config
    from .report import has_storage, summary_table

    args = _saved_run_parser("compile-tune show", "Print the verdict and top trials of a run.").parse_args(argv)
    if has_storage(args.dir, args.storage):
        from .report import open_saved_study, trials_frame
        from .run.outputs import pick_saved

        study = open_saved_study(args.dir, args.storage, args.study_name)
        print(summary_table(trials_frame(study)))
        print()
        print(_verdict_text(pick_saved(study), args.dir))
        return 0
    best = os.path.join(args.dir, "best_config.yaml")
    if not os.path.exists(best):
        problem = "no study.db or best_config.yaml in this folder" if os.path.isdir(args.dir) else "no such folder"
        raise TunerError(f"{args.dir}: {problem}", "give the output folder of a compile-tune run (--out)")
    tuned = load_tuned_config(best)
    csv_path = os.path.join(args.dir, "trials.csv")
    if os.path.exists(csv_path):
        import pandas as pd

        print(summary_table(pd.read_csv(csv_path)))
        print()
    print(_verdict_text(tuned, args.dir))
    return 0


def _report(argv: list[str]) -> int:
    from .run.outputs import rebuild_outputs

    args = _saved_run_parser(
        "compile-tune report",
        "Rebuild report.html, report.md, trials.csv and best_config.yaml of a run from its study storage "
        "alone (nothing is measured).").parse_args(argv)
    if not args.verbose:
        warnings.filterwarnings("ignore", module="optuna")
    study, tuned = rebuild_outputs(args.dir, args.storage, args.study_name)
    for name in ("report.html", "report.md", "trials.csv", "best_config.yaml"):
        print(os.path.join(args.dir, name))
    print(_verdict_text(tuned, args.dir))
    return 0


def _node(argv: list[str]) -> int:
    from pathlib import Path

    from .ranks.node import follow

    p = argparse.ArgumentParser(prog="compile-tune node", description="Lend this machine's ranks to the trials of "
                                "a run on several machines (`compile-tune MODEL.py --nnodes N --rdzv-endpoint "
                                "HOST:PORT ...` on the tuner's machine) until that run ends.")
    p.add_argument("--rdzv-endpoint", required=True, metavar="HOST:PORT", help="the tuner's --rdzv-endpoint")
    p.add_argument("--work-dir", default=".compile-tune-node", help="trial files and caches [.compile-tune-node]")
    p.add_argument("--wait", type=float, default=600.0, help="seconds to wait for the tuner's board [600]")
    args = p.parse_args(argv)
    return follow(args.rdzv_endpoint, Path(args.work_dir), args.wait, log=lambda line: print(line, flush=True))


_SUBCOMMANDS = {"show": _show, "check": _check, "space": _space, "report": _report, "export": _export,
                "package": _package, "node": _node}
assert set(_SUBCOMMANDS) == set(SUBCOMMANDS)


if __name__ == "__main__":
    sys.exit(main())
