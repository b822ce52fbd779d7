"""The tuner's side of a trial on many ranks (tuner/ranks/main.py): start the group, and turn
what its ranks wrote into one trial's result.

A data-parallel step is as slow as its slowest rank: the trial's step times, compile time and
peak memory are the slowest rank's (the largest), and each rank's own figures are kept
(``ranks``: trials.csv's ``rank<N>_...`` columns). A failure names its root cause: the rank that
failed first, by the wall-clock time each rank recorded with its failure, or, for a rank that died
before it could record one (killed by a signal), by its launcher's summary; the other ranks'
failures follow as its consequences (a rank whose peer died loses it in a collective), with where
every rank was. NCCL's watchdog aborting a rank that waited too long in a collective reads as the
hang it is.
"""
from __future__ import annotations

import datetime
import json
import math
import re
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.spec import PER_RANK, rank_path
from ..system.launch import python_command
from ..user.diagnose import failure, killed_by


def start(nproc: int, argv: list[str], env: dict[str, str], log, cwd: str,
          nodes: list[str] | None = None) -> subprocess.Popen:
    """The elastic launcher for ``nproc`` ranks, in a session of its own (killable as a group; its
    ranks have their own sessions and die with it). ``nodes``: its share of a trial across machines
    (tuner/ranks/main.py's ``launcher_args``)."""
    return subprocess.Popen(python_command("tuner.ranks.main", "agent", str(nproc), *argv, *(nodes or [])),
                            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True)


def read_ranks(out: Path, world: int, posted: Callable[[int], dict | None] | None = None) -> list[dict[str, Any]]:
    """Each rank's result: from its file on this machine, else as it posted it (``posted``: the
    tuner's board, for ranks on other machines: tuner/ranks/board.py)."""
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
    where = ", ".join(f"rank {i} at stage {r.get('stage', 'startup')}" for i, r in enumerate(ranks))
    failed = sorted(_recorded(ranks) + _deaths(ranks, log_text), key=lambda f: (f.at, f.rank))
    if not failed:  # no rank recorded a failure, and no launcher named one
        result = dict(ranks[0])
        result.update(status="failed", failure=_death(returncode, where).to_dict(), failed_rank=None,
                      ranks=_per_rank(ranks))
        return result
    cause, then = failed[0], failed[1:]
    fail = dict(cause.failure)
    if then:
        fail["raw"] += "; then, as a consequence: " + "; ".join(f.failure["raw"][:300] for f in then)
    fail["raw"] = f"{fail['raw']} (ranks: {where})"[:2000]
    return {**ranks[cause.rank], "status": "failed", "failure": fail, "failed_rank": cause.rank,
            "consequences": [{"rank": f.rank, "category": f.failure["category"], "raw": f.failure["raw"][:500]}
                             for f in then],
            "ranks": _per_rank(ranks)}


@dataclass(frozen=True)
class _Failed:
    """One rank's failure, and when it happened (seconds since the epoch)."""

    rank: int
    at: float
    failure: dict[str, Any]


def _recorded(ranks: list[dict[str, Any]]) -> list[_Failed]:
    """The failures the ranks recorded themselves, each at the time it recorded it (``failed_at``;
    a result without one, from an older rank, counts last)."""
    out = []
    for i, r in enumerate(ranks):
        if r.get("status") != "failed" or not r.get("failure"):
            continue
        fail = dict(r["failure"])
        if fail["category"] == "rank_hang":  # name the rank it waited for, and where it was
            fail["raw"] = fail["raw"].replace("for a rank that never joined it", f"for {_behind(ranks, i)}, "
                                              f"which never joined it")
        if not fail["raw"].startswith("rank "):
            fail["raw"] = f"rank {i}: {fail['raw']}"
        at = r.get("failed_at")
        out.append(_Failed(i, float(at) if at is not None else math.inf, fail))
    return out


