"""The verdict: which config to recommend, from the study's measurements.

The fastest correct config within the memory bound, when it beats eager on total time; the
confirmed medians when the finalists were re-measured (tuner/decide/confirm.py); the knee of the
time/memory Pareto front under ``--objective pareto``. Warm-start, thread-check and
regional-compile figures stored in the study are attached to the chosen config.
"""
from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from ..core.config import EAGER, PLAIN_COMPILE, CompileConfig, TunedConfig
from ..core.durations import BUDGET_RAN_OUT
from ..core.score import Scoring, break_even_steps, knee, pareto_front
from ..study import ROLE_EAGER, ROLE_PLAIN, measured_trials
from ..system.heap import PIN_REASON as HEAP_PIN_REASON
from ..system.heap import pinned_as_measured


def ranked(study, scoring: Scoring):
    """(eager trial, plain trial, correct compiled trials within the memory bound, best first)."""
    trials = measured_trials(study)
    eager = next(t for t in trials if t.user_attrs.get("role") == ROLE_EAGER)
    plain = next((t for t in trials if t.user_attrs.get("role") == ROLE_PLAIN), None)
    candidates = [t for t in trials if t.user_attrs.get("role") != ROLE_EAGER
                  and t.user_attrs.get("correct") and not scoring.over_memory(t.user_attrs)]
    return eager, plain, sorted(candidates, key=lambda t: t.value)


#: Study attribute: why the finalists were not confirmed this time (``--confirm 0``, ``interrupted``, ...).
SKIPPED_ATTR = "confirmation_skipped"


def finalist_configs(study, scoring: Scoring, k: int) -> list[CompileConfig]:
    return [CompileConfig.from_dict(t.user_attrs["config"]) for t in ranked(study, scoring)[2][:k]]


def pick_best(study, scoring: Scoring, device: str) -> TunedConfig:
    """The fastest correct config within the memory bound; eager unless something beats it.
    When the finalists were confirmed, the confirmed medians decide (see tuner/decide/confirm.py).
    Warm-start and thread-check figures stored for the chosen config are attached, and where
    ``apply_config`` will pin glibc's heap, why (``measured.heap_pinned_because``)."""
    tuned = _pick_best(study, scoring, device)
    key = tuned.config.key()
    started = study.user_attrs.get("warm_start") or {}
    if started.get("config_key") == key:
        tuned = dataclasses.replace(tuned, measured={
            **tuned.measured, **{k: v for k, v in started.items() if k != "config_key"}})
    regional = regional_saving(study)
    if regional:
        tuned = dataclasses.replace(tuned, measured={**tuned.measured, "regional_compile": regional})
    packaged = study.user_attrs.get("package") or {}  # compile-tune package (tuner/pt2/command.py)
    if packaged and (packaged.get("config_key") == key or tuned.verdict == "stay_eager"):
        tuned = dataclasses.replace(tuned, measured={
            **tuned.measured, "package": {k: v for k, v in packaged.items() if k != "config_key"}})
    threads = study.user_attrs.get("thread_check") or {}
    if threads.get("config_key") == key:
        tuned = dataclasses.replace(tuned, thread_check={k: v for k, v in threads.items() if k != "config_key"})
    ranks = _ranks_of(study, key)
    if ranks:
        tuned = dataclasses.replace(tuned, measured={**tuned.measured, "ranks": ranks})
    if pinned_as_measured(tuned.tuned_on):  # apply_config pins it for every verdict: the reason, said
        tuned = dataclasses.replace(tuned, measured={**tuned.measured, "heap_pinned_because": HEAP_PIN_REASON})
    return tuned


def _ranks_of(study, key: str) -> dict | None:
    """On many ranks: the chosen config's search trial, rank by rank (its step and compile time)."""
    settings = study.user_attrs.get("settings") or {}
    if settings.get("nproc", 1) * settings.get("nnodes", 1) <= 1:
        return None
    trial = next((t for t in measured_trials(study) if t.user_attrs.get("config_key") == key
                  and t.user_attrs.get("ranks")), None)
    if trial is None:
        return None
    a = trial.user_attrs
    return {"nproc": settings["nproc"], "nnodes": settings.get("nnodes", 1),
            "data_parallel": settings.get("data_parallel"),
            "slowest_rank": a.get("slowest_rank"), "rank_spread": round(float(a.get("rank_spread") or 0.0), 4),
            "step_ms": [round(1000 * float(r.get("step_s") or 0.0), 3) for r in a["ranks"]],
            "compile_s": [round(float(r.get("compile_time_s") or 0.0), 2) for r in a["ranks"]]}


