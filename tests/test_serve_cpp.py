"""examples/serve_cpp, the C++ program that serves a .pt2 by its compile-tune record: built once
against the installed torch's CMake config, it must act on every field of the record (a change of
each shows in what it says), name the level to rebuild for as the Python loader does, and serve a
real package while refusing one built for another CPU."""
import json
import subprocess
import zipfile
from pathlib import Path

import pytest
import torch
from conftest import ROOT
from package_records import altered, needing

from tuner.core.spec import TrialSpec
from tuner.isolation.isolated import run_isolated
from tuner.pt2 import machine
from tuner.pt2.machine import NATIVE, choose_level, level_flags
from tuner.pt2.record import META_FIELDS, META_KEY

HERE = machine.cpu_flags()


@pytest.fixture(scope="session")
def serve_pt2(tmp_path_factory) -> Path:
    """examples/serve_cpp built once against the installed torch's CMake config (about 15 s)."""
    import shutil

    cmake, compiler = shutil.which("cmake"), shutil.which("c++") or shutil.which("g++")
    if not (cmake and compiler):
        pytest.skip(f"no C++ toolchain here (cmake: {cmake}, c++: {compiler}): the example cannot be built")
    build = tmp_path_factory.mktemp("serve_cpp")
    configure = subprocess.run([cmake, "-S", str(ROOT / "examples" / "serve_cpp"), "-B", str(build),
                                f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}"], capture_output=True, text=True)
    said = configure.stdout + configure.stderr
    if configure.returncode != 0 and torch.version.cuda and "Could NOT find CUDA" in said:
        # A CUDA build's CMake config wants the whole toolkit (headers, cudart), not an nvcc alone.
        pytest.skip(f"torch {torch.__version__} is a CUDA build and its CMake config finds no CUDA toolkit here: "
                    f"{next(line for line in said.splitlines() if 'Could NOT find CUDA' in line).strip()}")
    assert configure.returncode == 0, said[-4000:]
    made = subprocess.run([cmake, "--build", str(build)], capture_output=True, text=True)
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-2000:]
    return build / "serve_pt2"


#: A record the example accepts up to loading the code (a .pt2 holding only its metadata: it is
#: refused or described before AOTInductor loads anything): this torch, this CPU, one input.
RECORD = {"torch": torch.__version__, "device": "cpu", "threads": 3, "cpu_isa": "avx2",
          "cpu": {"isa_level": "x86-64-v2", "required_flags": [], "flags": ["fpu", "sse2"], "model": "Some CPU"},
          "cuda": None, "tensors": {"x": {"dtype": "torch.float32", "shape": [4, 8]}}, "dims": {"x": {"0": [1, 16]}},
          "dims_from": {"x": {"0": "input_dims()"}}, "fixed": {"x": [4, 8]}, "input_order": ["x"],
          "keyword_inputs": False, "config": "whole/inductor/default", "config_change": "as tuned",
          "fold_at_runtime": True, "precision": None, "matmul_precision": "high"}
