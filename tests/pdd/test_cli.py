"""``fleetplan simulate-pdd`` through a FleetplanGroup (as ``fleetplan.cli.main`` registers it)."""

from __future__ import annotations

import json

import click
from click.testing import CliRunner

from fleetplan.cli.errors import FleetplanGroup
from fleetplan.cli.pdd_cmd import simulate_pdd_cmd


@click.group(cls=FleetplanGroup)
def _cli() -> None:
    pass


_cli.add_command(simulate_pdd_cmd)


def test_simulate_pdd_prints_the_ttft_breakdown_and_writes_exports(tmp_path):
    summary, rows = tmp_path / "s.json", tmp_path / "r.csv"
    res = CliRunner().invoke(_cli, ["simulate-pdd", "--workload", "lmsys", "--lam", "5", "--requests", "400",
                                    "--policy", "sibyl", "--layerwise", "--latency-ms", "0.5",
                                    "--json", str(summary), "--requests-csv", str(rows)])
    assert res.exit_code == 0, res.output
    for word in ("queue", "prefill", "transfer", "first_decode", "ttft", "tpot", "optimal-assignment"):
        assert word in res.output
    assert "TTFT = queue + prefill + transfer + first decode step" in res.output
    data = json.loads(summary.read_text())
    assert data["policy"] == "sibyl" and data["n_requests"] == 400
    header = rows.read_text().splitlines()[0].split(",")
    assert {"queue_ms", "prefill_ms", "transfer_ms", "first_decode_ms", "ttft_ms"} <= set(header)


def test_simulate_pdd_bad_combination_is_one_line_exit_2():
    res = CliRunner().invoke(_cli, ["simulate-pdd", "--workload", "lmsys", "--policy", "oracle"])
    assert res.exit_code == 2
    assert "binding = late" in res.output and len(res.output.strip().splitlines()) == 1


def test_simulate_pdd_unknown_policy_is_exit_2():
    res = CliRunner().invoke(_cli, ["simulate-pdd", "--workload", "lmsys", "--policy", "magic"])
    assert res.exit_code == 2 and "magic" in res.output


def test_help_ends_with_examples():
    res = CliRunner().invoke(_cli, ["simulate-pdd", "--help"])
    assert res.exit_code == 0 and "Examples:" in res.output


def test_simulate_pdd_on_a_fabric_reports_flows(tmp_path):
    summary = tmp_path / "s.json"
    res = CliRunner().invoke(_cli, ["simulate-pdd", "--workload", "lmsys", "--lam", "5", "--requests", "300",
                                    "--prefill-instances", "2", "--decode-instances", "2", "--fabric", "2x2x2",
                                    "--link-gbps", "25", "--path-policy", "reservation", "--json", str(summary)])
    assert res.exit_code == 0, res.output
    assert "KV flows" in res.output and "reservation" in res.output and "slowdown" in res.output
    data = json.loads(summary.read_text())
    assert data["network"]["path_policy"] == "reservation" and data["network"]["n_flows_done"] > 0


def test_simulate_pdd_bad_fabric_is_exit_2():
    res = CliRunner().invoke(_cli, ["simulate-pdd", "--workload", "lmsys", "--fabric", "1x2x1"])
    assert res.exit_code == 2 and "host" in res.output
    res = CliRunner().invoke(_cli, ["simulate-pdd", "--workload", "lmsys", "--fabric", "nonsense"])
    assert res.exit_code == 2 and "LEAVESxHOSTSxSPINES" in res.output
