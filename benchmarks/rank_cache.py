"""What one compile for all ranks saves: each rank's compile time on 2 ranks, three ways, side by side.

- ``own``: every rank compiles into an inductor cache directory of its own (ranks without a
  shared file system): every rank pays the whole compile;
- ``shared``: the ranks of the trial compile into one directory at the same time (compile-tune's
  trials): a rank finds the graphs another rank wrote first;
- ``warm``: a later trial of the same config finds the ``shared`` trial's directory (a restart, or
  confirmation re-measuring a finalist): every graph is a cache hit.

Each is a real trial of compile-tune on ``--nproc`` ranks (DDP on loopback, one thread per rank), in
the order own, shared, warm, repeated ``--repeats`` times; compile time here is the trial's, per
rank (first compiled step and warm-up beyond steady steps), with the FX graph cache hits.

    python benchmarks/rank_cache.py examples/hf_gpt2_train.py --config blocks --repeats 2

Run nothing else on the machine meanwhile: the two ranks take both cores here.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuner.core.config import CompileConfig  # noqa: E402
from tuner.core.spec import TrialSpec  # noqa: E402
from tuner.isolation.isolated import run_isolated  # noqa: E402


def measure(workload: str, target: str, nproc: int, work: Path, cache_mode: str, cache: Path | None) -> dict:
    config = CompileConfig(target=target, data_parallel={"wrap": "ddp"})
    spec = TrialSpec(workload=str(Path(workload).resolve()), config=config.to_dict(), task="train", threads=1,
                     nproc=nproc, data_parallel="ddp", measure_seconds=2.0, rounds=2, rank_cache=cache_mode)
    return run_isolated(spec, timeout=1200, work_dir=work, cache_dir=cache, keep_cache=cache is None)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workload")
    p.add_argument("--config", default="blocks", help="the target compiled with inductor: whole or blocks")
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args()
    rows: dict[str, list[dict]] = {"own": [], "shared": [], "warm": []}
    with tempfile.TemporaryDirectory(prefix="rank-cache-") as tmp:
        work = Path(tmp)
        for _ in range(args.repeats):
            for mode in ("own", "shared"):
                result = measure(args.workload, args.config, args.nproc, work, mode, None)
                if result.get("status") != "ok":
                    sys.exit(f"{mode}: {result.get('failure')}")
                rows[mode].append(result)
                if mode == "shared":  # the directory this trial kept: the warm trial's
                    warm = measure(args.workload, args.config, args.nproc, work, "shared", Path(result["cache_dir"]))
                    if warm.get("status") != "ok":
                        sys.exit(f"warm: {warm.get('failure')}")
                    rows["warm"].append(warm)
    print(f"{Path(args.workload).name}, target {args.config}, inductor, {args.nproc} ranks (DDP, gloo), 1 thread per "
          f"rank; {platform.processor() or platform.machine()}; repeats {args.repeats}")
    print(f"{'cache':8} " + " ".join(f"{'rank ' + str(r) + ' compile s':>17} {'hits':>5}" for r in range(args.nproc)))
    for mode, results in rows.items():
        cells = []
        for r in range(args.nproc):
            times = [res["ranks"][r]["compile_time_s"] for res in results]
            hits = [res["ranks"][r].get("fxgraph_cache_hits", 0) for res in results]
            cells.append(f"{statistics.median(times):>17.1f} {statistics.median(hits):>5g}")
        print(f"{mode:8} " + " ".join(cells))
    print(json.dumps({m: [[r.get("compile_time_s") for r in res["ranks"]] for res in results]
                      for m, results in rows.items()}))


if __name__ == "__main__":
    main()
