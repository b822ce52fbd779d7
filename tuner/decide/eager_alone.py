"""What the processes of eager alone say (the first rounds' pinned and as-started processes,
tuner/decide/race.py): the heap pin's own gain, and the spread of a fresh process of one config.
Side figures of the decision (tuner/decide/evidence.py): no verdict rests on them."""
from __future__ import annotations

import math
import statistics

from ..core.config import EAGER
from . import stats
from .records import AS_STARTED, Record

#: The fewest degrees of freedom at which the heap pin's own gain is stated with an interval. Paired
#: (every CPU run with the heap pinned), eager alone and eager as started run once a round in the
#: first two rounds only (rounds.EAGER_ALONE_ROUNDS): four processes, two rounds, one degree of
#: freedom. There the 95 % t quantile is 12.7 (4.30 at 2 df, 2.78 at 4, against the normal's 1.96),
#: and a spread from one residual lies anywhere from 0.45 to 32 times the truth (95 %): the README
#: example read "0.96x (0.35x to 2.68x)", the zoo's GPT-2 training 1.17x (1.17x-1.17x), a
#: best_config.yaml [0.013, 101.9]; valid over repeated runs, of no use for this one. Processes
#: enough to state it would come out of the candidates' budget, and no verdict rests on the gain
#: (apply_config pins the heap because every figure was measured pinned: tuner/system/heap.py,
#: ``PIN_REASON``), so below this its interval is withheld and the reason said.
HEAP_GAIN_DF = 4


def heap_gain(records: dict[str, Record], confidence: float) -> dict | None:
    """Eager pinned against eager as a user's process starts: the pin's own gain, its degrees of
    freedom, and its interval where they reach :data:`HEAP_GAIN_DF` (``withheld`` says why not)."""
    started, eager = records.get(AS_STARTED), records[EAGER.key()]
    if started is None or not started.steps or not eager.steps:
        return None
    model = stats.fit(stats.Sample(r.key, rnd, s) for r in (eager, started) for rnd, s in r.steps)
    gain = model.speedup(AS_STARTED, eager.key, confidence)
    finite = [v if math.isfinite(v) else None for v in (gain.low, gain.high)]
    heap = {"gain": gain.estimate, "interval": finite, "df": model.df, "confidence": confidence,
            "eager_as_started_step_s": statistics.fmean(s for _, s in started.steps), "processes": started.processes,
            "pinned_processes": len(eager.steps)}
    if model.df < HEAP_GAIN_DF:
        heap.update(interval=[None, None], withheld=(
            f"{len(eager.steps)} process(es) of eager pinned and {len(started.steps)} as started give "
            f"{model.df} degree(s) of freedom, fewer than the {HEAP_GAIN_DF} an interval is stated at; the race "
            "spends its processes on the candidates, and no verdict rests on this gain"))
    return heap


def process_spread(records: dict[str, Record]) -> float | None:
    """The spread between processes of eager alone (pinned and, apart, as started), rounds'
    effects removed: what a fresh process of one config varies by, whether or not the configs'
    own processes were paired."""
    alone = [records[k] for k in (EAGER.key(), AS_STARTED) if k in records]
    model = stats.fit(sample for r in alone for sample in r.samples(EAGER.key()))
    return model.sigma if model.df >= 1 else None
