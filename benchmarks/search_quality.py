"""Does a budgeted search find (nearly) the config an exhaustive sweep finds?

1. Sweep: every config of ``benchmarks/sweep.yaml`` is measured for real, once, per workload
   (the tuner with ``--trials`` = the space size: its no-repeats rule makes that a brute-force
   sweep; ``--sweep-dir`` reuses a finished one).
2. Budgeted runs: the tuner's own search loop (``tuner.study.Tuner``, the same seeded TPE
   sampler, the same duplicate handling) runs with a budget of 25 % of the sweep's configs, the
   plain ``torch.compile`` baseline counted in the budget, for several seeds. Its trials are
   answered with the sweep's recorded measurements instead of being compiled again: that
   isolates what the search chooses from measurement noise, and makes many seeds affordable.
3. Each run's best total time is compared with the sweep's optimum.

    python benchmarks/search_quality.py [--workloads examples/mlp.py examples/tiny_transformer.py] [--seeds 10]

Target: within 3 % of the optimum's objective with at most 25 % of the sweep's trials.
"""
from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuner.core.config import CompileConfig  # noqa: E402
from tuner.decide.search import Tuner  # noqa: E402
from tuner.runtime.marks import distinct_shapes, varying_dims  # noqa: E402
from tuner.space.search_space import load_space  # noqa: E402
from tuner.study import StudyRun, StudySettings, has_repeated_blocks, open_store, open_study, scoring_from_study
from tuner.user.workload import load_workload  # noqa: E402

SPACE = str(ROOT / "benchmarks" / "sweep.yaml")


def space_for(workload: str, space: str | None = None):
    """The space as a run restricts it for this workload (blocks, the input schedule's dims)."""
    loaded = load_workload(workload)
    calls = [loaded.make_inputs(), *(loaded.make_schedule() or [])]
    return load_space(space or SPACE).restrict(
        device="cpu", task="infer", has_blocks=has_repeated_blocks(loaded.make_model()),
        varying_dims=varying_dims(calls), shapes=distinct_shapes(calls))


def sweep(workload: str, out: Path, steps: int, measure_seconds: float) -> None:
    n = len(space_for(workload).configs())
    cmd = [sys.executable, "-m", "tuner", workload, "--space", SPACE, "--trials", str(n), "--steps", str(steps),
           "--out", str(out), "--confirm", "0", "--no-warm-start", "--no-check", "--no-progress",
           "--measure-seconds", str(measure_seconds)]
    print(f"  sweeping {n} configs: {' '.join(cmd[2:])}", flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)


def recorded(out: Path, name: str):
    study = open_study(f"sqlite:///{out / 'study.db'}", name, seed=0)
    results = {}
    for t in study.get_trials(deepcopy=False):
        a = t.user_attrs
        if a.get("duplicate_of") is not None or a.get("interrupted") or "config_key" not in a:
            continue
        result = {k: v for k, v in a.items()}
        result["status"] = a.get("status", "failed")
        if t.state.name == "FAIL" and "failure" not in result:
            result["failure"] = {"category": a.get("failure_category", "unknown"), "explanation": "",
                                 "hint": "", "raw": a.get("failure_raw", "")}
        results.setdefault(a["config_key"], result)
    return study, results


