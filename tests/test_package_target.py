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
from tuner.runtime import machine_facts
from tuner.runtime.machine_facts import LEVELS, NATIVE, choose_level, cuda_mismatch, highest_level, level_flags
from tuner.runtime.package_meta import refuse_cpu

V2 = list(LEVELS["x86-64-v2"])
V3 = V2 + list(LEVELS["x86-64-v3"])
V4 = V3 + list(LEVELS["x86-64-v4"])
HERE = machine_facts.cpu_flags()
x86_only = pytest.mark.skipif(not machine_facts.x86(), reason="x86-64 ISA levels")


@x86_only
def test_the_isa_level_is_the_highest_whose_flags_the_cpu_has_and_the_vector_isa_adds_its_own():
    assert highest_level([]) is None and highest_level(V2) == "x86-64-v2"
    assert highest_level([*V3, "avx512f"]) == "x86-64-v3" and highest_level(V4) == "x86-64-v4"
    assert machine_facts.required_flags("x86-64-v3", V4, "-mavx2 -mfma -mf16c") == level_flags("x86-64-v3")
    # inductor's 512-bit ISA on a CPU with VNNI emits VNNI: a v4 package from it needs that too
    assert "avx512_vnni" in machine_facts.required_flags("x86-64-v4", V4, "-mavx512f -mfma -mavx512vnni")
    native = machine_facts.required_flags(NATIVE, [*V4, "hypervisor", "constant_tsc"])
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
    monkeypatch.setattr(machine_facts, "cpu_flags", lambda: V3)
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
