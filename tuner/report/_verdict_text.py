"""The verdict in words and key figures: one text, rendered by the terminal, the HTML and the
Markdown report alike. It is built from the picked config alone (``best_config.yaml``'s
``measured`` holds every figure it cites), so a run's verdict reads the same wherever it is shown.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Any

from ..core.durations import format_duration
from ..core.precision import CHANGES_NUMERICS
from ..core.precision import FLAG as PRECISION_FLAG
from ..core.precision import MEANING as PRECISION_MEANING
from ..system.heap import PIN_REASON as HEAP_PIN_REASON
from ..system.heap import pinned_as_measured
from ._fmt import count, megabytes, millis, missing, number, ratio, seconds, text


@dataclass
class Verdict:
    headline: str
    """``Compile with blocks/inductor/default`` or ``Stay eager``."""
    sentence: str
    """One or two plain sentences saying why."""
    facts: list[tuple[str, str, str]] = field(default_factory=list)
    """(what, value, compared with) triples: the numbers that back the verdict."""
    compile: bool = False
    label: str = ""
    unconfirmed: str | None = None
    """Why the verdict was not re-measured side by side with eager, when it was not."""


def verdict(tuned, hardware_warning: str | None = None, failed: int | None = None) -> Verdict:
    """The verdict of a :class:`tuner.core.config.TunedConfig`; ``failed``: how many trials failed."""
    m = tuned.measured
    steps = int(number(tuned.tuned_on.get("steps")) or 0)
    if tuned.verdict == "compile":
        v = _compile_verdict(tuned, steps)
    elif tuned.verdict == "undecided":
        v = _undecided_verdict(m, steps)
    else:
        v = _eager_verdict(m, steps, failed)
    v.facts += extra_facts(m, tuned.thread_check) + heap_facts(tuned)
    if m.get("confirm_cut_short"):
        v.sentence += (f" Confirmation was cut short by the --budget ({text(m['confirm_cut_short'])})"
                       + (", so its single round measured no spread." if m.get("confirm_rounds") == 1 else "."))
    if m.get("so_far"):
        v.sentence += (f" This is the answer so far: the race decided it after {count(m.get('confirm_rounds'))} "
                       "round(s) and the run stopped before the race finished (Ctrl-C, a signal, an error or the "
                       "--budget); run the same command again to go on.")
    if m.get("later_looks"):
        v.sentence += f" The race's later looks could not tell ({text(m['later_looks'])}); this look's answer stands."
    if m.get("looks_closed"):
        v.sentence += f" No round ran after it: {text(m['looks_closed'])}."
    if m.get("confirmed") is False:
        why = text(m.get("unconfirmed_because")) or "no confirmation recorded"
        v.unconfirmed = why + (f" ({m['confirmation_error']})" if m.get("confirmation_error") else "")
        v.sentence += (f" This verdict is unconfirmed: {why} (the search's single measurements, not re-measured "
                       "side by side with eager).")
        v.facts.insert(0, ("unconfirmed", why, "the search's single measurements"))
        if m.get("confirmation_error"):
            v.facts.append(("confirmation", "failed", text(m.get("confirmation_error"))))
    if hardware_warning:
        v.sentence += f" Warning: {hardware_warning}."
    return v


def verdict_text(tuned, config_path: str, hardware_warning: str | None = None) -> str:
    """The verdict for the terminal: the headline, why, the figures, and how to use it."""
    v = verdict(tuned, hardware_warning)
    head = f"verdict: {v.headline[0].lower()}{v.headline[1:]}"
    lines = [head + (f" [unconfirmed: {v.unconfirmed}]" if v.unconfirmed else ""),
             textwrap.fill(v.sentence, width=100, initial_indent="  ", subsequent_indent="  ")]
    lines += [f"  {what}: {value}" + (f" ({note})" if note else "") for what, value, note in v.facts
              if what != "unconfirmed"]
    if v.compile:
        lines.append(f'  use it: model = tuner.apply_config(model, "{config_path}")')
    else:
        wrap = {"ddp": "DistributedDataParallel", "fsdp2": "fully_shard"}.get(tuned.tuned_on.get("data_parallel"))
        wrapped = f", wraps it with {wrap}'s defaults as eager was measured," if wrap else ""
        if pinned_as_measured(tuned.tuned_on):
            lines.append(f'  {config_path} says so; keep model = tuner.apply_config(model, "{config_path}"): it '
                         f"leaves the model uncompiled{wrapped} and pins glibc's heap, as every step time above "
                         "was measured.")
        else:
            lines.append(f"  {config_path} says so; apply_config leaves the model uncompiled{wrapped.rstrip(',')}.")
    return "\n".join(lines)


def _undecided_verdict(m: dict, steps: int) -> Verdict:
    """The measurement could not tell a saving from a tie: eager until it can (apply_config does so)."""
    to = m.get("to_decide") or {}
    more = (f" About {count(to['rounds'])} rounds in all (another {seconds(to.get('seconds'))}) would likely decide: "
            "run the same command again with a larger --confirm-rounds." if number(to.get("rounds")) else "")
    sentence = (f"Undecided over the scored {steps:,} steps: {text(m.get('reason'))}. Until a measurement decides, "
                f"the model stays eager (apply_config leaves it uncompiled).{more}")
    facts = [("eager total", seconds(m.get("total_time_s")), f"over {steps:,} steps"),
             ("best compiled", text(m.get("best_compiled")), ""),
             ("its total", seconds(m.get("best_compiled_total_time_s")), f"eager {seconds(m.get('total_time_s'))}")]
    return Verdict("Undecided: stay eager for now", sentence, facts)


def _eager_verdict(m: dict, steps: int, failed: int | None) -> Verdict:
    eager_total = m.get("total_time_s")
    facts = [("eager total", seconds(eager_total), f"over {steps:,} steps"),
             ("eager step", _ms(m.get("eager_step_time_ms")), "")]
    best = text(m.get("best_compiled"))
    if m.get("reason") and "Pareto" in str(m["reason"]):
        return Verdict("Stay eager", f"{m['reason'][0].upper()}{m['reason'][1:]}.", facts)
    if not best:
        many = f" ({failed} failed or did not finish; see the failures below)" if failed else ""
        return Verdict("Stay eager", f"No compiled config finished correctly{many}, so the model stays eager.", facts)
    total, compile_s = m.get("best_compiled_total_time_s"), m.get("best_compiled_compile_time_s")
    pays_off = m.get("best_compiled_break_even_steps")
    sentence = f"No compiled config beats eager over the scored {steps:,} steps. The best compiled one, {best}, takes "
    if missing(compile_s):  # a best_config.yaml written before these figures were kept
        sentence += f"{seconds(total)}."
    else:
        why = (f"its steps are {ratio(m.get('best_compiled_speedup'))} as fast as eager's, but compiling costs "
               f"{seconds(compile_s)}")
        why += (", and it never pays that back" if missing(pays_off)
                else f", which pays off only after {count(pays_off)} steps")
        sentence += f"{seconds(total)}: {why}."
    facts += [("best compiled", best, ""), ("its total", seconds(total), f"eager {seconds(eager_total)}")]
    if not missing(compile_s):
        facts += [
            ("its speedup per step", ratio(m.get("best_compiled_speedup")), ""),
            ("its compile time", seconds(compile_s), ""),
            ("pays off after", "never" if missing(pays_off) else f"{count(pays_off)} steps", f"scored: {steps:,}"),
        ]
    if m.get("confirmed"):
        sentence = f"Stay eager over the scored {steps:,} steps: {text(m.get('reason'))}."
    return Verdict("Stay eager", sentence, facts)


def _compile_verdict(tuned, steps: int) -> Verdict:
    m = tuned.measured
    label = tuned.config.describe()
    vs_plain = m.get("speedup_vs_plain_compile")
    plain = m.get("plain_compile_total_time_s")
    pays_off = m.get("break_even_steps")
    sentence = (f"{label} runs steps {ratio(m.get('speedup_vs_eager'))} as fast as eager"
                + (f" and {ratio(vs_plain)} as fast as plain torch.compile" if vs_plain else "")
                + f"; its {seconds(m.get('compile_time_s'))} compile pays off after {count(pays_off)} steps, "
                f"so over the scored {steps:,} steps it takes {seconds(m.get('total_time_s'))} "
                f"instead of eager's {seconds(m.get('eager_total_time_s'))}.")
    warm = m.get("compile_cost") == "warm"
    facts = [
        ("speedup vs eager", ratio(m.get("speedup_vs_eager")), "per step"),
        ("speedup vs plain torch.compile", ratio(vs_plain) if vs_plain else "n/a",
         "per step" if vs_plain else "plain torch.compile failed"),
        ("compile time", seconds(m.get("compile_time_s")),
         "warm (cache kept), recompiles included" + (f"; cold {seconds(m['cold_compile_time_s'])}"
                                                     if number(m.get("cold_compile_time_s")) else "")
         if warm else "cold, recompiles included"),
        ("step time", _ms(m.get("step_time_ms")), f"eager {_ms(m.get('eager_step_time_ms'))}"),
        (f"total over {steps:,} steps", seconds(m.get("total_time_s")), f"eager {seconds(m.get('eager_total_time_s'))}"
         + (f", plain compile {seconds(plain)}" if not missing(plain) else "")),
        ("peak memory", megabytes(m.get("peak_memory_mb")) or "not measured",
         f"eager {megabytes(m.get('eager_peak_memory_mb'))}" if number(m.get("eager_peak_memory_mb")) else ""),
        ("pays off after", f"{count(pays_off)} steps", f"scored: {steps:,}"),
        ("graph breaks / recompiles", f"{count(m.get('graph_breaks')) or 0} / {count(m.get('recompiles')) or 0}", ""),
    ]
    precision = tuned.config.precision
    if precision:  # said in the sentence and first among the facts: the speedup came with different numbers
        sentence += (f" It {CHANGES_NUMERICS}: precision {precision} ({PRECISION_MEANING[precision]}); its results "
                     f"matched float32 eager only within {precision}'s tolerance, and were searched because of "
                     f"{PRECISION_FLAG}.")
        facts.insert(0, ("numerics", f"CHANGED: precision {precision}",
                         f"checked against float32 eager at {precision}'s tolerance"))
    return Verdict(f"Compile with {label}", sentence, facts, compile=True, label=label)


def _ms(value_ms: Any) -> str:
    """:func:`millis` for the figures best_config.yaml keeps in milliseconds."""
    return millis(None if missing(value_ms) else float(value_ms) / 1e3)


def _precompiled_facts(m: dict) -> list[tuple[str, str, str]]:
    """torch's precompiled forward against the bundle (tuner/runtime/precompiled.py), where tried."""
    if number(m.get("precompiled_start_s")):
        used = m.get("warm_start_with") == "precompiled"
        dynamo = f"{m['dynamo_guard_check_us']} us" if number(m.get("dynamo_guard_check_us")) else "not timed"
        runs = (m.get("start_processes") or {}).get("precompiled") or [m["precompiled_start_s"]]
        return [("precompiled start", f"{seconds(m['precompiled_start_s'])} first step"
                 + (f" (median of {len(runs)} fresh processes, in turn with the bundle's)" if len(runs) > 1 else ""),
                 f"{'USED by apply_config' if used else 'not used'}: torch's AOT precompile of the forward (no trace); "
                 f"{seconds(m.get('precompiled_saving_s'))} saved over the run's steps against the bundle alone, "
                 f"its guard check counted beyond torch.compile's own ({m.get('guard_check_us')} us a call; "
                 f"torch.compile's: {dynamo})")]
    why = m.get("precompiled_error") or m.get("precompile_skipped")
    return [("precompiled start", "not used", text(why)[:160])] if why else []


