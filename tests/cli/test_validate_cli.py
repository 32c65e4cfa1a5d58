"""``fleetplan validate queueing``: table content and option checking."""

from __future__ import annotations

from click.testing import CliRunner

from fleetplan.cli.main import cli

WIDE = {"COLUMNS": "250"}


def run(*args: str):
    return CliRunner().invoke(cli, ["validate", *args], env=WIDE)


def test_queueing_prints_exact_and_simulated_columns():
    res = run("queueing", "--c", "1", "--rho", "0.5", "--sim-requests", "20000", "--seed", "2")
    assert res.exit_code == 0, res.output
    text = res.stdout
    for header in ("E[W] exact", "E[W] sim", "P(W>0) exact", "P99 W exact", "P99 W sim", "paper eq.2"):
        assert header in text
    row = next(line for line in text.splitlines() if line.startswith("│ ") and " 0.5 " in line)
    cells = [c.strip() for c in row.strip("│").split("│")]
    # M/M/1 at rho = 0.5, mu = 1: E[W] = 1, P(W>0) = 0.5, W_99 = ln(50)/0.5 = 7.824
    assert cells[:3] == ["1", "0.5", "1"] and cells[5] == "0.5" and cells[8] == "7.824"
    assert abs(float(cells[3]) - 1.0) < 0.15 and abs(float(cells[6]) - 0.5) < 0.03


def test_queueing_rejects_unstable_rho_and_bad_c():
    for args in (["--rho", "1.0"], ["--rho", "x"], ["--c", "0"], ["--sim-requests", "5"]):
        res = run("queueing", *args)
        assert res.exit_code == 2 and "Traceback" not in res.output


def test_help_lists_subcommand_and_ends_with_examples():
    res = run("--help")
    assert res.exit_code == 0 and "queueing" in res.output
    assert res.output.strip().endswith("--sim-requests 100000")
    res = run("queueing", "--help")
    assert res.exit_code == 0 and res.output.strip().endswith("--seed 3")
