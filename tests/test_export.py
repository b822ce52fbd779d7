"""`compile-tune export`: each tool's block loaded by that tool's own code where it is installed
(accelerate's config file by its ClusterConfig and `accelerate launch`, its TorchDynamoPlugin,
inductor's environment variables; HF TrainingArguments and the Trainer in
tests/test_export_trainer.py, torchtitan and vLLM in tests/test_export_titan_vllm.py); what is not
carried is named, on the text a user pastes, for one process and for many ranks; best_config.yaml
holds the blocks under `exports:`; the CLI; the accelerate example."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
import yaml
from conftest import ROOT
from export_configs import CONFIGS, IDS, expected_plugin, plugin_fields, ranked_dict, tuned_dict

from tuner.core.config import CompileConfig, TunedConfig
from tuner.export import (
    ACCELERATE_BACKENDS,
    TARGETS,
    export,
    exports,
    render,
)
from tuner.export.best_config import load_tuned_config, save_tuned_config
from tuner.export.parallelism import ACCELERATE_DDP_DEFAULTS
from tuner.system.heap import ENV as HEAP_ENV

accelerate = pytest.importorskip("accelerate")
from accelerate.utils import DynamoBackend, TorchDynamoPlugin  # noqa: E402

# --------------------------------------------------------------------------- accelerate


def test_accelerate_backend_list_is_the_installed_accelerates():
    assert set(ACCELERATE_BACKENDS) == {b.value.lower() for b in DynamoBackend} - {"no"}


@pytest.mark.parametrize("cfg", CONFIGS, ids=IDS)
def test_accelerate_plugin_and_env_build_the_tuned_plugin_in_accelerates_own_code(cfg, clean_env):
    block = export(tuned_dict(cfg), "accelerate")
    assert plugin_fields(TorchDynamoPlugin(**block["plugin"])) == expected_plugin(cfg)
    for name, value in block["env"].items():
        clean_env.setenv(name, value)
    assert set(block["unset"]).isdisjoint(os.environ)
    assert plugin_fields(TorchDynamoPlugin()) == expected_plugin(cfg)


def test_accelerate_launch_with_the_exported_dynamo_config_gives_the_tuned_plugin(tmp_path, clean_env):
    cfg = CONFIGS[0]
    text, _ = render(tuned_dict(cfg), "accelerate", source="best_config.yaml", label="x")
    config_file = tmp_path / "accelerate.yaml"
    # The smallest accelerate config file around the exported section.
    config_file.write_text(yaml.safe_dump({"compute_environment": "LOCAL_MACHINE", "distributed_type": "NO",
                                           "num_processes": 1, "use_cpu": True, "mixed_precision": "no",
                                           **yaml.safe_load(text)}))
    script = tmp_path / "show.py"
    script.write_text("import json\nfrom accelerate.utils import TorchDynamoPlugin\np = TorchDynamoPlugin()\n"
                      "print(json.dumps({'backend': p.backend.value, 'mode': p.mode, 'fullgraph': p.fullgraph, "
                      "'dynamic': p.dynamic, 'use_regional_compilation': p.use_regional_compilation}))\n")
    proc = subprocess.run([sys.executable, "-m", "accelerate.commands.accelerate_cli", "launch", "--config_file",
                           str(config_file), str(script)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == expected_plugin(cfg)


def test_accelerate_launch_keeps_dynamic_none_and_names_the_regional_difference(tmp_path, clean_env):
    text, _ = render(tuned_dict(CONFIGS[1]), "accelerate", source="best_config.yaml", label="x")
    assert "dynamo_use_dynamic" not in yaml.safe_load(text)["dynamo_config"]
    for name, value in launched_env(text, tmp_path).items():
        clean_env.setenv(name, value)
    assert TorchDynamoPlugin().dynamic is None, "accelerate launch leaves ACCELERATE_DYNAMO_USE_DYNAMIC unset"
    lost = {x["setting"]: x for x in export(tuned_dict(CONFIGS[1]), "accelerate")["not_carried"]}
    assert set(lost) == {"target"} and "ran the rest eagerly" in lost["target"]["why"]


def launched_env(text: str, tmp_path, script: str = "train.py") -> dict[str, str]:
    """The ACCELERATE_* and FSDP_* variables `accelerate launch --config_file FILE` gives the
    processes it starts, from accelerate's own argument handling (no process is started)."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env, prepare_simple_launcher_cmd_env

    config_file = tmp_path / "accelerate.yaml"
    config_file.write_text(text)
    args, _, _ = _validate_launch_command(launch_command_parser().parse_args(["--config_file", str(config_file),
                                                                             script]))
    env = prepare_multi_gpu_env(args) if args.use_fsdp or args.multi_gpu else prepare_simple_launcher_cmd_env(args)[1]
    env["num_processes"] = str(args.num_processes)
    return {k: v for k, v in env.items() if k.startswith(("ACCELERATE_", "FSDP_")) or k == "num_processes"}


