"""What a package, or a warm-start bundle, is for: the x86-64 ISA level chosen from this CPU's
flags and refused, in one line with exit code 2, where the CPU lacks it; a package whose code needs
a flag this CPU lacks refused before it loads; a GPU of another compute capability or CUDA release
refused; a warm-start bundle compiled for another CPU not loaded. Pure parts: nothing is compiled
(the packages built with AOTInductor are in tests/test_package.py)."""
import json
from pathlib import Path

import pytest
import torch

from tuner.core.config import CompileConfig
from tuner.core.errors import ConfigError
from tuner.pt2 import machine
from tuner.pt2.machine import LEVELS, NATIVE, choose_level, cuda_mismatch, highest_level, level_flags
from tuner.pt2.record import refuse_cpu

V2 = list(LEVELS["x86-64-v2"])
V3 = V2 + list(LEVELS["x86-64-v3"])
V4 = V3 + list(LEVELS["x86-64-v4"])
HERE = machine.cpu_flags()
x86_only = pytest.mark.skipif(not machine.x86(), reason="x86-64 ISA levels")


@x86_only
def test_the_isa_level_is_the_highest_whose_flags_the_cpu_has_and_the_vector_isa_adds_its_own():
    assert highest_level([]) is None and highest_level(V2) == "x86-64-v2"
    assert highest_level([*V3, "avx512f"]) == "x86-64-v3" and highest_level(V4) == "x86-64-v4"
    assert machine.required_flags("x86-64-v3", V4, "-mavx2 -mfma -mf16c") == level_flags("x86-64-v3")
    # inductor's 512-bit ISA on a CPU with VNNI emits VNNI: a v4 package from it needs that too
    assert "avx512_vnni" in machine.required_flags("x86-64-v4", V4, "-mavx512f -mfma -mavx512vnni")
    native = machine.required_flags(NATIVE, [*V4, "hypervisor", "constant_tsc"])
    assert "avx512f" in native and "hypervisor" not in native and "constant_tsc" not in native


@x86_only
def test_a_level_this_cpu_lacks_is_refused_before_anything_is_built():
    assert choose_level(None, V3) == "x86-64-v3" and choose_level("x86-64-v2", V3) == "x86-64-v2"
    assert choose_level("native", V3) == NATIVE
    with pytest.raises(ConfigError) as got:
        choose_level("x86-64-v4", V3)
    assert got.value.message.startswith("--isa x86-64-v4: this CPU lacks avx512bw, avx512cd, avx512dq, avx512f, "
                                        "avx512vl (it has up to x86-64-v3)")
    assert got.value.hint == "give --isa x86-64-v3"


