"""The tuner's side of a trial on many ranks (tuner/measure/rank_main.py): start the group, and turn
what its ranks wrote into one trial's result.

A data-parallel step is as slow as its slowest rank: the trial's step times, compile time and
peak memory are the slowest rank's (the largest), and each rank's own figures are kept
(``ranks``: trials.csv's ``rank<N>_...`` columns). A failure names its rank: the rank that
recorded one, else the rank the launcher saw die first, with where every other rank was.
"""
from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .core.spec import PER_RANK, rank_path
from .diagnose import failure, killed_by
from .system.launch import python_command


def start(nproc: int, argv: list[str], env: dict[str, str], log, cwd: str,
          nodes: list[str] | None = None) -> subprocess.Popen:
    """The elastic launcher for ``nproc`` ranks, in a session of its own (killable as a group; its
    ranks have their own sessions and die with it). ``nodes``: its share of a trial across machines
    (tuner/measure/rank_main.py's ``launcher_args``)."""
    return subprocess.Popen(python_command("tuner.measure.rank_main", "agent", str(nproc), *argv, *(nodes or [])),
                            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True)


def read_ranks(out: Path, world: int, posted: Callable[[int], dict | None] | None = None) -> list[dict[str, Any]]:
    """Each rank's result: from its file on this machine, else as it posted it (``posted``: the
    tuner's board, for ranks on other machines: tuner/rank_board.py)."""
    results = []
    for r in range(world):
        try:
            results.append(json.loads(rank_path(out, r).read_text()))
        except (OSError, json.JSONDecodeError):
            results.append((posted and posted(r)) or {"status": "running", "stage": "startup"})
    return results


def merge(ranks: list[dict[str, Any]], returncode: int | None, log_text: str) -> dict[str, Any]:
    """One trial's result from its ranks' results (see the module's docstring)."""
    if all(r.get("status") == "ok" for r in ranks):
        return _slowest(ranks)
    failed = next((i for i, r in enumerate(ranks) if r.get("status") == "failed"), None)
    where = ", ".join(f"rank {i} at stage {r.get('stage', 'startup')}" for i, r in enumerate(ranks))
    killed = _killed_unrecorded(ranks, log_text)
    if failed is not None and killed is not None:
        # a rank killed by a signal (on another machine: its launcher's log came from the board)
        # is the cause; the rank that recorded a failure lost its peer in a collective
        victim, signal_code = killed
        category, name = killed_by(signal_code) or ("crashed", f"signal {-signal_code}")
        oom = " (likely the out-of-memory killer)" if category == "out_of_memory" else ""
        fail = failure(category, f"rank {victim} was killed by {name}{oom}; then rank {failed} failed: "
                                 f"{ranks[failed]['failure'].get('raw', '')[:300]} (ranks: {where})"[:2000]).to_dict()
        return {**ranks[victim], "status": "failed", "failure": fail, "failed_rank": victim,
                "ranks": _per_rank(ranks)}
    if failed is not None:
        result = dict(ranks[failed])
        fail = dict(result["failure"])
        if fail["category"] == "rank_hang":  # name the ranks it waited for, and where they were
            others = " and ".join(f"rank {i} (at stage {r.get('stage', 'startup')})"
                                  for i, r in enumerate(ranks) if i != failed)
            fail["raw"] = fail["raw"].replace("for a rank that never joined it", f"for {others}, which never joined it")
        if not fail["raw"].startswith("rank "):
            fail["raw"] = f"rank {failed}: {fail['raw']}"
        fail["raw"] = f"{fail['raw']} (ranks: {where})"[:2000]
        result.update(failure=fail, failed_rank=failed)
    else:
        dead, code = died_first(log_text)
        result = dict(ranks[dead if dead is not None else 0])
        result.update(failure=_death(dead, code, returncode, where).to_dict(), failed_rank=dead)
    result.update(status="failed", ranks=_per_rank(ranks))
    return result


def _slowest(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    slowest = max(range(len(ranks)), key=lambda i: float(ranks[i].get("step_s") or 0.0))
    result = dict(ranks[slowest])
    for name in ("compile_time_s", "peak_memory_mb", "eager_peak_memory_mb", "compile_peak_memory_mb",
                 "steady_peak_memory_mb", "eager_step_s", "step_mean_s", "first_call_s", "graphs"):
        values = [r[name] for r in ranks if r.get(name) is not None]
        if values:
            result[name] = max(values)
    if result.get("eager_step_s") and result.get("step_s"):
        result["speedup"] = result["eager_step_s"] / result["step_s"]
    steps = [float(r["step_s"]) for r in ranks if r.get("step_s")]
    result.update(ranks=_per_rank(ranks), slowest_rank=slowest,
                  rank_spread=(max(steps) - min(steps)) / min(steps) if steps and min(steps) > 0 else 0.0)
    return result


def _per_rank(ranks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"rank": i, "stage": r.get("stage"), "status": r.get("status"),
             **{k: r[k] for k in PER_RANK if r.get(k) is not None}} for i, r in enumerate(ranks)]


#: The launcher's summary of the first rank that failed: "rank : 1 (local_rank: 1)" then "exitcode : -9".
_ROOT_CAUSE = re.compile(r"Root Cause.*?rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)", re.S)


def died_first(log_text: str) -> tuple[int | None, int | None]:
    """``(rank, exit code)`` of the rank the launcher saw fail first, from its summary."""
    found = _ROOT_CAUSE.search(log_text)
    return (int(found.group(1)), int(found.group(2))) if found else (None, None)


def _killed_unrecorded(ranks: list[dict[str, Any]], log_text: str) -> tuple[int, int] | None:
    """A rank that a launcher (this machine's or another's) saw killed by a signal before it could
    record anything."""
    for found in _ROOT_CAUSE.finditer(log_text):
        rank, code = int(found.group(1)), int(found.group(2))
        if code < 0 and rank < len(ranks) and ranks[rank].get("status") != "failed":
            return rank, code
    return None


def _death(rank: int | None, code: int | None, returncode: int | None, where: str):
    who = f"rank {rank}" if rank is not None else "the rank launcher"
    code = code if code is not None else returncode
    killed = killed_by(code)
    if killed:
        category, name = killed
        if category == "out_of_memory":
            return failure(category, f"{who} was killed by {name} (likely the out-of-memory killer); "
                                     f"the launcher stopped the others ({where})")
        return failure(category, f"{who} died with {name}; the launcher stopped the others ({where})")
    return failure("crashed", f"{who} exited with code {code}; the launcher stopped the others ({where})")
