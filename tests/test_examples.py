"""The examples that carry a tuned config into other tools: Hugging Face Trainer (examples/hf_trainer.py)
and the cluster files (examples/cluster/), whose compile-tune command lines must parse with the CLI's
own parser."""
from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from tuner.cli import _saved_run_parser, _tune_parser
from tuner.core.config import CompileConfig, TunedConfig
from tuner.export.best_config import save_tuned_config

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
CLUSTER = EXAMPLES / "cluster"

# --------------------------------------------------------------------------- Hugging Face Trainer


@pytest.fixture
def hf_trainer():
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    import torch

    sys.path.insert(0, str(EXAMPLES))
    try:
        import hf_trainer

        yield hf_trainer
    finally:
        sys.path.remove(str(EXAMPLES))
        torch._dynamo.reset()


def test_trainer_with_a_tuned_aot_eager_config_compiles_and_matches_eager_loss(hf_trainer, tmp_path):
    config = save_tuned_config(TunedConfig(CompileConfig(target="blocks", backend="aot_eager")),
                               tmp_path / "best_config.yaml")
    eager = hf_trainer.train(None, steps=3)
    tuned = hf_trainer.train(config, steps=3, fallback_random=True)
    assert eager.graphs == 0
    assert tuned.graphs >= 1, "the config was not applied: Trainer ran the model eagerly"
    assert len(tuned.losses) == len(eager.losses) == 3
    # aot_eager runs eager's own kernels on the same weights, batches and dropout masks (dropout is
    # on): equal up to rounding.
    assert hf_trainer.compare(eager, tuned) <= 1e-6, (eager.losses, tuned.losses)