@x86_only
def test_the_package_command_refuses_a_level_this_cpu_lacks_with_exit_code_2(tmp_path, monkeypatch, capsys):
    from tuner import cli

    (tmp_path / "best_config.yaml").write_text("")  # refused before it is read
    monkeypatch.setattr(machine, "cpu_flags", lambda: V3)
    assert cli.main(["package", str(tmp_path), "--isa", "x86-64-v4"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("error: --isa x86-64-v4: this CPU lacks avx512bw") and err[1:] == [
        "hint: give --isa x86-64-v3"]


@x86_only
def test_a_cpu_lacking_a_flag_the_code_requires_is_refused_in_one_line_that_names_it():
    v4_vnni = {"isa_level": "x86-64-v4", "required_flags": [*level_flags("x86-64-v4"), "avx512_vnni"],
               "model": "AMD EPYC 9004"}
    refuse_cpu(Path("model.pt2"), v4_vnni, [*V4, "avx512_vnni"])  # all there: nothing to say
    with pytest.raises(ConfigError) as got:  # the level is there, the vector ISA's extra is not
        refuse_cpu(Path("model.pt2"), v4_vnni, V4)
    assert got.value.message == ("model.pt2: built for x86-64-v4 (AMD EPYC 9004) and needs avx512_vnni, which this "
                                 "CPU lacks: its code would die with an illegal instruction")
    assert got.value.hint == ("rebuild it with `compile-tune package RESULTS --isa x86-64-v3`, or build it on this "
                              "machine")
    with pytest.raises(ConfigError, match=r"needs abm, avx, avx2, avx512_vnni, .*--isa x86-64-v2`"):  # an older CPU
        refuse_cpu(Path("model.pt2"), v4_vnni, V2)


def test_a_gpu_of_another_compute_capability_or_cuda_release_is_refused():
    a100 = {"capability": [8, 0], "name": "NVIDIA A100", "cuda": "12.4"}
    assert cuda_mismatch(a100, {**a100, "cuda": "12.8"}) is None  # a minor release apart: the same runtime
    assert cuda_mismatch(a100, {"capability": [9, 0], "name": "NVIDIA H100", "cuda": "12.4"}) == (
        "its kernels are compiled for compute capability 8.0 (NVIDIA A100); this GPU is 9.0 (NVIDIA H100)")
    assert cuda_mismatch(a100, {**a100, "cuda": "13.0"}) == "it was built with CUDA 12.4; this torch runs CUDA 13.0"


@pytest.mark.skipif(HERE is None, reason="no /proc/cpuinfo")
def test_a_warm_start_bundle_compiled_for_flags_this_cpu_lacks_is_not_loaded(workloads, tmp_path):
    import tuner
    from tuner.core.config import TunedConfig
    from tuner.export.best_config import save_tuned_config
    from tuner.runtime.warmstart import CACHE_DIRNAME, CPU_FILE, DIGEST_KEY, bundle_digest
    from tuner.user.workload import load_workload

    bundle = tmp_path / CACHE_DIRNAME
    bundle.mkdir()
    (bundle / "mega_cache.bin").write_bytes(b"not a cache: unpickling it would raise")
    (bundle / CPU_FILE).write_text(json.dumps({"flags": HERE, "model": "a newer CPU",
                                               "required_flags": [*HERE, "avx512_fake"]}))
    path = save_tuned_config(TunedConfig(CompileConfig(backend="eager"), measured={DIGEST_KEY: bundle_digest(bundle)},
                                         tuned_on={"torch": torch.__version__, "device": "cpu"}),
                             tmp_path / "best_config.yaml")
    with pytest.warns(UserWarning, match=r"compiled for the CPU it was made on \(a newer CPU\), which has "
                                         r"avx512_fake; this CPU lacks them"):
        tuner.apply_config(load_workload(workloads / "mlp.py").make_model(), path)


# --------------------------------------------------------------------------- the vector ISA, the GPU, the compiler

#: A Sapphire Rapids' flags as /proc/cpuinfo lists them (the instruction sets that matter here).
SAPPHIRE_RAPIDS = [*V4, "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8"]


@x86_only
def test_the_vector_isa_at_a_named_level_is_the_levels_own_not_the_build_cpus_amx():
    from torch._inductor import config as inductor_config

    from tuner.pt2.build_target import cpu_target, level_cpu

    with inductor_config.patch({"cpp.vec_isa_ok": True}):  # the CPU's (fabricated) flags decide, no test kernel
        with level_cpu("x86-64-v4", SAPPHIRE_RAPIDS):
            _, v4 = cpu_target("x86-64-v4", SAPPHIRE_RAPIDS)
        with level_cpu("x86-64-v3", SAPPHIRE_RAPIDS):
            _, v3 = cpu_target("x86-64-v3", SAPPHIRE_RAPIDS)
    assert v4["vector_isa"] == "avx512" and v4["required_flags"] == level_flags("x86-64-v4")
    assert not any(x in v4["vector_options"] for x in ("amx", "vnni", "bf16")), v4["vector_options"]
    assert v3["vector_isa"] == "avx2" and v3["required_flags"] == level_flags("x86-64-v3")
    # an EPYC with x86-64-v4 and no AMX, VNNI or BF16 runs it
    refuse_cpu(Path("model.pt2"), v4, V4)


@x86_only
def test_a_cuda_package_is_built_for_a_portable_cpu_level_and_records_it():
    from torch._inductor import config as inductor_config

    from tuner.pt2.build_target import cpu_target, level_cpu

    level = choose_level(None, SAPPHIRE_RAPIDS, device="cuda:0")
    assert level == machine.PORTABLE == "x86-64-v3"
    assert choose_level(None, SAPPHIRE_RAPIDS, device="cpu") == "x86-64-v4"  # a CPU package: the highest here
    assert choose_level("x86-64-v4", SAPPHIRE_RAPIDS, device="cuda:0") == "x86-64-v4"  # asked for by name
    with inductor_config.patch({"cpp.vec_isa_ok": True}), level_cpu(level, SAPPHIRE_RAPIDS):
        options, cpu = cpu_target(level, SAPPHIRE_RAPIDS)
    assert options == {"cpp.march": "x86-64-v3", "cpp.simdlen": 256}
    assert cpu["isa_level"] == "x86-64-v3" and cpu["required_flags"] == level_flags("x86-64-v3")
    refuse_cpu(Path("model.pt2"), cpu, V3)  # the same GPU behind any AVX2 server


def test_sass_runs_on_the_same_major_at_an_equal_or_higher_minor_and_arch_specific_targets_on_their_own():
    def on(built, here):
        return cuda_mismatch({"capability": built, "name": "built", "cuda": "12.8"},
                             {"capability": here, "name": "here", "cuda": "12.8"})

    assert on([8, 0], [8, 6]) is None and on([8, 0], [8, 9]) is None and on([8, 6], [8, 9]) is None
    assert on([8, 6], [8, 0]) == "its kernels are compiled for compute capability 8.6 (built); this GPU is 8.0 (here)"
    assert on([7, 5], [8, 0]) is not None and on([8, 0], [9, 0]) is not None
    # Triton builds sm_90a / sm_100a from 9.0 on: that capability alone
    assert on([9, 0], [9, 0]) is None and on([10, 0], [10, 3]) is not None


def test_a_package_for_a_cuda_device_this_process_lacks_is_refused_in_one_line():
    assert machine.missing_device("cuda:1", 1) == "built for cuda:1, and this process sees 1 CUDA device (cuda:0)"
    assert machine.missing_device("cuda", 1) is None and machine.missing_device("cuda:1", 2) is None


def test_a_build_whose_compiler_recorded_no_switches_is_not_verified():
    from tuner.pt2.build_target import off_target

    cpu = {"isa_level": "x86-64-v3", "required_flags": level_flags("x86-64-v3")}
    assert off_target([], cpu) == (False, None)
    assert off_target(["-mavx2"], cpu) == (False, None)  # no -march among them: the level is unchecked
    assert off_target(["-march=x86-64-v3", "-mavx2", "-mfma"], cpu) == (True, None)
    assert off_target(["-march=x86-64-v3", "-mavx512f"], cpu)[1].startswith("inductor compiled for avx512f")


def test_the_fallback_stops_when_two_configs_fail_with_the_same_error():
    from tuner.pt2.build import same_error

    one = {"change": "as tuned", "error": "CppCompileError: C++ compile error"}
    two = {"change": "as tuned, weights folded at build time", "error": one["error"]}
    assert same_error([one]) is None and same_error([one, {**two, "error": "InductorError: other"}]) is None
    stop = same_error([one, two])
    assert stop["category"] == "aoti_compile" and "with the same error" in stop["raw"]


def test_a_package_needing_a_newer_libstdcxx_or_glibc_is_refused():
    from tuner.pt2 import toolchain

    path, have = toolchain.libstdcxx_here()
    if have is None:
        pytest.skip("no libstdc++ readable here")
    assert toolchain.toolchain_mismatch({"glibcxx": have, "glibc": toolchain.glibc_here()}) is None
    assert toolchain.toolchain_mismatch({"glibcxx": "3.4.99"}) == (
        f"its code needs libstdc++ with GLIBCXX_3.4.99; this process's ({path}) has up to GLIBCXX_{have}")
    assert toolchain.toolchain_mismatch({"glibc": "9.99"}).startswith("its code needs glibc 9.99; this machine has")


def fake_gcc10(where: Path) -> Path:
    """A ``g++`` that answers as gcc 10 does: the x86-64-vN levels (new in gcc 11) are bad values."""
    import shutil

    real = shutil.which("g++") or shutil.which("c++")
    if real is None:
        pytest.skip("no C++ compiler here")
    wrapper = where / "g++-10"
    wrapper.write_text(f"""#!/bin/sh
case "$1" in -dumpfullversion|-dumpversion) echo 10.2.1; exit 0;; esac
for a in "$@"; do
  case "$a" in -march=x86-64-v*)
    echo "cc1plus: error: bad value ('${{a#-march=}}') for '-march=' switch" >&2
    echo "cc1plus: note: valid arguments to '-march=' switch are: nocona core2 nehalem ... native" >&2
    exit 1;;
  esac
done
exec {real} "$@"
""")
    wrapper.chmod(0o755)
    return wrapper


@x86_only
@pytest.mark.skipif(HERE is None or highest_level(HERE or []) is None, reason="no x86-64 level on this CPU")
def test_a_compiler_without_the_level_is_refused_in_one_line_before_anything_is_built(tmp_path):
    """`compile-tune package`, in a real process with CXX pointing at a gcc 10: exit 2, one error line
    naming the compiler and the level, and nothing exported or compiled (no study is even read:
    there is none here)."""
    import subprocess
    import sys

    from conftest import ROOT

    from tuner.core.config import TunedConfig
    from tuner.export.best_config import save_tuned_config

    gcc10 = fake_gcc10(tmp_path)
    save_tuned_config(TunedConfig(CompileConfig(), verdict="compile", tuned_on={"device": "cpu"}),
                      tmp_path / "best_config.yaml")
    proc = subprocess.run([sys.executable, "-m", "tuner", "package", str(tmp_path)], capture_output=True, text=True,
                          timeout=300, env={**__import__("os").environ, "PYTHONPATH": str(ROOT), "CXX": str(gcc10),
                                            "XDG_CACHE_HOME": str(tmp_path / "cache")})
    level = highest_level(HERE)
    err = proc.stderr.splitlines()
    assert proc.returncode == 2, proc.stderr
    assert err[0] == (f"error: the C++ compiler {gcc10} (version 10.2.1) cannot build for -march={level}: cc1plus: "
                      f"error: bad value ('{level}') for '-march=' switch"), err
    assert err[1].startswith("hint: give --isa native") and len(err) == 2, err
    assert not (tmp_path / "work").exists() and not (tmp_path / "model.pt2").exists()
    # the answer is kept per compiler and flags: asked again, the compiler is not run
    assert len(list((tmp_path / "cache" / "compile-tune").glob("cxx-probe-*.json"))) == 1