def cluster_config(text: str, tmp_path):
    """The file as accelerate reads it: ClusterConfig refuses a key it does not have."""
    from accelerate.commands.config.config_args import ClusterConfig

    path = tmp_path / "accelerate.yaml"
    path.write_text(text)
    return ClusterConfig.from_yaml_file(str(path))


# --------------------------------------------------------------------------- many ranks and the environment


@pytest.mark.parametrize("tuned", [*(tuned_dict(c) for c in CONFIGS), ranked_dict("ddp", bucket_cap_mb=100),
                                   ranked_dict("fsdp2", device="cuda", block_class="Block")],
                         ids=[*IDS, "ddp-cpu", "fsdp2-cuda"])
def test_the_accelerate_file_holds_only_keys_of_accelerates_own_classes(tuned, tmp_path):
    from accelerate.commands.launch import launch_command_parser

    text, _ = render(tuned, "accelerate", source="best_config.yaml", label="x")
    loaded = cluster_config(text, tmp_path)  # a key ClusterConfig lacks is a ValueError
    data = yaml.safe_load(text)
    assert loaded.num_processes == data["num_processes"] and loaded.distributed_type.value == data["distributed_type"]
    options = {a.dest for a in launch_command_parser()._actions}
    assert set(data["dynamo_config"]) <= options and set(data.get("fsdp_config", {})) <= options


def test_a_two_rank_ddp_accelerate_export_shows_the_processes_and_names_the_bucket_and_heap(tmp_path):
    tuned = ranked_dict("ddp", bucket_cap_mb=100, threads=1)
    text, _ = render(tuned, "accelerate", source="best_config.yaml", label="x")
    data = yaml.safe_load(text)
    assert (data["num_processes"], data["num_machines"], data["distributed_type"]) == (2, 1, "MULTI_CPU")
    assert "carries every setting" not in text
    lost = text[text.index("# NOT CARRIED"):]
    for line in ("data_parallel.bucket_cap_mb=100", "DistributedDataParallelKwargs(bucket_cap_mb=100)", "heap=pinned",
                 *(f"export {k}={v}" for k, v in HEAP_ENV.items()), "threads=1", "export OMP_NUM_THREADS=1",
                 "processes=2", "ACCELERATE_USE_CPU=true torchrun --nproc_per_node 2 train.py"):
        assert line in lost, line
    gpu = ranked_dict("ddp", device="cuda", heap=False, threads=None)  # bucket 25: accelerate's default
    block = export(gpu, "accelerate")
    assert not block["not_carried"] and block["config_file"]["distributed_type"] == "MULTI_GPU"
    assert launched_env(render(gpu, "accelerate", source="b", label="x")[0], tmp_path)["num_processes"] == "2"


def test_accelerates_ddp_defaults_are_the_installed_accelerates():
    from accelerate.utils import DistributedDataParallelKwargs

    kwargs = DistributedDataParallelKwargs()
    assert {k: getattr(kwargs, k) for k in ACCELERATE_DDP_DEFAULTS} == ACCELERATE_DDP_DEFAULTS