class ReplayTuner(Tuner):
    """The real search loop, answered from a sweep's measurements."""

    def __init__(self, *args, results: dict, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.results = results

    def measure(self, config: CompileConfig, label: str = "trial", compile_budget_s=None, warm=None, **_) -> dict:
        return dict(self.results[config.key()])


def budgeted(workload: str, results: dict, settings: dict, seed: int, budget: int) -> float:
    """Best total time a budgeted search finds (plain baseline counted in the budget)."""
    space = space_for(workload)
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/replay.db", "replay", seed=seed)
        study = store.study
        study_settings = StudySettings(workload=workload, task="infer", device="cpu", threads=settings["threads"],
                                       steps=settings["steps"], trials=budget - 1, seed=seed)
        study.set_user_attr("settings", {"steps": settings["steps"], "task": "infer", "device": "cpu",
                                         "threads": settings["threads"], "workload": workload})
        tuner = ReplayTuner(store, space, study_settings, Path(tmp), results=results, log=lambda *_: None)
        scoring = tuner.baselines()
        tuner.search(scoring, StudyRun(study=study, scoring=scoring))
        totals = [t.value for t in study.get_trials(deepcopy=False)
                  if t.state.name == "COMPLETE" and t.user_attrs.get("role") != "eager" and t.user_attrs.get("correct")]
        measured = sum(1 for t in study.get_trials(deepcopy=False)
                       if t.user_attrs.get("role") != "eager" and t.user_attrs.get("duplicate_of") is None)
        assert measured <= budget, (measured, budget)
        return min(totals) if totals else math.inf


def same_compile(config: CompileConfig) -> str:
    """``config.key()`` with inductor options at their default dropped: ``shape_padding: true``
    in one space and no shape_padding in another compile the same way."""
    from dataclasses import replace

    from tuner.system.config_defaults import inductor_defaults

    defaults = inductor_defaults()
    return replace(config, options={k: v for k, v in config.options.items() if defaults.get(k, object()) != v}).key()


def compare(workload: str, other: str, ok: dict, scoring, optimum: float) -> None:
    """The best of the swept configs that ``other`` (a smaller space) also offers."""
    offered = {same_compile(c) for c in space_for(workload, other).configs()}
    inside = {k: r for k, r in ok.items() if same_compile(CompileConfig.from_dict(r["config"])) in offered}
    if not inside:
        print(f"  {Path(other).name}: none of its configs is in this sweep")
        return
    best = min(inside, key=lambda k: scoring.total_time(inside[k]))
    total = scoring.total_time(inside[best])
    print(f"  best of {Path(other).name}'s configs ({len(inside)} of its {len(offered)} swept): "
          f"{CompileConfig.from_dict(inside[best]['config']).describe()} at {total:.1f} s; "
          f"the optimum takes {optimum / total:.3f}x its time")


def main() -> int:
    global SPACE
    warnings.filterwarnings("ignore", module="optuna")
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", nargs="+", default=["examples/mlp.py", "examples/tiny_transformer.py"])
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--budget", type=float, default=0.25, help="fraction of the sweep's configs [0.25]")
    p.add_argument("--steps", type=int, default=100000)
    p.add_argument("--measure-seconds", type=float, default=3.0)
    p.add_argument("--sweep-dir", default=None, help="reuse the sweeps in this folder")
    p.add_argument("--extra-budgets", type=int, nargs="*", default=[3, 4, 6],
                   help="also report these budgets (trials), to show the curve")
    p.add_argument("--space", default=SPACE, help="the space to sweep [benchmarks/sweep.yaml]")
    p.add_argument("--compare-space", default=None,
                   help="also print the best of the swept configs this (smaller) space offers")
    args = p.parse_args()
    SPACE = args.space
    base = Path(args.sweep_dir or tempfile.mkdtemp(prefix="sweep-"))
    overall = []
    for workload in args.workloads:
        name = Path(workload).stem
        out = base / name
        print(f"{name}:", flush=True)
        if not (out / "study.db").exists():
            sweep(workload, out, args.steps, args.measure_seconds)
        study, results = recorded(out, name)
        scoring = scoring_from_study(study)
        ok = {k: r for k, r in results.items() if r.get("status") == "ok" and r.get("correct") and k != "none"}
        optimum_key = min(ok, key=lambda k: scoring.total_time(ok[k]))
        optimum = scoring.total_time(ok[optimum_key])
        n = len(results) - 1  # configs, eager baseline not counted
        budget = max(2, math.floor(args.budget * n))
        settings = {"steps": scoring.steps, "threads": (study.user_attrs.get("settings") or {}).get("threads", 1)}
        label = CompileConfig.from_dict(results[optimum_key]["config"]).describe()
        eager_total = scoring.eager_total
        print(f"  sweep: {n} configs, optimum {label} at {optimum:.1f} s (eager {eager_total:.1f} s)")
        plain = next((r for r in results.values() if r.get("role") == "plain"), None)
        if plain is not None and plain.get("status") == "ok":
            total = scoring.total_time(plain)
            print(f"  plain torch.compile: {total:.1f} s; the optimum takes {optimum / total:.3f}x its time")
        if args.compare_space:
            compare(workload, args.compare_space, ok, scoring, optimum)
        for b in sorted({budget, *[min(n, x) for x in args.extra_budgets]}):
            gaps = [(budgeted(workload, results, settings, seed, b) - optimum) / optimum for seed in range(args.seeds)]
            within = sum(g <= 0.03 for g in gaps)
            if b == budget:
                overall.extend(gaps)
            print(f"  budget {b} trials ({b / n:.0%} of the sweep, plain baseline included), {args.seeds} seeds: "
                  f"gap to optimum median {statistics.median(gaps):.2%}, worst {max(gaps):.2%}; "
                  f"within 3 %: {within}/{len(gaps)}", flush=True)
    print(f"all: worst gap {max(overall):.2%}, within 3 % in {sum(g <= 0.03 for g in overall)}/{len(overall)} runs "
          f"(target: within 3 % with <= {args.budget:.0%} of the sweep's trials); sweeps in {base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
