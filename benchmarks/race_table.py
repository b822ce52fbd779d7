"""The table of benchmarks/full_races.py: each race's written answers judged against the truth of
its candidates, pure Python on the races' JSON lines (tests/test_race_table.py checks it on canned
lines).

A race's row keeps every answer the run wrote (``answers``: OUT/answers.jsonl, one per decided look)
and its final decision (``final``), each slimmed to what is judged here: per candidate, named
``plain``, ``alias`` (plain compile under another name) or by its stand-in backend
(tuner/core/known_truth.py), its zone against eager, its intervals (the look's and the unadjusted
95 % ones) and its row against plain compile.

**Truths.** A stand-in's speedup is known (tuner/core/known_truth.py) over the share of a step its
forward takes (``forward_share``, measured per workload: the rest of a step is not slowed, so a
stand-in slowed by F runs ``1 + (F - 1) x share`` times a step), its compile is its delay, and
its saving is ``steps x E x (1 - 1/speedup) - delay`` with ``E`` eager's level *as the race samples
it*: the mean of eager's processes alone and of its side of each paired process, where the side
beside a ``stand-in-fast`` was slowed by its factor (tuner/measure/stand_in.py). ``E``'s own truth
is the reference: the mean step of eager's processes alone (one config each) in the *other* races
of the workload in the same sitting (:func:`eager_reference`), 5-50 times the race's own two. A
reference's error moves a saving's truth by that share of its steps' part only: a few per cent of
a few seconds for the saving-null candidate, of about 100 s for the 5 % and 10 % stand-ins.

Plain compile under another name ties plain compile: its speedup over it is 1. Plain compile's own
truth is not known; its reference is the other races' estimates of the workload, pooled, which
says whether a "compile with plain compile" was right where it is clear.

**Intervals on rates.** Clopper-Pearson at 95 %, and, for the false-"compile" rate, the same on the
effective sample size (Korn and Graubard 1998): the races' count divided by the design effect
``1 + (m - 1) ICC`` of launcher blocks of ``m`` races, the intra-block correlation estimated by
one-way ANOVA on the block rates (floored at 0). It widens the interval where blocks differ more
than binomial chance allows. The variance of the standardized errors (each turned into a normal
score through its t distribution) has a chi-square interval (Wilson-Hilferty).
"""
from __future__ import annotations

import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tuner.core.known_truth import parse as stand_in  # noqa: E402
from tuner.decide.student_t import _betainc, _t_cdf, t_quantile  # noqa: E402

#: The two names that are not stand-in backends.
PLAIN, ALIAS = "plain", "alias"
#: The coverage a calibrated 95 % interval should show on a few hundred races (issue 59).
COVERAGE_BOUNDS = (0.92, 0.98)
#: Eager's reference needs at least this many processes of other races; else the race's own.
REFERENCE_PROCESSES = 10


# ----------------------------------------------------------------------------- rates and intervals


