"""`compile-tune package`: the winner of an inference run as a .pt2 that starts without compiling,
checked in a fresh process against eager, its figures in best_config.yaml and the reports."""
import json
from pathlib import Path

import pytest
import torch
import yaml
from conftest import tune_one_inductor_trial

from tuner.core.spec import TrialSpec
from tuner.isolated import run_isolated

pytestmark = pytest.mark.slow


def test_a_packaged_winner_loads_matches_eager_and_starts_far_faster_than_a_cold_compile(tmp_path, cli, workloads):
    import tuner
    from tuner.workload import load_workload

    out = tmp_path / "run"
    proc = tune_one_inductor_trial(workloads / "fusable_schedule.py", out, "--confirm", "0")
    assert proc.returncode == 0, proc.stderr
    assert yaml.safe_load((out / "best_config.yaml").read_text())["verdict"] == "compile"
    proc = cli("package", str(out))
    assert proc.returncode == 0, proc.stderr
    assert (out / "model.pt2").exists() and "recommended" in proc.stdout
    measured = yaml.safe_load((out / "best_config.yaml").read_text())["measured"]
    record = measured["package"]
    assert record["correct"] and record["checked_inputs"] == 4  # the distinct row counts of the schedule
    assert record["dynamic_dims"] == {"0": {"0": [160, 256]}}
    assert record["first_call_s"] * 10 < measured["compile_time_s"], (record, measured["compile_time_s"])
    assert "packaged model (.pt2)" in (out / "report.md").read_text()
    # the serving side, in this process: no compile, the same numbers as eager on a size never exported
    w = load_workload(workloads / "fusable_schedule.py")
    model, x = w.make_model().eval(), torch.randn(200, 1024)
    packaged = tuner.load_package(out)
    with torch.no_grad():
        torch.testing.assert_close(packaged(x), model(x), rtol=1e-4, atol=1e-4)


def test_a_model_export_cannot_take_names_the_line_that_stops_it_and_writes_nothing(tmp_path, workloads):
    package = tmp_path / "model.pt2"
    result = run_isolated(TrialSpec(workload=str(workloads / "graph_breaks.py"), config={"backend": "inductor"},
                                    mode="package", package_path=str(package)), timeout=600, work_dir=tmp_path)
    assert result["status"] == "failed" and not package.exists()
    where = result["export_stopped_at"]
    assert where.startswith(str(workloads / "graph_breaks.py")), json.dumps(result)[:2000]
    assert "numpy" in where or "item" in where or "if h.sum()" in where


@pytest.fixture(scope="module")
def served_package(tmp_path_factory):
    """The served workload (keyword inputs, input_dims() declared wider than its schedule),
    exported and compiled into a .pt2 and checked in fresh processes, as `compile-tune package` does."""
    out = tmp_path_factory.mktemp("served")
    base = dict(workload=str(Path(__file__).parent / "workloads" / "served.py"), config={"backend": "inductor"},
                package_path=str(out / "model.pt2"), threads=2)
    built = run_isolated(TrialSpec(**base, mode="package"), timeout=600, work_dir=out)
    assert built["status"] == "ok", json.dumps(built)[:2000]
    checked = run_isolated(TrialSpec(**base, mode="package_check"), timeout=600, work_dir=out)
    assert checked["status"] == "ok", json.dumps(checked)[:2000]
    return out / "model.pt2", built, checked


def test_a_package_takes_the_declared_shapes_and_its_check_probes_unseen_ones(served_package):
    _, built, checked = served_package
    assert built["shapes"]["dims"]["input_ids"] == {"0": [1, 8], "1": [2, 64]}
    assert built["shapes"]["dims_from"]["input_ids"]["1"] == "input_dims()"
    assert built["input_order"] == ["input_ids", "attention_mask"]
    assert checked["correct"], checked.get("correctness_error")
    probes = {p["probe"]: p for p in checked["probes"]}
    # inside the declared bounds, at sizes the schedule (batch 4, lengths 17-40) never showed: eager's answers
    for size in ("dim 0 = 1", "dim 0 = 8", "dim 1 = 2", "dim 1 = 64"):
        hit = next(p for label, p in probes.items() if label.endswith(size))
        assert hit["inside"] and hit["outcome"] == "matches eager", hit
    # outside them: refused with an error naming the input, and the checking process lived on
    for size in ("dim 0 = 9", "dim 1 = 65"):
        hit = next(p for label, p in probes.items() if label.endswith(size))
        assert not hit["inside"] and hit["outcome"].startswith("refused: PackageInputError: input 'input_ids'"), hit


