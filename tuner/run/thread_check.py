"""The thread check, from the tuner's side: run the chosen config from N threads at once in a
fresh process (tuner/measure/threads.py has the why and the how) and say what was found.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from ..core.spec import TrialSpec
from ..isolation.isolated import run_isolated
from ..runtime.apply import coerce_config


def check_threads(workload_path: str, config, threads: int = 4, *, device: str = "cpu",
                  torch_threads: int = 1, timeout: float = 900.0, work_dir=None) -> dict[str, Any]:
    """Run the thread check in a fresh process; returns the findings with a ``verdict``.

    Example:
        >>> found = tuner.check_threads("examples/mlp.py", "results/mlp/best_config.yaml", threads=4)  # doctest: +SKIP
        >>> found["verdict"]  # doctest: +SKIP
        'safe'
    """
    cfg = coerce_config(config)
    spec = TrialSpec(workload=str(Path(workload_path).resolve()), config=cfg.to_dict(), device=device,
                     threads=torch_threads, mode="threads", check_threads=threads)
    with tempfile.TemporaryDirectory(prefix="compile-tune-threads-") as tmp:
        result = run_isolated(spec, timeout=timeout, work_dir=Path(work_dir or tmp))
    if result.get("status") != "ok":
        fail = result.get("failure") or {}
        return {"threads": threads, "verdict": "unsafe", "advice": f"the check failed: {fail.get('category')}",
                "examples": [fail.get("raw", "")[:300]]}
    return result["thread_check"]


def format_thread_check(found: dict[str, Any]) -> str:
    line = f"thread check ({found.get('threads')} threads at once, one model object): {found.get('verdict')}"
    if "calls" in found:
        line += (f" - {found['calls']} calls, {found['mismatches']} mismatches, {found['errors']} errors, "
                 f"{found['frames_compiled']} frame compiles for {found['distinct_input_shapes']} input shape(s)")
    lines = [line, f"  {found.get('advice', '')}"]
    lines += [f"  e.g. {e}" for e in found.get("examples", [])[:3]]
    return "\n".join(lines)
