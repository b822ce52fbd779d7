"""compile-tune uses Optuna's public API only, so that an Optuna release inside the pinned range
cannot break it. One exception is allowed, in one function that says why
(``tuner.system.storage.stale_trial_numbers``)."""
from __future__ import annotations

import ast
from pathlib import Path

import optuna

PACKAGE = Path(__file__).resolve().parent.parent / "tuner"
OPTUNA = Path(optuna.__file__).parent
ALLOWED = {("storage.py", "stale_trial_numbers", "_get_stale_trial_ids")}


def optuna_private_names() -> set[str]:
    """Every private attribute Optuna defines: ``self._x = ...`` and ``def _x`` in its source."""
    names = set()
    for path in OPTUNA.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def private_uses(path: Path, private: set[str]) -> list[tuple[str, str, str, int]]:
    """(file, enclosing function, name, line) for each private Optuna access in ``path``."""
    found = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if isinstance(node, ast.Attribute) and node.attr in private:
            own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if not own:  # an object of ours with a name Optuna also uses is not Optuna's
                found.append((path.name, function, node.attr, node.lineno))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("optuna"):
            hidden = [p for p in node.module.split(".") if p.startswith("_")]
            hidden += [a.name for a in node.names if a.name.startswith("_")]
            found.extend((path.name, function, name, node.lineno) for name in hidden)
        if isinstance(node, ast.Import):
            found.extend((path.name, function, a.name, node.lineno) for a in node.names
                         if a.name.startswith("optuna") and any(p.startswith("_") for p in a.name.split(".")))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "setattr")
                and len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
                and str(node.args[1].value) in private):
            found.append((path.name, function, str(node.args[1].value), node.lineno))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(ast.parse(path.read_text()), "<module>")
    return found


def test_the_package_touches_no_private_optuna_attribute_outside_the_one_allowed_function():
    private = optuna_private_names()
    assert {"_storage", "_study_id", "_trial_id", "_get_stale_trial_ids"} <= private
    uses = [use for path in sorted(PACKAGE.rglob("*.py")) for use in private_uses(path, private)]
    unexpected = [use for use in uses if use[:3] not in ALLOWED]
    assert unexpected == [], "use Optuna's public API (see tuner/study/_store.py): " + ", ".join(
        f"{file}:{line} {name} in {fn}()" for file, fn, name, line in unexpected)
    assert {use[:3] for use in uses} == ALLOWED, "the exception is gone: remove it from ALLOWED"


def test_the_check_finds_what_it_is_for(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("from optuna.storages._heartbeat import is_heartbeat_enabled\n"
                      "def f(study, trial):\n    return study._storage, trial._trial_id, getattr(study, '_study_id')\n")
    names = [name for _, _, name, _ in private_uses(sample, optuna_private_names())]
    assert names == ["_heartbeat", "_storage", "_trial_id", "_study_id"]