def regional_saving(study) -> dict | None:
    """Compile time of regional (blocks) vs whole-model compiles of otherwise equal configs."""
    by_rest: dict[str, dict[str, float]] = {}
    for t in measured_trials(study):
        cfg = t.user_attrs.get("config") or {}
        if cfg.get("target") not in ("whole", "blocks"):
            continue
        rest = CompileConfig.from_dict({**cfg, "target": "whole"}).key()
        by_rest.setdefault(rest, {})[cfg["target"]] = float(t.user_attrs.get("compile_time_s") or 0.0)
    pairs = [(v["whole"], v["blocks"]) for v in by_rest.values() if "whole" in v and "blocks" in v]
    if not pairs:
        return None
    import statistics

    whole, blocks = statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)
    return {"pairs": len(pairs), "whole_compile_s": round(whole, 3), "blocks_compile_s": round(blocks, 3),
            "saving_s": round(whole - blocks, 3)}


def _pick_best(study, scoring: Scoring, device: str) -> TunedConfig:
    eager, _, candidates = ranked(study, scoring)
    settings = study.user_attrs.get("settings") or {}
    tuned_on = dict(eager.user_attrs.get("environment") or {})
    # The trials' own thread count (their environment records it); the study's setting if not.
    tuned_on.setdefault("threads", settings.get("threads"))
    tuned_on.update(device=device, date=_measured_on(study), steps=scoring.steps, task=settings.get("task"))
    if settings.get("nproc", 1) * settings.get("nnodes", 1) > 1:  # apply_config wraps the model as its ranks were
        tuned_on.update(nproc=settings["nproc"], data_parallel=settings.get("data_parallel"))
        if settings.get("nnodes", 1) > 1:
            tuned_on.update(nnodes=settings["nnodes"])
    if study.user_attrs.get("objective") == "pareto":
        return _unconfirmed(_pick_pareto(study, scoring, eager, candidates, tuned_on), "objective pareto")
    confirmation = study.user_attrs.get("confirmation") or {}
    current = confirmation.get("finalist_keys") == sorted(
        c.key() for c in finalist_configs(study, scoring, len(confirmation.get("finalist_keys") or [])))
    searched = _pick_time(study, scoring, eager, candidates, tuned_on)
    if current and confirmation.get("verdict"):
        try:
            return _from_confirmation(confirmation, scoring, tuned_on, study)
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
            return _unconfirmed(searched, "confirmation failed", f"unusable confirmation figures ({exc!r})")
    skipped = study.user_attrs.get(SKIPPED_ATTR)
    if skipped == BUDGET_RAN_OUT and searched.verdict == "compile":
        return _unconfirmed(_not_measured_enough(searched), skipped)
    if skipped:
        return _unconfirmed(searched, skipped)
    if current and confirmation.get("failed"):
        return _unconfirmed(searched, "confirmation failed", confirmation["failed"])
    why = "finalists changed since the last confirmation" if confirmation else "no confirmation recorded"
    return _unconfirmed(searched, why)


def _not_measured_enough(searched: TunedConfig) -> TunedConfig:
    """A search's lead that no fresh process re-measured because the --budget ran out: one
    in-process timing has no interval, so the verdict is undecided (eager until measured)."""
    m = searched.measured
    label = searched.config.describe()
    measured = {"total_time_s": m.get("eager_total_time_s"), "eager_step_time_ms": m.get("eager_step_time_ms"),
                "best_compiled": label, "best_compiled_total_time_s": m.get("total_time_s"),
                "best_compiled_speedup": m.get("speedup_vs_eager"),
                "best_compiled_compile_time_s": m.get("compile_time_s"),
                "best_compiled_break_even_steps": m.get("break_even_steps"),
                "reason": f"the --budget ran out before a fresh process re-measured the search's lead ({label} at "
                          f"{m.get('speedup_vs_eager') or 0:.2f}x eager, timed once, side by side in one process, "
                          "with no interval); give a larger --budget so that confirmation's first two rounds fit"}
    return TunedConfig(EAGER, "undecided", _rounded(measured), searched.tuned_on)


