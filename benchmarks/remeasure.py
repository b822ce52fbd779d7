"""Re-measure a tuned verdict in fresh processes, sharing none of the tuner's measuring code.

    python benchmarks/remeasure.py WORKLOAD.py --results results/<name> [--rounds 3] [--steps 100]
        [--warmup 5] [--threads N] [--task infer|train] [--device cpu|cuda] [--json out.json]

Why: the tuner's speedups (and benchmarks/schedule_replay.py) time eager *beside* a compiled
model, alternating the two in one process. That is a fair ratio only if eager runs as fast there
as it does on its own, and it may not: a process that compiled holds Dynamo's frame hook,
inductor's compile workers and their threads, more memory and a colder cache, so eager may be
slowed (the speedup looks larger than a user gets) or the compiled code may be. The tuner's own
trial runner, step loop, warm-up rules and thread setup could also share a bias with everything it
measured. So this script times each side in a process of its own, with its own step loop:

- ``eager`` and ``eager2``: the model alone, nothing compiled in the process. The two give the
  noise floor: how far two identical processes differ (``|eager/eager2 - 1|``).
- ``compiled``: ``tuner.apply_config(model, best_config.yaml)`` as user code calls it, then steps;
  nothing eager is timed there.
- ``beside``: the compiled model built and warmed up, then a second copy of the model (same seed)
  timed eagerly in that process, alternating in blocks with the compiled one: eager-beside over
  eager-alone is the bias of in-process ratios, and the in-process speedup is printed too.

Every process replays ``input_schedule()`` in arrival order (``example_inputs()`` if none): one
full pass (timed: the compiled process's cold first pass, compiles and recompiles included), then
``--warmup`` more steps, then ``--steps`` timed steps starting from the schedule's first input, so
every process times the same inputs. The step time is the mean over those steps (what a server's
total time is; the speedup uses it), the median is printed beside it. The kinds run in an order
reversed round by round so drift of the machine hits all alike. All compiled processes share one
``TORCHINDUCTOR_CACHE_DIR`` (a temporary directory, removed at the end): only the first compiles
cold. The only tuner code used: ``tuner.apply_config`` (``tuner.optimizer_step`` for a config
that compiles the optimizer step), ``tuner.user.workload.load_workload`` and ``call_model``, and the
YAML file itself. A verdict holds on the machine it was measured on: the torch version, thread
count, CPU and date are printed with the figures.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("eager", "compiled", "beside", "eager2")  # round 1's order; every other round reversed
CHILD = Path(__file__).resolve().with_name("remeasure_child.py")

# what the tuner said: its result files read as data (benchmarks/remeasure_plan.py, beside this script)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from remeasure_plan import defines, read_verdict, task_constant  # noqa: E402

# --------------------------------------------------------------------------- parent


def run_child(spec: dict, env: dict, timeout: float) -> dict:
    """One fresh process of ``spec["kind"]``; a failure comes back as ``{"error": ...}``."""
    with tempfile.NamedTemporaryFile("r", suffix=".json", prefix="remeasure-") as out:
        spec = {**spec, "out": out.name}
        start = time.perf_counter()
        try:
            proc = subprocess.run([sys.executable, str(CHILD), json.dumps(spec)], capture_output=True,
                                  text=True, env=env, timeout=timeout, cwd=str(ROOT))
        except subprocess.TimeoutExpired:
            return {"kind": spec["kind"], "error": f"timed out after {timeout:.0f} s"}
        text = Path(out.name).read_text().strip()
    result = json.loads(text) if text else {"kind": spec["kind"]}
    if proc.returncode != 0 and "error" not in result:
        tail = proc.stderr.strip().splitlines()[-3:] or [f"exit {proc.returncode}"]
        result["error"] = " | ".join(tail)
    if "error" in result:
        print(f"  {spec['kind']} failed: {result['error']}", flush=True)
        if proc.stderr.strip():
            print("    " + "\n    ".join(proc.stderr.strip().splitlines()[-8:]), flush=True)
    result["process_wall_s"] = time.perf_counter() - start
    return result


def run_rounds(args: argparse.Namespace, plan: dict, base: dict, env: dict) -> list[dict]:
    kinds = [k for k in KINDS if plan["config"] is not None or k.startswith("eager")]
    rounds = []
    for r in range(args.rounds):
        order = kinds if r % 2 == 0 else kinds[::-1]
        print(f"round {r + 1}/{args.rounds}: {' '.join(order)}", flush=True)
        results = {kind: run_child({**base, "kind": kind}, env, args.timeout) for kind in order}
        rounds.append({"order": order, **results})
        print_round(r, rounds[-1])
    return rounds


def _ms(x: float | None) -> str:
    return f"{x * 1e3:10.4f}" if x is not None else f"{'-':>10s}"


def print_round(r: int, rnd: dict) -> None:
    print(f"  {'process':18s} {'mean ms':>10s} {'median ms':>10s} {'apply s':>8s} {'1st pass s':>10s} "
          f"{'compile s':>10s} {'threads':>7s} {'wall s':>7s}")
    for kind in rnd["order"]:
        x = rnd[kind]
        if "error" in x:
            print(f"  {kind:18s} FAILED: {x['error'][:100]}")
            continue
        name = "beside: eager" if kind == "beside" else kind
        comp = f"{x['compile_s']:10.2f}" if "compile_s" in x else f"{'':10s}"
        first = f"{x['first_pass_s']:10.2f}" if kind in ("compiled", "beside") else f"{'':10s}"
        apply = f"{x['apply_s']:8.2f}" if "apply_s" in x else f"{'':8s}"
        print(f"  {name:18s} {_ms(x['mean_s'])} {_ms(x['median_s'])} {apply} {first} {comp} {x['threads']:7d} "
              f"{x['process_wall_s']:7.1f}")
        if kind == "beside":
            print(f"  {'beside: compiled':18s} {_ms(x['compiled_mean_s'])} {_ms(x['compiled_median_s'])}   "
                  f"in-process speedup {x['in_process_speedup']:.3f}x (blocks of {x['block']})")
    for warning in sorted({w for kind in rnd["order"] for w in (rnd[kind].get("warnings") or [])}):
        print(f"  warning from apply_config: {warning[:300]}")
    print(flush=True)


def _ok(rnd: dict, kind: str) -> dict | None:
    x = rnd.get(kind)
    return x if x and "error" not in x else None


def _ratio_of_means(num: list[float], den: list[float]) -> float | None:
    return (statistics.fmean(num) / statistics.fmean(den)) if num and den else None


def per_round(rnd: dict) -> dict:
    """One round's figures: eager alone (mean of the pair), speedup, noise, bias, in-process speedup."""
    e1, e2, c, b = (_ok(rnd, k) for k in ("eager", "eager2", "compiled", "beside"))
    alone = [x["mean_s"] for x in (e1, e2) if x]
    out: dict[str, Any] = {"eager_alone_s": statistics.fmean(alone) if alone else None,
                           "eager_alone_median_s": statistics.fmean([x["median_s"] for x in (e1, e2) if x])
                           if alone else None}
    out["noise"] = abs(e1["mean_s"] / e2["mean_s"] - 1) if e1 and e2 else None
    out["compiled_s"] = c["mean_s"] if c else None
    out["compiled_median_s"] = c["median_s"] if c else None
    out["speedup"] = out["eager_alone_s"] / c["mean_s"] if c and alone else None
    out["speedup_median"] = out["eager_alone_median_s"] / c["median_s"] if c and alone else None
    out["beside_s"] = b["mean_s"] if b else None
    out["beside_over_alone"] = b["mean_s"] / out["eager_alone_s"] if b and alone else None
    out["in_process_speedup"] = b["in_process_speedup"] if b else None
    out["first_pass_s"] = c["first_pass_s"] if c else None
    out["compile_s"] = c["compile_s"] if c else None
    return out