def _deaths(ranks: list[dict[str, Any]], log_text: str) -> list[_Failed]:
    """The ranks a launcher (this machine's or another's, whose log came from the board) saw fail
    before they recorded anything: killed by a signal (the out-of-memory killer's SIGKILL, NCCL's
    watchdog's SIGABRT), or exited. Every rank in its summary counts, not only its Root Cause: the
    launcher dates every failure it finds in one poll to the same whole second and then names the
    lowest rank, so a rank 0 that lost its peer a few milliseconds after rank 1 was killed is named
    the root cause, and rank 1 is listed only under "Failures:". The launcher reads its clock a
    little after the death, so a death counts from a second before (and first, without a time):
    ahead of the peers' reactions to it, which each peer recorded itself, later. SIGTERM is how a
    launcher stops its ranks once another failed (another machine's, across machines): a rank
    stopped so counts last."""
    out, seen = [], set()
    for rank, code, when in launcher_failures(log_text):
        if code == 0 or rank >= len(ranks) or rank in seen or ranks[rank].get("status") == "failed":
            continue
        seen.add(rank)
        died = _died(rank, code, ranks[rank].get("stage", "startup"), _others(ranks, rank), log_text)
        at = math.inf if code == -signal.SIGTERM else when - 1 if when is not None else -math.inf
        out.append(_Failed(rank, at, died.to_dict()))
    return out


def _behind(ranks: list[dict[str, Any]], rank: int) -> str:
    """The ranks that rank ``rank``, timed out in a collective, waited for: those whose last
    finished collective is the earliest (``collectives``: how many each had started when it timed
    out, tuner/ranks/rank.py). A rank that timed out in no collective was busy elsewhere, before
    the one the others wait in: it is the furthest behind. A rank at the same count waited in the
    same collective, for someone else."""
    def started(r: dict[str, Any]) -> float:
        if r.get("status") == "ok":
            return math.inf
        count = r.get("collectives") if r.get("failure", {}).get("category") == "rank_hang" else None
        return -math.inf if count is None else float(count)

    mine = started(ranks[rank])
    behind = [j for j, r in enumerate(ranks) if j != rank and started(r) < mine]
    if not behind:
        return _others(ranks, rank)
    earliest = min(started(ranks[j]) for j in behind)
    return " and ".join(f"rank {j} (at stage {ranks[j].get('stage', 'startup')})" for j in behind
                        if started(ranks[j]) == earliest)


def _others(ranks: list[dict[str, Any]], rank: int) -> str:
    """``rank 1 (at stage compile) and rank 2 (at stage timing)``: every rank but ``rank``."""
    return " and ".join(f"rank {j} (at stage {r.get('stage', 'startup')})" for j, r in enumerate(ranks)
                        if j != rank) or "another rank"


def _died(rank: int, code: int, stage: str, others: str, log_text: str):
    """Rank ``rank``'s death, in words and with its category: NCCL's watchdog aborting a rank that
    waited in a collective too long reads as the hang it is, not as a crash."""
    killed = killed_by(code)
    if killed is None:
        return failure("crashed", f"rank {rank} exited with code {code} before recording why")
    category, name = killed
    line = nccl_watchdog(log_text, rank)
    if line is not None and code == -signal.SIGABRT:
        return failure("rank_hang", f"rank {rank} waited in a collective during stage {stage} for {others}, which "
                                    f"never joined it: NCCL's watchdog timed it out and aborted the rank with {name} "
                                    f"({line[:300]})")
    oom = ", likely by the out-of-memory killer" if category == "out_of_memory" else ""
    return failure(category, f"rank {rank} was killed by {name}{oom}")


#: NCCL's watchdog on a collective that ran past the process group's timeout (ProcessGroupNCCL.cpp):
#: "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, ...)
#: ran for 600088 milliseconds before timing out.", then the process is taken down with SIGABRT.
_NCCL_WATCHDOG = re.compile(r"Watchdog caught collective operation timeout|ProcessGroupNCCL's watchdog|NCCL timeout",
                            re.I)
#: The rank a log line is about: torch's prefix "[rank1]:" or NCCL's "[Rank 1]", "[PG ID 0 ... Rank 1]".
_LINE_RANK = re.compile(r"\[rank(\d+)\]:|\bRank (\d+)\]")


