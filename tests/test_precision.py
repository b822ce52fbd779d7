"""Opt-in precision (``--allow-precision-change``): the config value, the space dimension that exists only
with the flag, bf16 autocast and TF32 matmuls applied by apply_config and by the trial (compiled side
only), the correctness check at the precision's tolerance, and the "changes numerics" flag in every
output: labels, reports, the terminal verdict, best_config.yaml and the exports."""
from __future__ import annotations

import json
import os
import warnings

import optuna
import pytest
import studies
import torch
import yaml
from torch import nn

import tuner
from tuner.core.config import CompileConfig, TunedConfig
from tuner.core.errors import ConfigError, StudyError
from tuner.export import export, exports, render
from tuner.export.best_config import load_tuned_config, save_tuned_config
from tuner.measure.correctness import PRECISION_TOLERANCE, compare
from tuner.measure.steps import Step
from tuner.space.search_space import load_space
from tuner.user.workload import load_workload

BF16 = CompileConfig(target="whole", backend="eager", precision="bf16")


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.linear(x))


class Head(nn.Module):
    """Two repeated blocks (the ``blocks`` target: a class with code of its own, not a container)
    and a head outside them."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(2))
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


@pytest.fixture(autouse=True)
def fresh_dynamo():
    before = torch.get_float32_matmul_precision()
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
    torch.set_float32_matmul_precision(before)


# --------------------------------------------------------------------------- the config value


def test_a_config_without_precision_keeps_its_key_and_dict():
    cfg = CompileConfig(target="blocks", backend="inductor", mode="default")
    assert "precision" not in cfg.to_dict() and "precision" not in cfg.key()
    assert cfg.key() == CompileConfig.from_dict(cfg.to_dict()).key()
    assert not cfg.changes_numerics and "numerics" not in cfg.describe()


def test_a_precision_is_part_of_the_key_and_the_label_says_it_changes_numerics():
    cfg = CompileConfig(target="blocks", precision="bf16")
    assert cfg.key() != CompileConfig(target="blocks").key()
    assert CompileConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.describe().endswith("precision=bf16 (changes numerics)")


@pytest.mark.parametrize("fields, message", [
    (dict(precision="fp16"), "`precision` must be one of bf16, tf32 or null, got 'fp16'"),
    (dict(target="none", precision="bf16"), "applies to a compiled model"),
])
def test_a_bad_precision_is_refused(fields, message):
    with pytest.raises(ConfigError, match=message):
        CompileConfig(**fields)


# --------------------------------------------------------------------------- the space dimension


def restricted(space, allow: bool, device: str = "cpu"):
    return space.restrict(device=device, task="infer", has_blocks=True, allow_precision_change=allow)


def test_without_the_flag_there_is_no_precision_dimension_and_a_listed_one_is_skipped_naming_the_flag(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text("backend: [eager]\nprecision: [null, bf16]\n")
    space = restricted(load_space(str(path)), allow=False)
    assert space.precision == [None]
    assert {c.precision for c in space.configs()} == {None}
    assert any("precision=bf16" in s and "--allow-precision-change" in s for s in space.skipped)
    trial = optuna.create_study().ask()
    space.suggest(trial)
    assert "precision" not in trial.params, "a study without the flag keeps its parameters"


def test_the_flag_adds_bf16_to_any_space_and_tf32_is_skipped_off_cuda():
    space = restricted(load_space("quick"), allow=True)
    assert space.precision == [None, "bf16"]
    assert any(s.startswith("precision=tf32: needs CUDA") for s in space.skipped)
    configs = space.configs()
    plain = [c for c in configs if c.precision is None]
    assert len(configs) == 2 * len(plain) and {c.precision for c in configs} == {None, "bf16"}
    study = optuna.create_study()
    for cfg in configs:  # Optuna can ask for each config, precision included
        study.enqueue_trial(space.params_for(cfg))
        trial = study.ask()
        assert space.suggest(trial).key() == cfg.key()
        study.tell(trial, 1.0)


def test_a_listed_precision_list_is_kept_under_the_flag(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text("backend: [eager]\nprecision: bf16\n")
    assert restricted(load_space(str(path)), allow=True).precision == ["bf16"]
    path.write_text("backend: [eager]\nprecision: [null, fp8]\n")
    with pytest.raises(Exception, match="`precision` values must be null or one of bf16, tf32"):
        load_space(str(path))


@pytest.mark.parametrize("capability, offered", [((8, 0), [None, "bf16", "tf32"]), ((7, 5), [None, "bf16"])])
def test_tf32_is_offered_on_cuda_from_compute_capability_8(monkeypatch, capability, offered):
    import tuner.core.precision

    monkeypatch.setattr(tuner.core.precision, "_capability", lambda device: capability)
    monkeypatch.setattr(tuner.core.precision, "_cuda_bf16", lambda device: True)
    space = load_space("quick")  # lists no precision: the flag adds every one the device supports
    space._restrict_precision("cuda", True)
    assert space.precision == offered


def test_resuming_with_the_flag_changed_is_refused(tmp_path, workloads):
    from tuner.study import StudySettings, check_settings, open_study

    def settings(allow):
        return StudySettings(workload=str(workloads / "mlp.py"), task="infer", device="cpu", threads=1, steps=10,
                             trials=1, torch="2.13.0", allow_precision_change=allow)

    study = open_study(f"sqlite:///{tmp_path / 'study.db'}", "mlp", seed=0)
    check_settings(study, settings(False))
    with pytest.raises(StudyError, match="allow_precision_change=False, now allow_precision_change=True"):
        check_settings(study, settings(True))


def test_the_cli_flag_is_off_by_default_and_reaches_the_options():
    from tuner.cli import _tune_parser

    assert _tune_parser().parse_args(["m.py"]).allow_precision_change is False
    assert _tune_parser().parse_args(["m.py", "--allow-precision-change"]).allow_precision_change is True


# --------------------------------------------------------------------------- apply_config


@pytest.mark.parametrize("target", ["whole", "blocks"])
def test_apply_config_runs_the_whole_forward_under_bf16_autocast(target):
    model = Head()
    x = torch.randn(4, 8)
    assert model(x).dtype == torch.float32
    model = tuner.apply_config(model, CompileConfig(target=target, backend="eager", precision="bf16"))
    assert model(x).dtype == torch.bfloat16, "the head outside the blocks runs under autocast too"
    with pytest.warns(UserWarning, match="already compiled by an earlier apply_config"):
        model = tuner.apply_config(model, CompileConfig(target=target, backend="eager"))
    assert model(x).dtype == torch.float32, "a later float32 config undoes the autocast"
    assert "forward" not in vars(model) or target == "whole"


def test_apply_config_sets_tf32_matmuls_for_the_process_and_warns():
    torch.set_float32_matmul_precision("highest")
    with pytest.warns(UserWarning, match=r"set_float32_matmul_precision\('high'\) for the whole process"):
        tuner.apply_config(Head(), CompileConfig(backend="eager", precision="tf32"))
    assert torch.get_float32_matmul_precision() == "high"


def test_a_tuned_bf16_config_is_applied_from_best_config_yaml(tmp_path):
    path = save_tuned_config(TunedConfig(BF16, tuned_on={"torch": torch.__version__, "device": "cpu",
                                                         "threads": torch.get_num_threads()}), tmp_path / "b.yaml")
    model = tuner.apply_config(Head(), str(path))
    assert model(torch.randn(2, 8)).dtype == torch.bfloat16


# --------------------------------------------------------------------------- the trial


def test_the_trial_step_runs_precision_on_the_compiled_side_only(workloads):
    workload = load_workload(str(workloads / "blocks.py"))
    step = Step(workload.make_model(), "infer", workload)
    inputs = workload.make_inputs()
    step.compile(CompileConfig(target="blocks", backend="eager", precision="bf16"))
    assert step(inputs).dtype == torch.bfloat16
    with step.eager():
        assert step(inputs).dtype == torch.float32, "eager is the float32 reference"
    torch.set_float32_matmul_precision("highest")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        step.compile(CompileConfig(target="whole", backend="eager", precision="tf32"))
    assert torch.get_float32_matmul_precision() == "high"
    with step.eager():
        assert torch.get_float32_matmul_precision() == "highest"
    assert torch.get_float32_matmul_precision() == "high"
    step.compile(CompileConfig(target="whole", backend="eager"))
    assert torch.get_float32_matmul_precision() == "highest", "the next config starts from the reference"
    assert step(inputs).dtype == torch.float32


def _matmul_case():
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(64, 256, generator=g), torch.randn(256, 256, generator=g) / 16
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = x @ w
    return x @ w, low, x.double() @ w.double()


def test_bf16_results_pass_at_bf16_tolerance_and_fail_at_float32s():
    ref, low, ref64 = _matmul_case()
    assert low.dtype == torch.bfloat16
    assert compare(ref, low, precision="bf16") is None
    assert compare(ref, low.float(), tol=1e-3) is not None, "bf16's error exceeds the float32 tolerance"
    assert compare(ref, low.float(), tol=1e-3, fp64_reference=ref64) is not None, "and float32's RMSE rule"
    assert PRECISION_TOLERANCE["bf16"] > 1e-3


def test_a_wrong_or_overflowing_bf16_result_still_fails():
    ref, low, _ = _matmul_case()
    assert compare(ref, low * 1.5, precision="bf16") is not None
    broken = low.clone()
    broken[0, 0] = float("nan")
    assert "non-finite" in compare(ref, broken, precision="bf16")


@pytest.mark.parametrize("task", ["infer", "train"])
def test_a_bf16_trial_compiles_under_autocast_and_is_checked_at_bf16_tolerance(workloads, tmp_path, task):
    from tuner.core.spec import TrialSpec
    from tuner.isolation.isolated import run_isolated

    spec = TrialSpec(workload=str(workloads / "blocks.py"), task=task, measure_seconds=0.3, rounds=2, warmup=2,
                     config=CompileConfig(target="blocks", backend="eager", precision="bf16").to_dict())
    result = run_isolated(spec, timeout=120, work_dir=tmp_path)
    assert result["status"] == "ok", result.get("failure")
    assert result["correct"] is True
    assert result["compiled_output_dtypes"] == ["bfloat16"], "the compiled side ran under autocast"
    assert "precision bf16 on the compiled side only" in result["correctness_check"]
    assert result["config_label"].endswith("(changes numerics)")


# --------------------------------------------------------------------------- outputs


def test_best_config_yaml_says_it_changes_numerics_and_loads_back(tmp_path):
    path = save_tuned_config(TunedConfig(BF16), tmp_path / "best_config.yaml")
    text = path.read_text()
    assert "# CHANGES NUMERICS: precision bf16" in text and "--allow-precision-change" in text
    data = yaml.safe_load(text)
    assert data["changes_numerics"] is True and data["config"]["precision"] == "bf16"
    assert load_tuned_config(path).config == BF16
    plain = save_tuned_config(TunedConfig(CompileConfig()), tmp_path / "plain.yaml").read_text()
    assert "changes_numerics" not in plain and "CHANGES NUMERICS" not in plain


def test_reports_terminal_summary_and_verdict_flag_a_precision_config(tmp_path):
    from tuner.decide.verdict import pick_best
    from tuner.report import render_reports, summary_table, trials_frame, verdict_text
    from tuner.study import scoring_from_study

    b = studies.Builder(tmp_path / "study.db").eager()
    b.add(studies.ok_attrs(CompileConfig(), "plain", 1.10, 10.0, 200.0))
    fast = CompileConfig(target="blocks", precision="bf16")
    b.add(studies.ok_attrs(fast, "search", 1.60, 10.0, 180.0), cfg=fast)
    b.add(studies.ok_attrs(CompileConfig(target="blocks"), "search", 1.20, 10.0, 190.0), cfg=CompileConfig("blocks"))
    tuned = pick_best(b.study, scoring_from_study(b.study), "cpu")
    assert tuned.config == fast
    html, md = render_reports(b.study, tuned, scoring_from_study(b.study))
    for text in (html, md):
        assert "changes numerics" in text and "CHANGED: precision bf16" in text
    assert "| precision | bf16 |" in md, "Which settings mattered compares precision values"
    frame = trials_frame(b.study)
    assert "(changes numerics)" in summary_table(frame)
    assert list(frame["precision"].dropna()) == ["bf16"]
    terminal = verdict_text(tuned, "out/best_config.yaml")
    assert "numerics: CHANGED: precision bf16" in terminal and "--allow-precision-change" in terminal


def test_exports_carry_bf16_where_the_tool_has_it_and_refuse_where_it_does_not(monkeypatch):
    data = TunedConfig(BF16).to_dict()
    blocks = exports(data)
    assert blocks["accelerate"]["mixed_precision"] == "bf16"
    assert blocks["accelerate"]["env"]["ACCELERATE_MIXED_PRECISION"] == "bf16"
    assert blocks["env"]["variables"]["ACCELERATE_MIXED_PRECISION"] == "bf16"
    assert blocks["hf-trainer"]["training_args"]["bf16"] is True
    assert blocks["torchtitan"]["training"] == {"mixed_precision_param": "bfloat16"}
    assert "refused" in blocks["vllm"]
    with pytest.raises(ConfigError, match="cannot export for vllm: precision bf16") as err:
        render(data, "vllm", source="best_config.yaml", label="x")
    assert "apply_config" in err.value.hint
    text, header = render(data, "accelerate", source="best_config.yaml", label="x")
    assert yaml.safe_load(text)["mixed_precision"] == "bf16"
    assert any(line.startswith("CHANGES NUMERICS") for line in header)
    tf32 = exports(TunedConfig(CompileConfig(precision="tf32")).to_dict())
    assert tf32["hf-trainer"]["training_args"]["tf32"] is True and "refused" in tf32["torchtitan"]


def test_accelerates_own_code_autocasts_from_the_exported_variable(monkeypatch):
    accelerate = pytest.importorskip("accelerate")
    from accelerate.state import AcceleratorState

    for name in list(os.environ):
        if name.startswith("ACCELERATE_"):
            monkeypatch.delenv(name)
    for name, value in export(TunedConfig(BF16).to_dict(), "env")["variables"].items():
        monkeypatch.setenv(name, value)
    AcceleratorState._reset_state(reset_partial_state=True)
    try:
        accelerator = accelerate.Accelerator(cpu=True)
        assert accelerator.mixed_precision == "bf16" and accelerator.native_amp
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)


def test_the_cli_export_refuses_a_precision_it_cannot_carry(tmp_path, cli):
    save_tuned_config(TunedConfig(BF16), tmp_path / "best_config.yaml")
    proc = cli("export", str(tmp_path), "--to", "vllm")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0].startswith(f"error: {tmp_path / 'best_config.yaml'}: cannot export for vllm")
    proc = cli("export", str(tmp_path), "--to", "json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["changes_numerics"] is True
