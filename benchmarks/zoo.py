"""Run the model zoo (benchmarks/zoo/*.py) as a new user would, then re-measure each verdict.

For each model: ``compile-tune MODEL.py --budget B`` (the task and budget from the file's
``TASK`` and ``BUDGET``), then ``benchmarks/remeasure.py`` on its results (fresh processes, eager
alone, the schedule in arrival order, an eager-versus-eager pair per round). One row per model:
the verdict, the confirmed speedup range, the re-measured speedup with its noise floor, eager
beside a compiled model over eager alone (the bias of in-process figures), time per phase, time
to the verdict and peak memory. The table is written as Markdown with the date, commit, torch
and machine of the run, since a verdict holds only there.

    python benchmarks/zoo.py                       # every model twice, its table into docs/zoo.md
    python benchmarks/zoo.py resnet50 vit_b16 --budget 6m --rounds 4 --repeat 1
    python benchmarks/zoo.py --table-only          # rebuild the table from results/zoo/
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
ZOO = ROOT / "benchmarks" / "zoo"
OUT = ROOT / "results" / "zoo"
#: Re-measure steps per process: enough for 100 at a fast step, about 10 s of timing at a slow one.
#: Processes differ far more than the steps inside one, so rounds buy a re-measure's precision,
#: not longer processes.
MAX_TIMED_S = 10.0
#: Runs of each model: the second tells whether a verdict repeats.
REPEAT = 2


def run_id(name: str, run: int) -> str:
    """``bert_serve`` for a model's first run, ``bert_serve~2`` for its second."""
    return name if run == 1 else f"{name}~{run}"


def constants(path: Path) -> dict:
    """TASK and BUDGET from a zoo file, read without importing it (no torch in this process)."""
    found = dict(re.findall(r'^(TASK|BUDGET)\s*=\s*"([^"]+)"', path.read_text(), re.M))
    return {"task": found.get("TASK", "infer"), "budget": found.get("BUDGET", "8m")}


def tune(name: str, budget: str | None, run: int = 1) -> dict:
    path = ZOO / f"{name}.py"
    c = constants(path)
    rid = run_id(name, run)
    out = OUT / rid
    # A new user's run: a study of an earlier run (or an older measurement) is not resumed
    shutil.rmtree(out, ignore_errors=True)
    (OUT / f"{rid}.remeasure.json").unlink(missing_ok=True)
    cmd = [str(Path(sys.executable).with_name("compile-tune")), str(path), "--budget", budget or c["budget"],
           "--task", c["task"], "--out", str(out), "--no-progress"]
    commit = _commit()  # the code the run starts with: the tree may change while it runs
    began = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - began
    out.mkdir(parents=True, exist_ok=True)
    (OUT / f"{rid}.log").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    record = {"name": name, "run": run, "command": " ".join(["compile-tune", f"benchmarks/zoo/{name}.py", *cmd[2:6]]),
              "commit": commit, "date": datetime.date.today().isoformat(),
              "rc": proc.returncode, "wall_s": wall, "task": c["task"], "budget": budget or c["budget"]}
    (OUT / f"{rid}.run.json").write_text(json.dumps(record, indent=1))
    return record


def _commit() -> str:
    """The commit whose code a row measured, marked when the working tree differed from it."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          cwd=ROOT).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "tuner"], capture_output=True, text=True,
                           cwd=ROOT).stdout.strip()
    return head + ("+changes" if dirty else "")


def remeasure(name: str, rounds: int, run: int = 1) -> dict | None:
    rid = run_id(name, run)
    results = OUT / rid
    best = yaml.safe_load((results / "best_config.yaml").read_text())
    step_ms = (best.get("measured") or {}).get("eager_step_time_ms") or 100.0
    steps = int(max(30, min(100, MAX_TIMED_S / (step_ms / 1e3))))
    out = OUT / f"{rid}.remeasure.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "remeasure.py"), str(ZOO / f"{name}.py"), "--results",
           str(results), "--rounds", str(rounds), "--steps", str(steps), "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    (OUT / f"{rid}.remeasure.log").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    return json.loads(out.read_text()) if out.exists() else None


def phases(results: Path) -> dict:
    """Seconds per phase of the run, from its study."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = f"sqlite:///{results / 'study.db'}"
    names = optuna.get_all_study_names(storage)
    return optuna.load_study(study_name=names[0], storage=storage).user_attrs.get("phase_seconds") or {}