def test_accelerate_fsdp2_reaches_accelerates_plugin_with_the_block_class_or_names_it(tmp_path, clean_env):
    from accelerate.utils import FullyShardedDataParallelPlugin

    tuned = ranked_dict("fsdp2", device="cuda", block_class="Block", reshard_after_forward=False, heap=False,
                        threads=None)
    text, _ = render(tuned, "accelerate", source="best_config.yaml", label="x")
    for name, value in launched_env(text, tmp_path).items():
        clean_env.setenv(name, value)
    plugin = FullyShardedDataParallelPlugin()
    assert (plugin.fsdp_version, plugin.reshard_after_forward, plugin.transformer_cls_names_to_wrap) == (
        2, False, ["Block"])
    assert "# NOT CARRIED" not in text and "carries every setting" not in text  # accelerate 1.14's extra units
    unknown = export(ranked_dict("fsdp2", device="cuda", heap=False, threads=None), "accelerate")
    lost = {x["setting"]: x for x in unknown["not_carried"]}
    assert lost["fsdp_transformer_layer_cls_to_wrap"]["fix"] == ["fsdp_transformer_layer_cls_to_wrap: BlockClassName"]
    bf16 = ranked_dict("fsdp2", "compile", device="cuda", cfg=CompileConfig(target="blocks", precision="bf16"))
    assert "fsdp mixed precision policy" in {x["setting"] for x in export(bf16, "accelerate")["changes_measured"]}


@pytest.mark.parametrize("target", ["accelerate", "hf-trainer"])
def test_fsdp2_exports_name_the_root_reshard_with_the_line_that_restores_it_and_never_carry_every_setting(target):
    def changes(reshard: bool) -> str:
        tuned = ranked_dict("fsdp2", device="cuda", block_class="Block", reshard_after_forward=reshard, heap=False,
                            threads=None)
        text, _ = render(tuned, target, source="best_config.yaml", label="x")
        assert "carries every setting" not in text
        return text[text.index("# CHANGES WHAT WAS MEASURED"):text.index("# lossless")]

    resharded = changes(True)
    assert "- root reshard_after_forward=True: before accelerate 1.14" in resharded
    restore = {"accelerate": ["#       model.set_reshard_after_forward(False, recurse=False)  # after model = "
                              "accelerator.prepare(model)"],
               "hf-trainer": ["#       class KeepGathered(TrainerCallback):  # Trainer(..., callbacks=["
                              "KeepGathered()])",
                              "#               model.set_reshard_after_forward(False, recurse=False)"]}[target]
    assert all(line + "\n" in resharded for line in restore), resharded
    assert "- input embeddings reshard_after_forward=True: from accelerate 1.14" in resharded
    kept = changes(False)  # the root is kept by every release; accelerate 1.14's extra units remain
    assert "root reshard_after_forward" not in kept and "set_reshard_after_forward" not in kept
    assert "- fsdp units=+ the last *Norm* child with the output layer" in kept
    ddp = ranked_dict("ddp", device="cuda", heap=False, threads=None)  # stay eager: no compile, no TF32 change
    assert "# carries every setting of the measured config" in render(ddp, target, source="b", label="x")[0] or (
        target == "hf-trainer")  # the Trainer names the processes its arguments cannot hold


def test_accelerates_own_fsdp2_preparation_and_the_exported_lines_leave_what_was_measured_gathered():
    """The installed accelerate's fsdp2_prepare_model (1.14+) keeps the root gathered and reshards the
    embeddings; accelerate 1.13's ending reshards the root. The lines the export prints, run after
    either, leave gathered what the measured run kept gathered; the blocks still reshard."""
    from accelerate_fsdp2 import after_forward, one_rank, prepared
    from packaging.version import Version

    from tuner.export.parallelism import ACCELERATE_ROOT_KEPT

    assert Version(accelerate.__version__) >= Version(ACCELERATE_ROOT_KEPT), "the check below reads 1.14's code"
    tuned = ranked_dict("fsdp2", device="cuda", block_class="Block", reshard_after_forward=True)
    fixes = {x["setting"]: "\n".join(x["fix"]) for x in export(tuned, "accelerate")["changes_measured"] if "fix" in x}
    measured = {"root": "Parameter", "embeddings": "Parameter", "block": "DTensor", "norm": "Parameter",
                "head": "Parameter"}
    with one_rank():
        assert after_forward(prepared(installed=True)) == {**measured, "embeddings": "DTensor"}
        assert after_forward(prepared(installed=False)) == {**measured, "root": "DTensor", "embeddings": "DTensor",
                                                            "norm": "DTensor", "head": "DTensor"}
        for installed in (True, False):
            model = prepared(installed)
            for lines in fixes.values():
                exec(lines, {"model": model})
            assert after_forward(model) == measured, installed


