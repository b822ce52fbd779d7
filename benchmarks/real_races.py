"""The race's error rates on real processes: many real races, each judged against a truth it
did not measure.

    python benchmarks/real_races.py [--workloads a.py,b.py,c.py] [--per-kind aa=30,aa_fork=0,slow5=15,slow10=12,plain=8]
                                    [--rounds 12] [--out results/real_races.jsonl] [--table]

Each race is the tuner's own (tuner/decide/race.py, built as tuner/decide/confirm.py's
``new_race`` builds the run's race): eager against one candidate, paired fresh processes round by
round, looks at rounds 2, 3, ... until one decides or ``--rounds`` ran. The candidates, per
workload, in turn (aa, slow5, slow10, plain, aa, ...) so slow hours of the machine hit each kind:

- ``aa``: eager under another name (tuner/measure/stand_in.py, ``backend: stand-in``). Truth: a
  speedup of exactly 1, a saving of 0. Any ``compile`` is false.
- ``aa_fork``: the same, its processes forked with the launcher's layout as it is, not shifted
  (``COMPILE_TUNE_LAYOUT_SHIFT=0``, tuner/measure/launcher.py): the layout bias the shift removes,
  measured beside it in the same run. Not in the false-"compile" total.
- ``slow5``, ``slow10``: the same stand-in spinning 5 % / 10 % of each forward longer. Truth: 1/1.05,
  1/1.10. Any ``compile`` is false; ``slower`` is a detection.
- ``plain``: plain ``torch.compile``, cold compiles and all. Its truth is unknown: each race is
  judged against its own reference, the pooled processes of every *other* plain race on that
  workload in this run (none of its own), which has several times its processes.

Prints one line per race and, with ``--table`` (or at the end), the table docs/benchmarks.md
quotes: false "compile" with its Clopper-Pearson 95 % interval, coverage of the stated interval,
detection of each slowdown, the median race's length. A verdict holds at the thread count, torch
and machine it ran on: the table's header says which.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuner.core.config import EAGER, PLAIN_COMPILE, CompileConfig  # noqa: E402
from tuner.core.score import Scoring  # noqa: E402
from tuner.decide.confirm import CONFIRM_TIMING_SHARE  # noqa: E402
from tuner.decide.race import PAIRED_PER_ROUND, Race  # noqa: E402
from tuner.decide.search import Tuner  # noqa: E402
from tuner.measure.launcher import LAYOUT_SHIFT_ENV  # noqa: E402
from tuner.space.search_space import load_space  # noqa: E402
from tuner.study import StudySettings, open_store  # noqa: E402

WORKLOADS = ["examples/mlp.py", "tests/workloads/tiny_convnet.py", "examples/tiny_transformer.py"]
KINDS = {"aa": "stand-in", "aa_fork": "stand-in", "slow5": "stand-in:1.05", "slow10": "stand-in:1.10", "plain": None}
TRUTH = {"aa": 1.0, "aa_fork": 1.0, "slow5": 1 / 1.05, "slow10": 1 / 1.10}
#: Kinds run as a user's race is not (the layout shift off): reported on their own rows only.
CONTROLS = {"aa_fork"}
STEPS = 1_000_000


def candidate(kind: str) -> CompileConfig:
    backend = KINDS[kind]
    return PLAIN_COMPILE if backend is None else CompileConfig(backend=backend)


def bench_tuner(workload: str, work: Path, threads: int) -> Tuner:
    store = open_store(f"sqlite:///{work / 'study.db'}", Path(workload).stem, seed=0)
    settings = StudySettings(workload=str(ROOT / workload), task="infer", device="cpu", threads=threads,
                             steps=STEPS, trials=0, measure_seconds=6.0, rounds=5)
    return Tuner(store, load_space("quick"), settings, work / "work", log=lambda line: None)


def one_race(tuner: Tuner, scoring: Scoring, kind: str, rounds: int) -> dict:
    """One race as the run races (paired, 3 processes a round, the heap pinned), with no eager
    process as a user's one starts (it measures the pin, not the candidate)."""
    def measure(config, label, round_=0, heap=None, timing="alone", reuse_cache=False):
        return tuner.measure(config, label, warm=False, reuse_cache=reuse_cache, timing_share=CONFIRM_TIMING_SHARE,
                             timing=timing, check_correctness=False, heap=heap)

    race = Race(scoring, measure, rounds=rounds, heap_apart=False, paired=True, log=lambda line: None,
                per_round=PAIRED_PER_ROUND)
    cfg = candidate(kind)
    race.join([cfg])
    began = time.monotonic()
    os.environ[LAYOUT_SHIFT_ENV] = "0" if kind in CONTROLS else "1"  # read by each forked process
    try:
        race.run()
    finally:
        os.environ.pop(LAYOUT_SHIFT_ENV)
    decision = race.final()
    wall = time.monotonic() - began
    rec = race.records[cfg.key()]
    summary = next((c for c in decision.get("candidates", []) if c.get("config") == cfg.to_dict()), {})
    eager = race.records[EAGER.key()]
    return {"kind": kind, "verdict": decision.get("verdict"), "zone": summary.get("zone"),
            "speedup": summary.get("speedup"), "interval": summary.get("speedup_interval"),
            "saving_s": summary.get("saving_s"), "saving_interval_s": summary.get("saving_interval_s"),
            "rounds": race.done, "processes": sum(r.processes for r in race.records.values()),
            "wall_s": round(wall, 1), "look_confidence": decision.get("look_confidence"),
            "spread": decision.get("spread"), "reason": decision.get("reason"),
            # per process: (eager beside, config) mean steps, for the other races' references
            "pairs": [[b, s] for b, (_, s) in zip(rec.beside, rec.steps)],
            "eager_alone": [s for _, s in eager.steps], "cold": rec.cold, "warm": rec.warm,
            "failures": rec.failures}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--per-kind", default="aa=30,slow5=15,slow10=12,plain=8")
    p.add_argument("--rounds", type=int, default=12, help="the most rounds of a race [12]")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default="results/real_races.jsonl")
    p.add_argument("--table", action="store_true", help="only print the table of --out")
    args = p.parse_args()
    out = ROOT / args.out
    if not args.table:
        run_races(args, out)
    print_table([json.loads(line) for line in out.read_text().splitlines() if line.strip()])
    return 0


