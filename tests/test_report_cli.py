"""`compile-tune report` and `compile-tune show` in real processes; one real tuning run; the report
opened in headless Chromium."""
import os
import re
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import optuna
import pytest
import studies
import yaml
from conftest import ROOT

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is not installed "
                                    "(Debian: apt-get install -y chromium)")
OUTPUTS = ("report.html", "report.md", "trials.csv", "best_config.yaml")


@pytest.fixture
def run_dir(tmp_path):
    """An output folder holding only a study.db (the mixed study: compile verdict, failures, a pruned trial)."""
    out = tmp_path / "tiny"
    out.mkdir()
    studies.mixed_study(out / "study.db")
    return out


def load(out: Path, name: str = "tiny"):
    return optuna.load_study(study_name=name, storage=f"sqlite:///{out / 'study.db'}")


def test_report_rebuilds_every_output_from_the_storage_alone(run_dir, cli):
    before = len(load(run_dir).trials)
    proc = cli("report", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[:4] == [str(run_dir / name) for name in OUTPUTS]
    assert "verdict: compile with blocks/inductor/default freezing=True" in proc.stdout
    assert len(load(run_dir).trials) == before
    best = yaml.safe_load((run_dir / "best_config.yaml").read_text())
    assert best["verdict"] == "compile" and best["measured"]["trial"] == 2
    assert best["tuned_on"]["date"] == "2025-11-30", "the day the numbers were measured, not today"
    assert (run_dir / "report.md").read_text().startswith("# compile-tune report: tiny\n")


def test_report_asks_for_a_study_name_when_the_storage_holds_several(run_dir, cli):
    studies.all_failed_study(run_dir / "study.db")
    proc = cli("report", str(run_dir))
    assert proc.returncode == 2
    first, hint = proc.stderr.splitlines()[:2]
    assert first == f"error: sqlite:///{run_dir / 'study.db'} holds 2 studies (broken, tiny)"
    assert hint == "hint: pick one with --study NAME"
    proc = cli("report", str(run_dir), "--study", "broken")
    assert proc.returncode == 0, proc.stderr
    assert "## Stay eager" in (run_dir / "report.md").read_text()


def test_report_with_an_unknown_study_name_is_refused(run_dir, cli):
    proc = cli("report", str(run_dir), "--study", "nope")
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: no study named 'nope' in sqlite:///{run_dir / 'study.db'} (it has: tiny)")


def test_report_on_a_missing_folder_is_refused(tmp_path, cli):
    proc = cli("report", str(tmp_path / "nowhere"))
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"error: {tmp_path / 'nowhere'}: no such folder",
                                        "hint: give the output folder of a compile-tune run (--out)"]