def nccl_watchdog(log_text: str, rank: int) -> str | None:
    """The line in which NCCL's watchdog timed out a collective of rank ``rank`` (or of no rank it
    names), or None.

    Example:
        >>> nccl_watchdog("[rank1]:[E1218 ProcessGroupNCCL.cpp:629] [Rank 1] Watchdog caught collective "
        ...               "operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE)", 1)[:24]
        '[rank1]:[E1218 ProcessGr'
    """
    for line in log_text.splitlines():
        if _NCCL_WATCHDOG.search(line):
            named = {int(a or b) for a, b in _LINE_RANK.findall(line)}
            if not named or rank in named:
                return line.strip()
    return None


def hang_lines(path: Path, keep: int = 20) -> str:
    """The lines of the log file at ``path`` in which NCCL's watchdog timed out a collective (see
    :func:`nccl_watchdog`), found anywhere in it: NCCL dumps its debug information for about a
    minute before it aborts a rank, on every rank, so the watchdog's line scrolls far out of the
    log's tail. Read a bounded piece at a time (a log can reach gigabytes, a line megabytes); the
    first ``keep`` such lines, each cut at 1000 characters, or "" for none or no file."""
    found: list[str] = []
    try:
        with open(path, "rb") as log:
            for piece in iter(lambda: log.readline(1 << 16), b""):
                if (b"atchdog" in piece or b"NCCL timeout" in piece) and _NCCL_WATCHDOG.search(
                        line := piece.decode(errors="replace")):
                    found.append(line.strip()[:1000])
                    if len(found) >= keep:
                        break
    except OSError:
        return ""
    return "".join(f"{line}\n" for line in found)


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


#: A section of the elastic launcher's summary (torch/distributed/elastic/multiprocessing/errors,
#: ``ChildFailedError``): "Failures:" lists every failed rank but one, "Root Cause" that one; each
#: ends at a line of "-" or "=", and holds one block per rank, each opened by a line "[N]:".
_SECTION = re.compile(r"^(Failures|Root Cause[^\n]*):[ \t]*$", re.M)
_SECTION_END = re.compile(r"^[=-]{10,}[ \t]*$", re.M)
_BLOCK = re.compile(r"^\[\d+\]:[ \t]*$", re.M)


def launcher_failures(log_text: str) -> list[tuple[int, int, float | None]]:
    """``(rank, exit code, when)`` of every rank in every launcher's summary (one per machine),
    each launcher's Root Cause first. ``when`` is its "time" line (seconds since the epoch, whole
    seconds, the launcher's local time), or None. The launcher dates the failures it finds in one
    poll alike and names the lowest of them its root cause: a rank's own ``failed_at`` is the
    better witness where there is one."""
    roots: list[tuple[int, int, float | None]] = []
    others: list[tuple[int, int, float | None]] = []
    parts = _SECTION.split(log_text)
    for name, body in zip(parts[1::2], parts[2::2]):
        end = _SECTION_END.search(body)
        for block in _BLOCK.split(body[:end.start()] if end else body)[1:]:
            found = _block_failure(block)
            if found is not None:
                (others if name == "Failures" else roots).append(found)
    return roots + others


def _block_failure(block: str) -> tuple[int, int, float | None] | None:
    rank = re.search(r"^\s*rank\s*:\s*(\d+)", block, re.M)
    code = re.search(r"^\s*exitcode\s*:\s*(-?\d+)", block, re.M)
    if not (rank and code):
        return None
    when = re.search(r"^\s*time\s*:\s*(\S+)", block, re.M)
    return int(rank.group(1)), int(code.group(1)), _launcher_time(when.group(1)) if when else None


def _launcher_time(text: str) -> float | None:
    """The launcher's "2026-12-02_11:21:41" (``datetime.isoformat(sep="_")``) in seconds since the epoch."""
    try:
        return datetime.datetime.fromisoformat(text.replace("_", "T", 1)).timestamp()
    except ValueError:
        return None


def died_first(log_text: str) -> tuple[int | None, int | None]:
    """``(rank, exit code)`` of the rank the launcher named its root cause, from its summary."""
    found = launcher_failures(log_text)
    return (found[0][0], found[0][1]) if found else (None, None)


def _death(returncode: int | None, where: str):
    """The launcher ended with no rank's failure recorded or named in its summary."""
    killed = killed_by(returncode)
    if killed:
        return failure(killed[0], f"the rank launcher died with {killed[1]} ({where})")
    return failure("crashed", f"the rank launcher exited with code {returncode}, no rank saying why ({where})")
