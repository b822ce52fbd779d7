"""Each candidate against plain ``torch.compile()``: what a config beyond plain saves over it, with
its interval and its zone, decided as the verdict against eager is.

Plain compile is the yardstick every run races from its start (tuner/decide/race.py): a tuned
config is worth recommending only where it beats plain compile by more than the tie margin,
compile costs included, since plain compile is what a user gets for one line. Where processes
are paired each candidate's are timed beside eager, so plain compile against a candidate is the
difference of two independent paired contrasts, ``log(eager / plain) - log(eager / candidate)``
(``stats.Contrast.minus``: Welch and Satterthwaite's degrees of freedom), and the saving over
plain compile is ``steps x P x (1 - 1/speedup) - (compile - plain's compile)`` (``P``: plain
compile's mean step). Three zones, as against eager (``stats.zone``), with the margin a share
of plain compile's total:

- ``beats``: the saving's interval lies above zero and reaches the margin;
- ``ties``: it lies inside the margin either way (plain compile, the simpler, is as good);
- ``slower``: it lies below zero and is no tie;
- None: undecided; the race measures on while the budget has room.

Each candidate's claim against plain compile is taken at the candidate's own look confidence
(its share of the error rate: ``stats.arrival_share``).

**Beside plain, or through eager.** A race process of a candidate steps plain compile too, as a
third side with eager (tuner/measure/timing.py), so ``log(plain / candidate)`` is measured in each
of them, paired, each process's own effect cancelling as eager's does against a candidate
(``Record.rival_samples``). Once such processes span :data:`evidence.OWN_ROUNDS` rounds the
comparison is theirs alone (``direct``): one contrast's variance. Before that (a candidate that
joined with its search trial, timed beside eager only) it goes through eager, two independent
contrasts' variances summed, about 1.4 times as wide for the same processes. The row says which
(``compared``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..core.config import PLAIN_COMPILE
from . import stats
from .records import Record

#: ``stats.zone``'s names, as a comparison with plain compile says them.
ZONES = {"compile": "beats", "tie": "ties", "slower": "slower"}


@dataclass
class AgainstPlain:
    """Every weighed candidate beyond plain compile against it, at one look."""

    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Config key -> what the decision and the report keep (``saving_s``, its interval, ``zone`` ...)."""
    savings: dict[str, stats.Interval] = field(default_factory=dict)
    zones: dict[str, str | None] = field(default_factory=dict)
    margin_s: float = 0.0

    @classmethod
    def weigh(cls, contrasts: dict[str, stats.Contrast], costs: dict[str, stats.Cost], levels: dict[str, float],
              labels: dict[str, str], ready: set[str], steps: int, e_step: float, e_se_log: float, base_df: int,
              tie_margin: float, direct: dict[str, stats.Contrast] | None = None) -> AgainstPlain:
        """``contrasts``: key -> ``log(eager / key)``, plain compile's among them; ``ready``: the keys
        with rounds enough of their own for an interval (plain compile's too, or none has one);
        ``direct``: key -> ``log(plain / key)`` from its processes that stepped plain compile beside
        it, where they span rounds enough (then the comparison is theirs)."""
        plain = PLAIN_COMPILE.key()
        base = contrasts[plain]
        plain_step = e_step / math.exp(base.d)
        out = cls(margin_s=tie_margin * (costs[plain].compile_s + steps * plain_step))
        # plain compile's level is eager's times its speedup: both uncertainties are in it
        base_se_log = math.sqrt(e_se_log ** 2 + base.se ** 2)
        for key, contrast in contrasts.items():
            if key == plain:
                continue
            beside = (direct or {}).get(key)
            over = beside or contrast.minus(base)  # log(plain's step / key's step)
            level = levels[key]
            saving = stats.saving_of(over, steps, plain_step, base_se_log, costs[key], level, base_cost=costs[plain],
                                     base_df=base_df)
            speedup = over.speedup(level)
            if key not in ready or plain not in ready:
                saving = _unbounded(saving)
                speedup = _unbounded(speedup)
            zone = ZONES.get(stats.zone(saving, out.margin_s) or "")
            out.savings[key], out.zones[key] = saving, zone
            out.rows[key] = {"config_label": labels[key], "zone": zone, "saving_s": saving.estimate,
                             "saving_interval_s": _finite(saving), "speedup": speedup.estimate,
                             "speedup_interval": _finite(speedup), "margin_s": out.margin_s,
                             "look_confidence": level, "df": round(over.df, 1),
                             "compared": "beside plain" if beside else "through eager"}
        return out

    def decision_fields(self, dropped: dict[str, str]) -> dict[str, Any]:
        """What the decision keeps: every row, the best beyond plain compile by its estimate, and
        the most any could still save over it (the upper end of every interval)."""
        if not self.rows:
            return {}
        rows = {k: {**row, **({"dropped": dropped[k]} if dropped.get(k) else {})} for k, row in self.rows.items()}
        best = max(rows, key=lambda k: self.savings[k].estimate)
        highs = [s.high for s in self.savings.values()]
        return {"against_plain": rows, "beyond_plain": {"key": best, **rows[best]},
                "beyond_plain_most_s": max(highs) if all(math.isfinite(h) for h in highs) else None,
                "undecided_against_plain": [k for k, z in self.zones.items() if z is None and not dropped.get(k)]}

    def words(self, key: str) -> str:
        """``saves 210.0 s over plain torch.compile (+95.0 to +330.0 s), 1.12x its steps: beats it``."""
        s, row = self.savings[key], self.rows[key]
        sign = "saves" if s.estimate >= 0 else "loses"
        span = f" ({s.low:+.1f} to {s.high:+.1f} s)" if math.isfinite(s.low) else " (no interval yet)"
        zone = {"beats": "beats it", "ties": f"ties it within {self.margin_s:.1f} s",
                "slower": "slower than it", None: "not decided against it"}[row["zone"]]
        return (f"{sign} {abs(s.estimate):.1f} s over plain torch.compile{span}, {row['speedup']:.2f}x its steps: "
                f"{zone}")


def _unbounded(i: stats.Interval) -> stats.Interval:
    return stats.Interval(i.estimate, -math.inf, math.inf, i.confidence)


def _finite(i: stats.Interval) -> list[float | None]:
    return [v if math.isfinite(v) else None for v in (i.low, i.high)]


def beside_plain(ok: list[Record], own_rounds: int) -> dict[str, stats.Contrast]:
    """``log(plain / key)`` of each candidate whose processes stepped plain compile beside it over
    ``own_rounds`` rounds or more (``evidence.OWN_ROUNDS``): its own paired fit, plain compile's
    level cancelling in each process (the module's text)."""
    plain = PLAIN_COMPILE.key()
    out = {}
    for r in ok:
        if r.key != plain and r.rival_rounds >= own_rounds:
            model = stats.fit(r.rival_samples(plain))
            if model.df >= 1:
                out[r.key] = model.contrast(plain, r.key)
    return out
