"""The verdict's figures use the compile cost the score used (``Scoring.compile_time``)."""
import math

import studies

from tuner.core.config import CompileConfig
from tuner.decide.verdict import pick_best
from tuner.study import scoring_from_study

TUNED = CompileConfig("blocks", "inductor", "default")


def warm_study(path):
    """A config whose cold compile (30 s) is long but whose warm one (2 s) is short, scored warm."""
    b = studies.Builder(path, steps=10_000).eager()
    b.study.set_user_attr("settings", {**b.study.user_attrs["settings"], "steps": 10_000, "compile_cost": "warm"})
    step = studies.EAGER_STEP / 1.25
    b.add(studies.ok_attrs(TUNED, "search", 1.25, 30.0, 190.0, compile_time_warm_s=2.0,
                           total_time_s=2.0 + 10_000 * step), cfg=TUNED)
    return b.study


def test_break_even_and_compile_time_use_the_warm_cost_when_scored_warm(tmp_path):
    study = warm_study(tmp_path / "study.db")
    scoring = scoring_from_study(study)
    tuned = pick_best(study, scoring, "cpu")
    m = tuned.measured
    assert tuned.verdict == "compile" and m["compile_cost"] == "warm"
    assert m["compile_time_s"] == 2.0 and m["cold_compile_time_s"] == 30.0
    saving = studies.EAGER_STEP - studies.EAGER_STEP / 1.25
    assert m["break_even_steps"] == math.ceil(2.0 / saving)
    assert math.isclose(m["total_time_s"], m["compile_time_s"] + 10_000 * m["step_time_ms"] / 1e3, rel_tol=1e-6)
