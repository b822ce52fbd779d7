"""`compile-tune export --to torchtitan|vllm`: torchtitan's own config classes and command-line
parser take the block, data-parallel degrees included; vLLM's block holds only keys (and
CUDAGraphMode names) of vLLM's own CompilationConfig, read from vLLM 0.33.0's source into
tests/data/ (vLLM needs its own CUDA torch and cannot be installed beside the CPU wheel), pins
cudagraph_mode, and names what vLLM changes beyond it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from export_configs import CONFIGS, IDS, ranked_dict, tuned_dict

from tuner.core.config import CompileConfig, TunedConfig
from tuner.export import TORCHTITAN_PROCESS_SETTINGS, VLLM_PROCESS_CHANGES, VLLM_RELEASE, export, render

#: vLLM's CompilationConfig, read from the release's own vllm/config/compilation.py
#: (tests/data/extract_vllm_config.py wrote it; the file names the release, commit and sha256).
VLLM_RECORD = json.loads((Path(__file__).parent / "data" / f"vllm-{VLLM_RELEASE}-compilation-config.json").read_text())


def _torchtitan_job():
    """A job config with torchtitan's own sections, parsed as its ConfigManager parses overrides (tyro)."""
    import dataclasses

    from torchtitan.config import CompileConfig as TitanCompile
    from torchtitan.config import ParallelismConfig, TrainingConfig
    from torchtitan.config.manager import ConfigManager

    ConfigManager()  # registers torchtitan's tyro rules

    # built with real types (this module's annotations are strings, which tyro would resolve here)
    return dataclasses.make_dataclass("Job", [
        ("compile", TitanCompile, dataclasses.field(default_factory=TitanCompile)),
        ("training", TrainingConfig, dataclasses.field(default_factory=TrainingConfig)),
        ("parallelism", ParallelismConfig, dataclasses.field(default_factory=ParallelismConfig))], kw_only=True)


@pytest.mark.parametrize("cfg", CONFIGS, ids=IDS)
def test_torchtitan_overrides_build_torchtitans_own_config_classes(cfg):
    """torchtitan 0.3's CompileConfig and TrainingConfig (kw_only, slots: an unknown field is a
    TypeError) take the block; its command line, as rendered, parses to the same values."""
    import tyro
    from torchtitan.config import CompileConfig as TitanCompile
    from torchtitan.config import TrainingConfig
    from torchtitan.config.manager import custom_registry

    block = export(tuned_dict(cfg), "torchtitan")
    compile_section, training = TitanCompile(**block["compile"]), TrainingConfig(**block["training"])
    assert compile_section.enable and compile_section.components == ["model"] and compile_section.backend == cfg.backend
    assert training.mixed_precision_param == "float32"  # torchtitan's default is bfloat16: pinned, as measured
    text, _ = render(tuned_dict(cfg), "torchtitan", source="best_config.yaml", label="x")
    job = tyro.cli(_torchtitan_job(), args=text.strip().splitlines()[-1].split(), registry=custom_registry)
    assert job.compile == compile_section and job.training.mixed_precision_param == "float32"
    with pytest.raises(TypeError):
        TitanCompile(**block["compile"], mode="max-autotune")  # what the check catches: a field torchtitan lacks


def test_torchtitan_names_the_dynamo_flags_it_sets_for_the_whole_process():
    import inspect

    from torchtitan.distributed import compile as titan_compile

    source = inspect.getsource(titan_compile.apply_compile)
    block = export(tuned_dict(CompileConfig(target="blocks", backend="inductor", fullgraph=True)), "torchtitan")
    changed = {x["setting"] for x in block["changes_measured"]}
    for name in TORCHTITAN_PROCESS_SETTINGS:  # still what the installed torchtitan sets
        assert f"torch._dynamo.config.{name} = " in source.replace("\n", " ") or name in source, name
        assert f"dynamo.{name}" in changed
    text, header = render(tuned_dict(CompileConfig(target="blocks", backend="inductor", fullgraph=True)),
                          "torchtitan", source="best_config.yaml", label="x")
    assert "CHANGES WHAT WAS MEASURED: the tool itself also sets:" in header
    stay = export(tuned_dict(CompileConfig(), verdict="stay_eager"), "torchtitan")
    from torchtitan.config import CompileConfig as TitanCompile

    assert TitanCompile(**stay["compile"]).enable is False


@pytest.mark.parametrize("cfg", CONFIGS, ids=IDS)
def test_vllm_compilation_config_holds_only_keys_of_vllms_own_class(cfg):
    text, header = render(tuned_dict(cfg), "vllm", source="best_config.yaml", label="x")
    settings = json.loads(text)
    assert VLLM_RECORD["vllm"] == VLLM_RELEASE and VLLM_RECORD["CompilationMode"]["STOCK_TORCH_COMPILE"] == "1"
    assert set(settings) <= set(VLLM_RECORD["CompilationConfig"])
    assert settings["cudagraph_mode"] in VLLM_RECORD["CUDAGraphMode"]
    graphs = "FULL" if cfg.mode in ("reduce-overhead", "max-autotune") else "NONE"  # inductor's cudagraph modes
    assert settings == {"mode": 1, "backend": cfg.backend, "cudagraph_mode": graphs}
    assert any(line.startswith("NOT CARRIED") for line in header), "every config here loses something in vLLM"