def _unconfirmed(tuned: TunedConfig, why: str, detail: str | None = None) -> TunedConfig:
    """The search's own figures, marked: nothing re-measured them side by side (see ``confirm``)."""
    marker: dict[str, Any] = {"confirmed": False, "unconfirmed_because": why}
    if detail:
        marker["confirmation_error"] = detail
    return dataclasses.replace(tuned, measured={**marker, **tuned.measured})


def _pick_time(study, scoring: Scoring, eager, candidates, tuned_on: dict) -> TunedConfig:
    """The fastest of ``candidates`` (best first), if it beats eager on total time."""
    best = candidates[0] if candidates else None
    plain = next(iter(measured_trials(study, roles=(ROLE_PLAIN,))), None)
    eager_total = eager.value
    if best is None or best.value >= eager_total:
        measured: dict[str, Any] = {"eager_step_time_ms": scoring.eager_step_s * 1e3, "total_time_s": eager_total,
                                    "best_compiled": best.user_attrs.get("config_label") if best else None,
                                    "best_compiled_total_time_s": best.value if best else None,
                                    "reason": "no compiled config beat eager over the scored steps"}
        if best is not None:  # what it would have cost: the verdict text explains the loss with these
            compile_s = scoring.compile_time(best.user_attrs)
            measured.update(best_compiled_speedup=best.user_attrs.get("speedup"),
                            best_compiled_compile_time_s=compile_s,
                            best_compiled_break_even_steps=break_even_steps(
                                compile_s, scoring.eager_step_s, best.user_attrs["step_time_s"]))
        return TunedConfig(EAGER, "stay_eager", measured, tuned_on)
    a = best.user_attrs
    step = a["step_time_s"]
    compile_s = scoring.compile_time(a)  # the compile cost the score counted (cold or warm)
    measured = {
        "speedup_vs_eager": a["speedup"],
        "speedup_vs_plain_compile": (a["speedup"] / plain.user_attrs["speedup"]) if plain else None,
        "total_time_s": best.value,
        "eager_total_time_s": eager_total,
        "plain_compile_total_time_s": plain.value if plain else None,
        "compile_time_s": compile_s,
        "compile_cost": scoring.compile_cost,
        "cold_compile_time_s": a.get("compile_time_s") if scoring.compile_cost == "warm" else None,
        "step_time_ms": step * 1e3,
        "eager_step_time_ms": scoring.eager_step_s * 1e3,
        "step_spread": a.get("step_spread"),
        "peak_memory_mb": a.get("peak_memory_mb"),
        "eager_peak_memory_mb": a.get("eager_peak_memory_mb"),
        "break_even_steps": break_even_steps(compile_s, scoring.eager_step_s, step),
        "graph_breaks": a.get("graph_breaks"),
        "recompiles": a.get("recompiles"),
        "trial": best.number,
    }
    if scoring.compile_cost == "warm":
        measured["cold_compile_time_s"] = a.get("compile_time_s")
    return TunedConfig(CompileConfig.from_dict(a["config"]), "compile", _rounded(measured), tuned_on)


def _pick_pareto(study, scoring: Scoring, eager, candidates, tuned_on: dict) -> TunedConfig:
    points = [(t.value, float(t.user_attrs.get("peak_memory_mb") or 0.0), t) for t in [eager, *candidates]]
    front = pareto_front(points)
    total, memory, chosen = knee(front)
    listed = [{"config": t.user_attrs.get("config_label"), "total_time_s": round(v, 3), "peak_memory_mb": round(m, 1)}
              for v, m, t in front]
    if chosen is eager:
        measured = {"total_time_s": eager.value, "peak_memory_mb": memory, "pareto_front": listed,
                    "reason": "eager is the knee of the time/memory Pareto front"}
        return TunedConfig(EAGER, "stay_eager", _rounded(measured), tuned_on)
    tuned = _pick_time(study, scoring, eager, [chosen], tuned_on)
    return dataclasses.replace(tuned, measured={**tuned.measured, "pareto_front": listed,
                                                "reason": "the knee of the time/memory Pareto front"})


