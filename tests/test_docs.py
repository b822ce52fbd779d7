"""The documentation a newcomer follows: README.md and the MkDocs site in docs/.

Light checks only (no tune, no compile): the README stays short and names the commands CI
really runs, every Python block parses, the own-model workload file loads and runs eagerly,
every `compile-tune` command line parses with the CLI's own parsers, README's links into docs/
exist, and `mkdocs build --strict` passes.
"""
from __future__ import annotations

import argparse
import ast
import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tuner import cli

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
README_MAX_LINES = 200


def fenced_blocks(path: Path) -> list[tuple[str, str, int]]:
    """Every ``` block of a Markdown file as (language, text, line of its opening fence)."""
    blocks, lines = [], path.read_text().split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"\s*```(\S*)", lines[i])
        if m:
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith("```"):
                j += 1
            blocks.append((m.group(1), "\n".join(lines[i + 1:j]), i + 1))
            i = j
        i += 1
    return blocks


def section(path: Path, heading: str) -> str:
    """The text of the `## heading` section of a Markdown file, up to the next `## `."""
    text = path.read_text()
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def command_lines() -> list[tuple[str, list[str]]]:
    """Every `compile-tune ...` command in a ``` block: (file:line, argv after the program name).

    A line may start with `$ `, chain commands with `&&`, continue with a trailing backslash and
    end in a `# comment`."""
    found = []
    for page in PAGES:
        for lang, text, fence in fenced_blocks(page):
            if lang not in ("", "bash", "sh", "console", "shell"):
                continue
            lines = text.split("\n")
            for i, raw in enumerate(lines):
                if i and lines[i - 1].endswith("\\"):
                    continue  # joined to the line it continues
                j = i
                while lines[j].endswith("\\") and j + 1 < len(lines):
                    j += 1
                    raw = raw[:-1] + " " + lines[j]
                for part in raw.strip().removeprefix("$ ").split("&&"):
                    if part.split()[:1] in (["compile-tune"], [".venv/bin/compile-tune"]):
                        found.append((f"{page.relative_to(ROOT)}:{fence + 1 + i}", shlex.split(part, comments=True)[1:]))
    return found


class _Parsed(Exception):
    """Raised in place of running a subcommand once its parser has accepted the arguments."""


def parse_subcommand(name: str, argv: list[str], monkeypatch) -> argparse.Namespace:
    """Parse `compile-tune NAME ARGV` with the parser the subcommand builds, and run nothing."""
    original = argparse.ArgumentParser.parse_args

    def parse_only(self, args=None, namespace=None):
        raise _Parsed(original(self, args, namespace))

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_only)
    with pytest.raises(_Parsed) as parsed:
        getattr(cli, f"_{name}")(argv)
    return parsed.value.args[0]


# --------------------------------------------------------------------------- README


def test_readme_is_shorter_than_200_lines():
    lines = README.read_text().count("\n")
    assert lines < README_MAX_LINES, f"README.md has {lines} lines; move details into docs/"


def test_readme_fresh_machine_section_has_the_commands_ci_runs():
    fresh = section(README, "Fresh machine: two commands")
    ci_run, wheel_check = (ROOT / ".ci/run").read_text(), (ROOT / ".ci/wheel_check").read_text()
    torch_pins = set(re.findall(r"\btorch==[\w.+]+", ci_run + wheel_check))
    assert len(torch_pins) == 1, f"CI installs different torch versions: {torch_pins}"
    pin = torch_pins.pop()
    assert f".venv/bin/pip install {pin}" in fresh
    assert re.search(r"\.venv/bin/pip install .*-e '\.\[test\]'", ci_run)
    assert ".venv/bin/pip install -e '.[test]'" in fresh
    test_command = re.search(r"^(\.venv/bin/python -m pytest[^\n]*)$", ci_run, re.M).group(1)
    assert test_command == ".venv/bin/python -m pytest -q"
    assert test_command in fresh
    assert ".venv/bin/compile-tune examples/tiny_transformer.py" in fresh



def fresh_machine_commands(path: Path) -> list[str]:
    """The code blocks of a page's "Fresh machine: two commands" section, in order."""
    return re.findall(r"```\n(.*?)\n```", section(path, "Fresh machine: two commands"), re.S)


def test_the_docs_quick_start_gives_the_readmes_two_commands():
    """.ci/run runs the README's first command as written and its test command is the README's
    second, so the getting-started page, which gives the same two, is run by CI as well."""
    readme = fresh_machine_commands(README)
    assert len(readme) == 2
    assert fresh_machine_commands(DOCS / "getting-started.md") == readme
    assert "README.md" in (ROOT / ".ci/run").read_text() and "Fresh machine: two commands" in (
        ROOT / ".ci/run").read_text()