#: For each field of the record, a change and what the example then says that it did not before.
CHANGED = {
    "torch": ({"torch": "1.0.0"}, "built for torch 1.0.0, this is libtorch"),
    "device": ({"device": "cuda:0"}, "built for cuda:0, and this process sees no CUDA device"),
    "threads": ({"threads": 1}, "serving: threads 1,"),
    "cpu_isa": ({"cpu_isa": "avx512"}, "vector ISA avx512"),
    "cpu": ({"cpu": {**RECORD["cpu"], "required_flags": ["zz_fake_isa"]}}, "needs zz_fake_isa, which this CPU lacks"),
    "cuda": ({"cuda": {"capability": [8, 0], "name": "A100", "cuda": "12.4"}}, "GPU A100 (compute capability 8.0"),
    "tensors": ({"tensors": {"x": {"dtype": "torch.float64", "shape": [4, 8]}}}, "inputs x [16, 8] Double"),
    "dims": ({"dims": {"x": {"0": [1, 32]}}}, "inputs x [32, 8] Float"),
    "dims_from": ({"dims_from": {"x": {"0": "the schedule"}}}, "x dim 0 from the schedule"),
    "fixed": ({"fixed": {"x": [4, 12]}}, "inputs x [16, 12] Float"),
    "input_order": ({"input_order": ["x", "y"]}, "cannot build its inputs: input y is nested"),
    "keyword_inputs": ({"keyword_inputs": True}, "inputs by keyword"),
    "config": ({"config": "blocks/inductor/max-autotune"}, "built: blocks/inductor/max-autotune ("),
    "config_change": ({"config_change": "fell back"}, "(fell back)"),
    "fold_at_runtime": ({"fold_at_runtime": False}, "weights folded at build time"),
    "precision": ({"precision": "bf16"}, "precision bf16;"),
    "matmul_precision": ({"matmul_precision": "medium"}, "float32 matmul precision medium"),
    "schema": ({"schema": 3}, "its record is schema 3, newer than this example reads (2)"),
    "digests": ({"digests": {"members": {"a": "00", "b": "11"}, "weights": {}}}, "; 2 files digested"),
    "toolchain": ({"toolchain": {"compiler": {"path": "/usr/bin/g++", "version": "12.2.0"},
                                 "needs": {"glibc": "2.34", "glibcxx": "3.4.30"}}},
                  "compiled by /usr/bin/g++ 12.2.0, needs GLIBCXX_3.4.30 and glibc 2.34"),
    "target_verified": ({"target_verified": True}, "; target verified"),
    "source": ({"source": {"best_config": "b.yaml", "best_config_sha256": "00", "commit": "0123456789abcdef"}},
               "from commit 0123456789ab"),
}


def record_only(record: dict, to: Path) -> Path:
    """A .pt2 that holds a wrapper's metadata and nothing else: AOTIModelPackageLoader reads the
    record from it, and loading it fails after everything the example checks first."""
    with zipfile.ZipFile(to, "w") as archive:
        archive.writestr("model/data/aotinductor/model/m.wrapper.cpp", "")
        archive.writestr("model/data/aotinductor/model/m.wrapper_metadata.json",
                         json.dumps({META_KEY: json.dumps(record), "AOTI_DEVICE_KEY": "cpu"}))
    return to


def served(binary: Path, record: dict, tmp_path: Path) -> tuple[int, str]:

    ran = subprocess.run([str(binary), str(record_only(record, tmp_path / "m.pt2"))], capture_output=True,
                         text=True, timeout=60)
    return ran.returncode, ran.stdout + ran.stderr


def test_every_field_of_the_record_has_a_change_the_cpp_example_shows():
    assert set(CHANGED) == set(META_FIELDS)


@pytest.mark.parametrize("field", sorted(CHANGED))
def test_the_cpp_example_acts_on_each_field_of_the_packages_record(field, serve_pt2, tmp_path):
    if HERE is None and field == "cpu":
        pytest.skip("this CPU's flags cannot be read: the example checks none")
    if field == "device" and torch.cuda.is_available():
        pytest.skip("this machine has the CUDA device the change asks for")
    rc, before = served(serve_pt2, RECORD, tmp_path)
    assert rc == 2 and "AOTInductor could not load it" in before and "serving: threads 3," in before, before
    change, said = CHANGED[field]
    rc, after = served(serve_pt2, {**RECORD, **change}, tmp_path)
    assert said in after and said not in before, after


