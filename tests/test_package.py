"""`compile-tune package`: the winner of an inference run as a .pt2 that starts without compiling,
checked in a fresh process against eager, its figures in best_config.yaml and the reports; built
for a named x86-64 ISA level (refused on a CPU without it: tests/test_package_target.py), at the
config's precision, falling back to the nearest config AOTInductor takes (served from C++ by its
record: tests/test_serve_cpp.py).

The tests marked slow build packages with real AOTInductor compiles; the others check the pure parts."""
import json
import zipfile
from pathlib import Path

import pytest
import torch
import yaml
from conftest import ROOT, tune_one_inductor_trial
from package_records import altered, needing

from tuner.core.config import CompileConfig
from tuner.core.errors import ConfigError
from tuner.core.spec import TrialSpec
from tuner.isolation.isolated import run_isolated
from tuner.pt2 import machine
from tuner.pt2.machine import highest_level, level_flags
from tuner.pt2.record import META_FIELDS, compiled_flags, read_metadata

HERE = machine.cpu_flags()


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