def run_races(args, out: Path) -> None:
    counts = {k: int(v) for k, v in (item.split("=") for item in args.per_kind.split(","))}
    out.parent.mkdir(parents=True, exist_ok=True)
    header = {"machine": platform.processor() or platform.machine(), "threads": args.threads,
              "torch": __import__("torch").__version__,
              "commit": os.popen(f"git -C {ROOT} rev-parse --short HEAD").read().strip(),
              "max_rounds": args.rounds, "started": time.strftime("%Y-%m-%d %H:%M")}
    print(json.dumps(header), flush=True)
    workloads = args.workloads.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        tuners, scorings = {}, {}
        for i, workload in enumerate(workloads):
            (Path(tmp) / str(i)).mkdir()
            tuners[workload] = bench_tuner(workload, Path(tmp) / str(i), args.threads)
            eager = tuners[workload].measure(EAGER, "eager", timing_share=CONFIRM_TIMING_SHARE,
                                             check_correctness=False)
            scorings[workload] = Scoring(steps=STEPS, eager_step_s=float(eager["step_s"]))
        # kinds and workloads in turn, so a slow hour of the machine hits each alike
        order = [(w, k) for i in range(max(counts.values())) for k in KINDS if i < counts.get(k, 0) for w in workloads]
        for n, (workload, kind) in enumerate(order):
            row = {**header, "workload": workload, "race": n,
                   **one_race(tuners[workload], scorings[workload], kind, args.rounds)}
            with out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            lo, hi = row["interval"] or (None, None)
            print(f"{n}/{len(order)} {workload} {kind}: {row['verdict']} ({row['zone']}) {row['speedup'] or 0:.3f}x "
                  f"[{lo or 0:.3f}, {hi or 0:.3f}] {row['rounds']} rounds {row['wall_s']} s", flush=True)


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact binomial interval (from the beta quantiles, by bisection on the binomial tail)."""
    a = (1 - confidence) / 2

    def tail_at_least(p: float) -> float:  # P(X >= k)
        return 1 - sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k))

    def tail_at_most(p: float) -> float:  # P(X <= k)
        return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))

    def solve(f, target: float, rising: bool) -> float:
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            if (f(mid) < target) == rising:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2

    low = 0.0 if k == 0 else solve(tail_at_least, a, rising=True)
    high = 1.0 if k == n else solve(tail_at_most, a, rising=False)
    return low, high


def reference(rows: list[dict], row: dict) -> float | None:
    """The speedup the other plain races of ``row``'s workload measured, pooled (the paired model's
    geometric mean of eager over config per process): ``row``'s own processes are not in it."""
    logs = [math.log(b / s) for other in rows if other is not row and other["kind"] == "plain"
            and other["workload"] == row["workload"] for b, s in other["pairs"]]
    return math.exp(statistics.fmean(logs)) if len(logs) >= 2 else None