def test_vllm_names_what_mode_1_drops_and_what_vllm_changes():
    cfg = CompileConfig(backend="inductor", mode="max-autotune", options={"freezing": True}, dynamic=True)
    block = export(tuned_dict(cfg), "vllm")
    lost = {x["setting"] for x in block["not_carried"]}
    # mode 1 calls model.compile(fullgraph=True, backend=...) and nothing else (vLLM 0.33.0's model runner)
    assert {"mode", "options.freezing", "dynamic"} <= lost
    assert "inductor_compile_config" not in block["compilation_config"]
    changed = {x["setting"]: x["value"] for x in block["changes_measured"]}
    assert changed == {**{name: value for name, (value, _) in VLLM_PROCESS_CHANGES.items()}, "cudagraph_mode": "FULL"}
    assert any("fail_on_recompile" in n and "modes 2 and 3 only" in n for n in block["notes"])
    text, header = render(tuned_dict(cfg), "vllm", source="best_config.yaml", label="x")
    assert "CHANGES WHAT WAS MEASURED: the tool itself also sets:" in header
    assert any("TORCHINDUCTOR_COMPILE_THREADS=1" in line for line in header)
    graphs = export(tuned_dict(CompileConfig(backend="aot_eager", fullgraph=True)), "vllm")
    assert {x["setting"] for x in graphs["changes_measured"]} == {"TORCHINDUCTOR_COMPILE_THREADS"}


def test_torchtitan_bf16_is_fsdp2s_parameter_cast_and_says_it_is_not_autocast():
    import importlib.util

    from torchtitan.distributed import utils as titan_utils

    # torchtitan 0.3 as installed: no autocast context, FSDP2's policy on every run (the llama3 module is read,
    # not imported: importing it needs triton)
    root = Path(importlib.util.find_spec("torchtitan").submodule_search_locations[0])
    assert not hasattr(titan_utils, "maybe_enable_amp")
    assert "apply_fsdp_to_decoder(" in (root / "models" / "llama3" / "parallelize.py").read_text()
    block = export(tuned_dict(CompileConfig(target="blocks", backend="inductor", fullgraph=True, precision="bf16")),
                   "torchtitan")
    assert block["training"]["mixed_precision_param"] == "bfloat16"
    change = next(x for x in block["changes_measured"] if x["setting"] == "training.mixed_precision_param")
    assert "MixedPrecisionPolicy" in change["why"] and "autocast" in change["why"]
    assert not any("torch.autocast(dtype=torch.bfloat16) on a single device" in n for n in block["notes"])


def test_torchtitan_takes_the_ranks_as_its_own_parallelism_fields_and_names_what_it_replaces():
    import importlib.util

    import tyro
    from torchtitan.config import ParallelismConfig
    from torchtitan.config.manager import custom_registry

    # torchtitan 0.3.0 as installed: no DDP and no bucket size anywhere (replicate is FSDP2 on a replicate mesh)
    root = Path(importlib.util.find_spec("torchtitan").submodule_search_locations[0])
    source = "".join(p.read_text() for p in root.rglob("*.py"))
    assert "def apply_ddp" not in source and "bucket_cap_mb" not in source
    tuned = ranked_dict("ddp", "compile", bucket_cap_mb=100,
                        cfg=CompileConfig(target="blocks", backend="inductor", fullgraph=True))
    block = export(tuned, "torchtitan")
    assert ParallelismConfig(**block["parallelism"]).data_parallel_replicate_degree == 2
    text, header = render(tuned, "torchtitan", source="best_config.yaml", label="x")
    job = tyro.cli(_torchtitan_job(), args=text.strip().splitlines()[-1].split(), registry=custom_registry)
    assert (job.parallelism.data_parallel_replicate_degree, job.parallelism.data_parallel_shard_degree) == (2, 1)
    assert {"data_parallel.wrap", "data_parallel.optimize_ddp", "heap", "threads"} <= {
        x["setting"] for x in block["not_carried"]}
    assert "carries every setting" not in text and "export OMP_NUM_THREADS=2" in text
    fsdp = export(ranked_dict("fsdp2", nnodes=2, reshard_after_forward=True), "torchtitan")
    assert ParallelismConfig(**fsdp["parallelism"]).fsdp_reshard_after_forward == "always"
    assert fsdp["parallelism"]["data_parallel_shard_degree"] == 4
    assert not fsdp.get("changes_measured"), "the root is sharded with fully_shard's default in both"
    kept = export(ranked_dict("fsdp2", nnodes=2, reshard_after_forward=True, keep_last_block_gathered=True),
                  "torchtitan")
    assert [x["setting"] for x in kept["not_carried"] if x["setting"].startswith("data_parallel")] == [
        "data_parallel.keep_last_block_gathered"]
    assert fsdp["training"] == {"mixed_precision_param": "float32"}, "eager was measured in float32 too"


def test_vllm_pins_cudagraph_mode_from_what_the_measured_compile_ran():
    def graphs(cfg, **on):
        tuned = TunedConfig(cfg, tuned_on=on).to_dict()
        return export(tuned, "vllm")["compilation_config"]["cudagraph_mode"]

    assert graphs(CompileConfig(mode="reduce-overhead"), device="cuda") == "FULL"
    assert graphs(CompileConfig(mode="reduce-overhead"), device="cpu") == "NONE", "no CUDA graph ran on a CPU"
    assert graphs(CompileConfig(options={"triton.cudagraphs": True}), device="cuda") == "FULL"
    assert graphs(CompileConfig(backend="cudagraphs"), device="cuda") == "FULL"
    assert graphs(CompileConfig(mode="max-autotune-no-cudagraphs"), device="cuda") == "NONE"
    assert graphs(CompileConfig(target="none")) == "NONE"
    note = next(n for n in export(tuned_dict(CompileConfig()), "vllm")["notes"] if "cudagraph_mode" in n)
    assert "pinned" in note and "PIECEWISE" in note
    ranked = export(ranked_dict("ddp", "compile", cfg=CompileConfig()), "vllm")
    assert {"data_parallel", "heap", "threads"} <= {x["setting"] for x in ranked["not_carried"]}