#: Student's t, 0.975 quantile, by degrees of freedom (a table: this script imports none of the tuner's statistics)
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}


def t975(df: int) -> float:
    return T975.get(df) or T975[max(k for k in T975 if k <= df)] if df <= 30 else 1.96


def interval95(speedups: list[float]) -> list[float] | None:
    """The 95 % t-interval of the speedup over the rounds (each round's speedup one sample, log scale)."""
    logs = [math.log(s) for s in speedups if s and s > 0]
    if len(logs) < 2:
        return None
    mean, sd = statistics.fmean(logs), statistics.stdev(logs)
    half = t975(len(logs) - 1) * sd / math.sqrt(len(logs))
    return [round(math.exp(mean - half), 4), round(math.exp(mean + half), 4)]


def _span(values: list[float | None]) -> tuple[float | None, float | None]:
    v = [x for x in values if x is not None]
    return (min(v), max(v)) if v else (None, None)


def summarize(rounds: list[dict], plan: dict) -> dict:
    figs = [per_round(r) for r in rounds]
    eager = [x["mean_s"] for r in rounds for k in ("eager", "eager2") if (x := _ok(r, k))]
    comp = [x["mean_s"] for r in rounds if (x := _ok(r, "compiled"))]
    beside = [x["mean_s"] for r in rounds if (x := _ok(r, "beside"))]
    noises = [f["noise"] for f in figs if f["noise"] is not None]
    s = {"per_round": figs, "eager_step_s": statistics.fmean(eager) if eager else None,
         "compiled_step_s": statistics.fmean(comp) if comp else None,
         "remeasured_speedup": _ratio_of_means(eager, comp),
         "noise_floor": max(noises) if noises else None,
         "noise_floor_median": statistics.median(noises) if noises else None,
         "eager_beside_over_alone": _ratio_of_means(beside, eager),
         "in_process_speedup": statistics.median(ips) if (ips := [f["in_process_speedup"] for f in figs
                                                                 if f["in_process_speedup"] is not None]) else None}
    s["speedup_min"], s["speedup_max"] = _span([f["speedup"] for f in figs])
    s["speedup_interval"] = interval95([f["speedup"] for f in figs if f["speedup"] is not None])
    s["beside_min"], s["beside_max"] = _span([f["beside_over_alone"] for f in figs])
    s["in_process_min"], s["in_process_max"] = _span([f["in_process_speedup"] for f in figs])
    med = [f["speedup_median"] for f in figs if f["speedup_median"] is not None]
    s["speedup_of_medians"] = statistics.median(med) if med else None
    s["first_pass_s"] = [f["first_pass_s"] for f in figs]
    s["compile_s"] = [f["compile_s"] for f in figs]
    ref = plan.get("reference")
    s["confirmed_min"], s["confirmed_max"] = ref if ref else (None, None)
    s["inside"], s["outside_by"] = _inside(s["remeasured_speedup"], ref)
    # The done-when of a re-measure: its own 95 % interval overlaps the tuner's
    mine = s["speedup_interval"]
    s["agrees"] = None if not ref or not mine else not (mine[1] < ref[0] or ref[1] < mine[0])
    return s


