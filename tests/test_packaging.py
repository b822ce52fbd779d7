"""The built wheel is a complete install: every module of tuner and every bundled search space."""
import importlib.resources
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT

from tuner.space.space_file import bundled_dir, bundled_spaces

#: What setuptools reads to build the wheel (pyproject.toml names README.md as the long description).
SOURCES = ["pyproject.toml", "setup.py", "README.md", "tuner", "search_spaces"]


@pytest.fixture(scope="module")
def wheel_files(tmp_path_factory) -> set[str]:
    """The file list of a wheel built from a copy of the sources.

    A copy, because setuptools builds in the source tree and its build/lib keeps modules that
    were deleted since the last build: a wheel built in place can hold files the sources lack.
    """
    src, dist = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("dist")
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, src / name)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--disable-pip-version-check", "-w", str(dist), str(src)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = dist.glob("compile_tune-*.whl")
    return set(zipfile.ZipFile(wheel).namelist())


def test_wheel_holds_every_bundled_search_space(wheel_files):
    spaces = sorted(p.name for p in (ROOT / "search_spaces").glob("*.yaml"))
    assert {"default.yaml", "quick.yaml"} <= set(spaces)
    missing = [s for s in spaces if f"tuner/search_spaces/{s}" not in wheel_files]
    assert not missing, f"search spaces missing from the wheel: {missing}"


def test_wheel_holds_every_module_of_the_package(wheel_files):
    modules = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tuner").rglob("*.py")
                     if "__pycache__" not in p.parts)
    missing = [m for m in modules if m not in wheel_files]
    assert not missing, f"modules missing from the wheel (see setup.py): {missing}"
    assert "tuner/py.typed" in wheel_files


def test_wheel_holds_no_tests_or_repository_files(wheel_files):
    tops = {name.split("/")[0] for name in wheel_files if ".dist-info/" not in name}
    assert tops == {"tuner"}, sorted(tops)


def test_bundled_spaces_are_found_as_package_data():
    """In the editable install the tests run from, too: the package, not a path beside it."""
    assert bundled_spaces() == sorted(p.stem for p in (ROOT / "search_spaces").glob("*.yaml"))
    assert bundled_dir() == Path(str(importlib.resources.files("tuner.search_spaces")))


def test_a_source_checkout_run_without_installing_finds_the_bundled_spaces():
    # No editable finder: tuner imported from PYTHONPATH alone, as scripts/gpu_check.sh runs it.
    code = (
        "import sys\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in getattr(f, '__module__', '')]\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from tuner.space.search_space import load_space\nfrom tuner.space.space_file import bundled_spaces\n"
        "load_space('quick')\n"
        "print(' '.join(bundled_spaces()))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd="/")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == sorted(p.stem for p in (ROOT / "search_spaces").glob("*.yaml"))
