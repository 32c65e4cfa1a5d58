"""The module import graph has no loops (beside ``tests/test_layering.py``, which checks direction).

The graph is built with ``ast`` from every module of ``fleetplan``: an edge a -> b for each
``import b`` / ``from b import x`` in a (``from pkg import sub`` names the submodule ``pkg.sub``
when it is one, else ``pkg``'s ``__init__``; relative imports resolved).  Edges are of two
classes: run-time (module level or inside a function: both execute) and type-only (under
``if TYPE_CHECKING:``).  A loop makes a module impossible to read or test alone and is where
import time hides, so the run-time graph must have none, and neither may the graph with the
type-only edges added (a result type in its own module removes such a loop).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "fleetplan"


def _module_of(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_of(p): p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The fleetplan modules ``node`` (in ``module``) imports."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = f"{package}.{base}" if base else package
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
    return {n for n in names if n in MODULES and n != module}


def import_edges() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(run-time, type-only) edges of every fleetplan module."""
    run: dict[str, set[str]] = {m: set() for m in MODULES}
    typed: dict[str, set[str]] = {m: set() for m in MODULES}

    def visit(module: str, node: ast.AST, type_only: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(module, child, True)
            for child in node.orelse:
                visit(module, child, type_only)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            (typed if type_only else run)[module] |= _targets(module, node)
        for child in ast.iter_child_nodes(node):
            visit(module, child, type_only)

    for module, path in MODULES.items():
        visit(module, ast.parse(path.read_text()), False)
    return run, typed


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    return out


RUN, TYPED = import_edges()


def test_the_graph_sees_every_kind_of_import():
    """The builder resolves absolute, relative, submodule and TYPE_CHECKING imports (a check of the check)."""
    assert "fleetplan.plan.sweep" in RUN["fleetplan.plan.optimize"]  # from fleetplan.plan.sweep import ...
    assert "fleetplan.queueing.engine" in RUN["fleetplan.plan.pools"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_run_time_import_loop():
    assert cycles(RUN) == []


def test_no_import_loop_even_through_type_only_imports():
    both = {m: RUN[m] | TYPED[m] for m in MODULES}
    assert cycles(both) == []


@pytest.mark.parametrize("module", ["fleetplan.plan.horizon.plan", "fleetplan.cli.errors",
                                    "fleetplan.plan.optimize", "fleetplan.plan.sweep", "fleetplan.hardware.power"])
def test_the_loops_of_issue_28_are_gone(module):
    both = {m: RUN[m] | TYPED[m] for m in MODULES}
    assert not [c for c in cycles(both) if module in c]