def _inside(speedup: float | None, ref: list | None) -> tuple[bool | None, float | None]:
    """Whether ``speedup`` lies in ``ref`` ([min, max]); else how far outside, as a fraction."""
    if speedup is None or not ref:
        return None, None
    lo, hi = ref
    if lo <= speedup <= hi:
        return True, 0.0
    return False, (speedup / hi - 1) if speedup > hi else (speedup / lo - 1)


def verdict_line(s: dict, plan: dict, rounds: int) -> str:
    if s["remeasured_speedup"] is None:
        return "no re-measured speedup (no compiled process succeeded, or the verdict named no compiled config)"
    noise = s["noise_floor"]
    noise_txt = f"{noise * 100:.1f} %" if noise is not None else "unknown"
    head = (f"re-measured {s['remeasured_speedup']:.2f}x ({_x(s['speedup_min'], '{:.2f}')}-"
            f"{_x(s['speedup_max'], '{:.2f}')} over "
            f"{rounds} round(s), noise floor {noise_txt})")
    if s["inside"] is None:
        return head + "; best_config.yaml records no speedup to compare it with"
    lo, hi = s["confirmed_min"], s["confirmed_max"]
    ref = f"the {plan['reference_what']} " + (f"{lo:.2f}x" if lo == hi else f"{lo:.2f}-{hi:.2f}x")
    if s["inside"]:
        return f"{head} is inside {ref}"
    off = s["outside_by"]
    beyond = "beyond" if noise is None or abs(off) > noise else "within"
    side = "above" if off > 0 else "below"
    return f"{head} is outside {ref}: {abs(off) * 100:.1f} % {side} it ({beyond} the noise floor)"


