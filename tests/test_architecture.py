"""The package's layers (ARCHITECTURE.md) as a test: every import of our own modules, at module
level or inside a function, goes to a layer the importer may use, and the import graph has no
cycle. Since function-level imports count like any other, none can hide a cycle."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "tuner"

#: module (or subpackage) -> layer, as in ARCHITECTURE.md
LAYER_OF = {
    "errors": 0, "interrupts": 0, "heap": 0, "config": 0, "score": 0, "space": 0, "spec": 0, "launch": 0, "storage": 0,
    "_version": 0, "export": 0, "targets": 0, "lanes": 0, "caches": 0, "budget": 0, "dynamo_settings": 0, "shapes": 0, "precision": 0,
    "repair": 0, "autospace": 0, "config_defaults": 0, "space_file": 0,
    "workload": 1, "diagnose": 1, "runtime": 1,
    "measure": 2,
    "isolated": 3, "forkserver": 3,
    "study": 4,
    "search": 5, "confirm": 5, "verdict": 5, "dead_ends": 5,
    "report": 6,
    "pipeline": 7, "options": 7, "run": 7, "package": 7, "outputs": 7, "workers": 7, "thread_check": 7, "bundle": 7, "progress": 7,
    "cli": 8, "cli_ship": 8, "_worker": 8, "__init__": 8, "__main__": 8,
}
#: layer -> the layers it may import (its own included)
MAY_IMPORT = {
    0: {0}, 1: {0, 1}, 2: {0, 1, 2}, 3: {0, 1, 3}, 4: {0, 1, 4}, 5: {0, 1, 3, 4, 5}, 6: {0, 1, 4, 6},
    7: {0, 1, 2, 3, 4, 5, 6, 7}, 8: set(range(9)),
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str]) -> list[tuple[str, int]]:
    """Our modules that ``name`` imports, with line numbers (function-level imports included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            # `from . import interrupts` imports the submodule, `from .x import y` the module x
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        found += [(t, node.lineno) for t in targets if t == "tuner" or t.startswith("tuner.")]
    return found


def layer(name: str) -> int:
    parts = name.split(".")
    key = parts[1] if len(parts) > 1 else "__init__"
    assert key in LAYER_OF, f"{name}: not in any layer; add it to ARCHITECTURE.md and LAYER_OF"
    return LAYER_OF[key]


def graph() -> dict[str, list[tuple[str, int]]]:
    mods = modules()
    return {name: imports_of(name, path, set(mods)) for name, path in mods.items()}


def test_every_module_has_a_layer():
    for name in modules():
        layer(name)


def test_imports_only_go_down():
    upward = []
    for name, edges in graph().items():
        for target, line in edges:
            if target != name and layer(target) not in MAY_IMPORT[layer(name)]:
                upward.append(f"{name}:{line} imports {target} (layer {layer(name)} -> {layer(target)})")
    assert not upward, "imports against ARCHITECTURE.md:\n" + "\n".join(upward)


def test_no_import_cycle():
    edges = {name: {t for t, _ in targets if t != name} for name, targets in graph().items()}
    state: dict[str, str] = {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = "open"
        for target in sorted(edges.get(name, ())):
            if state.get(target) == "open":
                pytest.fail("import cycle: " + " -> ".join(path[path.index(target):] + [target]))
            if target not in state:
                visit(target, path + [target])
        state[name] = "done"

    for name in sorted(edges):
        if name not in state:
            visit(name, [name])


def test_the_checker_sees_function_level_and_relative_imports(tmp_path):
    """The walker itself: a function-level relative import of a module in a higher layer is found."""
    fake = PACKAGE / "runtime" / "apply.py"
    found = dict(imports_of("tuner.runtime.apply", fake, set(modules())))
    assert "tuner.config" in found  # `from ..config import ...`
    source = tmp_path / "x.py"
    source.write_text("def f():\n    from ..pipeline import tune\n    from . import warmstart\n")
    found = [t for t, _ in imports_of("tuner.runtime.x", source, set(modules()))]
    assert found == ["tuner.pipeline", "tuner.runtime.warmstart"]
    assert layer("tuner.pipeline") not in MAY_IMPORT[layer("tuner.runtime.x")]


def _documented_layers(path: Path) -> dict[str, int]:
    """module -> layer, from the layer table of an architecture page (``| 3 name | `a`, `b/` | ... |``)."""
    import re

    table = {}
    for line in path.read_text().splitlines():
        m = re.match(r"\| (\d) [^|]+\| ([^|]+) \|", line)
        if m:
            for name in re.findall(r"`([^`]+)`", m.group(2)):
                table[name.rstrip("/")] = int(m.group(1))
    return table


@pytest.mark.parametrize("page", ["ARCHITECTURE.md", "docs/architecture.md"])
def test_the_documented_layer_table_is_this_tests_table(page):
    """The pages say what the code holds: a module added, moved or renamed fails here until both agree."""
    documented = _documented_layers(PACKAGE.parent / page)
    assert documented == LAYER_OF, (
        f"{page} lists {sorted(set(documented.items()) - set(LAYER_OF.items()))}; "
        f"this test lists {sorted(set(LAYER_OF.items()) - set(documented.items()))}")


def test_no_data_layer_module_imports_torch_optuna_or_pandas_at_module_level():
    """Layer 0 is values and rules: importing it costs no torch (tuner.apply_config's import path,
    the CLI's start-up, the report rebuilt without torch)."""
    import ast

    heavy = {"torch", "optuna", "pandas", "matplotlib"}
    found = []
    for name, layer in LAYER_OF.items():
        if layer != 0:
            continue
        path = PACKAGE / f"{name}.py"
        files = [path] if path.exists() else sorted((PACKAGE / name).glob("*.py"))
        for file in files:
            for node in ast.parse(file.read_text()).body:  # module level only
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
                found += [f"{file.name}: {n}" for n in names if n.split(".")[0] in heavy]
    assert not found, found
