"""The package's layers (ARCHITECTURE.md) as a test: every import of our own modules, at module
level or inside a function, goes to a layer the importer may use, and the import graph has no
cycle. Since function-level imports count like any other, none can hide a cycle."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "tuner"

#: module (or subpackage) -> layer, as in ARCHITECTURE.md; a subpackage's module may have a layer
#: of its own ("ranks.rank"), looked up before its subpackage's ("ranks")
LAYER_OF = {
    "core": 0, "_version": 0,
    "system": 1,
    "space": 2, "export": 2,
    "user": 3, "runtime": 3, "pt2": 3,
    "measure": 4, "ranks.rank": 4, "ranks.main": 4,
    "pt2.build": 4, "pt2.build_target": 4, "pt2.attempts": 4, "pt2.bounds": 4,
    "isolation": 5, "ranks": 5, "ranks.group": 5, "ranks.board": 5, "ranks.node": 5,
    "study": 6,
    "decide": 7,
    "report": 8,
    "run": 9, "ship": 9, "pt2.command": 9,
    "cli": 10, "cli_ship": 10, "_worker": 10, "__init__": 10, "__main__": 10,
}
#: layer -> the layers it may import (its own included)
MAY_IMPORT = {
    0: {0}, 1: {0, 1}, 2: {0, 1, 2}, 3: {0, 1, 2, 3}, 4: {0, 1, 2, 3, 4}, 5: {0, 1, 2, 3, 5}, 6: {0, 1, 2, 3, 6},
    7: {0, 1, 2, 3, 5, 6, 7}, 8: {0, 1, 2, 3, 6, 8}, 9: set(range(10)), 10: set(range(11)),
}
#: the layers below the user's side: values, the system, the space and the exports
BELOW_THE_USER = {0, 1, 2}


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
    if len(parts) > 2 and f"{parts[1]}.{parts[2]}" in LAYER_OF:
        key = f"{parts[1]}.{parts[2]}"
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
    assert "tuner.core.config" in found  # `from ..core.config import ...`
    source = tmp_path / "x.py"
    source.write_text("def f():\n    from ..run.pipeline import tune\n    from . import warmstart\n")
    found = [t for t, _ in imports_of("tuner.runtime.x", source, set(modules()))]
    assert found == ["tuner.run.pipeline", "tuner.runtime.warmstart"]
    assert layer("tuner.run.pipeline") not in MAY_IMPORT[layer("tuner.runtime.x")]


def _documented_layers(path: Path) -> dict[str, int]:
    """module -> layer, from the layer table of an architecture page (``| 3 name | `a`, `b/` | ... |``)."""
    import re

    table = {}
    for line in path.read_text().splitlines():
        m = re.match(r"\| (\d+) [^|]+\| ([^|]+) \|", line)
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


def _files_of(name: str) -> list[Path]:
    path = PACKAGE / f"{name.replace('.', '/')}.py"
    return [path] if path.exists() else sorted((PACKAGE / name).glob("*.py"))


def _module_level_imports(file: Path) -> list[str]:
    names = []
    for node in ast.parse(file.read_text()).body:  # module level only
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names.append(node.module or "")
    return names


def test_nothing_below_the_users_side_imports_torch_optuna_or_pandas_at_module_level():
    """The core, the system, the space and the exports cost no torch to import (tuner.apply_config's
    import path, the CLI's start-up, the report rebuilt without torch)."""
    heavy = {"torch", "optuna", "pandas", "matplotlib"}
    found = [f"{file.relative_to(PACKAGE)}: {n}" for name, layer in LAYER_OF.items() if layer in BELOW_THE_USER
             for file in _files_of(name) for n in _module_level_imports(file) if n.split(".")[0] in heavy]
    assert not found, found


#: what reads or writes a file, starts a process or changes the process: none of it in the core
_EFFECTS = {"open", "read_text", "write_text", "read_bytes", "write_bytes", "mkdir", "unlink", "rmdir", "rename",
            "touch", "safe_load", "safe_dump", "load", "dump", "Popen", "run", "system", "chdir", "putenv"}
_EFFECT_MODULES = {"os", "shutil", "subprocess", "tempfile", "signal", "ctypes", "yaml", "sqlite3", "socket"}


def _effects(file: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(file.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            base = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
            if name in _EFFECTS and (base not in {"json"} or name in {"load", "dump"}):
                found.append(f"{file.name}:{node.lineno} {base + '.' if base else ''}{name}()")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [f"{file.name}:{node.lineno} imports {m}" for m in mods
                      if not getattr(node, "level", 0) and m.split(".")[0] in _EFFECT_MODULES]
    return found


def test_the_core_touches_no_file_and_no_process():
    """The core is values and rules: whatever reads or writes a file (best_config.yaml is
    tuner/export/best_config.py), starts a process or changes this one lives in a package above it."""
    found = [e for file in _files_of("core") for e in _effects(file)]
    assert not found, found


def test_the_effects_check_sees_a_file_written(tmp_path):
    source = tmp_path / "x.py"
    source.write_text("import yaml\nfrom pathlib import Path\n\ndef save(p):\n    Path(p).write_text(yaml.safe_dump({}))\n")
    assert _effects(source) == ["x.py:1 imports yaml", "x.py:5 write_text()", "x.py:5 yaml.safe_dump()"]