def test_a_plain_single_process_compile_carries_every_setting_and_says_so_only_where_nothing_changes():
    for target in ("accelerate", "hf-trainer", "env"):
        cfg = CompileConfig(precision="bf16") if target in ("accelerate", "hf-trainer") else CompileConfig()
        text, header = render(tuned_dict(cfg), target, source="best_config.yaml", label="x")
        assert "carries every setting of the measured config" in header, target
        assert not any(line.startswith(("NOT CARRIED", "CHANGES WHAT")) for line in header), target
    for target in ("accelerate", "hf-trainer", "vllm"):  # TF32 matmuls on (float32, CUDA); vLLM's own process
        text, header = render(tuned_dict(CompileConfig()), target, source="best_config.yaml", label="x")
        said = "\n".join(header)  # vLLM's JSON has no comments: the header goes to the terminal
        assert "carries every setting" not in said and "CHANGES WHAT WAS MEASURED" in said, target
        assert not any(line.startswith("NOT CARRIED") for line in header), target
    tuned = TunedConfig(CompileConfig(), tuned_on={"threads": 4}).to_dict()
    text, header = render(tuned, "accelerate", source="best_config.yaml", label="x")
    assert "carries every setting" not in text and "export OMP_NUM_THREADS=4" in text
    assert "carries every setting" in "".join(render(tuned, "env", source="b", label="x")[1])
    assert "export OMP_NUM_THREADS=4" in render(tuned, "env", source="b", label="x")[0]


# --------------------------------------------------------------------------- what every tool gets for stay-eager


def test_stay_eager_exports_do_not_compile(tmp_path):
    from transformers import TrainingArguments

    blocks = exports(tuned_dict(CompileConfig(target="none"), verdict="stay_eager"))
    assert TrainingArguments(**blocks["hf-trainer"]["training_args"], output_dir=str(tmp_path)).torch_compile is False
    assert TorchDynamoPlugin(**blocks["accelerate"]["plugin"]).backend == DynamoBackend.NO
    assert blocks["accelerate"]["config_file"]["dynamo_config"] == {"dynamo_backend": "NO"}
    assert blocks["env"]["variables"] == {"ACCELERATE_DYNAMO_BACKEND": "NO"}
    assert blocks["torchtitan"]["compile"] == {"enable": False}
    assert blocks["vllm"]["compilation_config"] == {"mode": 0, "cudagraph_mode": "NONE"}
    assert all(not block["not_carried"] for block in blocks.values())


# --------------------------------------------------------------------------- environment variables


def test_sourced_env_export_sets_the_plugin_and_the_inductor_option(tmp_path):
    options = {"freezing": True, "shape_padding": False, "max_autotune_gemm_backends": "ATEN"}
    cfg = CompileConfig(target="whole", backend="inductor", dynamic=True, options=options)
    text, _ = render(tuned_dict(cfg), "env", source="best_config.yaml", label="x")
    (tmp_path / "tuned.env").write_text(text)
    probe = ("import json, torch._inductor.config as c\nfrom accelerate.utils import TorchDynamoPlugin\n"
             "p = TorchDynamoPlugin()\nprint(json.dumps([p.backend.value, p.mode, p.dynamic, p.fullgraph, "
             "p.use_regional_compilation, c.freezing, c.shape_padding]))\n")
    (tmp_path / "probe.py").write_text(probe)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "TORCHINDUCTOR_"))}
    command = f"source {tmp_path / 'tuned.env'} && {sys.executable} {tmp_path / 'probe.py'}"
    proc = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == ["INDUCTOR", "default", True, False, False, True, False]
    lost = {x["setting"] for x in export(tuned_dict(cfg), "env")["not_carried"]}
    assert lost == {"options.max_autotune_gemm_backends"}, "a string option has no plain environment form"