def extra_facts(m: dict, thread_check: dict | None) -> list[tuple[str, str, str]]:
    """Confirmation, start-up, regional-compile and thread-check figures, where measured."""
    facts = []
    if m.get("confirmed"):
        facts += _confirmed_facts(m)
    if number(m.get("cold_start_s")) and number(m.get("warm_start_s")):
        cache = m.get("warm_start_cache") or {}
        hits = (f"; the warm start's cache: {cache.get('fxgraph_hit', 0)} graph(s) hit, "
                f"{cache.get('fxgraph_miss', 0)} missed" if cache else "")
        missed = f"; MISSED: {text(m['warm_start_missed'])}" if m.get("warm_start_missed") else ""
        facts.append(("first step at start-up", f"{seconds(m['warm_start_s'])} warm",
                      f"{seconds(m['cold_start_s'])} cold; compile cache saved beside best_config.yaml "
                      f"({megabytes(m.get('compile_cache_mb'))}){hits}{missed}"))
        facts += _precompiled_facts(m)
    elif m.get("warm_start_error"):
        facts.append(("warm start", "not available", text(m["warm_start_error"])[:160]))
    packaged = m.get("package")
    if isinstance(packaged, dict) and number(packaged.get("first_call_s")) is not None:
        cold = f"; JIT: cold compile {seconds(m['cold_start_s'])}" if number(m.get("cold_start_s")) else ""
        warm = f", warm start {seconds(m['warm_start_s'])}" if number(m.get("warm_start_s")) else ""
        verdict = "recommended" if packaged.get("recommended") else "NOT recommended"
        facts.append(("packaged model (.pt2)", f"load {seconds(packaged['load_s'])}, first call "
                      f"{seconds(packaged['first_call_s'])}",
                      f"{verdict}: {text(packaged.get('why'))}{cold}{warm}; tuner.load_package(RESULTS)"))
        if packaged.get("shapes"):
            facts.append(("package takes", "; ".join(text(x) for x in packaged["shapes"][:4]),
                          "other sizes are refused with an error naming the input (load_package checks inputs)"))
        probes = packaged.get("probes") or []
        if probes:
            held = sum(1 for p in probes if p.get("inside") and p.get("outcome") == "matches eager")
            outside = [p for p in probes if not p.get("inside")]
            refused = sum(1 for p in outside if str(p.get("outcome", "")).startswith("refused"))
            facts.append(("package at unseen sizes", f"{held} of {len(probes) - len(outside)} inside match eager",
                          f"{refused} of {len(outside)} outside refused with an error, the rest matched eager"))
        for lost in packaged.get("not_carried") or []:
            facts.append(("package does not carry", f"{text(lost.get('setting'))} = {text(lost.get('value'))}",
                          text(lost.get("why"))))
    ranks = m.get("ranks")
    if isinstance(ranks, dict) and ranks.get("step_ms"):
        steps_text = ", ".join(f"rank {i} {ms:g} ms" for i, ms in enumerate(ranks["step_ms"]))
        compile_s = ranks.get("compile_s") or []
        compiles = "; compile per rank: " + ", ".join(f"{s:g} s" for s in compile_s) if any(compile_s) else ""
        spread = 100 * float(ranks.get("rank_spread") or 0)
        nodes = int(ranks.get("nnodes") or 1)
        machines = f" on {nodes} machines" if nodes > 1 else ""
        facts.append((f"{int(ranks.get('nproc') or 1) * nodes} ranks{machines} ({text(ranks.get('data_parallel'))})",
                      f"slowest rank {ranks.get('slowest_rank')}, spread {spread:.1f} %",
                      f"the search trial's step per rank: {steps_text}{compiles}"))
    regional = m.get("regional_compile")
    if regional:
        facts.append(("regional compile", f"{seconds(regional['blocks_compile_s'])} (blocks)",
                      f"{seconds(regional['whole_compile_s'])} for the whole model; "
                      f"median of {regional['pairs']} pair(s)"))
    if thread_check:
        facts.append((f"{thread_check.get('threads')} threads at once", text(thread_check.get("verdict")),
                      text(thread_check.get("advice"))))
    return facts