def test_trainer_refuses_to_compile_a_model_apply_config_compiled(hf_trainer, tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELERATE_DYNAMO_BACKEND", "INDUCTOR")  # what accelerate's own config sets
    config = save_tuned_config(TunedConfig(CompileConfig(backend="aot_eager")), tmp_path / "best_config.yaml")
    with pytest.raises(SystemExit, match="Trainer would compile the model again"):
        hf_trainer.train(config, steps=1)


def test_trainer_space_has_no_compiled_optimizer_step():
    from tuner.space.search_space import load_space

    space = load_space(str(EXAMPLES / "hf_trainer_space.yaml")).restrict(device="cuda", task="train", has_blocks=True)
    assert space.configs() and not any(c.compile_optimizer for c in space.configs())


# --------------------------------------------------------------------------- cluster

TUNE_DB = "postgresql://tuner@db.example.com/tune"


def recording_path(tmp_path: Path) -> dict[str, str]:
    """Environment whose ``compile-tune`` and ``optuna`` record their arguments instead of running."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("compile-tune", "optuna"):
        tool = bin_dir / name
        tool.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                        f"open(os.environ['RECORD'], 'a').write(json.dumps(['{name}', *sys.argv[1:]]) + '\\n')\n")
        tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", RECORD=str(tmp_path / "argv.jsonl"),
                TUNE_DB=TUNE_DB, TMPDIR=str(tmp_path))


def run_recorded(script: Path, *args: str, env: dict[str, str]) -> list[list[str]]:
    subprocess.run(["bash", str(script), *args], cwd=ROOT, env=env, check=True, timeout=60)
    lines = Path(env["RECORD"]).read_text().splitlines()
    Path(env["RECORD"]).unlink()
    return [json.loads(line) for line in lines]


def parse_tune(argv: list[str]):
    assert argv[0] == "compile-tune"
    try:
        return _tune_parser().parse_args(argv[1:])
    except SystemExit:
        pytest.fail(f"compile-tune rejects the command line {argv}")


def check_worker(args) -> None:
    assert (ROOT / args.workload).is_file() and (ROOT / args.space).is_file()
    assert args.storage == TUNE_DB and args.study_name == "hf_trainer_gpt2"
    assert args.task == "train" and args.device == "cuda" and args.threads == 8
    assert args.confirm == 0 and not args.warm_start  # done once, at the end


def test_slurm_array_runs_one_worker_per_task_on_the_postgres_study(tmp_path):
    script = CLUSTER / "tune.sbatch"
    directives = dict(re.findall(r"^#SBATCH --([\w-]+)=(\S+)", script.read_text(), re.M))
    assert directives["array"] == "0-7" and directives["gres"] == "gpu:1"
    env = recording_path(tmp_path)
    outs = set()
    for task in ("0", "5"):
        env.update(SLURM_ARRAY_JOB_ID="42", SLURM_ARRAY_TASK_ID=task, SLURM_CPUS_PER_TASK="8")
        [argv] = run_recorded(script, env=env)
        args = parse_tune(argv)
        check_worker(args)
        outs.add(args.out)
    assert len(outs) == 2, "array tasks must not share an output folder"


def test_slurm_array_without_a_database_url_stops_before_starting(tmp_path):
    env = recording_path(tmp_path)
    del env["TUNE_DB"]
    proc = subprocess.run(["bash", str(CLUSTER / "tune.sbatch")], cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode != 0 and "TUNE_DB" in proc.stderr
    assert not Path(env["RECORD"]).exists()


def test_slurm_ranks_job_runs_the_study_on_the_first_node_and_a_node_on_every_other(tmp_path):
    script = CLUSTER / "ranks.sbatch"
    directives = dict(re.findall(r"^#SBATCH --([\w-]+)=(\S+)", script.read_text(), re.M))
    assert directives["nodes"] == "2" and directives["ntasks-per-node"] == "1"
    env = recording_path(tmp_path)
    bin_dir = Path(env["PATH"].split(os.pathsep)[0])
    (bin_dir / "scontrol").write_text("#!/bin/sh\nprintf 'gpu-a\\ngpu-b\\n'\n")
    (bin_dir / "srun").write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                                  "argv = ['srun', os.environ['COMPILE_TUNE_RDZV'], *sys.argv[1:]]\n"
                                  "open(os.environ['RECORD'], 'a').write(json.dumps(argv) + '\\n')\n")
    for stub in ("scontrol", "srun"):
        (bin_dir / stub).chmod(0o755)
    env.update(SLURM_JOB_NODELIST="gpu-[a-b]", SLURM_NNODES="2", SLURM_SUBMIT_DIR=str(ROOT), SLURM_GPUS_ON_NODE="8",
               SLURM_CPUS_PER_TASK="64", SLURM_JOB_ID="7")
    env.pop("COMPILE_TUNE_RDZV", None)
    [batch] = run_recorded(script, env=env)
    assert batch[:2] == ["srun", "gpu-a:29400"] and batch[-1].endswith("examples/cluster/ranks.sbatch")
    [study] = run_recorded(script, env={**env, "COMPILE_TUNE_RDZV": "gpu-a:29400", "SLURM_NODEID": "0"})
    args = parse_tune(study)
    assert (args.nproc, args.nnodes, args.rdzv_endpoint) == (8, 2, "gpu-a:29400")
    assert args.data_parallel == "fsdp2" and args.threads == 8 and args.task == "train" and args.device == "cuda"
    [node] = run_recorded(script, env={**env, "COMPILE_TUNE_RDZV": "gpu-a:29400", "SLURM_NODEID": "1"})
    assert node[:4] == ["compile-tune", "node", "--rdzv-endpoint", "gpu-a:29400"]


def test_kubernetes_job_runs_n_workers_on_the_postgres_study():
    job = yaml.safe_load((CLUSTER / "tune-job.yaml").read_text())
    assert job["kind"] == "Job" and job["apiVersion"] == "batch/v1"
    assert job["spec"]["parallelism"] == job["spec"]["completions"] == 8
    [container] = job["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert "secretKeyRef" in env["PGPASSWORD"]["valueFrom"] and urlsplit(env["TUNE_DB"]["value"]).password is None
    values = {name: e["value"] for name, e in env.items() if "value" in e}
    values["TUNE_DB"] = TUNE_DB
    # Kubernetes expands $(NAME) in command and args from the container's environment.
    argv = [re.sub(r"\$\((\w+)\)", lambda m: values[m.group(1)], a) for a in container["command"] + container["args"]]
    check_worker(parse_tune(argv))
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1


def test_study_script_creates_the_study_once_and_collects_outputs_from_the_database(tmp_path):
    env = recording_path(tmp_path)
    [create] = run_recorded(CLUSTER / "study.sh", "create", env=env)
    assert create[:2] == ["optuna", "create-study"]
    assert create[create.index("--storage") + 1] == TUNE_DB
    assert create[create.index("--study-name") + 1] == "hf_trainer_gpt2"
    assert create[create.index("--direction") + 1] == "minimize"  # as compile-tune creates it
    [collect] = run_recorded(CLUSTER / "study.sh", "collect", env=env)
    assert collect[:2] == ["compile-tune", "report"]
    try:
        args = _saved_run_parser("compile-tune report", "").parse_args(collect[2:])
    except SystemExit:
        pytest.fail(f"compile-tune report rejects the command line {collect}")
    assert args.storage == TUNE_DB and args.study_name == "hf_trainer_gpt2" and args.dir == "results/hf_trainer_gpt2"


def test_study_script_creates_a_study_the_real_optuna_cli_accepts_twice(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    env = dict(os.environ, TUNE_DB=url, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    for _ in range(2):  # the second run finds the study and leaves it
        subprocess.run(["bash", str(CLUSTER / "study.sh"), "create"], cwd=ROOT, env=env, check=True,
                       capture_output=True, timeout=120)
    import optuna

    study = optuna.load_study(study_name="hf_trainer_gpt2", storage=url)
    assert study.direction == optuna.study.StudyDirection.MINIMIZE
