"""Architecture checks: every module imports on its own, and imports flow one way.

Layers (lower never imports higher): base (errors, units, rng, paths, metrics, jit) ->
workload, hardware, models -> perf -> queueing -> sim -> plan -> bench -> report -> exec -> cli.
Only ``fleetplan.cli`` may import click or rich.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "fleetplan"
LAYER = {
    "errors": 0, "atomic": 0,
    "memo": 0,  # bounded memos keyed by object identity (pools, queueing)
    "names": 0,
    "units": 0,
    "rng": 0,
    "paths": 0,
    "metrics": 0,
    "parallel": 0,
    "jit": 0,  # numba's options for every kernel (sim's and queueing's): imports numba, no fleetplan module
    "__init__": 0,
    "workload": 1,
    "hardware": 1,
    "models": 1,
    "perf": 2,
    "queueing": 3,
    "sim": 4,
    "plan": 5,
    "bench": 5.5,  # serving-benchmark clients: above sim (and plan's peers), below report
    "report": 6,
    "deploy": 6,  # a saved run as deployment files (fleet file, engine commands, manifests): formats, like report
    "exec": 7,
    "cli": 8,
}
MODULES = sorted(
    ".".join(p.relative_to(PKG.parent).with_suffix("").parts) for p in PKG.rglob("*.py") if "__pycache__" not in p.parts
)


def _layer(module: str) -> int:
    parts = module.split(".")
    return LAYER[parts[1]] if len(parts) > 1 else 0


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


@pytest.mark.parametrize("module", MODULES)
def test_imports_flow_one_way(module):
    path = PKG.parent.joinpath(*module.split(".")).with_suffix(".py")
    me = _layer(module)
    for imported in _imports(path):
        root = imported.split(".")[0]
        if root in ("click", "rich"):
            assert module.startswith("fleetplan.cli"), f"{module} imports {imported}: only fleetplan.cli may"
        if root == "fleetplan" and "." in imported:
            if module == "fleetplan.__init__":
                continue
            assert _layer(imported) <= me, f"{module} (layer {me}) imports higher layer {imported}"
    if "._kernels" in module:
        allowed = {"numpy", "numba", "math", "collections", "__future__"}  # collections: namedtuple state groups
        package = module[:module.index("._kernels") + len("._kernels")]  # its own kernel package
        if module == "fleetplan.sim._kernels.jit":  # re-exports the options module, registers its helper tree
            allowed |= {"pathlib", "fleetplan.jit"}
        if module == package + ".__init__":  # a kernel package registers its folder as a helper tree
            allowed |= {"pathlib"}
        for imported in _imports(path):
            root = imported.split(".")[0]
            assert (root in allowed or imported in allowed or imported.startswith(package)
                    or imported in KERNEL_IMPORTS_OUTSIDE
                    or (package != "fleetplan.sim._kernels" and imported == "fleetplan.jit")), (module, imported)


def test_the_jit_options_module_imports_no_fleetplan_module():
    """``fleetplan.jit`` sits in the base layer (both sim's and queueing's kernels import it)."""
    imported = _imports(PKG / "jit.py")
    assert not {m for m in imported if m.split(".")[0] == "fleetplan"}, imported
    assert {m.split(".")[0] for m in imported} <= {"__future__", "functools", "os", "pathlib", "numba"}, imported


#: The only modules outside ``sim/_kernels`` that kernels may import: plain ``math`` functions that
#: numba compiles unchanged, so perf and the kernels share one implementation (the roofline terms).
KERNEL_IMPORTS_OUTSIDE = {"fleetplan.perf.step_terms"}


def test_kernel_imports_outside_are_plain_math():
    """What the kernels import from outside ``sim/_kernels`` imports nothing but ``math``."""
    for module in KERNEL_IMPORTS_OUTSIDE:
        path = PKG.parent.joinpath(*module.split(".")).with_suffix(".py")
        assert _imports(path) <= {"math", "__future__"}, module


def test_every_module_imports_in_a_fresh_interpreter():
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\n"
    mods = [m.removesuffix(".__init__") for m in MODULES]
    subprocess.run([sys.executable, "-c", code, *mods], check=True, timeout=120)