def _spread_words(m: dict) -> str:
    """What the intervals' spread is: between processes, or (paired) what is left of it when eager
    and the config share each process."""
    if not number(m.get("spread")):
        return ""
    df = m.get("spread_df")
    if not m.get("paired"):
        return f"; processes differ by {float(m['spread']):.1%} (pooled over every process, {df} df)"
    alone = (f"; processes of eager alone differ by {float(m['process_spread']):.1%}"
             if number(m.get("process_spread")) else "")
    return (f"; each config timed beside eager in its own processes, which differ by {float(m['spread']):.1%} "
            f"once paired (pooled, {df} df){alone}")


def _confirmed_facts(m: dict) -> list[tuple[str, str, str]]:
    """The confirmation's intervals, its spread and the machine (the heap's own gain: :func:`heap_facts`)."""
    lo, hi = m.get("speedup_interval") or (None, None)
    confidence = f"{float(m['confidence']):.0%}" if number(m.get("confidence")) else "95%"
    rounds = m.get("confirm_rounds")
    cut = f"; cut short by the --budget ({text(m['confirm_cut_short'])})" if m.get("confirm_cut_short") else ""
    spread = _spread_words(m)
    facts = [("confirmed", f"{rounds} interleaved round{'' if rounds == 1 else 's'} in fresh processes",
              f"the figures above are theirs{spread}{cut}")]
    if number(m.get("speedup")):
        facts.append((f"speedup, {confidence} interval", f"{ratio(m['speedup'])} {_between(lo, hi, ratio)}",
                      "eager's mean step over the config's, the same heap for both"))
    s_lo, s_hi = m.get("saving_interval_s") or (None, None)
    if number(m.get("saving_s")):
        facts.append((f"saving, {confidence} interval",
                      f"{float(m['saving_s']):+.1f} s {_between(s_lo, s_hi, _signed)}",
                      f"tie margin {float(m.get('tie_margin') or 0):.0%} of eager's total either way"
                      + ZONE_WORDS.get(str(m.get("zone")), "")))
    facts += _against_plain_facts(m)
    machine = m.get("machine") or {}
    if machine.get("crowded"):
        facts.append(("machine", f"{machine['crowded']} of {machine['processes']} processes crowded",
                      f"waited for a core; load average up to {machine.get('load')}"
                      + ("; BUSY: the verdict is undecided" if machine.get("busy") else "; left out of the figures")))
    return facts