def _from_confirmation(decision: dict, scoring: Scoring, tuned_on: dict, study) -> TunedConfig:
    """The verdict as confirmation decided it: every figure from its fresh processes
    (tuner/decide/evidence.py), the intervals at the stated confidence."""
    by_key = {CompileConfig.from_dict(c["config"]).key(): c for c in decision["candidates"]}
    eager = by_key.get("none") or {"total_time_s": scoring.eager_total, "peak_memory_mb": None}
    plain = by_key.get(CompileConfig().key())
    best = decision.get("best") or {}
    base: dict[str, Any] = {
        "confirmed": True, "confirm_rounds": decision.get("rounds_done") or decision.get("rounds"),
        "reason": decision["reason"], "confidence": decision.get("confidence"),
        "tie_margin": decision.get("tie_margin"), "zone": decision.get("zone"),  # stats.zone: tie/slower says why
        "speedup": best.get("speedup"), "speedup_interval": best.get("speedup_interval"),
        "saving_s": best.get("saving_s"), "saving_interval_s": best.get("saving_interval_s"),
        "eager_total_time_s": decision.get("eager_total_s", eager["total_time_s"]),
        "eager_step_time_ms": decision["eager_step_s"] * 1e3,
        "spread": decision.get("spread"), "spread_df": decision.get("spread_df"),
        "paired": decision.get("paired"), "process_spread": decision.get("process_spread"),
    }
    base.update(_heap_gain(decision))
    if decision.get("machine"):
        base["machine"] = decision["machine"]
    base.update(_race_facts(decision, study))
    if decision["verdict"] != "compile":
        measured = {**base, "total_time_s": base["eager_total_time_s"], "best_compiled": best.get("config_label"),
                    "best_compiled_total_time_s": best.get("total_time_s"),
                    "best_compiled_speedup": best.get("speedup"),
                    "best_compiled_compile_time_s": best.get("compile_time_s")}
        if best.get("step_s") and best.get("compile_time_s") is not None:
            measured["best_compiled_break_even_steps"] = break_even_steps(
                best["compile_time_s"], decision["eager_step_s"], best["step_s"])
        if decision.get("to_decide"):
            measured["to_decide"] = decision["to_decide"]
        return TunedConfig(EAGER, decision["verdict"], _rounded(measured), tuned_on)
    step = best["step_s"]
    measured = {
        **base,
        "speedup_vs_eager": best["speedup"],
        "speedup_vs_plain_compile": best["speedup"] / plain["speedup"] if plain and plain.get("speedup") else None,
        "total_time_s": best["total_time_s"],
        "plain_compile_total_time_s": plain.get("total_time_s") if plain else None,
        "compile_time_s": best["compile_time_s"],
        "cold_compile_times_s": best.get("cold_compiles_s"),
        "compile_time_warm_s": best.get("compile_time_warm_s"),
        "compile_cost": scoring.compile_cost,
        "step_time_ms": step * 1e3,
        "peak_memory_mb": best["peak_memory_mb"],
        "eager_peak_memory_mb": eager["peak_memory_mb"],
        "break_even_steps": break_even_steps(best["compile_time_s"] or 0.0, decision["eager_step_s"], step),
    }
    config = CompileConfig.from_dict(best["config"])
    trial = next((t for t in ranked(study, scoring)[2] if t.user_attrs.get("config_key") == config.key()), None)
    if trial is not None:
        measured.update(trial=trial.number, graph_breaks=trial.user_attrs.get("graph_breaks"),
                        recompiles=trial.user_attrs.get("recompiles"),
                        search_speedup_in_process=trial.user_attrs.get("speedup"))
    return TunedConfig(config, "compile", _rounded(measured), tuned_on)