def test_env_names_an_option_the_mode_overrides():
    cfg = CompileConfig(backend="inductor", mode="max-autotune-no-cudagraphs", options={"max_autotune": False})
    block = export(tuned_dict(cfg), "env")
    assert [x["setting"] for x in block["not_carried"]] == ["options.max_autotune"]
    assert "TORCHINDUCTOR_MAX_AUTOTUNE" not in block["variables"]


# --------------------------------------------------------------------------- accelerate's plugin options


def test_accelerate_plugin_carries_inductor_options_into_torch_compile(clean_env):
    """TorchDynamoPlugin(options=...) reaches torch.compile through its to_kwargs(); torch.compile
    refuses a mode beside options, so the mode's own options are folded in and the mode left out."""
    import torch

    cfg = CompileConfig(backend="inductor", mode="max-autotune-no-cudagraphs", options={"freezing": True})
    block = export(tuned_dict(cfg), "accelerate")
    kwargs = TorchDynamoPlugin(**block["plugin"]).to_kwargs()
    assert "mode" not in kwargs and kwargs["options"]["freezing"] is True and kwargs["options"]["max_autotune"]
    torch.compile(torch.nn.Linear(2, 2), **kwargs)  # accepted: compiling waits for the first call
    why = {x["setting"]: x["why"] for x in block["not_carried"]}["options.freezing"]
    assert why.startswith("carried by `plugin` only")
    assert block["config_file"]["dynamo_config"]["dynamo_mode"] == "max-autotune-no-cudagraphs"  # the file keeps it


# --------------------------------------------------------------------------- what is not carried


def test_an_inductor_option_the_optimizer_compile_and_the_warm_start_are_named_where_dropped():
    cfg = CompileConfig(target="blocks", backend="inductor", fullgraph=True, options={"freezing": True},
                        compile_optimizer=True)
    blocks = exports(tuned_dict(cfg, warm_start_s=0.5, cold_start_s=4.0))
    for name in ("accelerate", "hf-trainer", "torchtitan"):
        lost = {x["setting"]: x["value"] for x in blocks[name]["not_carried"]}
        assert lost["options.freezing"] is True, name
    for name, block in blocks.items():
        lost = {x["setting"] for x in block["not_carried"]}
        assert {"compile_optimizer", "warm_start"} <= lost, name
    assert blocks["env"]["variables"]["TORCHINDUCTOR_FREEZING"] == "1"
    assert "options.freezing" not in {x["setting"] for x in blocks["env"]["not_carried"]}
    assert not {"target", "fullgraph"} & {x["setting"] for x in blocks["torchtitan"]["not_carried"]}


def test_marked_dimensions_and_dynamo_settings_are_named_where_dropped():
    cfg = CompileConfig(target="whole", backend="inductor", mark_dynamic={"input_ids": {1: [32, 128]}},
                        mark_unbacked={"input_ids": {0: [1, 8]}}, dynamo={"capture_scalar_outputs": True})
    for name, block in exports(tuned_dict(cfg)).items():
        lost = {x["setting"]: x["value"] for x in block["not_carried"]}
        assert {"mark_dynamic", "mark_unbacked", "dynamo.capture_scalar_outputs"} <= set(lost), name
        assert lost["dynamo.capture_scalar_outputs"] is True, name
    stay = exports(tuned_dict(cfg, verdict="stay_eager"))
    assert not any("dynamo." in x["setting"] or "mark_" in x["setting"]
                   for block in stay.values() for x in block["not_carried"]), "nothing is lost when nothing compiles"


def test_a_glob_target_and_an_unknown_backend_are_named_where_dropped():
    blocks = exports(tuned_dict(CompileConfig(target="layers.*", backend="aot_eager")))
    for name in ("accelerate", "hf-trainer", "torchtitan", "vllm"):
        assert "target" in {x["setting"] for x in blocks[name]["not_carried"]}, name
    blocks = exports(tuned_dict(CompileConfig(backend="my_backend")))
    assert blocks["hf-trainer"]["training_args"] == {"torch_compile": False}
    assert blocks["accelerate"]["plugin"] == {"backend": "no"}
    assert "backend" in {x["setting"] for x in blocks["accelerate"]["not_carried"]}