def heap_facts(tuned) -> list[tuple[str, str, str]]:
    """Why ``apply_config`` pins glibc's heap (every figure was measured pinned), and the pin's own
    gain apart: a side figure, its interval withheld below the degrees of freedom that give it
    meaning (tuner/decide/eager_alone.py, ``HEAP_GAIN_DF``)."""
    m, facts = tuned.measured, []
    if pinned_as_measured(tuned.tuned_on):
        facts.append(("heap", "pinned by apply_config, whatever the verdict",
                      text(m.get("heap_pinned_because")) or HEAP_PIN_REASON))
    if number(m.get("heap_gain")):
        lo, hi = m.get("heap_gain_interval") or (None, None)
        df = f"{m['heap_gain_df']} df" if number(m.get("heap_gain_df")) is not None else ""
        within = (f"({ratio(lo)} to {ratio(hi)}, {df})" if number(lo) is not None and number(hi) is not None else
                  f"(no interval: {text(m.get('heap_gain_withheld')) or 'too few processes'})")
        facts.append(("the heap pin's own gain", f"eager {ratio(m['heap_gain'])} as fast pinned {within}",
                      "eager pinned over eager as a user's process starts: the pin's own, not compile's"))
    elif m.get("eager_alone"):
        facts.append(("the heap pin's own gain", "not measured", text(m["eager_alone"])))
    return facts


