"""The verdict in words and key figures, shared by the HTML and Markdown reports."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..score import break_even_steps
from ._data import ReportData
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


def verdict(data: ReportData) -> Verdict:
    v = _verdict(data)
    m = data.tuned.measured
    if m.get("confirmed") is False:
        why = text(m.get("unconfirmed_because")) or "no confirmation recorded"
        v.sentence += (f" This verdict is unconfirmed: {why} (the search's single measurements, not re-measured "
                       "side by side with eager).")
        v.facts.insert(0, ("unconfirmed", why, "the search's single measurements"))
        if m.get("confirmation_error"):
            v.facts.append(("confirmation", "failed", text(m.get("confirmation_error"))))
    if data.hardware_warning:
        v.sentence += f" Warning: {data.hardware_warning}."
    return v


def _verdict(data: ReportData) -> Verdict:
    steps = data.scoring.steps
    eager = data.line(data.role_row("eager"), "eager")
    best = data.best_row()
    if data.compile_verdict and best is not None:
        return _compile_verdict(data, best, steps)
    eager_total = eager.total(steps) if eager else data.tuned.measured.get("total_time_s")
    facts = [("eager total", seconds(eager_total), f"over {steps:,} steps"),
             ("eager step", millis(data.scoring.eager_step_s), "")]
    if best is None:
        n_failed = len(data.failed)
        sentence = (f"No compiled config finished correctly ({n_failed} failed or did not finish; see the failures "
                    "below), so the model stays eager.")
        return Verdict("Stay eager", sentence, facts)
    line = data.line(best, text(best.get("config_label")))
    pays_off = break_even_steps(line.compile_s, data.scoring.eager_step_s, line.step_s)
    why = (f"its steps are {ratio(best.get('speedup'))} as fast as eager's, but compiling costs "
           f"{seconds(line.compile_s)}")
    if pays_off is None:
        why += ", and it never pays that back"
    else:
        why += f", which pays off only after {pays_off:,} steps"
    sentence = (f"No compiled config beats eager over the scored {steps:,} steps. The best compiled one, "
                f"{line.label}, takes {seconds(line.total(steps))}: {why}.")
    facts += [
        ("best compiled", line.label, ""),
        ("its total", seconds(line.total(steps)), f"eager {seconds(eager_total)}"),
        ("its speedup per step", ratio(best.get("speedup")), ""),
        ("its compile time", seconds(line.compile_s), ""),
        ("pays off after", "never" if pays_off is None else f"{pays_off:,} steps", f"scored: {steps:,}"),
    ]
    if data.tuned.measured.get("confirmed"):
        sentence += f" Confirmed by re-measuring: {text(data.tuned.measured.get('reason'))}."
    facts += extra_facts(data.tuned.measured, data.tuned.thread_check)
    return Verdict("Stay eager", sentence, facts)


def _compile_verdict(data: ReportData, best, steps: int) -> Verdict:
    m = data.tuned.measured
    label = text(best.get("config_label"))
    vs_plain = m.get("speedup_vs_plain_compile")
    plain = m.get("plain_compile_total_time_s")
    pays_off = m.get("break_even_steps")
    sentence = (f"{label} runs steps {ratio(m.get('speedup_vs_eager'))} as fast as eager"
                + (f" and {ratio(vs_plain)} as fast as plain torch.compile" if vs_plain else "")
                + f"; its {seconds(m.get('compile_time_s'))} compile pays off after {count(pays_off)} steps, "
                f"so over the scored {steps:,} steps it takes {seconds(m.get('total_time_s'))} "
                f"instead of eager's {seconds(m.get('eager_total_time_s'))}.")
    facts = [
        ("speedup vs eager", ratio(m.get("speedup_vs_eager")), "per step"),
        ("speedup vs plain torch.compile", ratio(vs_plain) if vs_plain else "n/a",
         "per step" if vs_plain else "plain torch.compile failed"),
        ("compile time", seconds(m.get("compile_time_s")),
         "warm (cache kept), recompiles included" + (f"; cold {seconds(m['cold_compile_time_s'])}"
                                                     if number(m.get("cold_compile_time_s")) else "")
         if data.scoring.compile_cost == "warm" else "cold, recompiles included"),
        ("step time", millis(best.get("step_time_s")), f"eager {millis(data.scoring.eager_step_s)}"),
        (f"total over {steps:,} steps", seconds(m.get("total_time_s")), f"eager {seconds(m.get('eager_total_time_s'))}"
         + (f", plain compile {seconds(plain)}" if not missing(plain) else "")),
        ("peak memory", megabytes(m.get("peak_memory_mb")) or "not measured",
         f"eager {megabytes(m.get('eager_peak_memory_mb'))}" if number(m.get("eager_peak_memory_mb")) else ""),
        ("pays off after", f"{count(pays_off)} steps", f"scored: {steps:,}"),
        ("graph breaks / recompiles", f"{count(best.get('graph_breaks')) or 0} / {count(best.get('recompiles')) or 0}",
         ""),
    ]
    facts += extra_facts(m, data.tuned.thread_check)
    return Verdict(f"Compile with {label}", sentence, facts, compile=True, label=label)


def extra_facts(m: dict, thread_check: dict | None) -> list[tuple[str, str, str]]:
    """Confirmation, start-up, regional-compile and thread-check figures, where measured."""
    facts = []
    if m.get("confirmed"):
        lo, hi = m.get("speedup_range") or (None, None)
        spread = f"speedup {ratio(lo)} to {ratio(hi)}" if lo is not None else ""
        facts.append(("confirmed", f"{m.get('confirm_rounds')} interleaved rounds in fresh processes",
                      f"{spread}; {text(m.get('reason'))}".strip("; ")))
    if number(m.get("cold_start_s")) and number(m.get("warm_start_s")):
        facts.append(("first step at start-up", f"{seconds(m['warm_start_s'])} warm",
                      f"{seconds(m['cold_start_s'])} cold; compile cache saved beside best_config.yaml "
                      f"({megabytes(m.get('compile_cache_mb'))})"))
    regional = m.get("regional_compile")
    if regional:
        facts.append(("regional compile", f"{seconds(regional['blocks_compile_s'])} (blocks)",
                      f"{seconds(regional['whole_compile_s'])} for the whole model; median of {regional['pairs']} pair(s)"))
    if thread_check:
        facts.append((f"{thread_check.get('threads')} threads at once", text(thread_check.get("verdict")),
                      text(thread_check.get("advice"))))
    return facts
