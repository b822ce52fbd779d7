"""`compile-tune package`: the winner of an inference run as a .pt2 that starts without compiling,
checked in a fresh process against eager, its figures in best_config.yaml and the reports; built
for a named x86-64 ISA level (refused on a CPU without it: tests/test_package_target.py), at the
config's precision, falling back to the nearest config AOTInductor takes, and served from C++ by its record.

The tests marked slow build packages with real AOTInductor compiles; the others check the pure parts."""
import json
import zipfile
from pathlib import Path

import pytest
import torch
import yaml
from conftest import ROOT, tune_one_inductor_trial

from tuner.core.config import CompileConfig
from tuner.core.errors import ConfigError
from tuner.core.spec import TrialSpec
from tuner.isolation.isolated import run_isolated
from tuner.pt2 import machine
from tuner.pt2.machine import NATIVE, choose_level, highest_level, level_flags
from tuner.pt2.record import META_FIELDS, META_KEY, compiled_flags, read_metadata

HERE = machine.cpu_flags()


def altered(path: Path, to: Path, change) -> Path:
    """A copy of the package at ``path`` whose compile-tune record is ``change(record)``."""
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(to, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename.endswith("_metadata.json"):
                meta = json.loads(data)
                meta[META_KEY] = json.dumps(change(json.loads(meta[META_KEY])))
                data = json.dumps(meta).encode()
            dst.writestr(item, data)
    return to


def needing(flag: str):
    """A record change: its code requires ``flag`` besides what it does."""
    return lambda meta: {**meta, "cpu": {**meta["cpu"], "required_flags": [*meta["cpu"]["required_flags"], flag]}}


# --------------------------------------------------------------------------- configs, precision, the C++ record


def test_package_attempts_go_from_the_tuned_config_to_plain_inductor_one_step_at_a_time():
    from tuner.pt2.attempts import package_attempts
    from tuner.pt2.command import not_carried

    tuned = CompileConfig(mode="max-autotune", options={"epilogue_fusion": False, "max_fusion_size": 32})
    attempts = package_attempts(tuned)
    assert [(a.change, a.fold_at_runtime) for a in attempts] == [
        ("as tuned", True), ("as tuned, weights folded at build time", False),
        ("mode default instead of max-autotune", True), ("mode default, without epilogue_fusion", True),
        ("mode default, without max_fusion_size", True), ("plain inductor", True)]
    assert attempts[0].config == tuned and attempts[3].config.options == {"max_fusion_size": 32}
    assert attempts[-1].config == CompileConfig(mode="default")
    # on CPU, reduce-overhead adds nothing to a package (CUDA graphs are left to the server): one config
    assert [a.change for a in package_attempts(CompileConfig(mode="reduce-overhead"))] == [
        "as tuned", "as tuned, weights folded at build time"]
    # what the config packaged instead lacks is listed with the refusal
    built = {"packaged": attempts[3].to_dict(), "refused": [{"error": "InductorError: AssertionError: Not all"}]}
    lost = {x["setting"]: x for x in not_carried(tuned, built)}
    assert set(lost) == {"triton.cudagraphs", "mode", "options.epilogue_fusion"}  # CUDA graphs: never carried
    assert lost["mode"]["value"] == "max-autotune"
    assert lost["mode"]["why"].startswith("AOTInductor refused the tuned config (InductorError: AssertionError")


def test_the_build_compiles_at_the_configs_matmul_precision_and_the_check_switches_it_per_side():
    from tuner.pt2.build import Sides, _matmul_precision

    before = torch.get_float32_matmul_precision()
    try:
        with _matmul_precision("tf32"):
            assert torch.get_float32_matmul_precision() == "high"
        assert torch.get_float32_matmul_precision() == before
        torch.set_float32_matmul_precision("high")  # what load_package sets for a tf32 package
        asked = lambda x: torch.get_float32_matmul_precision()  # noqa: E731
        sides = Sides(asked, asked, eager_precision="highest")
        x = (torch.ones(1),)
        assert [sides.eager(x), sides.package(x), sides.eager(x)] == ["highest", "high", "highest"]
    finally:
        torch.set_float32_matmul_precision(before)


def test_a_package_whose_weights_were_folded_at_build_refuses_new_weights():
    from tuner.pt2.load import PackagedModel

    package = PackagedModel(None, {"fold_at_runtime": False, "config_change": "as tuned, weights folded at build time"},
                            Path("model.pt2"))
    with pytest.raises(ConfigError, match="its weights were folded into its code at build time"):
        package.load_weights({})


@pytest.fixture(scope="session")
def serve_pt2(tmp_path_factory) -> Path:
    """examples/serve_cpp built once against the installed torch's CMake config (about 15 s)."""
    import shutil
    import subprocess

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
    import subprocess

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
def test_a_packaged_winner_loads_matches_eager_and_starts_far_faster_than_a_cold_compile(tmp_path, cli, workloads):
    import tuner
    from tuner.user.workload import load_workload

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


@pytest.mark.slow
def test_a_model_export_cannot_take_names_the_line_that_stops_it_and_writes_nothing(tmp_path, workloads):
    package = tmp_path / "model.pt2"
    result = run_isolated(TrialSpec(workload=str(workloads / "graph_breaks.py"), config={"backend": "inductor"},
                                    mode="package", package_path=str(package)), timeout=600, work_dir=tmp_path)
    assert result["status"] == "failed" and not package.exists()
    where = result["export_stopped_at"]
    assert where.startswith(str(workloads / "graph_breaks.py")), json.dumps(result)[:2000]
    assert "numpy" in where or "item" in where or "if h.sum()" in where


#: The level the served package is built for where this CPU has it: named, not the default (the
#: highest here), so a test sees a level given by name reach the compiler.
NAMED = "x86-64-v3" if machine.x86() and HERE and highest_level(HERE) in ("x86-64-v3", "x86-64-v4") else None


@pytest.fixture(scope="module")
def served_package(tmp_path_factory):
    """The served workload (keyword inputs, input_dims() declared wider than its schedule),
    exported and compiled into a .pt2 for x86-64-v3 and checked in fresh processes, as
    `compile-tune package --isa x86-64-v3` does."""
    out = tmp_path_factory.mktemp("served")
    base = dict(workload=str(Path(__file__).parent / "workloads" / "served.py"), config={"backend": "inductor"},
                package_path=str(out / "model.pt2"), threads=2)
    built = run_isolated(TrialSpec(**base, mode="package", package_isa=NAMED), timeout=600, work_dir=out)
    assert built["status"] == "ok", json.dumps(built)[:2000]
    checked = run_isolated(TrialSpec(**base, mode="package_check"), timeout=600, work_dir=out)
    assert checked["status"] == "ok", json.dumps(checked)[:2000]
    return out / "model.pt2", built, checked


@pytest.mark.slow
@pytest.mark.skipif(NAMED is None, reason="this CPU has no x86-64-v3")
def test_a_package_is_compiled_for_the_named_isa_level_and_records_it(served_package):
    path, built, _ = served_package
    meta = read_metadata(path)
    assert meta is not None and set(meta) - {"aoti"} == set(META_FIELDS)
    assert meta["cpu"]["isa_level"] == "x86-64-v3" and meta["cpu"]["vector_isa"] == "avx2"
    assert meta["cpu"]["required_flags"] == level_flags("x86-64-v3") and meta["cpu"]["flags"] == HERE
    # what the compiler was given, as it recorded it in the package's shared libraries
    used = compiled_flags(path)
    assert built["compiled_with"] == used
    assert [t for t in used if t.startswith("-march=")] == ["-march=x86-64-v3"], used
    assert {"-mavx2", "-mfma"} <= set(used) and not any(t.startswith("-mavx512") for t in used), used
    assert meta["config_change"] == "as tuned" and meta["fold_at_runtime"] and built["refused"] == []


@pytest.mark.slow
@pytest.mark.skipif(HERE is None, reason="no /proc/cpuinfo")
def test_the_package_check_refuses_a_package_for_another_cpu_before_it_loads(served_package, tmp_path):
    from tuner.pt2.command import _check_refusal

    path, _, _ = served_package
    moved = altered(path, tmp_path / "model.pt2", needing("avx512_fake"))
    checked = run_isolated(TrialSpec(workload=str(Path(__file__).parent / "workloads" / "served.py"),
                                     config={"backend": "inductor"}, package_path=str(moved), mode="package_check"),
                           timeout=600, work_dir=tmp_path)
    assert checked["status"] == "failed" and checked["stage"] == "load", json.dumps(checked)[:2000]
    said = _check_refusal(moved, checked)  # what `compile-tune package` prints, exit code 2
    assert said.message.startswith(f"{moved}: built for x86-64-v") and "needs avx512_fake, which this CPU lacks" in \
        said.message and "\n" not in said.message
    assert said.hint.startswith("rebuild it with `compile-tune package RESULTS --isa x86-64-v")


@pytest.mark.slow
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


@pytest.mark.slow
def test_load_package_refuses_wrong_inputs_by_name_and_swaps_weights(served_package, workloads):
    import tuner
    from tuner.pt2.record import PackageInputError
    from tuner.user.workload import load_workload

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


@pytest.mark.slow
@pytest.mark.parametrize("change, said", [
    (lambda meta: {**meta, "torch": "2.99.0"}, "built for torch 2.99.0, this process runs torch "),
    (needing("avx512_fake"), "needs avx512_fake, which this CPU lacks: its code would die with an illegal instruction"),
    # a package built before its CPU flags were recorded: only its vector class is checked
    (lambda meta: {k: v for k, v in meta.items() if k != "cpu"} | {"cpu_isa": "vec_from_the_future"},
     "built for CPUs with vec_from_the_future vector instructions"),
    # a package whose code needs a newer libstdc++ than this process loads
    (lambda meta: {**meta, "toolchain": {**meta["toolchain"], "needs": {**meta["toolchain"]["needs"],
                                                                        "glibcxx": "3.4.99"}}},
     "its code needs libstdc++ with GLIBCXX_3.4.99; this process's ("),
], ids=["torch", "cpu_flags", "old_vector_class", "libstdcxx"])
def test_a_package_built_for_another_torch_or_cpu_is_refused_in_one_line(served_package, tmp_path, change, said):
    import tuner

    path, _, _ = served_package
    with pytest.raises(ConfigError) as got:
        tuner.load_package(altered(path, tmp_path / "model.pt2", change))
    assert said in str(got.value) and "\n" not in str(got.value)


@pytest.mark.slow
def test_a_packages_record_carries_its_schema_digests_toolchain_and_source(served_package):
    import subprocess

    from tuner.pt2.record import SCHEMA, sha256_file
    from tuner.pt2.toolchain import libstdcxx_here, newer

    path, built, _ = served_package
    meta = read_metadata(path)
    assert meta["schema"] == SCHEMA and meta["target_verified"] is True and built["target_verified"] is True
    so = [n for n in meta["digests"]["members"] if n.endswith(".so")]
    assert len(so) == 1 and list(meta["digests"]["weights"]) == so
    needs = meta["toolchain"]["needs"]
    assert needs["glibcxx"] and needs["glibc"] and not newer(needs["glibcxx"], libstdcxx_here()[1] or "0")
    assert meta["toolchain"]["compiler"]["version"] and Path(meta["toolchain"]["compiler"]["path"]).exists()
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert meta["source"]["commit"] == head and meta["source"]["best_config_sha256"] is None  # built without one
    # the archive's own digest beside it, as sha256sum writes it
    assert (path.parent / "model.pt2.sha256").read_text() == f"{sha256_file(path)}  model.pt2\n"
    assert built["archive_sha256"] == sha256_file(path)


def flipped_weights(path: Path, to: Path) -> Path:
    """A copy of the package with 64 bytes in the middle of its weights inverted in place, as a
    damaged or tampered copy has them (the zip's CRC left as it was: AOTInductor's loader ignores it)."""
    import shutil
    import struct

    from tuner.pt2.toolchain import weights_span

    shutil.copy(path, to)
    with zipfile.ZipFile(to) as archive:
        info = next(i for i in archive.infolist() if i.filename.endswith(".so"))
        start, end = weights_span(archive.read(info))
    assert info.compress_type == zipfile.ZIP_STORED and end - start > 64
    with open(to, "r+b") as f:
        f.seek(info.header_offset + 26)
        name_len, extra_len = struct.unpack("<HH", f.read(4))
        at = info.header_offset + 30 + name_len + extra_len + (start + end) // 2 - 32
        f.seek(at)
        chunk = f.read(64)
        f.seek(at)
        f.write(bytes(b ^ 0xFF for b in chunk))
    return to


@pytest.mark.slow
def test_a_copy_whose_weights_were_altered_is_refused_in_one_line_in_a_fresh_process(served_package, tmp_path):
    import subprocess
    import sys

    path, _, _ = served_package
    copy = flipped_weights(path, tmp_path / "model.pt2")
    code = ("import sys, tuner\nfrom tuner.core.errors import ConfigError\ntry:\n    tuner.load_package(sys.argv[1])\n"
            "except ConfigError as exc:\n    print(exc.message)\n    sys.exit(2)\nprint('loaded')\n")
    proc = subprocess.run([sys.executable, "-c", code, str(copy)], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stdout.splitlines()
    assert line.startswith(f"{copy}: its weights (in ") and "are not the ones it was built with: sha256 " in line
    # the original still loads: the check refuses the copy, not every package
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout.strip() == "loaded", proc.stdout + proc.stderr


@pytest.mark.slow
def test_a_compiler_error_stops_the_fallback_and_names_the_compiler_not_the_config(tmp_path, workloads, monkeypatch):
    """The build process itself, with CXX a gcc 10 (the up-front check of `compile-tune package`
    bypassed): one config tried, the failure the compiler's, no other config blamed."""
    from test_package_target import fake_gcc10

    from tuner.isolation.forkserver import SWITCH_ENV

    if NAMED is None:
        pytest.skip("this CPU has no x86-64-v3")
    gcc10 = fake_gcc10(tmp_path)
    monkeypatch.setenv("CXX", str(gcc10))
    monkeypatch.setenv(SWITCH_ENV, "0")  # a fresh interpreter: a launcher already running imported torch's CXX
    built = run_isolated(TrialSpec(workload=str(workloads / "fusable.py"), config={"backend": "inductor"},
                                   mode="package", package_path=str(tmp_path / "model.pt2"), package_isa=NAMED),
                         timeout=600, work_dir=tmp_path)
    assert built["status"] == "failed" and built["failure"]["category"] == "toolchain", json.dumps(built)[:2000]
    assert len(built["refused"]) == 1
    assert built["failure"]["raw"].startswith(f"the C++ compiler {gcc10} (version 10.2.1) refused the build for "
                                              f"-march={NAMED}: "), built["failure"]
    assert "bad value ('x86-64-v3')" in built["failure"]["raw"]


@pytest.mark.slow
def test_a_config_aotinductor_refuses_falls_back_to_the_nearest_that_packages(tmp_path, workloads):
    """A tiny convnet under max-autotune: its GEMM template's packed weights clash with runtime
    constant folding; the same config with its weights folded at build time packages."""
    import tuner
    from tuner.user.workload import load_workload

    package = tmp_path / "model.pt2"
    built = run_isolated(TrialSpec(workload=str(workloads / "tiny_convnet.py"), package_path=str(package),
                                   config={"backend": "inductor", "mode": "max-autotune"}, mode="package"),
                         timeout=900, work_dir=tmp_path)
    assert built["status"] == "ok", json.dumps(built)[:2000]
    assert [r["change"] for r in built["refused"]] == ["as tuned"]
    assert "Not all constant gets mapped for constant folding graph" in built["refused"][0]["error"]
    assert built["packaged"]["change"] == "as tuned, weights folded at build time"
    assert built["packaged"]["config_label"] == "whole/inductor/max-autotune"
    if built["isa_level"] == "x86-64-v4":  # the level's own 512-bit ISA, not the build CPU's AMX or VNNI
        assert built["cpu"]["vector_isa"] == "avx512" and built["cpu"]["required_flags"] == level_flags("x86-64-v4")
        assert not any(t.startswith(("-mamx", "-mavx512vnni", "-mavx512bf16")) for t in built["compiled_with"])
        assert read_metadata(package)["aoti"]["AOTI_CPU_ISA"] == "AVX512"
    w = load_workload(workloads / "tiny_convnet.py")
    model, (x,) = w.make_model().eval(), w.make_inputs()
    served = tuner.load_package(package)
    assert served.metadata["fold_at_runtime"] is False
    with torch.no_grad():
        torch.testing.assert_close(served(x), model(x), rtol=1e-4, atol=1e-4)
    with pytest.raises(ConfigError, match="folded into its code at build time"):
        served.load_weights(model.state_dict())


@pytest.mark.slow
def test_the_cpp_example_serves_a_package_by_its_record_and_refuses_one_for_another_cpu(tmp_path, workloads,
                                                                                       serve_pt2):
    """examples/serve_cpp, built against the installed torch's CMake config, reads the package's
    record, refuses one whose CPU flags this CPU lacks before loading it, and otherwise loads it with
    AOTIModelPackageLoader: eager's answer at the largest sizes of its bounds, a refusal one past them.
    The package is built at the default level: the highest this CPU has."""
    import subprocess

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
