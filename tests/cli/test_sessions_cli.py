"""``fleetplan simulate-sessions``: bad inputs exit 2 with one line; a good run prints and writes metrics."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fleetplan.cli.main import cli
from fleetplan.sim.session_metrics import ROUND_CSV_COLUMNS

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FLEET = str(EXAMPLES / "two_pool_a100.toml")
WIDE = {"COLUMNS": "250"}
RL = ("--rl-prompt-tokens", "256", "--rl-output-scale", "200", "--rl-output-shape", "1.0", "--rl-output-cap", "4000")


def run(*args: str):
    return CliRunner().invoke(cli, ["simulate-sessions", *args], env=WIDE)


def bad_json(tmp_path: Path) -> str:
    path = tmp_path / "bad.json"
    path.write_text('{"templates": [{"name": "a", "rounds": [[100, 0]]}]}')
    return str(path)


BAD = [
    (("--fleet", FLEET, "--tool-delay-s", "1"), "--rate (sessions/s) is required"),
    (("--fleet", FLEET, "--rate", "1"), "template 'short' has no tool-call delay"),
    (("--fleet", FLEET, "--rate", "1", "--sessions", "frontier"), "unknown session workload 'frontier'"),
    (("--fleet", FLEET, "--rate", "1", "--tool-delay-s", "1", "--mix", "long=1"), "unknown session template 'long'"),
    (("--fleet", FLEET, "--rate", "1", "--tool-delay-s", "1", "--mix", "short"), "is not name=weight"),
    (("--fleet", FLEET, "--rate", "1", "--tool-delay-s", "-1"), "--tool-delay-s': -1.0 is not in the range x>=0"),
    (("--fleet", FLEET, "--rate", "1", "--tool-delay-s", "1", "--tool-delay-kind", "lognormal"), "needs sigma > 0"),
    (("--fleet", FLEET, "--gpu", "a100", "--rate", "1", "--tool-delay-s", "1"), "not both or neither"),
    (("--rate", "1", "--tool-delay-s", "1"), "not both or neither"),
    (("--gpu", "a100", "--rate", "1", "--tool-delay-s", "1"), "--gpu needs --instances"),
    (("--gpu", "b300x", "--instances", "2", "--rate", "1", "--tool-delay-s", "1"), "unknown GPU 'b300x'"),
    (("--gpu", "a100", "--instances", "2", "--rl-rollout", "10", "--rl-prompt-tokens", "10"),
     "--rl-rollout needs --rl-output-scale"),
    (("--gpu", "a100", "--instances", "2", "--rl-rollout", "10", "--rl-bursts", "2", *RL), "need burst_interval_s > 0"),
    (("--gpu", "a100", "--instances", "2", "--rl-rollout", "10", "--rl-rounds", "3", *RL), "need a tool_delay"),
]


@pytest.mark.parametrize(("args", "fragment"), BAD)
def test_bad_input_exits_2_with_one_line(args, fragment):
    res = run(*args)
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and fragment in lines[0], res.output


def test_malformed_session_file_exits_2_naming_the_file(tmp_path):
    path = bad_json(tmp_path)
    res = run("--fleet", FLEET, "--rate", "1", "--sessions", path)
    assert res.exit_code == 2
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and path in lines[0] and "is not an integer >= 1" in lines[0]


def test_help_lists_examples():
    res = run("--help")
    assert res.exit_code == 0 and "Examples:" in res.output and "--rl-rollout" in res.output


def test_sessions_run_prints_metrics_and_writes_files(tmp_path):
    out_json, out_csv = tmp_path / "s.json", tmp_path / "s.csv"
    res = run("--gpu", "a100", "--instances", "4", "--rate", "0.2", "--n-sessions", "30", "--tool-delay-s", "0.5",
              "--mix", "short=1", "--json", str(out_json), "--csv", str(out_csv))
    assert res.exit_code == 0, res.output
    assert "aTTFT" in res.output and "round 5 TTFT" in res.output and "hidden planning throughput" in res.output
    doc = json.loads(out_json.read_text())
    assert doc["sessions"]["n_sessions"] == 30 and doc["sessions"]["attft"]["p99_s"] > 0
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == 150 and tuple(rows[0]) == ROUND_CSV_COLUMNS


def test_rollout_run_prints_bursts():
    res = run("--gpu", "a100", "--instances", "2", "--rl-rollout", "40", "--rl-bursts", "2", "--rl-interval-s", "600",
              *RL)
    assert res.exit_code == 0, res.output
    assert "RL bursts" in res.output and "tail share" in res.output