def _against_plain_facts(m: dict) -> list[tuple[str, str, str]]:
    """What the search covered, and the best config beyond plain compile against it: its saving
    over plain compile with the compile costs' difference, its interval and its zone."""
    search, beyond = m.get("search") or {}, m.get("beyond_plain") or {}
    facts = []
    if search.get("configs_searched"):
        of = f" of {search['configs_in_space']}" if search.get("configs_in_space") else ""
        facts.append(("search", f"{search['configs_searched']}{of} configs measured",
                      f"{search.get('configs_raced', 0)} raced in fresh processes (plain torch.compile included)"))
    if number(beyond.get("saving_s")):
        lo, hi = beyond.get("saving_interval_s") or (None, None)
        zone = {"beats": "beats it", "slower": "slower than it",
                "ties": "ties it (within the tie margin either way; the verdict says which it chose)",
                }.get(str(beyond.get("zone")), "not decided against it")
        saving = f"{float(beyond['saving_s']):+.1f} s"
        facts.append(("best beyond plain compile", f"{text(beyond.get('config_label'))}: {saving} "
                      f"over plain torch.compile {_between(lo, hi, _signed)}",
                      f"{ratio(beyond.get('speedup'))} plain's steps, compile costs included; {zone}"
                      + (f"; stopped racing: {text(beyond['dropped'])}" if beyond.get("dropped") else "")
                      + _to_interval_words(beyond)))
    waited = search.get("not_raced") or []
    if waited:
        facts.append(("searched, not raced", "; ".join(f"{text(w.get('config_label'))}: {text(w.get('reading'))}"
                                                       for w in waited),
                      "one process each, best first: their turn in the race did not come"))
    rides = m.get("plain_rides") or {}
    if rides.get("processes"):
        how = ("pooled with its own processes" if rides.get("pooled") else
               text(rides.get("why")) or "left out of its figures")
        facts.append(("plain compile's rides", f"{rides['processes']} candidate process(es) stepped it beside eager",
                      how))
    return facts