def test_load_package_refuses_wrong_inputs_by_name_and_swaps_weights(served_package, workloads):
    import tuner
    from tuner.runtime.package_meta import PackageInputError
    from tuner.workload import load_workload

    path, _, _ = served_package
    w = load_workload(workloads / "served.py")
    model, g = w.make_model().eval(), torch.Generator().manual_seed(5)
    package = tuner.load_package(path)
    one = w.input_schedule.__globals__["_batch"](1, 50, g)  # a batch of one, a length never seen
    with torch.no_grad():
        torch.testing.assert_close(package(**one), model(**one), rtol=1e-5, atol=1e-5)
        with pytest.raises(PackageInputError, match=r"input 'input_ids' dim 0 is 9; the package takes input_ids: "
                                                    r"dim 0 1\.\.8, dim 1 2\.\.64"):
            package(**w.input_schedule.__globals__["_batch"](9, 20, g))
        with pytest.raises(PackageInputError, match="input 'input_ids' is torch.float32; the package was built for "
                                                    "torch.int64"):
            package(input_ids=one["input_ids"].float(), attention_mask=one["attention_mask"])
        assert package.metadata["input_order"] == ["input_ids", "attention_mask"]
        # new weights, same model: the package answers as the model holding them
        torch.manual_seed(7)
        other = type(model)().eval()
        assert sorted(package.load_weights(other.state_dict())) == sorted(other.state_dict())
        torch.testing.assert_close(package(**one), other(**one), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("field, value, said", [
    ("torch", "2.99.0", "built for torch 2.99.0, this process runs torch "),
    ("cpu_isa", "vec_from_the_future", "built for CPUs with vec_from_the_future vector instructions"),
])
def test_a_package_built_for_another_torch_or_cpu_is_refused_in_one_line(served_package, tmp_path, field, value,
                                                                          said):
    import zipfile

    import tuner
    from tuner.core.errors import ConfigError
    from tuner.runtime.package_meta import META_KEY

    path, _, _ = served_package
    moved = tmp_path / "model.pt2"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(moved, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename.endswith("_metadata.json"):
                meta = json.loads(data)
                meta[META_KEY] = json.dumps({**json.loads(meta[META_KEY]), field: value})
                data = json.dumps(meta).encode()
            dst.writestr(item, data)
    with pytest.raises(ConfigError) as got:
        tuner.load_package(moved)
    assert said in str(got.value) and "\n" not in str(got.value)


def test_the_cpp_example_serves_a_package_and_lives_through_a_refused_input(tmp_path, workloads):
    """examples/serve_cpp, built against the installed torch's CMake config, loads the .pt2 with
    AOTIModelPackageLoader: eager's answer inside the package's bounds, a refusal outside them."""
    import shutil
    import subprocess

    cmake, compiler = shutil.which("cmake"), shutil.which("c++") or shutil.which("g++")
    if not (cmake and compiler):
        pytest.skip(f"no C++ toolchain here (cmake: {cmake}, c++: {compiler}): the example cannot be built")
    from tuner.workload import load_workload

    package = tmp_path / "model.pt2"
    built = run_isolated(TrialSpec(workload=str(workloads / "fusable_schedule.py"), config={"backend": "inductor"},
                                   mode="package", package_path=str(package), threads=2), timeout=600,
                         work_dir=tmp_path)
    assert built["status"] == "ok", json.dumps(built)[:2000]
    source = Path(__file__).resolve().parent.parent / "examples" / "serve_cpp"
    build = tmp_path / "build"
    configure = subprocess.run([cmake, "-S", str(source), "-B", str(build),
                                f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}"], capture_output=True, text=True)
    said = configure.stdout + configure.stderr
    if configure.returncode != 0 and torch.version.cuda and "Could NOT find CUDA" in said:
        # A CUDA build's CMake config wants the whole toolkit (headers, cudart); an nvcc alone (this
        # machine has one) is not enough. A CPU build of torch builds the example.
        pytest.skip(f"torch {torch.__version__} is a CUDA build and its CMake config finds no CUDA toolkit here: "
                    f"{next(line for line in said.splitlines() if 'Could NOT find CUDA' in line).strip()}")
    assert configure.returncode == 0, said[-4000:]
    made = subprocess.run([cmake, "--build", str(build)], capture_output=True, text=True)
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-2000:]
    ran = subprocess.run([str(build / "serve_pt2"), str(package), "256", "1024"], capture_output=True, text=True,
                         timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    lines = ran.stdout.splitlines()
    record = json.loads(lines[0].removeprefix("compile_tune: "))
    assert record["input_order"] == ["0"] and record["torch"] == torch.__version__
    x = torch.arange(256 * 1024, dtype=torch.float32).mul(1e-3).reshape(256, 1024)
    with torch.no_grad():
        expected = load_workload(workloads / "fusable_schedule.py").make_model().eval()(x).sum().item()
    answered = float(lines[1].split(" sum ")[1].split()[0])
    assert lines[1].startswith("input [256, 1024]: output [256, 1024]")
    assert answered == pytest.approx(expected, rel=1e-4)
    assert lines[2].startswith("input [257, 1024]: refused: ") and "<= 256" in lines[2], lines[2]