def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, as MkDocs (Python-Markdown's toc) makes them."""
    found = set()
    for heading in re.findall(r"^#+ (.+)$", page.read_text(), re.M):
        text = re.sub(r"[^\w\s-]", "", heading.replace("`", "")).strip().lower()
        found.add(re.sub(r"[-\s]+", "-", text))
    return found


def test_readme_links_into_docs_exist():
    links = re.findall(r"\]\((docs/[^)#\s]+)(?:#([^)\s]*))?\)", README.read_text())
    assert links, "README.md links to no page of docs/"
    missing = sorted({page for page, _ in links if not (ROOT / page).is_file()})
    assert not missing, f"README.md links to missing pages: {missing}"
    bad = sorted(f"{page}#{anchor}" for page, anchor in links if anchor and anchor not in anchors(ROOT / page))
    assert not bad, f"README.md links to headings that do not exist: {bad}"


# --------------------------------------------------------------------------- code in the docs


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_python_block_parses(page):
    for lang, text, line in fenced_blocks(page):
        if lang == "python":
            try:
                ast.parse(text)
            except SyntaxError as exc:
                pytest.fail(f"{page.relative_to(ROOT)}:{line}: {exc}")


def own_model_blocks() -> list[tuple[str, str]]:
    return [(f"{page.relative_to(ROOT)}:{line}", text) for page in PAGES
            for lang, text, line in fenced_blocks(page)
            if lang == "python" and "def build_model(" in text and "def example_inputs(" in text]


def test_readme_has_a_workload_file_to_copy():
    assert any(where.startswith("README.md") for where, _ in own_model_blocks())


@pytest.mark.parametrize("where,text", own_model_blocks(), ids=[w for w, _ in own_model_blocks()])
def test_workload_file_in_the_docs_loads_and_runs_eagerly(where, text, tmp_path):
    pytest.importorskip("transformers")
    import torch

    from tuner.user.workload import call_model, load_workload

    path = tmp_path / "my_model.py"
    path.write_text(text)
    workload = load_workload(path)
    model, inputs = workload.make_model(), workload.make_inputs()
    assert isinstance(model, torch.nn.Module), where
    with torch.no_grad():
        out = call_model(model.eval(), inputs)
    assert out is not None, where


# --------------------------------------------------------------------------- command lines


def test_the_docs_show_compile_tune_commands():
    assert len(command_lines()) >= 10


@pytest.mark.parametrize("where,argv", command_lines(), ids=[w for w, _ in command_lines()])
def test_compile_tune_command_in_the_docs_parses(where, argv, monkeypatch, capsys):
    name = argv[0] if argv and argv[0] in cli.SUBCOMMANDS else None
    try:
        if name is None:
            cli._tune_parser().parse_args(argv)
        elif name in ("show", "report"):
            cli._saved_run_parser(f"compile-tune {name}", "").parse_args(argv[1:])
        else:
            parse_subcommand(name, argv[1:], monkeypatch)
    except SystemExit as exc:  # --help and --version exit 0; a bad argument exits 2
        assert exc.code == 0, f"{where}: compile-tune {shlex.join(argv)}: {capsys.readouterr().err.strip()}"


# --------------------------------------------------------------------------- the site


def test_mkdocs_site_builds_in_strict_mode(tmp_path):
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed (pip install -e '.[test]' installs it)")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]


#: flags about the terminal, not the run: TuneOptions has no field for them
CLI_ONLY = {"help", "resume", "no_progress", "verbose", "version"}


def test_every_flag_whose_field_has_another_name_is_named_in_the_options_page():
    """`tuner.TuneOptions(...)` takes every flag by its field name; where that is not the flag's
    own name, docs/options.md says which it is."""
    import dataclasses

    from tuner.run.options import TuneOptions

    fields = {f.name for f in dataclasses.fields(TuneOptions)}
    page = (DOCS / "options.md").read_text()
    for action in cli._tune_parser()._actions:
        flags = [o for o in action.option_strings if o.startswith("--")]
        if not flags or action.dest in CLI_ONLY:
            continue
        assert action.dest in fields, f"{flags[0]} sets {action.dest!r}, which TuneOptions does not have"
        if action.dest != flags[0][2:].replace("-", "_"):
            assert f"`{flags[0]}` is `{action.dest}" in page, f"docs/options.md does not say `{flags[0]}` is `{action.dest}`"