def _to_interval_words(beyond: dict) -> str:
    """``; an interval needs 5 more of its processes, about 3m 20s: a --budget that much longer``."""
    need = beyond.get("to_interval") or {}
    if not number(need.get("processes")) or not number(need.get("seconds")) or beyond.get("dropped"):
        return ""
    return (f"; an interval needs {need['processes']} more of its processes, about "
            f"{format_duration(float(need['seconds']))}: a --budget that much longer would measure them")


#: What the saving's interval showed (tuner/decide/stats.py's zones), after the tie margin's note.
ZONE_WORDS = {"compile": ": above zero and reaching the margin", "tie": ": inside the margin, a tie",
              "slower": ": below zero, slower than eager"}


def _between(low, high, fmt) -> str:
    """``(low to high)``, or why there is no interval (a single round of confirmation)."""
    if number(low) is None or number(high) is None:
        return "(no interval: one round)"
    return f"({fmt(low)} to {fmt(high)})"


def _signed(v) -> str:
    return "?" if not number(v) else f"{float(v):+.1f} s"


def answer_line(tuned) -> str:
    """The verdict in one line, its interval and where it holds: what the terminal says at each
    look that decides (``so far: compile with whole/inductor/default, 1.06x (1.03x-1.09x) ...``)."""
    m, on = tuned.measured, tuned.tuned_on
    head = {"compile": f"compile with {tuned.config.describe()}", "stay_eager": "stay eager"}.get(tuned.verdict,
                                                                                               "undecided")
    low, high = m.get("speedup_interval") or (None, None)
    figure = (f", {ratio(m['speedup'])} as fast as eager {_between(low, high, ratio)} at "
              f"{number(m.get('confidence')) or 0.95:.0%}" if number(m.get("speedup")) else "")
    threads, torch = text(on.get("threads")), text(on.get("torch"))
    # a part the run did not record is left out, not written as an empty ", ,"
    where = ", ".join(part for part in (threads and f"{threads} thread(s)", torch and f"torch {torch}",
                                        text(on.get("cpu") or on.get("host"))) if part)
    covered = search_words(m)
    return f"{head}{figure}{'; ' + covered if covered else ''}; holds at {where or 'a machine the run did not record'}"


def search_words(m: dict) -> str:
    """What the search covered and how the best config beyond plain compile stands against it:
    ``searched 7 of 16 configs; best beyond plain: +optimizer, 1.12x plain's steps (1.08x-1.16x),
    beats plain``, or ``none beats plain by more than 12.0 s (95%)``."""
    search = m.get("search") or {}
    if not search.get("configs_searched"):
        return ""
    of = f" of {search['configs_in_space']}" if search.get("configs_in_space") else ""
    words = f"searched {search['configs_searched']}{of} configs"
    if search.get("not_raced"):
        words += f" ({len(search['not_raced'])} of them not raced)"
    beyond = m.get("beyond_plain") or {}
    if not beyond.get("config_label"):
        return words
    low, high = beyond.get("speedup_interval") or (None, None)
    zone = {"beats": "beats plain", "ties": "ties plain", "slower": "slower than plain"}.get(
        beyond.get("zone") or "", "undecided against plain")
    words += (f"; best beyond plain: {beyond['config_label']}, {ratio(beyond['speedup'])} plain's steps "
              f"{_between(low, high, ratio)}, {zone}")
    most = number(beyond.get("most_any_saves_s"))
    if beyond.get("zone") != "beats" and most is not None:
        # configs searched but not raced have no interval: the bound is only the raced ones'
        who = "none raced" if search.get("not_raced") else "none"
        words += f"; {who} saves more than {max(0.0, most):.1f} s over plain"
    return words
