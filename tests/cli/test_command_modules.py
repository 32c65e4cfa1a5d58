"""Commands do not import each other: plumbing two commands share lives in an options module
(``options``, ``plan_options``, ``model_options``, ``failure_options``, ``report_output``, ...)."""

from __future__ import annotations

import ast
from pathlib import Path

import fleetplan.cli

CLI = Path(fleetplan.cli.__file__).resolve().parent


def _imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
    return names


def test_no_command_module_imports_another():
    commands = {f"fleetplan.cli.{p.stem}" for p in CLI.glob("*_cmd.py")}
    found = [(p.name, m) for p in sorted(CLI.glob("*.py")) if p.stem.endswith("_cmd")
             for m in sorted(_imported(p) & commands) if m != f"fleetplan.cli.{p.stem}"]
    assert not found, found
