"""``fleetplan simulate --failures`` and ``fleetplan reliability``: exit codes, output, exports."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from fleetplan.cli.main import cli
from tests.cli.test_simulate_cli import small_fleet

WIDE = {"COLUMNS": "250"}


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), env=WIDE)


def test_simulate_with_failures_reports_both_p99s(tmp_path: Path) -> None:
    out_json = tmp_path / "sum.json"
    res = invoke("simulate", "--fleet", str(small_fleet(tmp_path)), "--workload", "lmsys", "--lam", "40",
                 "--sim-requests", "1500", "--mtbf-h", "0.01", "--mttr-h", "0.005", "--repair", "fixed",
                 "--json", str(out_json))
    assert res.exit_code == 0, res.output
    assert "failures (fixed repairs; short MTBF 0.01 h, MTTR 0.005 h, A = 0.6667" in res.stdout
    assert "same seed without failures: P99 TTFT" in res.stdout and "with failures; P99 TPOT" in res.stdout
    doc = json.loads(out_json.read_text())
    assert doc["failures"]["n_outages"] > 0 and doc["failures"]["repair"] == "fixed"


def test_simulate_catalog_failures_and_plain_run(tmp_path: Path) -> None:
    fleet = str(small_fleet(tmp_path))
    res = invoke("simulate", "--fleet", fleet, "--workload", "lmsys", "--sim-requests", "300", "--failures")
    assert res.exit_code == 0, res.output
    assert "MTBF 3,692 h, MTTR 48 h, A = 0.9872" in res.stdout  # A100-80GB: 6.5 / 1000 node-days, 2 days
    plain = invoke("simulate", "--fleet", fleet, "--workload", "lmsys", "--sim-requests", "300")
    assert plain.exit_code == 0 and "failures (" not in plain.stdout


def test_simulate_failure_errors_exit_2(tmp_path: Path) -> None:
    a10g = tmp_path / "a10g.toml"
    a10g.write_text('[[pool]]\nname = "a"\ngpu = "a10g"\ninstances = 2\nmax_context_tokens = 2048\n')
    res = invoke("simulate", "--fleet", str(a10g), "--workload", "lmsys", "--sim-requests", "100", "--failures")
    assert res.exit_code == 2 and "publishes no failure rate; give the MTBF (--mtbf-h)" in res.output
    assert len(res.output.strip().splitlines()) == 1
    res = invoke("simulate", "--fleet", str(small_fleet(tmp_path)), "--workload", "lmsys", "--sim-requests", "100",
                 "--level", "request", "--failures")
    assert res.exit_code == 2 and "level iteration" in res.output
    res = invoke("simulate", "--fleet", str(small_fleet(tmp_path)), "--workload", "lmsys", "--mtbf-h", "-1")
    assert res.exit_code == 2


def test_reliability_table(tmp_path: Path) -> None:
    res = invoke("reliability", "--fleet", str(small_fleet(tmp_path)), "--workload", "lmsys", "--lam", "30",
                 "--slo-ttft", "500", "--mtbf-h", "0.02", "--mttr-h", "0.01", "--target", "0.9",
                 "--sim-requests", "800", "--replications", "2", "--max-spares", "2")
    assert res.exit_code == 0, res.output
    for text in ("spares/pool", "P(>= n up), random time", "P(never short, 30 d)", "sim P99 TTFT ms (bound)",
                 "binomial: 3 spare(s) per pool give P(>= n up) >= 0.9", "simulated:", "without failures"):
        assert text in res.stdout
    # A = 2/3, two pools of 2: P(>= 2 of 2 up) = 4/9 per pool, the fleet (4/9)^2 = 0.197531
    assert "0.197531" in res.stdout


def test_reliability_help_ends_with_examples() -> None:
    res = invoke("reliability", "--help")
    assert res.exit_code == 0
    assert res.output.rstrip().splitlines()[-1].strip().startswith("--mtbf-h 720")
    assert "Examples:" in res.output and "fleetplan reliability --fleet" in res.output
