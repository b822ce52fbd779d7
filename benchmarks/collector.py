"""Does Python's collector belong on or off while steps are timed? The tool's own trial processes,
eager beside a config, alternating collector off (the default) and on process by process.

    python benchmarks/collector.py [WORKLOAD.py[:train] ...] [--processes 8] [--share 0.25]
        [--threads 2] [--aa tests/workloads/tiny_convnet.py] [--no-plain] [--quiet-s 120] [--json out.json]

Why: tuner/measure/timing.py turns the collector off while it times (``_no_garbage_collection``),
because a collection lands on the same step of every process and charges one side for both. But
compiled code allocates differently from eager, so with the collector off a user's run may pay
collections the timing never sees. ``COMPILE_TUNE_TIMING_GC=on`` leaves it on; this compares the
two. Per workload and mode: each process's speedup (eager's mean step over the config's, as the
race takes it), the mean log speedup with its 95 % t interval, the spread between processes, and
on minus off with its Welch interval. ``--aa`` adds eager against eager under another name
(``{"backend": "stand-in"}``, tuner/measure/stand_in.py), whose truth is 1.0x in both modes: a
one-sided collection shows as a speedup away from 1 with the collector on.

The first process of each workload compiles cold and fills the cache the others start warm from;
it is not counted, nor is a process whose threads waited for a core over 10 % of its timing (another
job's, as the race leaves it out: tuner/decide/records.py ``CROWDED``): it runs again. The modes alternate A B B A,
so drift over the run hits both alike. A timing job: run it under
``flock /tmp/compile-tune-timing.lock``; work that does not take the lock (a test suite) still
crowds it, so each process waits first, at most ``--quiet-s``, for the cores to go idle.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuner.core.spec import TrialSpec  # noqa: E402
from tuner.decide.confirm import CONFIRM_TIMING_SHARE  # noqa: E402
from tuner.decide.records import CROWDED  # noqa: E402
from tuner.decide.student_t import t_quantile  # noqa: E402
from tuner.decide.trial_runner import shared_timing  # noqa: E402
from tuner.isolation.isolated import run_isolated  # noqa: E402
from tuner.measure.timing import GC_ENV  # noqa: E402
from tuner.study import StudySettings  # noqa: E402

PLAIN = '{"target": "whole", "backend": "inductor"}'
STAND_IN = '{"backend": "stand-in"}'
WORKLOADS = ["examples/tiny_transformer.py", "tests/workloads/tiny_convnet.py", "tests/workloads/mlp.py:train"]
MODES = ("off", "on")


def spec(workload: str, config: str, a) -> TrialSpec:
    """A confirmation process's trial (benchmarks/paired_spread.py), ``WORKLOAD.py:train`` for training."""
    path, _, task = workload.partition(":")
    rounds, seconds = shared_timing(StudySettings.rounds, StudySettings.measure_seconds, a.share)
    return TrialSpec(workload=str((ROOT / path).resolve()), config=json.loads(config), task=task or "infer",
                     threads=a.threads, rounds=rounds, measure_seconds=seconds, heap="pinned", timing="beside",
                     check_correctness=False)


def interval(logs: list[float]) -> tuple[float, float, float]:
    """Mean of log speedups and its 95 % t interval, as speedups."""
    m, n = statistics.mean(logs), len(logs)
    half = t_quantile(0.975, n - 1) * statistics.stdev(logs) / math.sqrt(n) if n > 1 else math.inf
    return math.exp(m), math.exp(m - half), math.exp(m + half)


def welch(on: list[float], off: list[float]) -> tuple[float, float, float]:
    """On's mean log speedup minus off's, with its 95 % Welch interval, as a ratio of speedups."""
    d = statistics.mean(on) - statistics.mean(off)
    v1, v2 = statistics.variance(on) / len(on), statistics.variance(off) / len(off)
    df = (v1 + v2) ** 2 / (v1 ** 2 / (len(on) - 1) + v2 ** 2 / (len(off) - 1)) if v1 + v2 > 0 else math.inf
    half = t_quantile(0.975, df) * math.sqrt(v1 + v2)
    return math.exp(d), math.exp(d - half), math.exp(d + half)


def idle_share(seconds: float = 1.0) -> float:
    """The share of the machine's CPU time that was idle over ``seconds`` (/proc/stat)."""
    def sample() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
        return fields[3] + fields[4], sum(fields)
    (i0, t0), _, (i1, t1) = sample(), time.sleep(seconds), sample()
    return (i1 - i0) / max(t1 - t0, 1)


def quiet(most_s: float) -> float:
    """Wait, at most ``most_s``, until the cores are idle (work outside the timing lock: another
    session's tests); the seconds waited."""
    began = time.perf_counter()
    while Path("/proc/stat").exists() and time.perf_counter() - began < most_s and idle_share() < 0.85:
        time.sleep(2)
    return time.perf_counter() - began


def one(workload: str, config: str, mode: str, a, work: Path, cache: Path) -> dict | None:
    """One fresh trial process in ``mode``, once the machine is quiet; its figures, or None where it failed."""
    waited = quiet(a.quiet_s)
    if waited > 2:
        print(f"  (waited {waited:.0f} s for the cores to go idle)", flush=True)
    r = run_isolated(spec(workload, config, a), timeout=3600, work_dir=work, cache_dir=cache,
                     env_extra={GC_ENV: mode})
    if r.get("status") != "ok" or not r.get("eager_step_mean_s"):
        print(f"  {mode}: {r.get('status')} {(r.get('failure') or {}).get('raw', '')[:200]}", flush=True)
        return None
    return {"mode": mode, "speedup": r["eager_step_mean_s"] / r["step_mean_s"],
            "median_speedup": r["eager_step_s"] / r["step_s"], "eager_step_mean_s": r["eager_step_mean_s"],
            "step_mean_s": r["step_mean_s"], "collections": r.get("timing_gc_collections"),
            "pause_s": r.get("timing_gc_pause_s") or 0.0,
            "timed_steps": r.get("timed_steps"), "core_wait_share": r.get("core_wait_share"),
            "wall_s": r.get("trial_wall_s")}