# --------------------------------------------------------------------------- best_config.yaml


def test_best_config_yaml_holds_every_block_and_still_loads(tmp_path):
    cfg = CompileConfig(target="blocks", backend="inductor", options={"freezing": True})
    path = save_tuned_config(TunedConfig(cfg, measured={"speedup_vs_eager": 1.2}), tmp_path / "best_config.yaml")
    data = yaml.safe_load(path.read_text())
    assert set(data["exports"]) == set(TARGETS) - {"json"}
    assert data["exports"] == json.loads(json.dumps(exports(data)))
    loaded = load_tuned_config(path)
    assert loaded.config == cfg and loaded.measured["speedup_vs_eager"] == 1.2
    again = save_tuned_config(loaded, tmp_path / "again.yaml")
    assert yaml.safe_load(again.read_text())["exports"] == data["exports"]


# --------------------------------------------------------------------------- the CLI


@pytest.fixture
def results(tmp_path):
    out = tmp_path / "run"
    save_tuned_config(TunedConfig(CompileConfig(target="blocks", backend="aot_eager"),
                                  tuned_on={"torch": torch.__version__, "device": "cpu"}), out / "best_config.yaml")
    return out


def test_cli_exports_every_target_of_a_results_folder(results, cli, tmp_path):
    for target in TARGETS:
        proc = cli("export", str(results), "--to", target)
        assert proc.returncode == 0, (target, proc.stderr)
        assert proc.stdout
    proc = cli("export", str(results / "best_config.yaml"), "--to", "json", "--output", str(tmp_path / "x.json"))
    assert proc.returncode == 0, proc.stderr
    exported = json.loads((tmp_path / "x.json").read_text())
    assert exported["config"]["target"] == "blocks" and set(exported["exports"]) == set(TARGETS) - {"json"}
    proc = cli("export", str(results), "--to", "vllm")
    assert json.loads(proc.stdout) == {"mode": 1, "backend": "aot_eager", "cudagraph_mode": "NONE"}
    assert "NOT CARRIED" in proc.stderr, "JSON has no comments: the list goes to the terminal"


def test_cli_export_of_a_missing_folder_is_one_error_line_and_a_hint(cli, tmp_path):
    proc = cli("export", str(tmp_path / "nope"), "--to", "accelerate")
    assert proc.returncode == 2
    first, hint = proc.stderr.splitlines()[:2]
    assert first == f"error: {tmp_path / 'nope'}: no such folder or file"
    assert hint.startswith("hint: give the output folder of a compile-tune run")


def test_cli_export_rejects_an_unknown_target(results, cli):
    proc = cli("export", str(results), "--to", "deepspeed")
    assert proc.returncode == 2
    assert "invalid choice: 'deepspeed'" in proc.stderr


# --------------------------------------------------------------------------- the example


def test_accelerate_regional_example_trains_with_the_exported_regional_compile(results):
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "accelerate_regional.py"), str(results),
                           "--steps", "3"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "accelerate: backend=aot_eager mode=default fullgraph=False dynamic=None regional=True"
    assert any(line.startswith("not carried: target=blocks") for line in lines)
    assert "compiled regions: 6 (inp, layers.0, layers.1, layers.2, layers.3, out)" in lines
    steps = [line.split() for line in lines if line.startswith("step ")]
    assert len(steps) == 3
    for _, _, _, loss, _, eager in steps:
        assert float(loss) == pytest.approx(float(eager), rel=1e-4), "aot_eager matches eager"
    assert float(steps[-1][3]) < float(steps[0][3])


def test_accelerates_own_tf32_on_cuda_is_named_as_a_change_of_what_was_measured():
    import inspect

    from accelerate import state

    assert "torch.backends.cuda.matmul.allow_tf32 = True" in inspect.getsource(state)  # still what accelerate does
    blocks = exports(tuned_dict(CompileConfig(backend="inductor")))
    for name in ("accelerate", "hf-trainer"):
        assert [x["setting"] for x in blocks[name]["changes_measured"]] == ["torch.backends.cuda.matmul.allow_tf32"]
    assert not exports(tuned_dict(CompileConfig(), verdict="stay_eager"))["accelerate"].get("changes_measured")
