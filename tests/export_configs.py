"""The configs the export tests build each tool's block from (tests/test_export.py, tests/test_export_trainer.py and
tests/test_export_titan_vllm.py)."""
from __future__ import annotations

from tuner.core.config import CompileConfig, TunedConfig
from tuner.system.heap import PINNED_NOTE

#: Configs that differ in every field accelerate carries; the expected plugin is derived from each.
CONFIGS = [
    CompileConfig(target="whole", backend="inductor", mode="max-autotune-no-cudagraphs", dynamic=True, fullgraph=True),
    CompileConfig(target="blocks", backend="aot_eager", dynamic=None),
    CompileConfig(target="blocks", backend="inductor", mode="reduce-overhead", dynamic=False),
]
IDS = ["whole-inductor-mode-dynamic-fullgraph", "blocks-aot_eager-dynamic-none", "blocks-inductor-dynamic-false"]


def tuned_dict(cfg: CompileConfig, verdict: str = "compile", **measured) -> dict:
    return TunedConfig(cfg, verdict, measured).to_dict()


def ranked_dict(wrap: str, verdict: str = "stay_eager", *, device: str = "cpu", nproc: int = 2, nnodes: int = 1,
                heap: bool = True, threads: int | None = 2, block_class: str | None = None,
                cfg: CompileConfig | None = None, **settings) -> dict:
    """A best_config.yaml mapping as a run on ``nproc`` x ``nnodes`` ranks writes it (tuner/decide/verdict.py):
    the wrap and its settings in the config, the ranks, heap and threads under ``tuned_on``."""
    cfg = cfg or CompileConfig(target="none")
    cfg = CompileConfig.from_dict({**cfg.to_dict(), "data_parallel": {"wrap": wrap, **settings}})
    on = {"device": device, "nproc": nproc, "data_parallel": wrap, **({"nnodes": nnodes} if nnodes > 1 else {}),
          **({"heap": PINNED_NOTE} if heap else {}), **({"threads": threads} if threads else {}),
          **({"block_class": block_class} if block_class else {})}
    return TunedConfig(cfg, verdict, {}, on).to_dict()


def expected_plugin(cfg: CompileConfig) -> dict:
    mode = cfg.mode if cfg.backend == "inductor" and cfg.mode else "default"
    return {"backend": cfg.backend.upper(), "mode": mode, "fullgraph": cfg.fullgraph, "dynamic": cfg.dynamic,
            "use_regional_compilation": cfg.target == "blocks"}


def plugin_fields(plugin) -> dict:
    return {"backend": plugin.backend.value, "mode": plugin.mode, "fullgraph": plugin.fullgraph,
            "dynamic": plugin.dynamic, "use_regional_compilation": plugin.use_regional_compilation}