@pytest.mark.skipif(HERE is None or not machine.x86(), reason="needs an x86 CPU whose flags can be read")
def test_the_cpp_example_names_the_level_to_rebuild_for_from_the_record_as_the_python_loader_does(serve_pt2,
                                                                                                   tmp_path):
    levels = {name: level_flags(name) for name in machine.LEVELS}
    for level in levels:
        cpu = {**RECORD["cpu"], "isa_level": level, "required_flags": ["zz_fake_isa"], "levels": levels}
        rc, said = served(serve_pt2, {**RECORD, "cpu": cpu}, tmp_path)
        target = machine.rebuild_level(level, HERE)
        how = f"`compile-tune package RESULTS --isa {target}`" if target else "`compile-tune package RESULTS`,"
        assert rc == 2 and f"rebuild it with {how}" in said, (level, said)
    # The record's table, not one of the example's own: a v3 that needs a flag no CPU has leaves v2.
    odd = {**levels, "x86-64-v3": [*levels["x86-64-v3"], "zz_fake_isa"]}
    cpu = {**RECORD["cpu"], "isa_level": "x86-64-v4", "required_flags": ["zz_fake_isa"], "levels": odd}
    assert "--isa x86-64-v2`" in served(serve_pt2, {**RECORD, "cpu": cpu}, tmp_path)[1]
    old = {**RECORD["cpu"], "required_flags": ["zz_fake_isa"]}  # a package from before levels were recorded
    assert "rebuild it with `compile-tune package RESULTS`," in served(serve_pt2, {**RECORD, "cpu": old}, tmp_path)[1]


# --------------------------------------------------------------------------- real packages


@pytest.mark.slow
def test_the_cpp_example_serves_a_package_by_its_record_and_refuses_one_for_another_cpu(tmp_path, workloads,
                                                                                       serve_pt2):
    """examples/serve_cpp, built against the installed torch's CMake config, reads the package's
    record, refuses one whose CPU flags this CPU lacks before loading it, and otherwise loads it with
    AOTIModelPackageLoader: eager's answer at the largest sizes of its bounds, a refusal one past them.
    The package is built at the default level: the highest this CPU has."""

    from tuner.user.workload import load_workload

    package = tmp_path / "model.pt2"
    built = run_isolated(TrialSpec(workload=str(workloads / "fusable_schedule.py"), config={"backend": "inductor"},
                                   mode="package", package_path=str(package), threads=2), timeout=600,
                         work_dir=tmp_path)
    assert built["status"] == "ok", json.dumps(built)[:2000]
    level = choose_level(None, HERE)
    assert built["isa_level"] == level
    if level != NATIVE:
        assert [t for t in built["compiled_with"] if t.startswith("-march=")] == [f"-march={level}"]
    ran = subprocess.run([str(serve_pt2), str(package)], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    lines = ran.stdout.splitlines()
    record = json.loads(lines[0].removeprefix("compile_tune: "))
    assert record["input_order"] == ["0"] and record["torch"] == torch.__version__
    assert lines[1].startswith("built: whole/inductor/default (as tuned); precision as the model; weights swappable; "
                               "device cpu"), lines[1]
    x = torch.arange(256 * 1024, dtype=torch.float32).mul(1e-3).reshape(256, 1024)
    with torch.no_grad():
        expected = load_workload(workloads / "fusable_schedule.py").make_model().eval()(x).sum().item()
    assert lines[2] == "serving: threads 2, float32 matmul precision highest, inputs 0 [256, 1024] Float", lines[2]
    assert lines[3].startswith("input 0 [256, 1024] Float: output [256, 1024]"), lines[3]  # dim 0 at its maximum
    assert float(lines[3].split(" sum ")[1].split()[0]) == pytest.approx(expected, rel=1e-4)
    assert lines[4].startswith("input 0 [257, 1024] Float: refused: ") and "<= 256" in lines[4], lines[4]
    if HERE is not None:  # the same package asking for a flag this CPU lacks: refused before it loads
        other = altered(package, tmp_path / "other.pt2", needing("avx512_fake"))
        refused = subprocess.run([str(serve_pt2), str(other)], capture_output=True, text=True, timeout=300)
        assert refused.returncode == 2 and refused.stderr.startswith(f"error: {other}: built for {level}"), refused
        assert "needs avx512_fake, which this CPU lacks" in refused.stderr and len(refused.stderr.splitlines()) == 1