def print_table(rows: list[dict]) -> None:
    if not rows:
        print("no races")
        return
    first = rows[0]
    print(f"\n{len(rows)} real races, {len({r['workload'] for r in rows})} workloads; {first['machine']}, "
          f"{first['threads']} threads, torch {first['torch']}, commit {first['commit']}, "
          f"at most {first['max_rounds']} rounds")
    truth_known = [r for r in rows if r["kind"] in TRUTH and r["kind"] not in CONTROLS]
    false = [r for r in truth_known if r["verdict"] == "compile"]
    lo, hi = clopper_pearson(len(false), len(truth_known))
    print(f"false 'compile' (true speedup <= 1): {len(false)}/{len(truth_known)} = "
          f"{len(false) / max(1, len(truth_known)):.1%} (95 % interval {lo:.1%}-{hi:.1%})")
    for kind in KINDS:
        of = [r for r in rows if r["kind"] == kind]
        if not of:
            continue
        truths = [TRUTH.get(kind) or reference(rows, r) for r in of]
        judged = [(r, t) for r, t in zip(of, truths) if t is not None and r["interval"] and None not in r["interval"]]
        covered = sum(1 for r, t in judged if r["interval"][0] <= t <= r["interval"][1])
        verdicts = {v: sum(1 for r in of if (r["zone"] or r["verdict"]) == v) for v in
                    sorted({(r["zone"] or r["verdict"] or "none") for r in of})}
        clo, chi = clopper_pearson(covered, len(judged)) if judged else (0.0, 1.0)
        print(f"  {kind:7s} {len(of):3d} races: {verdicts}; interval covers the truth {covered}/{len(judged)} "
              f"({covered / max(1, len(judged)):.0%}, 95 % {clo:.0%}-{chi:.0%}); median race "
              f"{statistics.median(r['wall_s'] for r in of):.0f} s, "
              f"{statistics.median(r['rounds'] for r in of):.0f} rounds")
    print("eager over eager-under-another-name, log ratio per process (the harness's and the layout's bias):")
    for kind in ("aa", *sorted(CONTROLS)):
        for workload in sorted({r["workload"] for r in rows}):
            logs = [math.log(b / s) for r in rows if r["kind"] == kind and r["workload"] == workload
                    for b, s in r["pairs"]]
            if len(logs) > 1:
                se = statistics.stdev(logs) / math.sqrt(len(logs))
                print(f"  {kind:7s} {workload}: {len(logs)} processes, mean {statistics.fmean(logs):+.4f} "
                      f"(se {se:.4f}), median {statistics.median(logs):+.4f}")


if __name__ == "__main__":
    raise SystemExit(main())