def workload_run(workload: str, config: str, a, tmp: Path) -> list[dict]:
    """The cold process (not counted), then ``--processes`` a mode, A B B A; a crowded process is
    run again in its mode (three tries at most)."""
    work, cache = tmp / "work", tmp / f"cache-{len(list(tmp.glob('cache-*')))}"
    work.mkdir(exist_ok=True)
    cache.mkdir()
    print(f"\n{workload} {config}", flush=True)
    one(workload, config, "off", a, work, cache)
    rows = []
    for k in range(2 * a.processes):
        mode = MODES[(k + k // 2) % 2]  # off on on off off on ...
        for _ in range(3):
            row = one(workload, config, mode, a, work, cache)
            if row is None:
                break
            crowded = (row["core_wait_share"] or 0) > CROWDED
            print(f"  {mode:3} {row['speedup']:.4f}x (medians {row['median_speedup']:.4f}x), eager "
                  f"{row['eager_step_mean_s'] * 1e6:.0f} us, config {row['step_mean_s'] * 1e6:.0f} us, "
                  f"{row['collections']} collection(s) ({row['pause_s'] * 1e3:.2f} ms) in {row['timed_steps']} steps "
                  f"a side, waited for a core {row['core_wait_share'] or 0:.1%}"
                  f"{' (crowded: not counted)' if crowded else ''}, {row['wall_s']:.0f} s", flush=True)
            if not crowded:
                rows.append(row)
                break
    return rows


def summary(workload: str, config: str, rows: list[dict]) -> list[str]:
    """The table's lines for one workload: a line a mode, then on over off."""
    name = f"{Path(workload.partition(':')[0]).stem}{' (train)' if workload.endswith(':train') else ''}"
    name += " A/A" if config == STAND_IN else ""
    logs = {m: [math.log(r["speedup"]) for r in rows if r["mode"] == m] for m in MODES}
    lines = []
    for m in MODES:
        if len(logs[m]) < 2:
            lines.append(f"| {name} | {m} | {len(logs[m])} | too few processes | | | |")
            continue
        mean, lo, hi = interval(logs[m])
        mine = [r for r in rows if r["mode"] == m]
        per = " ".join(f"{math.exp(x):.3f}" for x in logs[m])
        coll = statistics.mean(r["collections"] or 0 for r in mine)
        # every pause charged to the config's side: how much slower its mean step would read, at most
        charge = max(r["pause_s"] / (r["timed_steps"] * r["step_mean_s"]) for r in mine)
        lines.append(f"| {name} | {m} | {len(logs[m])} | {mean:.4f}x ({lo:.4f}-{hi:.4f}) | "
                     f"{statistics.stdev(logs[m]):.2%} | {coll:.1f}, {charge:.2%} | {per} |")
    if all(len(logs[m]) >= 2 for m in MODES):
        d, lo, hi = welch(logs["on"], logs["off"])
        lines.append(f"| {name} | on / off | | {d:.4f} ({lo:.4f}-{hi:.4f}) | | | |")
    return lines


def header(a) -> str:
    import torch

    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    return (f"collector off/on while timing: commit {commit}{' (modified)' if dirty else ''}, {cpu}, "
            f"{os.cpu_count()} cores, {a.threads} thread(s), torch {torch.__version__}, "
            f"{a.processes} processes a mode, share {a.share}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workloads", nargs="*", default=WORKLOADS, help="WORKLOAD.py, or WORKLOAD.py:train")
    p.add_argument("--processes", type=int, default=8, help="counted processes a mode and workload")
    p.add_argument("--share", type=float, default=CONFIRM_TIMING_SHARE, help="of the trial's timing [confirmation's]")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--plain", action=argparse.BooleanOptionalAction, default=True,
                   help="plain torch.compile on the workloads (--no-plain: the A/A alone)")
    p.add_argument("--quiet-s", type=float, default=120.0,
                   help="before each process, wait at most this long for the cores to go idle")
    p.add_argument("--aa", default="tests/workloads/tiny_convnet.py", help="the A/A workload ('' for none)")
    p.add_argument("--json", help="write every process's figures here")
    a = p.parse_args()
    print(header(a), flush=True)
    runs = [(w, PLAIN) for w in a.workloads if a.plain] + ([(a.aa, STAND_IN)] if a.aa else [])
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for workload, config in runs:
            results.append((workload, config, workload_run(workload, config, a, Path(tmp))))
            if a.json:  # after each workload, so a run cut short keeps what it measured
                Path(a.json).write_text(json.dumps({"header": header(a), "runs": [
                    {"workload": w, "config": c, "processes": rows} for w, c, rows in results]}, indent=1))
    print(f"\n{header(a)}\n")
    print("| workload | collector | processes | speedup, mean of logs (95 % t) | between processes (log sd) "
          "| collections a process; their pauses over the config's timed time, at most | each process |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for workload, config, rows in results:
        print("\n".join(summary(workload, config, rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
