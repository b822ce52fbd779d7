"""Time to a verdict: the README example tuned by an older commit and by this checkout, side by
side in one run on one machine (alternating, old first), with both verdicts.

    python benchmarks/time_to_verdict.py [--old 33b26b4] [--new HEAD] [--pairs 1] [-- extra compile-tune args]

Both commits are checked out into temporary git worktrees and run from there with the same
Python (each run imports its own ``tuner`` package, since the command runs in its folder), so
editing the checkout while the benchmark runs changes nothing in it. Prints each
run's wall time, its verdict (choice and confirmed speedup), the time per phase where the new
code records it, and the ratio new / old. Target (issue 13): the same verdict in at most half
the time.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
README_EXAMPLE = ["examples/tiny_transformer.py", "--space", "quick", "--trials", "8", "--steps", "100000"]


def run(where: Path, out: Path, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "tuner", *README_EXAMPLE, "--out", str(out), "--no-progress", *extra]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=where, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{where}: exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    best = yaml.safe_load((out / "best_config.yaml").read_text())
    measured = best.get("measured") or {}
    timing = next((line for line in proc.stdout.splitlines() if line.startswith("time:")), "")
    return {"wall_s": wall, "verdict": best.get("verdict"), "choice": _label(best.get("config") or {}),
            "speedup": measured.get("speedup_vs_eager"), "confirmed": measured.get("confirmed"), "time": timing,
            "reason": measured.get("reason") or "", "interval": measured.get("speedup_interval"),
            # the first decided answer on disk (tuner/decide/race.py); a run that writes none before
            # its end answers at its end
            "first_s": measured.get("first_answer_s") if measured.get("first_answer_s") is not None else wall}


def _label(config: dict) -> str:
    if not config.get("compile", config.get("backend")):
        return "eager"
    options = " ".join(f"{k}={v}" for k, v in sorted((config.get("options") or {}).items()))
    return f"{config.get('target', 'whole')}/{config.get('backend')}/{config.get('mode') or 'default'} {options}".strip()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--old", default="33b26b4", help="the commit to compare with [33b26b4, before issue 13]")
    p.add_argument("--new", default="HEAD", help="the commit to measure [HEAD]")
    p.add_argument("--pairs", type=int, default=1, help="old/new pairs to run [1]")
    p.add_argument("extra", nargs="*", help="extra compile-tune arguments for both runs (after --)")
    args = p.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="time-to-verdict-"))
    trees = {"old": scratch / "old", "new": scratch / "new"}
    for name, ref in (("old", args.old), ("new", args.new)):
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(trees[name]), ref], cwd=ROOT, check=True)
    rows = []
    try:
        for i in range(args.pairs):
            for name, where in trees.items():
                result = run(where, scratch / f"{name}-{i}", args.extra)
                rows.append((name, result))
                low, high = result["interval"] or (None, None)
                print(f"{name} ({args.old if name == 'old' else args.new}): {result['wall_s']:.0f} s, first decided "
                      f"answer at {result['first_s']:.0f} s; verdict {result['verdict']} with {result['choice']}, "
                      f"{result['speedup'] or 0:.2f}x" + (f" ({low:.2f}x-{high:.2f}x)" if low and high else "")
                      + f"{' (confirmed)' if result['confirmed'] else ''}", flush=True)
                if result["reason"]:  # why confirmation chose it: a lead inside the noise is not a lead
                    print(f"  confirmed because: {result['reason']}", flush=True)
                if result["time"]:
                    print(f"  {result['time']}", flush=True)
    finally:
        for tree in trees.values():
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT)
        shutil.rmtree(scratch, ignore_errors=True)
    old = [r["wall_s"] for n, r in rows if n == "old"]
    new = [r["wall_s"] for n, r in rows if n == "new"]
    same = all(a["choice"] == b["choice"] for (_, a), (_, b) in zip(rows[::2], rows[1::2]))
    pairs = ", ".join(f"{b / a:.2f}" for a, b in zip(old, new))
    first = [r["first_s"] for n, r in rows if n == "new"]
    print(f"new: first decided answer at {', '.join(f'{s:.0f}' for s in first)} s (median "
          f"{statistics.median(first):.0f} s; target <= 120 s)")
    print(f"new / old wall time = {sum(new) / sum(old):.2f} over all runs (pairs: {pairs}; medians: "
          f"{statistics.median(new) / statistics.median(old):.2f}) (target <= 0.50); same choice in every pair: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
