"""The error rates of the confirmation race (tuner/decide/confirm.py) on simulated processes of
known spread, 400 races a case: the table of docs/statistics.md ("Error rates, measured").

tests/test_stats.py asserts the same cases on fewer races; this prints each case's verdict shares,
the stated intervals' coverage and the mean rounds, so the table can be rebuilt::

    python benchmarks/error_rates.py [--races 400]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_stats import OTHER, T5_LIKE, TUNED, coverage, race  # noqa: E402

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


def measure(kw: dict, races: int) -> str:
    counts: dict[str, int] = {}
    rounds = 0
    for seed in range(races):
        d, _ = race(seed=seed, **kw)
        counts[d["verdict"]] = counts.get(d["verdict"], 0) + 1
        rounds += d.get("rounds_done") or 0
    shares = ", ".join(f"{v} {n / races:.2%}" for v, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    held = coverage(kw["true"], runs=races, **{k: v for k, v in kw.items() if k != "true"})
    return f"{shares}; intervals hold {held:.2%}; {rounds / races:.1f} rounds on average"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--races", type=int, default=400)
    races = p.parse_args().races
    for name, kw in CASES:
        print(f"{name}: {measure(kw, races)}", flush=True)


if __name__ == "__main__":
    main()