def clopper_pearson(k: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """The exact binomial interval from the beta quantiles (``k`` and ``n`` may be fractional:
    an effective count). ``(0, 1)`` for ``n <= 0``."""
    if n <= 0:
        return 0.0, 1.0
    a = (1 - confidence) / 2
    low = 0.0 if k <= 0 else _beta_quantile(a, k, n - k + 1)
    high = 1.0 if k >= n else _beta_quantile(1 - a, k + 1, n - k)
    return low, high


def _beta_quantile(p: float, a: float, b: float) -> float:
    lo, hi = 0.0, 1.0
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _betainc(a, b, mid) < p else (lo, mid)
    return (lo + hi) / 2


def clustered(blocks: list[tuple[int, int]], confidence: float = 0.95) -> dict:
    """A rate over launcher blocks, ``(events, races)`` each: the pooled rate, the intra-block
    correlation (ANOVA, floored at 0), the design effect and the Clopper-Pearson interval on the
    effective sample size (see the module's text)."""
    blocks = [(k, n) for k, n in blocks if n > 0]
    big_n = sum(n for _, n in blocks)
    k_all = sum(k for k, _ in blocks)
    p = k_all / big_n if big_n else 0.0
    icc = 0.0
    if len(blocks) > 1 and 0 < p < 1:
        b = len(blocks)
        msb = sum(n * (k / n - p) ** 2 for k, n in blocks) / (b - 1)
        msw = sum(k * (1 - k / n) for k, n in blocks) / max(1, big_n - b)
        n0 = (big_n - sum(n * n for _, n in blocks) / big_n) / (b - 1)
        denom = msb + (n0 - 1) * msw
        icc = max(0.0, (msb - msw) / denom) if denom > 0 else 0.0
    m = big_n / len(blocks) if blocks else 1.0
    deff = 1 + (m - 1) * icc
    low, high = clopper_pearson(p * big_n / deff, big_n / deff, confidence)
    return {"events": k_all, "races": big_n, "rate": p, "icc": icc, "deff": deff, "interval": (low, high),
            "binomial": clopper_pearson(k_all, big_n, confidence), "blocks": blocks}


def normal_score(t: float, df: float) -> float:
    """A t statistic turned into the normal score with the same tail (so its variance is 1 at any df)."""
    p = _t_cdf(t, df) if math.isfinite(df) else 0.5 * (1 + math.erf(t / math.sqrt(2)))
    p = min(max(p, 1e-12), 1 - 1e-12)
    return statistics.NormalDist().inv_cdf(p)


def variance_interval(scores: list[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """The sample variance of ``scores`` about zero (their truth is 0 and their variance 1), and
    its chi-square interval (Wilson-Hilferty quantiles)."""
    n = len(scores)
    if n < 2:
        return math.nan, 0.0, math.inf
    var = sum(z * z for z in scores) / n

    def chi2(q: float) -> float:
        z = statistics.NormalDist().inv_cdf(q)
        return n * (1 - 2 / (9 * n) + z * math.sqrt(2 / (9 * n))) ** 3

    a = (1 - confidence) / 2
    return var, n * var / chi2(1 - a), n * var / chi2(a)


# ----------------------------------------------------------------------------- truths


def role(row: dict, name: str) -> str | None:
    """The candidate's role in its race (``A/A``, ``slower``, ``faster``, ``saving-null``, ``alias``,
    ``plain``), as the benchmark planned it."""
    return PLAIN if name == PLAIN else (row.get("roles") or {}).get(name)


def eager_reference(rows: list[dict], row: dict) -> float | None:
    """Eager's mean step on ``row``'s workload: its processes alone (one config each) in the other
    races of the same sitting, where the machine ran as it did for this race (a sitting's level
    moved 14 % from the next one's on this shared VM); in every other race where the sitting has
    too few; the race's own where the file has too few."""
    def pool(same_sitting: bool) -> list[float]:
        return [s for r in rows if r is not row and r.get("workload") == row.get("workload")
                and (not same_sitting or r.get("sitting") == row.get("sitting")) for s in r.get("eager_alone") or []]

    for candidates in (pool(True), pool(False), row.get("eager_alone") or []):
        if len(candidates) >= REFERENCE_PROCESSES or (candidates and candidates is row.get("eager_alone")):
            return statistics.fmean(candidates)
    return row.get("f_cal")


def step_factors(name: str, row: dict) -> tuple[float, float] | None:
    """``(eager's, the config's)`` step over the bare step, in the stand-in ``name``'s processes: a
    side slowed by F spins ``F - 1`` times its forward, which is ``forward_share`` of a step
    (benchmarks/full_races.py measures it per workload), so it runs ``1 + (F - 1) x share`` times as
    long. None for a real config."""
    known = stand_in(name) if name not in (PLAIN, ALIAS) else None
    if known is None:
        return None
    share = row.get("forward_share") or 1.0
    return 1 + (known.faster - 1) * share, 1 + (known.slower - 1) * share


def eager_level_factor(decision: dict, row: dict) -> float:
    """How much eager's level, as this decision sampled it, exceeds eager's own: its processes
    alone at 1, its side of each candidate's processes at that candidate's eager factor."""
    alone = len(decision.get("eager_alone") or []) or 1
    weights, total = alone, float(alone)
    for name, c in (decision.get("candidates") or {}).items():
        n = max(0, int(c.get("paired") or 0))
        weights += n
        total += n * (step_factors(name, row) or (1.0, 1.0))[0]
    return total / weights


def truth(name: str, row: dict, rows: list[dict], decision: dict) -> dict | None:
    """The candidate's true speedup and saving in ``decision``'s race, None where unknown."""
    factors = step_factors(name, row)
    if factors is None:
        return None
    delay = stand_in(name).delay_s
    speedup = factors[0] / factors[1]
    level = (eager_reference(rows, row) or 0.0) * eager_level_factor(decision, row)
    saving = row["steps"] * level * (1 - 1 / speedup) - delay
    return {"speedup": speedup, "saving_s": saving, "compile_s": delay}


def plain_reference(rows: list[dict], row: dict) -> dict | None:
    """Plain compile on ``row``'s workload as the other races' final decisions say it, pooled:
    the geometric mean speedup and the mean cold compile; None with fewer than three."""
    speedups, compiles = [], []
    for r in rows:
        c = ((r.get("final") or {}).get("candidates") or {}).get(PLAIN)
        if r is row or r.get("workload") != row.get("workload") or not c or not c.get("speedup"):
            continue
        speedups.append(math.log(c["speedup"]))
        if c.get("compile_time_s"):
            compiles.append(c["compile_time_s"])
    if len(speedups) < 3:
        return None
    return {"speedup": math.exp(statistics.fmean(speedups)), "compile_s": statistics.fmean(compiles or [0.0]),
            "races": len(speedups)}


def saving_truth(name: str, row: dict, rows: list[dict], decision: dict) -> float | None:
    """A candidate's true saving over eager: known for a stand-in; plain compile's (and its alias's)
    from the plain reference where its sign is clear (over twice the tie margin from zero)."""
    t = truth(name, row, rows, decision)
    if t is not None:
        return t["saving_s"]
    ref = plain_reference(rows, row) if name in (PLAIN, ALIAS) else None
    e = eager_reference(rows, row)
    if ref is None or not e:
        return None
    total = row["steps"] * e
    saving = total * (1 - 1 / ref["speedup"]) - ref["compile_s"]
    return saving if abs(saving) > 2 * (decision.get("tie_margin") or 0.02) * total else None


# ----------------------------------------------------------------------------- answers


def answers(row: dict) -> list[dict]:
    """Every answer the race wrote, in order: each decided look's, then the final one where it differs."""
    out = list(row.get("answers") or [])
    final = row.get("final")
    if final and final.get("verdict") in ("compile", "stay_eager"):
        if not out or _said(out[-1]) != _said(final):
            out.append(final)
    return out


def _said(a: dict) -> tuple:
    return a.get("verdict"), a.get("choice")


def ever(row: dict, name: str, test) -> bool:
    """Whether any answer written (or the final decision) has candidate ``name`` passing ``test``."""
    decisions = [*answers(row), *([row["final"]] if row.get("final") else [])]
    return any(name in (d.get("candidates") or {}) and test(d["candidates"][name], d) for d in decisions)


def false_compile(c: dict, d: dict, name: str) -> bool:
    return c.get("zone") == "compile" or (d.get("verdict") == "compile" and d.get("choice") == name)


def false_beats(c: dict, d: dict) -> bool:
    return ((c.get("against_plain") or {}).get("zone") == "beats"
            or (d.get("verdict") == "compile" and d.get("choice") == ALIAS))


def wrong(answer: dict, row: dict, rows: list[dict]) -> bool | None:
    """Whether an answer was wrong: "compile with X" where X's true saving is not above zero;
    "stay eager" where a candidate it weighed truly saves more than the tie margin; None unknown."""
    if answer.get("verdict") == "compile":
        s = saving_truth(answer.get("choice") or "", row, rows, answer)
        return None if s is None else s <= 0
    margin = (answer.get("tie_margin") or 0.02) * (answer.get("eager_total_s") or 0.0)
    truths = [saving_truth(n, row, rows, answer) for n in answer.get("candidates") or {}]
    if any(s is not None and s > margin for s in truths):
        return True
    return False if all(s is not None for s in truths) else None


def reversals(rows: list[dict]) -> dict:
    """Written answers later reversed (a later answer's verdict differs: compile against stay eager),
    and how many of those were wrong; answers whose choice of config changed alone, apart."""
    written = reversed_ = reversed_wrong = reversed_known = changed = races = 0
    for row in rows:
        seq = answers(row)
        written += len(seq)
        hit = False
        for i, a in enumerate(seq):
            later = seq[i + 1:]
            if any(b.get("verdict") != a.get("verdict") for b in later):
                reversed_ += 1
                hit = True
                w = wrong(a, row, rows)
                reversed_known += w is not None
                reversed_wrong += bool(w)
            elif any(b.get("choice") != a.get("choice") for b in later):
                changed += 1
        races += hit
    return {"written": written, "reversed": reversed_, "reversed_wrong": reversed_wrong,
            "reversed_known": reversed_known, "choice_changed": changed, "races_with_reversal": races}


# ----------------------------------------------------------------------------- coverage, errors


def judged(rows: list[dict]):
    """``(row, name, role, unadjusted figures, truth)`` of every known-truth candidate of every
    race's final decision that stated its unadjusted intervals."""
    for row in rows:
        final = row.get("final") or {}
        for name, c in (final.get("candidates") or {}).items():
            t = truth(name, row, rows, final)
            u = c.get("unadjusted")
            if t is not None and u and u.get("se_log") and u.get("df", 0) >= 1:
                yield row, name, role(row, name), u, t


def covers(interval, value: float) -> bool | None:
    if not interval or None in interval:
        return None
    return interval[0] <= value <= interval[1]


def coverage(rows: list[dict]) -> dict[str, dict[str, tuple[int, int]]]:
    """Role -> ``{"speedup": (covered, judged), "saving": (...)}`` of the unadjusted 95 % intervals,
    plus the alias's speedup over plain compile (its truth 1.0), from the look's interval and df."""
    out: dict[str, dict[str, list[int]]] = defaultdict(lambda: {"speedup": [0, 0], "saving": [0, 0]})
    for _, _, r, u, t in judged(rows):
        for what, interval, value in (("speedup", u.get("speedup_interval"), t["speedup"]),
                                      ("saving", u.get("saving_interval_s"), t["saving_s"])):
            hit = covers(interval, value)
            if hit is not None:
                out[r][what][0] += hit
                out[r][what][1] += 1
    for row in rows:
        a = (((row.get("final") or {}).get("candidates") or {}).get(ALIAS) or {}).get("against_plain") or {}
        hit = covers(unadjusted_speedup(a), 1.0)
        if hit is not None:
            out[ALIAS]["speedup"][0] += hit
            out[ALIAS]["speedup"][1] += 1
    return {k: {w: (v[0], v[1]) for w, v in d.items()} for k, d in out.items()}


def unadjusted_speedup(row: dict, confidence: float = 0.95) -> list[float] | None:
    """A speedup's 95 % interval from one stated at the look's confidence: the same t-interval on
    the log scale, its standard error recovered from the stated one's width and degrees of freedom."""
    lo, hi = row.get("speedup_interval") or (None, None)
    df, level, est = row.get("df"), row.get("look_confidence"), row.get("speedup")
    if not (lo and hi and df and df >= 1 and level and est):
        return None
    se = math.log(hi / lo) / (2 * t_quantile(0.5 + level / 2, df))
    half = t_quantile(0.5 + confidence / 2, df) * se
    return [est * math.exp(-half), est * math.exp(half)]


def standardized(rows: list[dict]) -> dict[str, list[float]]:
    """Role -> the normal scores of ``(log speedup - log truth) / se`` (each through its own t)."""
    out: dict[str, list[float]] = defaultdict(list)
    for _, _, r, u, t in judged(rows):
        out[r].append(normal_score((u["log_speedup"] - math.log(t["speedup"])) / u["se_log"], u["df"]))
    return dict(out)


# ----------------------------------------------------------------------------- events


def events(rows: list[dict], wanted: str, test) -> list[dict]:
    """Per race holding a candidate of role ``wanted``: whether any written answer met ``test(c, d, name)``."""
    out = []
    for row in rows:
        for name, r in (row.get("roles") or {}).items():
            if r == wanted:
                out.append({"block": row.get("block", 0), "hit": ever(row, name, lambda c, d, n=name: test(c, d, n))})
    return out


def by_block(found: list[dict]) -> list[tuple[int, int]]:
    blocks: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for e in found:
        blocks[e["block"]][0] += e["hit"]
        blocks[e["block"]][1] += 1
    return [tuple(blocks[b]) for b in sorted(blocks)]  # type: ignore[misc]


def null_race_false_compile(rows: list[dict]) -> list[dict]:
    """Races whose every candidate's truth saves nothing (stand-ins by their truth, plain compile and
    its alias by the plain reference): any written "compile" is false."""
    out = []
    for row in rows:
        final = row.get("final") or {}
        names = list(final.get("candidates") or {})
        truths = [saving_truth(n, row, rows, final) for n in names]
        if names and all(s is not None and s <= 0 for s in truths):
            out.append({"block": row.get("block", 0),
                        "hit": any(a.get("verdict") == "compile" for a in answers(row))})
    return out


# ----------------------------------------------------------------------------- the table


def pct(k: float, n: float) -> str:
    return f"{k / n:.1%}" if n else "-"


def span(interval: tuple[float, float]) -> str:
    return f"{interval[0]:.1%}-{interval[1]:.1%}"


def header(rows: list[dict]) -> list[str]:
    first = rows[0]
    lineups = defaultdict(int)
    for r in rows:
        lineups[r.get("lineup")] += 1
    commits = sorted({r.get("commit") for r in rows})
    dates = sorted(r.get("started", "") for r in rows)
    walls = [r["wall_s"] for r in rows if r.get("wall_s")]
    cut = sum(1 for r in rows if (r.get("final") or {}).get("cut_short"))
    blocks = sorted({r.get("block", 0) for r in rows})
    return [f"{len(rows)} full-flow races ({', '.join(f'{k} {v}' for k, v in sorted(lineups.items()))}) over "
            f"{len({r['workload'] for r in rows})} workloads, {len(blocks)} launcher blocks; {first.get('machine')}, "
            f"{first.get('threads')} threads, torch {first.get('torch')}, commit {', '.join(map(str, commits))}, "
            f"{dates[0]} to {dates[-1]}",
            f"median race {statistics.median(walls):.0f} s (max {max(walls):.0f} s); cut short by the --budget: "
            f"{cut} of {len(rows)}; failed runs: {sum(1 for r in rows if r.get('exit'))}" if walls else "no wall times"]


def rate_line(what: str, found: list[dict], target: str) -> str:
    c = clustered(by_block(found))
    return (f"| {what} | {c['races']} | {c['events']} ({pct(c['events'], c['races'])}) | {span(c['interval'])} "
            f"(binomial {span(c['binomial'])}; ICC {c['icc']:.2f}, design effect {c['deff']:.2f}) | {target} |")


def table(rows: list[dict]) -> str:
    """The Markdown table docs/benchmarks.md quotes, headed by where and when it was measured."""
    raced = [r for r in rows if r.get("final") is not None or r.get("answers")]
    if not raced:
        return "no races"
    idle = len(rows) - len(raced)
    rows = raced
    lines = [*header(rows), *([f"runs with no race (the --budget fit none, or no candidate could win): {idle}"]
                              if idle else []), "",
             "| what | races | result | 95 % interval (blocks allowed for) | target |",
             "| --- | --- | --- | --- | --- |",
             rate_line('false "compile": the A/A candidate, any answer written', events(rows, "A/A", false_compile),
                       "at most 2.5 %, upper end at most 5 %"),
             rate_line('false "compile": races where nothing saves, any answer written', null_race_false_compile(rows),
                       "at most 2.5 %"),
             rate_line('false "beats plain": plain under another name, any answer written',
                       events(rows, ALIAS, lambda c, d, n: false_beats(c, d)), "at most 2.5 %"),
             rate_line('saving-null false "compile" (true saving 0)', events(rows, "saving-null", false_compile),
                       "at most 2.5 %")]
    lines += detection_lines(rows) + coverage_lines(rows) + error_lines(rows)
    rev = reversals(rows)
    lines.append(f"| answers written, later reversed (compile against stay eager) | {len(rows)} | {rev['written']} "
                 f"written, {rev['reversed']} reversed ({pct(rev['reversed'], rev['written'])}) in "
                 f"{rev['races_with_reversal']} races; of the reversed, {rev['reversed_wrong']} wrong of "
                 f"{rev['reversed_known']} with a known truth; the choice alone changed in "
                 f"{rev['choice_changed']} | | |")
    seen = interference(rows)
    if seen:
        lines.append(f"| plain compile under another name (three sides) over eager, against plain compile (two sides), "
                     f"log ratio | {seen[2]} | {seen[0]:+.4f} (se {seen[1]:.4f}) | | 0 |")
    level = level_bias(rows)
    if level:
        lines.append(f"| eager's level as the decision pools it (alone and beside each config) over eager alone, log "
                     f"ratio | {level[2]} | {level[0]:+.4f} (se {level[1]:.4f}) | | 0 |")
    return "\n".join(lines + [""] + block_lines(rows))


def detection_lines(rows: list[dict]) -> list[str]:
    out = []
    names = sorted({n for r in rows for n, role_ in (r.get("roles") or {}).items() if role_ in ("faster", "slower")})
    for name in names:
        zone = "compile" if stand_in(name).speedup > 1 else "slower"
        right = against = n = 0
        for row in rows:
            c = ((row.get("final") or {}).get("candidates") or {}).get(name)
            if c is not None:
                n += 1
                right += c.get("zone") == zone
                against += c.get("zone") == {"compile": "slower", "slower": "compile"}[zone]
        lo, hi = clopper_pearson(right, n)
        out.append(f"| detection: {name} (truth {stand_in(name).speedup:.3f}x), final zone {zone} | {n} | {right} "
                   f"({pct(right, n)}); the opposite zone {against} | {span((lo, hi))} | |")
    return out


def coverage_lines(rows: list[dict]) -> list[str]:
    out = []
    cov = coverage(rows)
    for what in ("speedup", "saving"):
        pooled = [0, 0]
        for r in sorted(cov):
            k, n = cov[r][what]
            if n:
                pooled[0] += k
                pooled[1] += n
                out.append(f"| unadjusted 95 % interval holds the true {what}: {r} | {n} | {k} ({pct(k, n)}) | "
                           f"{span(clopper_pearson(k, n))} | |")
        k, n = pooled
        out.append(f"| **unadjusted 95 % interval holds the true {what}: all** | {n} | {k} ({pct(k, n)}) | "
                   f"{span(clopper_pearson(k, n))} | {COVERAGE_BOUNDS[0]:.0%}-{COVERAGE_BOUNDS[1]:.0%} |")
    return out


def error_lines(rows: list[dict]) -> list[str]:
    scores = standardized(rows)
    every = [z for zs in scores.values() for z in zs]
    out = []
    for label, zs in [*sorted(scores.items()), ("all", every)]:
        if len(zs) >= 2:
            var, lo, hi = variance_interval(zs)
            out.append(f"| standardized errors of the log speedup, variance: {label} | {len(zs)} | {var:.2f} "
                       f"(mean {statistics.fmean(zs):+.2f}) | {lo:.2f}-{hi:.2f} | 1 |")
    return out


def interference(rows: list[dict]) -> tuple[float, float, int] | None:
    """``(mean, se, races)`` of ``log(alias's speedup / plain compile's)`` over eager, each race's
    final decision: the same code, the alias timed in processes of three sides (eager, the alias,
    plain compile beside it), plain compile in processes of two; its truth is 0."""
    logs = []
    for row in rows:
        c = (row.get("final") or {}).get("candidates") or {}
        if (c.get(ALIAS) or {}).get("speedup") and (c.get(PLAIN) or {}).get("speedup"):
            logs.append(math.log(c[ALIAS]["speedup"] / c[PLAIN]["speedup"]))
    if len(logs) < 2:
        return None
    return statistics.fmean(logs), statistics.stdev(logs) / math.sqrt(len(logs)), len(logs)


def level_bias(rows: list[dict]) -> tuple[float, float, int] | None:
    """``(mean, se, races)`` of ``log(eager's level as the decision pools it / eager alone's)``, the
    stand-ins' slowing of eager's side taken out: the decision pools eager's side of each paired
    process with its processes alone (tuner/decide/evidence.py), and a saving is scaled by that
    level, while a user's eager runs alone. Its truth is 0 where eager beside a config runs as alone."""
    logs = []
    for row in rows:
        final = row.get("final") or {}
        alone = final.get("eager_alone") or []
        if final.get("eager_step_s") and alone:
            logs.append(math.log(final["eager_step_s"] / (statistics.fmean(alone) * eager_level_factor(final, row))))
    if len(logs) < 2:
        return None
    return statistics.fmean(logs), statistics.stdev(logs) / math.sqrt(len(logs)), len(logs)


def block_lines(rows: list[dict]) -> list[str]:
    """Each launcher block's A/A false "compile" and races, and the spread between blocks."""
    found = events(rows, "A/A", false_compile)
    blocks = by_block(found)
    keys = sorted({e["block"] for e in found})
    rates = [k / n for k, n in blocks if n]
    spread = statistics.pstdev(rates) if len(rates) > 1 else 0.0
    parts = [f"{b}: {k}/{n}" for b, (k, n) in zip(keys, blocks)]
    return [f"A/A false 'compile' by launcher block (block: false/races): {', '.join(parts) or '-'}; "
            f"spread of the block rates {spread:.1%}"]


def load(path: Path) -> list[dict]:
    import json

    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip().startswith("{")]


if __name__ == "__main__":
    print(table(load(Path(sys.argv[1]))))