def _x(v: float | None, fmt: str = "{:.3f}x") -> str:
    return fmt.format(v) if v is not None else "-"


def _rng(lo: float | None, hi: float | None) -> str:
    return f"{_x(lo)}-{_x(hi)}" if lo is not None and hi is not None else "-"


def print_summary(s: dict, plan: dict, info: dict, args: argparse.Namespace) -> None:
    print("=" * 100)
    label = plan["label"] or "none (eager pair only)"
    print(f"{args.workload}: verdict {plan['verdict']}, re-measured config: {label}")
    print(f"torch {info['torch']}, {info['threads']} thread(s), task {info['task']}, device {info['device']}, "
          f"CPU {info['machine']['cpu']}, {info['machine']['date']}")
    print(f"{args.rounds} round(s) x {len(plan['kinds'])} fresh processes; {args.steps} timed steps each after one "
          f"schedule pass + {args.warmup} steps; schedule of {info['schedule_len']} input(s) in arrival order")
    print(f"eager alone  {_ms(s['eager_step_s'])} ms/step (mean over the eager and eager2 processes)")
    print(f"compiled     {_ms(s['compiled_step_s'])} ms/step; first pass (compiles included) "
          f"{', '.join(f'{v:.2f}' for v in s['first_pass_s'] if v is not None) or '-'} s per round")
    print(f"speedup        {_x(s['remeasured_speedup'])} (rounds {_rng(s['speedup_min'], s['speedup_max'])}; "
          f"of medians {_x(s['speedup_of_medians'])})")
    nf, nm = s["noise_floor"], s["noise_floor_median"]
    print(f"noise floor    {_x(nf and nf * 100, '{:.2f} %')} max over rounds of |eager/eager2 - 1| "
          f"(median {_x(nm and nm * 100, '{:.2f} %')})")
    print(f"BIAS beside    eager timed beside a compiled model / eager alone = {_x(s['eager_beside_over_alone'])} "
          f"(rounds {_rng(s['beside_min'], s['beside_max'])}); >1: in-process ratios overstate the speedup")
    print(f"in-process     speedup inside `beside` {_x(s['in_process_speedup'])} "
          f"(rounds {_rng(s['in_process_min'], s['in_process_max'])})")
    print(verdict_line(s, plan, args.rounds))


def machine() -> dict:
    cpu = platform.processor() or "unknown"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": cpu, "cores": cores, "platform": platform.platform(), "python": platform.python_version(),
            "date": datetime.datetime.now().isoformat(timespec="seconds")}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workload", help="the workload file the results were tuned on")
    p.add_argument("--results", required=True, help="a compile-tune output folder (holds best_config.yaml)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=100, help="timed steps per process [100]")
    p.add_argument("--warmup", type=int, default=5, help="steps after the first full schedule pass [5]")
    p.add_argument("--threads", type=int, default=None, help="default: tuned_on.threads, else torch's default")
    p.add_argument("--task", choices=("infer", "train"), default=None,
                   help="default: tuned_on.task, else the workload's TASK, else infer")
    p.add_argument("--device", default=None, help="default: tuned_on.device, else cpu")
    p.add_argument("--warm-start", action="store_true",
                   help="let apply_config load the compile_cache/ saved beside best_config.yaml (it then uses its own "
                        "cache directory, not the shared one)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per process [1800]")
    p.add_argument("--json", help="write every figure to this JSON file")
    return p.parse_args(argv)


def _settings(args: argparse.Namespace, plan: dict) -> dict:
    tuned_on = plan["tuned_on"]
    threads = args.threads if args.threads is not None else tuned_on.get("threads")
    task = args.task or tuned_on.get("task") or task_constant(args.workload) or "infer"
    device = args.device or str(tuned_on.get("device") or "cpu")
    return {"workload": str(Path(args.workload).resolve()), "threads": threads if isinstance(threads, int) else None,
            "task": task, "device": device, "steps": args.steps, "warmup": args.warmup, "config": plan["config"],
            "warm_start": args.warm_start, "compile_optimizer": plan.get("compile_optimizer", False)}


def _environment(base: dict, cache: str, malloc_env: dict) -> dict:
    """Every child's environment: the verdict's thread count, and the MALLOC_* variables its
    ``env`` export lists (glibc malloc pinned, as the trials measured), as a user following it sets them."""
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache, PYTHONPATH=os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p), **malloc_env)
    if base["threads"]:
        env["OMP_NUM_THREADS"] = str(base["threads"])
    return env