def _heap_gain(decision: dict) -> dict[str, Any]:
    """Eager pinned against eager as a user's process starts: a side figure (eager_alone.HEAP_GAIN_DF);
    under a --budget not timed, and why (rounds.NOT_TIMED)."""
    heap = decision.get("heap")
    if not heap:
        return {"eager_alone": decision["eager_alone"]} if decision.get("eager_alone") else {}
    return {"heap_gain": heap["gain"], "heap_gain_interval": heap["interval"],
            **{f"heap_gain_{k}": heap[k] for k in ("df", "withheld") if heap.get(k) is not None}}


def _race_facts(decision: dict, study) -> dict[str, Any]:
    """Where the answer stands in its race (tuner/decide/race.py)."""
    facts: dict[str, Any] = {}
    if decision.get("cut_short"):  # the --budget stopped the race: fewer rounds, wider intervals
        facts["confirm_cut_short"] = decision["cut_short"]
    if decision.get("later_looks"):  # the answer is an earlier look's; the looks after it could not tell
        facts["later_looks"] = decision["later_looks"]
    if decision.get("looks_closed"):  # a look spent the error rate: the race ran no round after it
        facts["looks_closed"] = decision["looks_closed"]
    if decision.get("so_far"):  # a look of a race still running (or stopped there by Ctrl-C): the answer so far
        facts["so_far"] = True
    first = study.user_attrs.get("first_answer") or {}
    if first.get("elapsed_s") is not None:  # when the run's first decided answer was written
        facts["first_answer_s"] = first["elapsed_s"]
    facts["search"] = search_coverage(study, decision)
    plain: dict[str, Any] = next((c for c in decision.get("candidates") or []
                                  if c.get("config") == PLAIN_COMPILE.to_dict()), {})
    if plain.get("rides"):  # plain compile stepped in the candidates' processes (tuner/decide/rides.py)
        facts["plain_rides"] = plain["rides"]
    beyond = decision.get("beyond_plain")
    if beyond:  # the best config beyond plain compile, against plain compile (tuner/decide/against_plain.py)
        facts["beyond_plain"] = {k: beyond.get(k) for k in ("config_label", "zone", "saving_s", "saving_interval_s",
                                                            "speedup", "speedup_interval", "margin_s", "dropped",
                                                            "compared", "df", "to_interval")
                                 if beyond.get(k) is not None}
        if decision.get("beyond_plain_most_s") is not None:
            facts["beyond_plain"]["most_any_saves_s"] = decision["beyond_plain_most_s"]
    return facts


def search_coverage(study, decision: dict | None = None) -> dict[str, Any]:
    """What the search covered: the configs measured (plain compile and the search's, not eager),
    of the space's, and how many raced against plain compile in fresh processes."""
    searched = {t.user_attrs.get("config_key") for t in measured_trials(study)
                if t.user_attrs.get("role") != ROLE_EAGER and t.user_attrs.get("config_key")}
    raced = [c for c in (decision or {}).get("candidates") or [] if c.get("config") and c["config"] != EAGER.to_dict()]
    out: dict[str, Any] = {"configs_searched": len(searched), "configs_raced": len(raced)}
    if (decision or {}).get("waiting"):  # searched, their turn in the race not come (tuner/decide/waiting.py)
        out["not_raced"] = [dict(w) for w in (decision or {})["waiting"]]
    if study.user_attrs.get("space_configs"):
        out["configs_in_space"] = study.user_attrs["space_configs"]
    return out


def _rounded(d: dict) -> dict:
    def r(v):
        if isinstance(v, float):
            return round(v, 6)
        if isinstance(v, list):
            return [r(x) for x in v]
        if isinstance(v, dict):
            return {k: r(x) for k, x in v.items()}
        return v
    return {k: r(v) for k, v in d.items()}


def _measured_on(study) -> str:
    """The day the last trial finished: rebuilding the outputs later keeps the date the numbers came from."""
    ends = [t.datetime_complete for t in study.get_trials(deepcopy=False) if t.datetime_complete]
    return max(ends).date().isoformat() if ends else datetime.date.today().isoformat()