def row(rid: str) -> dict:
    name = rid.split("~")[0]
    run = json.loads((OUT / f"{rid}.run.json").read_text())
    best = yaml.safe_load((OUT / rid / "best_config.yaml").read_text())
    m = best.get("measured") or {}
    rm = _remeasure_of(rid, best)
    label = best.get("verdict", "?")
    if best.get("verdict") == "compile":
        label = f"compile: {_label(best)}"
    return {"name": name if run.get("run", 1) == 1 else f"{name} (run {run['run']})", "rid": rid, "run": run,
            "verdict": label, "m": m, "rm": rm, "phases": phases(OUT / rid), "tuned_on": best.get("tuned_on") or {}}


def _remeasure_of(rid: str, best: dict) -> dict:
    """The run's own re-measure, else another run's of the same model that re-measured the same config
    (the re-measure checks a config, so one serves every run that chose it)."""
    name = rid.split("~")[0]
    wanted = _compared_config(best)
    for path in [OUT / f"{rid}.remeasure.json", *sorted(OUT.glob(f"{name}*.remeasure.json"))]:
        if not path.exists() or not path.name.startswith((f"{name}.", f"{name}~")):
            continue
        rm = json.loads(path.read_text())
        other = path.name.removesuffix(".remeasure.json")
        if other == rid or (wanted and wanted == _compared_config(yaml.safe_load(
                (OUT / other / "best_config.yaml").read_text()))):
            return {**rm, "shared_from": None if other == rid else other}
    return {}


def _compared_config(best: dict) -> str | None:
    """The config a re-measure of this verdict times: the chosen one, or the best compiled one."""
    from tuner.core.config import CompileConfig

    if best.get("verdict") == "compile":
        return CompileConfig.from_dict(best.get("config") or {}).describe()
    return (best.get("measured") or {}).get("best_compiled")


def _label(best: dict) -> str:
    from tuner.core.config import CompileConfig

    return CompileConfig.from_dict(best.get("config") or {}).describe()


def _x(v) -> str:
    return "-" if v is None else f"{float(v):.2f}x"


def _pct(v) -> str:
    return "-" if v is None else f"{float(v) * 100:.1f} %"


def _spread(m: dict) -> str:
    """The run's spread: between processes, or paired (what is left once eager shares each process)
    with the spread of processes of eager alone beside it."""
    if not m.get("paired"):
        return _pct(m.get("spread"))
    return f"{_pct(m.get('spread'))} paired ({_pct(m.get('process_spread'))} alone)"


