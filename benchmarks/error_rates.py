"""The error rates of the confirmation race (tuner/decide/confirm.py) on simulated processes of
known spread, 400 races a case: the table of docs/statistics.md ("Error rates, measured").

tests/test_stats.py and tests/test_error_edges.py assert the same cases on fewer races; this
prints each case's verdict shares (stay eager split by its zone: a tie or slower), the stated
intervals' coverage, the mean rounds and, where a case names its false decision, how many races
made it with its 95 % interval (Clopper-Pearson), so the table can be rebuilt::

    python benchmarks/error_rates.py [--races 400] [--only SUBSTRING] [--first-seed 0] [--confidence 0.95]

The tests hold each rate two-sided around the rate measured here on seeds they do not use
(``--first-seed 10000``), and ``--confidence 0.90`` or ``0.999`` mis-sets the race's rule (the
confidence its intervals hold at together), which the tests' checks must then reject.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from simulated_races import (  # noqa: E402
    A_A,
    OTHER,
    T5_LIKE,
    TUNED,
    binomial_interval,
    compile_or_slower,
    holds,
    race,
    rule,
    saving_null,
)

from tuner.core.config import PLAIN_COMPILE  # noqa: E402

PLAIN, TUNED_KEY, OTHER_KEY = PLAIN_COMPILE.key(), TUNED.key(), OTHER.key()
NOTHING = {PLAIN: 1.0, TUNED_KEY: 1.0}
#: The zoo's BERT server at 6962d02 (docs/zoo.md, measurement 6): three candidates at 1.016x,
#: 1.05x and 1.086x, 62 s of compile, eager's total 2,826 s, processes 3.7 % apart and 3.6 % once
#: paired; its --budget fitted 6 of 18 rounds.
BERT_LIKE = dict(true={PLAIN: 1.016, TUNED_KEY: 1.05, OTHER_KEY: 1.086}, finalists=(TUNED, OTHER), spread=0.037,
                 inner=0.036, compile_s=62.0, steps=282_600, paired=True)

#: The zoo's Llama-style training at ab21535 (docs/zoo.md, measurement 7): plain compile about
#: 1.06x (confirmed 1.05x, re-measured 1.07x), ~60 s of compile, eager's total ~5,900 s, processes
#: 4 % apart, 1.4 % once paired in run 1 and 2.8 % in run 2 (``inner`` is each side's own noise:
#: the paired ratio's is sqrt(2) times it). Its --budget of 13m fitted about 15 confirmation
#: processes; 17m fits about 24.
LLAMA_LIKE = dict(true={PLAIN: 1.06}, finalists=(), spread=0.04, compile_s=60.0, steps=590_000, paired=True,
                  heap_gain=1.2)

COVER = {PLAIN: 1.05, TUNED_KEY: 1.25}


def said(verdict: str, zone: str | None = None) -> Callable[[dict], bool]:
    return lambda d: d["verdict"] == verdict and (zone is None or d.get("zone") == zone)


def beats_plain(d: dict) -> bool:
    """The finalist chosen though plain compile was itself proven: said to beat plain compile."""
    plain = next(c for c in d["candidates"] if c["config_label"] == PLAIN_COMPILE.describe())
    return d.get("choice") == TUNED.to_dict() and plain.get("zone") == "compile"


def chosen_over_plain(d: dict) -> bool:
    return d.get("choice") == TUNED.to_dict()


CASES = [
    ("every config saves nothing, 5 % spread", dict(true=NOTHING, spread=0.05)),
    ("true 1.10x, 5 % spread, no compile cost", dict(true={PLAIN: 1.10, TUNED_KEY: 1.10}, spread=0.05)),
    ("a tie (finalist at eager's speed, plain 1 % slower), 1 % spread", dict(true={PLAIN: 0.99, TUNED_KEY: 1.0},
                                                                             spread=0.01)),
    ("true 1.30x, 20 % spread", dict(true={PLAIN: 1.30, TUNED_KEY: 1.30}, spread=0.20)),
    ("intervals: 1.05x and 1.25x, 8 % spread", dict(true={PLAIN: 1.05, TUNED_KEY: 1.25}, spread=0.08)),
    ("cut at round 4 of 18: every config saves nothing, 5 % spread", dict(true=NOTHING, spread=0.05, cut=4)),
    ("cut at round 4: intervals, 1.05x and 1.25x, 8 % spread", dict(true={PLAIN: 1.05, TUNED_KEY: 1.25}, spread=0.08,
                                                                   cut=4)),
    ("paired: every config saves nothing, 15 % apart, 3 % once paired", dict(true=NOTHING, spread=0.15, inner=0.03,
                                                                            paired=True)),
    ("paired, cut at round 4: every config saves nothing", dict(true=NOTHING, spread=0.15, inner=0.03, paired=True,
                                                                cut=4)),
    ("paired: T5-small as the zoo measured it", dict(T5_LIKE, paired=True)),
    ("unpaired: T5-small as the zoo measured it", dict(T5_LIKE)),
    ("paired: intervals, 1.05x and 1.25x, 15 % apart", dict(true={PLAIN: 1.05, TUNED_KEY: 1.25}, spread=0.15,
                                                            inner=0.03, paired=True)),
    ("BERT server as the zoo measured it, cut at round 6", dict(BERT_LIKE, cut=6)),
    ("BERT server as the zoo measured it, 18 rounds", dict(BERT_LIKE)),
    *((f"Llama-style training, {paired:.1%} once paired, {n} processes (--budget {b})",
       dict(LLAMA_LIKE, inner=paired / 2 ** 0.5, processes=n))
      for paired in (0.014, 0.028) for n, b in ((15, "13m"), (24, "17m"))),
]


#: Where compiling is known to be wrong, and what the race must not say: a case name -> (the
#: race's settings, {false decision: its test}, the true saving or None).
EDGES: list[tuple[str, dict, dict[str, Callable[[dict], bool]], float | None]] = [
    *((f"exact: eager against itself, {what}: no tie margin, one candidate, 8 rounds", dict(A_A, **kw),
       {"compile or slower": compile_or_slower}, None)
      for what, kw in (("paired, three processes a round", {}), ("paired, cut at round 4", dict(cut=4)),
                       ("unpaired, 5 % spread", dict(paired=False, per_round=1, spread=0.05, inner=0.0)),
                       ("paired, Student t (3 df)", dict(tails=3)),
                       ("paired, one compiled side 30 % slow", dict(hiccup=1.3)),
                       ("unpaired, one process 30 % slow", dict(paired=False, per_round=1, spread=0.05, inner=0.0,
                                                                outlier=1.3)))),
    *((f"exact: saving-null {s}x, one candidate, no tie margin, paired, 8 rounds",
       dict(saving_null(s), finalists=(), tie_margin=0.0, per_round=3, rounds=8),
       {"compile or slower": compile_or_slower}, 0.0) for s in (1.05, 1.25)),
    *((f"saving-null: {s}x whose compile eats its saving, cold compiles {c:.0%} apart, warm 1.5 %, paired 1.4 %",
       {**saving_null(s), "cold": c}, {"compile": said("compile")}, 0.0)
      for s, c in ((1.05, 0.05), (1.05, 0.03), (1.25, 0.05))),
    ("saving-null: 1.05x, unpaired, 5 % spread", dict(saving_null(1.05), paired=False, spread=0.05, inner=0.0),
     {"compile": said("compile")}, 0.0),
    *((f"{what}: every config saves nothing, 5 % spread", dict(true=NOTHING, spread=0.05, **noise),
       {"compile": said("compile")}, None)
      for what, noise in (("Student t (3 df)", dict(tails=3)), ("one process 30 % slow", dict(outlier=1.3)))),
    *((f"{what}, paired: every config saves nothing, 15 % apart, 3 % once paired",
       dict(true=NOTHING, spread=0.15, inner=0.03, paired=True, **noise), {"compile": said("compile")}, None)
      for what, noise in (("Student t (3 df)", dict(tails=3)), ("one process 30 % slow", dict(outlier=1.3)))),
    *((f"{what}: intervals, 1.05x and 1.25x, 8 % spread", dict(true=COVER, spread=0.08, **noise), {}, None)
      for what, noise in (("Student t (3 df)", dict(tails=3)), ("one process 30 % slow", dict(outlier=1.3)))),
    ("A/A: plain compile is eager under another name (1.0x, no compile), paired 15 %/3 %",
     dict(true={PLAIN: 1.0}, finalists=(), spread=0.15, inner=0.03, paired=True),
     {"compile or slower": compile_or_slower, "compile": said("compile"), "slower": said("stay_eager", "slower")},
     None),
    ("A/A: the same, unpaired, 5 % spread", dict(true={PLAIN: 1.0}, finalists=(), spread=0.05),
     {"compile or slower": compile_or_slower, "compile": said("compile"), "slower": said("stay_eager", "slower")},
     None),
    ("A/A: the finalist is plain compile again (1.2x, 20 s compile), 5 % spread",
     dict(true={PLAIN: 1.2, TUNED_KEY: 1.2}, spread=0.05, compile_s=20.0, cold=0.05, warm=0.015),
     {"said to beat plain compile": beats_plain, "chosen over plain compile": chosen_over_plain}, None),
]


def measure(kw: dict, races: int, false: dict[str, Callable[[dict], bool]] | None = None,
            saving: float | None = None, first: int = 0) -> str:
    counts: dict[str, int] = {}
    rounds = held = 0
    wrong = dict.fromkeys(false or {}, 0)
    for seed in range(first, first + races):
        d, _ = race(seed=seed, **kw)
        v = d["verdict"] + (f" ({d['zone']})" if d["verdict"] == "stay_eager" and d.get("zone") else "")
        counts[v] = counts.get(v, 0) + 1
        rounds += d.get("rounds_done") or 0
        held += holds(d, kw["true"], saving)
        for name, test in (false or {}).items():
            wrong[name] += test(d)
    shares = ", ".join(f"{v} {n / races:.2%}" for v, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    errs = "".join(f"; {name}: {n} of {races}, {n / races:.2%} ({_pct(binomial_interval(n, races))})"
                   for name, n in wrong.items())
    what = "intervals hold" if saving is None else "intervals (speedup and saving) hold"
    return (f"{shares}{errs}; {what} {held / races:.2%} ({_pct(binomial_interval(held, races))}); "
            f"{rounds / races:.1f} rounds on average")


def _pct(interval: tuple[float, float]) -> str:
    return f"{interval[0]:.2%}-{interval[1]:.2%}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--races", type=int, default=400)
    p.add_argument("--only", default="", help="run only the cases whose name contains this")
    p.add_argument("--first-seed", type=int, default=0, help="the seed of the first race [0]")
    p.add_argument("--confidence", type=float, default=0.95,
                   help="the confidence the race's intervals hold at together: 0.95 is the rule, another mis-sets it")
    args = p.parse_args()
    first = args.first_seed
    print(f"{args.races} races a case, seeds {first}-{first + args.races - 1}, rule at {args.confidence:.1%}",
          flush=True)
    with rule(args.confidence):
        for name, kw in CASES:
            if args.only in name:
                print(f"{name}: {measure(kw, args.races, first=first)}", flush=True)
        for name, kw, false, saving in EDGES:
            if args.only in name:
                print(f"{name}: {measure(kw, args.races, false, saving, first)}", flush=True)


if __name__ == "__main__":
    main()
