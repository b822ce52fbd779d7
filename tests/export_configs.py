"""The configs the export tests build each tool's block from (tests/test_export.py and
tests/test_export_titan_vllm.py)."""
from __future__ import annotations

from tuner.core.config import CompileConfig, TunedConfig

#: Configs that differ in every field accelerate carries; the expected plugin is derived from each.
CONFIGS = [
    CompileConfig(target="whole", backend="inductor", mode="max-autotune-no-cudagraphs", dynamic=True, fullgraph=True),
    CompileConfig(target="blocks", backend="aot_eager", dynamic=None),
    CompileConfig(target="blocks", backend="inductor", mode="reduce-overhead", dynamic=False),
]
IDS = ["whole-inductor-mode-dynamic-fullgraph", "blocks-aot_eager-dynamic-none", "blocks-inductor-dynamic-false"]


def tuned_dict(cfg: CompileConfig, verdict: str = "compile", **measured) -> dict:
    return TunedConfig(cfg, verdict, measured).to_dict()
