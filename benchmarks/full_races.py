"""The race's error rates in the flow a user runs: many real ``compile-tune`` runs, each a fresh
study whose search space holds candidates of known truth, every answer each run wrote judged
against that truth (the table: benchmarks/race_table.py).

    python benchmarks/full_races.py --out benchmarks/data/full_races.jsonl [--races 200] [--sitting-races N]
                                    [--workloads a.py,b.py,c.py] [--budgets none,6m,4m] [--threads 2] [--block 10]
    python benchmarks/full_races.py --out benchmarks/data/full_races.jsonl --table

Each race is ``compile-tune WORKLOAD --space SPACE.yaml --trials 3 --steps S [--budget B]``
(``--no-check --no-warm-start --no-progress``: the model check only shapes an ``auto`` space and the
warm start runs after the last answer; neither moves a verdict), run as a subprocess in a fresh
output folder, with its own trial launcher: the baselines, the opening race of eager against
plain compile, a search of the space's three candidates each joining the race as it is measured
(late joiners, each with its share of the error rate), the finalists confirmed, the ``--budget``
cutting some races, and ``OUT/answers.jsonl``: every answer written at a decided look.

The space is written per race, its candidates in an order drawn per race (the order they join in
sets their share of the error rate). Three line-ups, in turn with the workloads:

- ``aa`` (6 races in 10): ``stand-in@1`` (eager under another name, a 1 s "compile": any compile is
  false), ``stand-in:1.05@1`` (5 % slower) and ``alias``: plain compile under another name
  (inductor with ``max_autotune_gemm_backends: ATEN,CPP``, which only max-autotune reads: the same
  kernels, its own cache key), so a "beats plain compile" is false;
- ``fast`` (2 in 10): ``stand-in-fast:1.05@1`` and ``stand-in-fast:1.10@1`` (eager slowed in their
  processes: known speedups) and ``stand-in:1.10@1`` (10 % slower);
- ``null`` (2 in 10): ``stand-in-fast:1.10@3`` at the steps where its 10 % saves exactly its 3 s
  compile (the saving-null case: any compile is false), ``stand-in@1`` and ``stand-in:1.05@1``. At
  that step count (eager's total 33 s) plain compile's cold compile (~14 s) cannot pay for itself,
  so the run opens no race before the search: the finalists race after it, as a user's run with
  few steps does.

``aa`` and ``fast`` races score ``--steps`` for an eager total of :data:`TOTAL_S` (from eager's step,
calibrated at the start of each sitting; a ``null`` race's just before it, where the saving's zero
depends on it): plain compile, a few per cent slower than eager on these
workloads, can still win there by the run's own test (a 1.2x doubt on its search trial), so the
run opens its race before the search.

Races are appended to ``--out`` as they end, one JSON line each; a later sitting skips the races
the file holds (the plan is fixed by the race's number), so the benchmark runs over several
sittings. Races are grouped in launcher blocks of ``--block`` races (each race restarts its
launcher; a block is a stretch of the machine's time): the table reports the spread between blocks
and widens the false-"compile" interval for it. A timing job: run it alone, under the project's
timing lock (``flock /tmp/compile-tune-timing.lock python benchmarks/full_races.py ...``).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.race_table import ALIAS, PLAIN, load, table  # noqa: E402
from tuner.core.config import EAGER, PLAIN_COMPILE, CompileConfig  # noqa: E402
from tuner.core.known_truth import is_stand_in  # noqa: E402

WORKLOADS = ["examples/mlp.py", "tests/workloads/wide_mlp.py", "tests/workloads/tiny_convnet.py"]
#: The option that makes plain compile's alias: read by max-autotune alone, which this run never uses.
ALIAS_OPTIONS = {"max_autotune_gemm_backends": "ATEN,CPP"}
ALIAS_CONFIG = CompileConfig(options=ALIAS_OPTIONS)
#: Each line-up's candidates (name -> role): see the module's text.
LINEUPS = {
    "aa": {"stand-in@1": "A/A", "stand-in:1.05@1": "slower", ALIAS: ALIAS},
    "fast": {"stand-in-fast:1.05@1": "faster", "stand-in-fast:1.10@1": "faster", "stand-in:1.10@1": "slower"},
    "null": {"stand-in-fast:1.10@3": "saving-null", "stand-in@1": "A/A", "stand-in:1.05@1": "slower"},
}
#: The line-ups in turn: 6 aa, 2 fast, 2 null in every 10.
PATTERN = ["aa", "fast", "aa", "null", "aa", "aa", "fast", "aa", "null", "aa"]
#: Eager's total at the ``aa`` and ``fast`` races' --steps, in seconds.
TOTAL_S = 1500.0
#: The saving-null candidate's speedup and compile, which set the ``null`` races' --steps.
NULL_SPEEDUP, NULL_DELAY_S = 1.10, 3.0
#: Eager's level as a ``null`` race samples it, over eager's own: its side beside the saving-null
#: stand-in is slowed 10 %, about a third of the paired processes (benchmarks/race_table.py weighs the
#: race's actual share into the truth; this only aims the steps at a saving of zero).
NULL_LEVEL = 1.035
#: How long one race may take before it is stopped (its row then records the timeout).
RACE_TIMEOUT_S = 1800


@dataclass(frozen=True)
class Planned:
    """One race of the fixed plan (its number decides everything, so sittings resume it)."""

    race: int
    workload: str
    lineup: str
    budget: str | None
    block: int
    order: tuple[str, ...]


def plan(n: int, workloads: list[str], budgets: list[str | None], block: int) -> list[Planned]:
    """The first ``n`` races: workloads in turn, line-ups in turn over them, the budget and the
    candidates' order drawn per race."""
    out = []
    for i in range(n):
        rng = random.Random(f"full-races-{i}")
        lineup = PATTERN[(i // len(workloads)) % len(PATTERN)]
        order = list(LINEUPS[lineup])
        rng.shuffle(order)
        out.append(Planned(i, workloads[i % len(workloads)], lineup, rng.choice(budgets), i // block, tuple(order)))
    return out


def steps_for(p: Planned, eager_step_s: float) -> int:
    """The race's --steps: eager's total of :data:`TOTAL_S`, or (``null``) where the saving-null
    candidate's speedup saves exactly its compile."""
    if p.lineup == "null":
        return round(NULL_DELAY_S / (eager_step_s * NULL_LEVEL * (1 - 1 / NULL_SPEEDUP)))
    return round(TOTAL_S / eager_step_s)


def space_yaml(p: Planned) -> str:
    """The race's search space: its stand-ins as backends, in its drawn order; the alias as
    inductor's one option choice (the search changes plain compile one setting at a time)."""
    backends = [n for n in p.order if n != ALIAS]
    space: dict = {"description": f"benchmarks/full_races.py race {p.race} ({p.lineup})", "target": ["whole"],
                   "backend": backends + (["inductor"] if ALIAS in p.order else []), "mode": ["default"],
                   "dynamic": [None], "fullgraph": [False]}
    if ALIAS in p.order:
        space["options"] = {k: [v] for k, v in ALIAS_OPTIONS.items()}
    return yaml.safe_dump(space, sort_keys=False)


# ----------------------------------------------------------------------------- what a run wrote


def name_of(config: dict | None) -> str:
    """``eager``, ``plain``, ``alias``, a stand-in's backend, or the config's label."""
    if not config:
        return "eager"
    c = CompileConfig.from_dict(config)
    if not c.compiles:
        return "eager"
    if is_stand_in(c.backend):
        return c.backend
    return {PLAIN_COMPILE.key(): PLAIN, ALIAS_CONFIG.key(): ALIAS}.get(c.key(), c.describe())


KEEP = ("zone", "speedup", "speedup_interval", "saving_s", "saving_interval_s", "rounds", "compile_time_s",
        "cold_compiles_s", "dropped", "unadjusted")
AGAINST_PLAIN = ("zone", "speedup", "speedup_interval", "saving_s", "saving_interval_s", "df", "look_confidence",
                 "compared", "margin_s")
DECISION = ("elapsed_s", "verdict", "zone", "rounds_done", "cut_short", "later_looks", "tie_margin", "eager_step_s",
            "eager_total_s", "look_confidence", "so_far", "looks")


def slim(d: dict) -> dict:
    """What the table judges of one decision: per candidate (by name) its zone, intervals, processes
    and row against plain compile; eager's processes alone; the verdict and its choice."""
    candidates, eager_alone = {}, []
    for c in d.get("candidates") or []:
        name = name_of(c.get("config"))
        if name == "eager":
            eager_alone = c.get("step_rounds") or []
            continue
        row = {k: c[k] for k in KEEP if c.get(k) is not None}
        row.update(paired=(c.get("processes") or 0) - (c.get("crowded") or 0), order=len(candidates))
        if c.get("against_plain"):
            row["against_plain"] = {k: c["against_plain"].get(k) for k in AGAINST_PLAIN}
        if c.get("speedup") is None and c.get("failures"):
            row["failed"] = c["failures"]
        candidates[name] = row
    out = {k: d.get(k) for k in DECISION if d.get(k) is not None}
    out.update(choice=name_of(d.get("choice")), candidates=candidates, eager_alone=eager_alone,
               reason=str(d.get("reason") or "")[:300])
    return out


def final_decision(out: Path) -> dict | None:
    """The run's final decision, as its study keeps it (user attribute ``confirmation``)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = f"sqlite:///{out / 'study.db'}"
    if not (out / "study.db").exists():
        return None
    names = optuna.get_all_study_names(storage)
    if not names:
        return None
    return optuna.load_study(study_name=names[0], storage=storage).user_attrs.get("confirmation")


# ----------------------------------------------------------------------------- one race


def command(p: Planned, steps: int, threads: int, space: Path, out: Path) -> list[str]:
    cmd = [sys.executable, "-m", "tuner", str(ROOT / p.workload), "--space", str(space), "--trials", "3",
           "--steps", str(steps), "--threads", str(threads), "--out", str(out), "--seed", str(p.race),
           "--no-progress", "--no-warm-start", "--no-check"]
    return cmd + (["--budget", p.budget] if p.budget else [])


def run_race(p: Planned, eager_step_s: float, threads: int, about: dict) -> dict:
    """One real run of ``compile-tune``; its row (every answer, the final decision, its wall time)."""
    steps = steps_for(p, eager_step_s)
    with tempfile.TemporaryDirectory(prefix=f"full-race-{p.race}-") as tmp:
        space, out, log = Path(tmp) / "space.yaml", Path(tmp) / "out", Path(tmp) / "run.log"
        space.write_text(space_yaml(p))
        began, started = time.monotonic(), time.strftime("%Y-%m-%d %H:%M:%S")
        with log.open("w") as f:
            proc = subprocess.Popen(command(p, steps, threads, space, out), cwd=ROOT, stdout=f,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            try:
                code = proc.wait(timeout=RACE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGTERM)  # the run and its trials: the group this call started
                code = proc.wait()
        wall = time.monotonic() - began
        answers_file = out / "answers.jsonl"
        written = [slim(json.loads(x)) for x in answers_file.read_text().splitlines()] if answers_file.exists() else []
        final = final_decision(out)
        lines = log.read_text().splitlines()
    final_slim = slim(final) if final else None
    return {**about, "race": p.race, "block": p.block, "workload": p.workload, "lineup": p.lineup,
            "roles": {n: LINEUPS[p.lineup][n] for n in p.order}, "order": list(p.order), "budget": p.budget,
            "steps": steps, "f_cal": eager_step_s, "started": started, "wall_s": round(wall, 1), "exit": code,
            "answers": written, "final": final_slim, "eager_alone": (final_slim or {}).get("eager_alone", []),
            "first_answer_s": written[0].get("elapsed_s") if written else None,
            "log_tail": lines[-12:] if code else [x for x in lines if x.startswith(("so far:", "  race round"))][-6:]
            + [x for x in lines if x.startswith(("verdict:", "time:", "note:"))]}


def calibrate(workload: str, threads: int, processes: int = 3) -> float:
    """Eager's mean step on ``workload``: ``processes`` fresh processes of eager alone, heap pinned,
    timed as a race process is (a quarter of a trial's steps)."""
    from tuner.core.spec import TrialSpec
    from tuner.isolation.isolated import run_isolated

    spec = TrialSpec(workload=str(ROOT / workload), config=EAGER.to_dict(), threads=threads, heap="pinned",
                     timing="alone", measure_seconds=1.5, rounds=2, check_correctness=False)
    means = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(processes):
            r = run_isolated(spec, timeout=300, work_dir=Path(tmp))
            if r.get("status") == "ok":
                means.append(float(r.get("step_mean_s") or r["step_s"]))
    if not means:
        raise SystemExit(f"calibration failed on {workload}: eager's process did not run")
    return statistics.fmean(means)


def forward_share(workload: str, threads: int) -> float:
    """The share of a step (as the trial times it: tuner/measure/timing.py) that the model's forward
    takes, in a fresh process: a stand-in spins ``F - 1`` times its *forward*, so its truth over a
    whole step is ``1 + (F - 1) x share`` (the rest of a step, no_grad, the call path and the clock
    reads, is not slowed): on the tiny convnet the share was 0.93, on the MLPs above 0.98."""
    out = subprocess.run([sys.executable, __file__, "--forward-share", workload, "--threads", str(threads)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    return float(out.stdout.strip().splitlines()[-1])


def measure_forward_share(workload: str, threads: int, blocks: int = 40, block_s: float = 0.05) -> float:
    """:func:`forward_share` inside its own process: steps and bare forwards in alternating blocks
    of about ``block_s`` each; at most 1."""
    import torch

    from tuner.measure.devices import timed
    from tuner.measure.steps import Step
    from tuner.user.workload import load_workload, split_inputs

    torch.set_num_threads(threads)
    w = load_workload(ROOT / workload)
    model = w.make_model().eval()
    inputs = w.make_inputs()
    step = Step(model, "infer", w)
    forward = type(model).forward.__get__(model)
    args, kwargs = split_inputs(inputs)
    steps, forwards = [], []
    warm = [timed(lambda: step(inputs), "cpu")[0] for _ in range(20)]
    n = max(5, int(block_s / statistics.median(warm)))
    clock = time.perf_counter
    for _ in range(blocks):
        steps += [timed(lambda: step(inputs), "cpu")[0] for _ in range(n)]
        with torch.no_grad():
            for _ in range(n):
                began = clock()
                forward(*args, **kwargs)
                forwards.append(clock() - began)
    return min(1.0, statistics.fmean(forwards) / statistics.fmean(steps))


def machine() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} cores)"
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def run_sitting(args, out: Path) -> None:
    """The races of the plan that ``out`` does not hold yet, at most ``--sitting-races`` of them."""
    import torch

    done = {r["race"] for r in load(out)}
    budgets = [None if b in ("none", "") else b for b in args.budgets.split(",")]
    picked = {int(x) for x in args.pick.split(",") if x} if args.pick else None
    todo = [p for p in plan(args.races, args.workloads.split(","), budgets, args.block)
            if p.race not in done and (picked is None or p.race in picked)]
    todo = todo[: args.sitting_races] if args.sitting_races else todo
    if not todo:
        print(f"all {args.races} races are in {out}")
        return
    about = {"machine": machine(), "threads": args.threads, "torch": torch.__version__,
             "commit": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                      text=True).stdout.strip(), "sitting": time.strftime("%Y-%m-%d %H:%M")}
    eager = {w: calibrate(w, args.threads) for w in sorted({p.workload for p in todo})}
    share = {w: forward_share(w, args.threads) for w in eager}
    print(f"sitting {about['sitting']}: {len(todo)} races; eager's step " +
          ", ".join(f"{w} {s * 1e6:.0f} us (forward {share[w]:.3f} of it)" for w, s in eager.items()), flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    for p in todo:
        # the saving-null steps need eager's level as the race will see it: measured just before it
        step = calibrate(p.workload, args.threads) if p.lineup == "null" else eager[p.workload]
        row = run_race(p, step, args.threads, {**about, "forward_share": share[p.workload]})
        with out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        final = row["final"] or {}
        print(f"race {p.race} ({p.lineup}, {p.workload}, budget {p.budget or 'none'}): exit {row['exit']}, "
              f"{len(row['answers'])} answers, final {final.get('verdict')} with {final.get('choice')}, "
              f"{final.get('rounds_done')} rounds{' (cut short)' if final.get('cut_short') else ''}, "
              f"{row['wall_s']:.0f} s", flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="benchmarks/data/full_races.jsonl")
    p.add_argument("--races", type=int, default=200, help="the plan's length [200]")
    p.add_argument("--sitting-races", type=int, default=0, help="at most this many races now (0: all left)")
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--budgets", default="none,6m,4m", help="each race's --budget, drawn per race ('none': unbounded)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--block", type=int, default=10, help="races per launcher block [10]")
    p.add_argument("--pick", default="", help="only these race numbers of the plan, e.g. 0,3,9 (a smoke run)")
    p.add_argument("--table", action="store_true", help="only print the table of --out")
    p.add_argument("--forward-share", metavar="WORKLOAD", help=argparse.SUPPRESS)  # forward_share's child
    args = p.parse_args()
    if args.forward_share:
        print(measure_forward_share(args.forward_share, args.threads))
        return 0
    out = ROOT / args.out
    if not args.table:
        run_sitting(args, out)
    print(table(load(out)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