def _note_machine(plan: dict, info: dict, base: dict) -> None:
    tuned_on = plan["tuned_on"]
    for name in ("task", "threads"):
        if tuned_on.get(name) not in (None, base[name]):
            print(f"NOTE: the verdict was measured with {name} {tuned_on[name]}, this re-measures {name} "
                  f"{base[name]}: its figures are not the verdict's to compare")
    if tuned_on.get("cpu") and tuned_on["cpu"] != info["cpu"]:
        print(f"NOTE: tuned on CPU {tuned_on['cpu']!r}, this is {info['cpu']!r}: the verdict may not carry over")
    if tuned_on.get("date"):
        print(f"tuned on {tuned_on.get('date')} with torch {tuned_on.get('torch')} at {tuned_on.get('threads')} "
              f"thread(s), host {tuned_on.get('host')}")


def to_json(s: dict, plan: dict, info: dict, rounds: list[dict], args: argparse.Namespace) -> dict:
    keys = ("remeasured_speedup", "speedup_min", "speedup_max", "speedup_interval", "noise_floor",
            "noise_floor_median", "eager_beside_over_alone", "beside_min", "beside_max", "in_process_speedup",
            "confirmed_min", "confirmed_max", "inside", "agrees", "outside_by", "eager_step_s", "compiled_step_s")
    out = {k: s[k] for k in keys}
    out.update(rounds=args.rounds, steps=args.steps, threads=info["threads"], torch=info["torch"],
               machine=info["machine"], workload=args.workload, results=args.results, verdict=plan["verdict"],
               config=plan["label"], reference=plan.get("reference_what"), task=info["task"], device=info["device"],
               outside_by=s["outside_by"], speedup_of_medians=s["speedup_of_medians"], per_round=s["per_round"],
               first_pass_s=s["first_pass_s"], compile_s=s["compile_s"], inductor_cache="shared, cold at first",
               processes=[{k: v for k, v in x.items() if "times" not in k} for r in rounds for x in r.values()
                          if isinstance(x, dict)])
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    plan = read_verdict(Path(args.results))
    base = _settings(args, plan)
    plan["kinds"] = [k for k in KINDS if plan["config"] is not None or k.startswith("eager")]
    if base["task"] == "train" and not defines(args.workload, "loss_fn"):
        print(f"{args.workload}: --task train needs loss_fn(output, inputs)", file=sys.stderr)
        return 2
    info = {"machine": machine(), "task": base["task"], "device": base["device"]}
    _note_machine(plan, info["machine"], base)
    cache = tempfile.mkdtemp(prefix="remeasure-inductor-")
    if plan["malloc_env"]:
        print("every process runs with the verdict's env export's "
              + " ".join(f"{k}={v}" for k, v in plan["malloc_env"].items()))
    print(f"one shared TORCHINDUCTOR_CACHE_DIR for every process: {cache} (removed at the end): only the first "
          f"compiled process compiles cold" + ("; --warm-start: apply_config loads the saved bundle instead"
                                               if args.warm_start else "; the saved compile_cache/ is not loaded"))
    if plan["verdict"] != "compile":
        print("verdict stay_eager: re-measuring " + (f"the best compiled config {plan['label']!r} (from trials.csv)"
                                                      if plan["config"] else "eager only: no compiled config found"))
    try:
        rounds = run_rounds(args, plan, base, _environment(base, cache, plan["malloc_env"]))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    done = [x for r in rounds for x in r.values() if isinstance(x, dict) and "error" not in x]
    info.update(torch=done[0]["torch"] if done else None, threads=done[0]["threads"] if done else base["threads"],
                schedule_len=done[0]["schedule_len"] if done else None)
    s = summarize(rounds, plan)
    print_summary(s, plan, info, args)
    if args.json:
        Path(args.json).write_text(json.dumps(to_json(s, plan, info, rounds, args), indent=2, default=str))
        print(f"wrote {args.json}")
    return 0 if done else 1


if __name__ == "__main__":
    sys.exit(main())
