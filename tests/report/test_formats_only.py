"""``report/`` formats only: it imports no simulator and no computing function of ``plan`` (the
plan's result carries every figure, ``plan.figures``), so a saved run re-renders from its JSON alone
into the same files the run wrote."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from fleetplan.cli.main import cli

REPORT = Path(__file__).resolve().parents[2] / "fleetplan" / "report"
#: What ``report/`` may take from ``plan`` at run time: labels and constants, no computation
#: (result types are imported for annotations only, under ``TYPE_CHECKING``).
PLAN_NAMES_ALLOWED = {
    ("fleetplan.plan.sweep", "candidate_label"),  # "two-pool@4096 3xH100-SXM": a label
    ("fleetplan.plan.horizon.schedule", "fleet_label"),  # "2x H100 (0-4096 tok)": a label
    ("fleetplan.plan.disagg.candidates", "VERIFIED_BY"),  # how phase 2 checked a topology: labels
}


def _runtime_imports(tree: ast.Module) -> list[tuple[str, tuple[str, ...]]]:
    """``(module, names)`` of every import outside ``if TYPE_CHECKING:`` blocks."""
    out = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            out.extend((a.name, ()) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, tuple(a.name for a in node.names)))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return out


@pytest.mark.parametrize("path", sorted(REPORT.glob("*.py")), ids=lambda p: p.name)
def test_report_imports_no_simulator_and_no_plan_computation(path):
    for module, names in _runtime_imports(ast.parse(path.read_text())):
        assert not module.startswith("fleetplan.sim"), f"report/{path.name} imports {module}"
        if module.startswith("fleetplan.plan"):
            extra = {(module, n) for n in names} - PLAN_NAMES_ALLOWED
            assert names and not extra, f"report/{path.name} imports {sorted(extra) or module} from plan"


def test_re_rendering_a_run_file_loads_neither_the_simulator_nor_numba():
    """``fleetplan report RUN.json`` (optimize, whatif, grid-flex documents) runs on the JSON alone."""
    code = ("import sys, fleetplan.cli.report_cmd, fleetplan.report.run_json, fleetplan.report.html, "
            "fleetplan.report.plots, fleetplan.report.procurement\n"
            "print(' '.join(m for m in sys.modules if m.startswith('fleetplan.sim') or m == 'numba'))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         cwd=REPORT.parents[1])
    assert out.stdout.split() == []


RUNS = {
    "analytic": ("optimize", "--workload", "lmsys", "--slo-ttft", "500", "--gpus", "h100", "--topology",
                 "homo,two-pool", "--no-verify", "--quiet"),
    "simulated": ("optimize", "--workload", "lmsys", "--slo-ttft", "500", "--gpus", "h100,a100", "--topology",
                  "homo,two-pool", "--verify-top", "1", "--sim-requests", "1000", "--replications", "2",
                  "--no-headroom", "--workers", "1", "--quiet"),
}


@pytest.mark.parametrize("run", sorted(RUNS))
def test_a_saved_run_re_renders_into_the_same_files(run, tmp_path):
    from fleetplan.report.procurement import write_procurement_csv
    from fleetplan.report.run_json import load_run

    first, again = tmp_path / "first", tmp_path / "again"
    first.mkdir()
    again.mkdir()
    res = CliRunner().invoke(cli, [*RUNS[run], "--csv", str(first / "p.csv"), "--json", str(first / "run.json"),
                                   "--html", str(first / "report.html")])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["report", str(first / "run.json"), "--html", str(again / "report.html")])
    assert res.exit_code == 0, res.output
    write_procurement_csv(load_run(first / "run.json")["procurement"], again / "p.csv")
    assert (again / "p.csv").read_text() == (first / "p.csv").read_text()
    assert (again / "report.html").read_text() == (first / "report.html").read_text()
    if run == "simulated":
        assert load_run(first / "run.json")["latency_profiles"]  # the figures that took a simulation