def test_report_on_a_folder_without_a_study_is_refused(tmp_path, cli):
    proc = cli("report", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: {tmp_path}: no study.db in this folder\nhint: ")
    assert not (tmp_path / "study.db").exists(), "no empty storage is created"


def test_report_before_the_eager_baseline_is_refused(tmp_path, cli):
    optuna.create_study(study_name="fresh", storage=f"sqlite:///{tmp_path / 'study.db'}")
    proc = cli("report", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: study 'fresh' has no eager baseline yet, so there is nothing to report")


def test_show_prints_the_verdict_and_top_trials_from_the_storage(run_dir, cli):
    proc = cli("show", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", "no library warnings in the output"
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["#", "config", "total", "s", "compile", "s", "step", "ms", "speedup", "mem", "MB",
                                "breaks"]
    assert lines[1].split()[:2] == ["2", "blocks/inductor/default"], "best total first"
    assert "  #12 blocks/aot_eager dynamic=False: pruned - " in lines
    # the study holds no confirmation of its finalists, so the verdict says it is unconfirmed
    assert "verdict: compile with blocks/inductor/default freezing=True [unconfirmed: no confirmation recorded]" in lines


def test_show_without_a_storage_reads_best_config_and_trials_csv(run_dir, cli):
    assert cli("report", str(run_dir)).returncode == 0
    from_storage = cli("show", str(run_dir)).stdout
    (run_dir / "study.db").unlink()
    proc = cli("show", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == from_storage


def test_show_on_a_folder_without_results_is_refused(tmp_path, cli):
    proc = cli("show", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: {tmp_path}: no study.db or best_config.yaml in this folder")


# --------------------------------------------------------------------------- one real run


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    """A real run on the blocks model: eager, plain inductor and 5 cheap search trials (~30 s)."""
    from conftest import SPACES, WORKLOADS, run_cli

    out = tmp_path_factory.mktemp("real") / "blocks"
    proc = run_cli(str(WORKLOADS / "blocks.py"), "--space", str(SPACES / "logic.yaml"), "--trials", "5",
                   "--out", str(out), "--measure-seconds", "0.5", "--steps", "10000000", "--no-progress",
                   "--confirm", "0", "--no-check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def test_tuning_writes_report_html_and_md_next_to_trials_csv(real_run):
    for name in OUTPUTS:
        assert (real_run / name).is_file(), name
    best = yaml.safe_load((real_run / "best_config.yaml").read_text())
    md = (real_run / "report.md").read_text()
    heading = md.splitlines()[2]
    assert heading == "## Stay eager" if best["verdict"] == "stay_eager" else heading.startswith("## Compile with ")
    html = (real_run / "report.html").read_text()
    assert html.count("<svg") == 5, "every figure has data in a run with 5 finished search trials"
    assert "torch" in html and "tests/spaces/logic.yaml" in html


def test_report_on_a_copied_folder_gives_the_same_report_without_running_a_trial(real_run, tmp_path, cli):
    copy = tmp_path / "copy"
    shutil.copytree(real_run, copy)
    for name in OUTPUTS:
        (copy / name).unlink()
    trials_before = [(t.number, t.state, t.datetime_complete) for t in load(copy, "blocks").trials]
    work_before = sorted(p.name for p in (copy / "work").rglob("*"))
    proc = cli("report", str(copy))
    assert proc.returncode == 0, proc.stderr
    for name in ("report.md", "report.html", "trials.csv"):
        assert (copy / name).read_text() == (real_run / name).read_text(), name
    assert (yaml.safe_load((copy / "best_config.yaml").read_text())
            == yaml.safe_load((real_run / "best_config.yaml").read_text()))
    assert [(t.number, t.state, t.datetime_complete) for t in load(copy, "blocks").trials] == trials_before
    assert sorted(p.name for p in (copy / "work").rglob("*")) == work_before, "no trial process ran"


def chromium(*args: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=120)


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


@needs_chromium
def test_report_of_a_real_run_opens_in_headless_chromium_with_every_figure_drawn(real_run, tmp_path):
    shutil.copytree(real_run, tmp_path / "run")
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "screenshot_report.sh"), str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("5 figures drawn, 0 without data")
    png = tmp_path / "run" / "report.png"
    assert png_size(png) == (1400, 4000)
    assert png.stat().st_size > 100_000, "a blank page compresses to a few KB"
    dom = (tmp_path / "run" / "report.dom.html").read_text()
    assert len(re.findall(r"<svg\b", dom)) == 5 and 'class="empty"' not in dom
    assert 'data-dir="asc"' not in dom, "nothing sorted before a click"


@needs_chromium
def test_clicking_a_header_sorts_the_trials_table_numerically(run_dir, cli, tmp_path):
    assert cli("report", str(run_dir)).returncode == 0
    html = (run_dir / "report.html").read_text()
    # Click "compile" (6th column) once, then record the trial numbers in table order.
    probe = ("<script>var t = document.querySelector('table.sortable'); t.tHead.rows[0].cells[5].click();"
             "document.body.dataset.order = Array.from(t.tBodies[0].rows, r => r.cells[0].textContent).join(',');"
             "</script></body>")
    page = tmp_path / "probe.html"
    page.write_text(html.replace("</body>", probe))
    proc = chromium("--dump-dom", f"file://{page}")
    order = re.search(r'data-order="([^"]*)"', proc.stdout).group(1).split(",")
    # compile time ascending: eager 0, then 2.5, 3, 11 (#2 and its repeat #8), 12, 16, 17, 45; unmeasured last.
    assert order[:9] == ["0", "6", "5", "2", "8", "3", "7", "1", "4"]
    assert sorted(order[9:], key=int) == ["9", "10", "11", "12"]