def table(names: list[str], repeat: int = REPEAT) -> str:
    ids = [run_id(n, k) for n in names for k in range(1, max(repeat, 1) + 1)]
    rows = [row(i) for i in ids if (OUT / f"{i}.run.json").exists() and (OUT / i / "best_config.yaml").exists()]
    lines = [f"Measured on {_machine()}; torch "
             f"{(rows[0]['tuned_on'].get('torch') if rows else '?')}, threads "
             f"{(rows[0]['tuned_on'].get('threads') if rows else '?')}. `python benchmarks/zoo.py` rebuilds it.", "",
             "| model | date, commit | task, budget | verdict | configs searched | best beyond plain: against plain "
             "(95 % interval, zone) | confirmed speedup (95 % interval) | spread (run) | "
             "saving (95 % interval) | re-measured speedup (95 % interval) | noise floor (re-measure) | agree? | "
             "heap's gain (95 % interval) | in one process (search; re-measure) | first decided answer | "
             "time to verdict | phases | peak memory |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        m, rm, ph = r["m"], r["rm"], r["phases"]
        within = _interval(m.get("speedup_interval"))
        confirmed = f"{_x(m.get('speedup_vs_eager'))} {within}" if m.get("speedup_vs_eager") else (
            f"best compiled {m.get('best_compiled') or '-'}: {_x(m.get('best_compiled_speedup'))} {within}")
        if m.get("confirm_rounds"):
            confirmed += f", {m['confirm_rounds']} round{'s' if m['confirm_rounds'] != 1 else ''}"
        theirs = rm.get("speedup_interval") or [None, None]
        re_ = f"{_x(rm.get('remeasured_speedup'))} ({_x(theirs[0])}-{_x(theirs[1])})" if rm else "-"
        phase_text = ", ".join(f"{k} {v:.0f} s" for k, v in ph.items() if k not in ("total",) and v >= 1)
        memory = m.get("peak_memory_mb") or m.get("eager_peak_memory_mb") or _eager_memory(OUT / r["rid"])
        lines.append(
            f"| {r['name']} | {r['run'].get('date', '?')}, `{r['run'].get('commit', '?')}` | "
            f"{r['run']['task']}, {r['run']['budget']} | {r['verdict']} | {_searched(m)} | {_beyond(m)} | "
            f"{confirmed} | "
            f"{_spread(m)} | {_saving(m)} | {re_} | {_pct(rm.get('noise_floor'))} | "
            f"{_agrees(m, rm)}{' (re-measure of run 1)' if rm.get('shared_from') else ''} | "
            f"{_heap(m)} | "
            f"{_x(m.get('search_speedup_in_process'))}; "
            f"{_x(rm.get('in_process_speedup'))} | {_first(m)} | {r['run']['wall_s'] / 60:.1f} min | {phase_text} | "
            f"{'-' if memory is None else f'{memory:.0f} MB'} |")
    return "\n".join(lines) + "\n"


def _searched(m: dict) -> str:
    """``6 of 12 (3 raced)``: the configs the run's search measured, of its space, and how many raced."""
    s = m.get("search") or {}
    if not s.get("configs_searched") and not s.get("configs_in_space"):
        return "-"
    of = f" of {s['configs_in_space']}" if s.get("configs_in_space") else ""
    return f"{s.get('configs_searched', 0)}{of} ({s.get('configs_raced', 0)} raced)"


def _beyond(m: dict) -> str:
    """The best config beyond plain compile against it: its saving over plain's total with the 95 %
    interval, its zone (or "undecided", or why it stopped racing), and how it was compared."""
    b = m.get("beyond_plain") or {}
    if not b.get("config_label"):
        return "-"
    within = _interval(b.get("saving_interval_s"), lambda v: f"{float(v):+,.0f}", " to ").replace(")", " s)")
    zone = b.get("zone") or ("dropped: " + b["dropped"] if b.get("dropped") else "undecided")
    how = f", {b['compared']}" if b.get("compared") else ""
    saving = f"{float(b.get('saving_s') or 0):+,.0f} s {within}"
    return f"{b['config_label']}: {saving}, {_x(b.get('speedup'))} its steps; {zone}{how}"


def _first(m: dict) -> str:
    """When the run first wrote a decided answer (the race's first deciding look: best_config.yaml
    held it from then on), from the run's start."""
    first = m.get("first_answer_s")
    return "-" if first is None else f"{float(first) / 60:.1f} min"


def _interval(pair, fmt=_x, sep: str = "-") -> str:
    """``(low-high)`` of a 95 % interval, as every column of the table writes it."""
    lo, hi = pair or (None, None)
    return "(no interval)" if lo is None or hi is None else f"({fmt(lo)}{sep}{fmt(hi)})"


def _heap(m: dict) -> str:
    """Eager pinned over eager as a user's process starts, with its 95 % interval."""
    return "-" if m.get("heap_gain") is None else f"{_x(m['heap_gain'])} {_interval(m.get('heap_gain_interval'))}"


def _saving(m: dict) -> str:
    """The quoted config's saving over eager's total, with its 95 % interval (as docs/zoo.md
    words it: ``+663 s (+342 to +965 s) of eager's 5,152 s``)."""
    if m.get("saving_s") is None:
        return "-"
    within = _interval(m.get("saving_interval_s"), lambda v: f"{float(v):+,.0f}", " to ").replace(")", " s)")
    total = m.get("eager_total_time_s")
    return f"{float(m['saving_s']):+,.0f} s {within}" + (f" of eager's {float(total):,.0f} s" if total else "")


def _eager_memory(results: Path) -> float | None:
    """Eager's peak memory from trials.csv: what a stay-eager verdict runs with."""
    import csv

    with open(results / "trials.csv", newline="") as f:
        row = next((r for r in csv.DictReader(f) if r.get("role") == "eager"), None)
    return float(row["peak_memory_mb"]) if row and row.get("peak_memory_mb") else None


def _agrees(m: dict, rm: dict) -> str:
    """Whether the re-measure confirms the run: "yes" only where the two 95 % intervals overlap
    (computed here, so a re-measure shared by two runs is held against each run's own interval)."""
    ours, theirs = m.get("speedup_interval") or [None, None], rm.get("speedup_interval") or [None, None]
    if not rm or None in ours or None in theirs:
        return "-"
    point = rm.get("remeasured_speedup")
    if ours[0] <= theirs[1] and theirs[0] <= ours[1]:
        inside = point is None or ours[0] <= point <= ours[1]
        return "yes" + ("" if inside else " (intervals overlap; its point outside)")
    gap = theirs[0] / ours[1] - 1 if theirs[0] > ours[1] else ours[0] / theirs[1] - 1
    return f"no ({gap * 100:.1f} % apart)"


def _machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else "?"
    import os

    return f"{model}, {len(os.sched_getaffinity(0))} cores"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", help="zoo file names without .py [all]")
    p.add_argument("--budget", help="override every model's BUDGET")
    p.add_argument("--rounds", type=int, default=4, help="re-measure rounds [4]")
    p.add_argument("--repeat", type=int, default=REPEAT, help=f"runs of each model [{REPEAT}]")
    p.add_argument("--only-run", type=int, help="run only this pass (1, 2, ...) and rebuild the table")
    p.add_argument("--table-only", action="store_true")
    p.add_argument("--no-remeasure", action="store_true")
    p.add_argument("--remeasure-only-compile", action="store_true",
                   help="re-measure compile verdicts only (a stay-eager or undecided row then reads '-')")
    p.add_argument("--doc", default=str(ROOT / "docs" / "zoo.md"),
                   help="the page whose table (between the zoo-table markers) is rewritten")
    a = p.parse_args(argv)
    names = a.models or sorted(f.stem for f in ZOO.glob("*.py"))
    OUT.mkdir(parents=True, exist_ok=True)
    passes = [] if a.table_only else [a.only_run] if a.only_run else range(1, a.repeat + 1)
    for run in passes:  # every model once, then every model again: a pass is a whole zoo
        for name in names:
            record = tune(name, a.budget, run)
            print(f"{run_id(name, run)}: rc={record['rc']} in {record['wall_s'] / 60:.1f} min", flush=True)
            best = yaml.safe_load((OUT / run_id(name, run) / "best_config.yaml").read_text()) \
                if record["rc"] == 0 else None
            skip = a.no_remeasure or (a.remeasure_only_compile and best and best.get("verdict") != "compile")
            if best is None or skip or (run > 1 and _remeasure_of(run_id(name, run), best)):
                continue  # a later run that chose a config already re-measured shares that re-measure
            rm = remeasure(name, a.rounds, run)
            print(f"{run_id(name, run)}: re-measured {rm and _x(rm.get('remeasured_speedup'))}", flush=True)
    text = table(names, a.repeat)
    write_table(Path(a.doc), text)
    print(text)
    return 0


MARK_START, MARK_END = "<!-- zoo-table: written by benchmarks/zoo.py -->", "<!-- /zoo-table -->"


def write_table(doc: Path, text: str) -> None:
    """Put ``text`` between the markers of ``doc`` (appended with them when it has none)."""
    page = doc.read_text() if doc.exists() else "# Model zoo\n\n"
    if MARK_START in page and MARK_END in page:
        head, rest = page.split(MARK_START, 1)
        page = head + MARK_START + "\n" + text + rest[rest.index(MARK_END):]
    else:
        page = page.rstrip("\n") + f"\n\n{MARK_START}\n{text}{MARK_END}\n"
    doc.write_text(page)


if __name__ == "__main__":
    sys.exit(main())
