"""``fleetplan simulate``: exit codes, printed content and exported files."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fleetplan.cli.main import cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WIDE = {"COLUMNS": "250"}
REQUIRED_CSV_COLUMNS = {
    "request_id",
    "pool",
    "instance",
    "arrival_s",
    "prompt_tokens",
    "output_tokens",
    "ttft_ms",
    "tpot_ms",
    "e2e_ms",
    "preemptions",
    "status",
}


def run(*args: str):
    return CliRunner().invoke(cli, ["simulate", *args], env=WIDE)


def small_fleet(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "fleet.toml"
    path.write_text(f"""
pool_router = "length"
{extra}
[[pool]]
name = "short"
gpu = "a100"
instances = 2
max_context_tokens = 4096

[[pool]]
name = "long"
gpu = "a100"
instances = 2
max_context_tokens = 65536
""")
    return path


def test_simulate_prints_pools_rate_and_tpot_definition(tmp_path):
    out_csv, out_json = tmp_path / "req.csv", tmp_path / "sum.json"
    res = run(
        "--fleet",
        str(small_fleet(tmp_path)),
        "--workload",
        "lmsys",
        "--sim-requests",
        "300",
        "--level",
        "request",
        "--seed",
        "3",
        "--slo-ttft",
        "500",
        "--slo-tpot",
        "200",
        "--requests-csv",
        str(out_csv),
        "--json",
        str(out_json),
    )
    assert res.exit_code == 0, res.output
    text = res.stdout
    assert "rate 100 req/s (default; the workload has no arrival rate)" in text
    for label in (
        "short",
        "long",
        "(fleet total)",
        "TTFT P99",
        "TPOT P50",
        "E2E P90",
        "goodput",
        "utilisation",
        "unfinished",
        "rejected",
    ):
        assert label in text
    assert "TPOT = (E2E - TTFT) / (output tokens - 1)" in text
    assert "TTFT <= 500 ms and TPOT <= 200 ms" in text
    with out_csv.open() as handle:
        rows = list(csv.DictReader(handle))
    assert REQUIRED_CSV_COLUMNS <= set(rows[0]) and len(rows) == 300
    assert {r["pool"] for r in rows} <= {"short", "long"}
    doc = json.loads(out_json.read_text(), parse_constant=lambda tok: pytest.fail(f"bare {tok}"))
    assert doc["n_requests"] == 300 and doc["slo_ttft_s"] == 0.5 and doc["level"] == "request"
    assert [p["name"] for p in doc["pools"]] == ["short", "long"]


def test_lam_is_reported_when_given():
    res = run(
        "--fleet",
        str(EXAMPLES / "two_pool_a100.toml"),
        "--workload",
        "lmsys",
        "--lam",
        "7.5",
        "--sim-requests",
        "100",
        "--level",
        "request",
    )
    assert res.exit_code == 0, res.output
    assert "rate 7.5 req/s (from --lam)" in res.stdout
    assert "8 instances" in res.stdout and "17.68 USD/h" in res.stdout  # 8 x 2.21 USD/h A100


@pytest.mark.parametrize(
    "extra, fragment",
    [
        ('colour = "red"', "unknown key 'colour'"),
        ('pool_router = "fastest"', "TOML"),  # duplicate key: not valid TOML
    ],
)
def test_bad_fleet_toml_is_one_line_exit_2(tmp_path, extra, fragment):
    res = run("--fleet", str(small_fleet(tmp_path, extra)), "--workload", "lmsys", "--sim-requests", "10")
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and fragment in lines[0]
    assert "Traceback" not in res.output


def test_unknown_gpu_and_missing_file_exit_2(tmp_path):
    bad = small_fleet(tmp_path).read_text().replace('gpu = "a100"', 'gpu = "tpu9"', 1)
    path = tmp_path / "bad.toml"
    path.write_text(bad)
    res = run("--fleet", str(path), "--workload", "lmsys")
    assert res.exit_code == 2 and res.stderr.startswith("error:") and "unknown GPU 'tpu9'" in res.stderr
    res = run("--fleet", str(tmp_path / "nope.toml"), "--workload", "lmsys")
    assert res.exit_code == 2 and res.stderr.startswith("error:") and "nope.toml" in res.stderr


@pytest.mark.parametrize("args", [["--lam", "-3"], ["--lam", "inf"], ["--sim-requests", "0"], ["--level", "token"]])
def test_bad_options_exit_2(tmp_path, args):
    res = run("--fleet", str(small_fleet(tmp_path)), "--workload", "lmsys", *args)
    assert res.exit_code == 2 and "Traceback" not in res.output


def test_help_ends_with_examples():
    res = run("--help")
    assert res.exit_code == 0
    tail = res.output[res.output.index("Examples:") :]
    assert "fleetplan simulate --fleet examples/two_pool_a100.toml" in tail
    assert "--level request --seed 7" in tail
    assert tail.strip().splitlines()[-1].strip().startswith("fleetplan simulate network")  # then the commands'
    assert "--slo-ttft" in res.output and "--requests-csv" in res.output


def test_replications_print_a_confidence_interval_of_p99():
    from click.testing import CliRunner

    from fleetplan.cli.main import cli

    res = CliRunner().invoke(
        cli,
        [
            "simulate",
            "--fleet",
            "examples/two_pool_a100.toml",
            "--workload",
            "lmsys",
            "--lam",
            "50",
            "--sim-requests",
            "3000",
            "--replications",
            "3",
        ],
    )
    assert res.exit_code == 0, res.stderr
    line = next(ln for ln in res.output.splitlines() if ln.startswith("3 replications"))
    import re

    pattern = r"P99 TTFT ([\d,.]+) ms \(95% CI ([\d,.]+) to ([\d,.]+)\)"
    mean, lo, hi = (
        float(x.replace(",", ""))
        for x in re.findall(pattern, line)[0]
    )
    assert lo <= mean <= hi


def test_simulate_with_a_model_uses_tensor_parallel_groups_and_the_predictor():
    from click.testing import CliRunner

    from fleetplan.cli.main import cli

    args = ["simulate", "--fleet", "examples/two_pool_a100.toml", "--workload", "lmsys", "--lam", "2",
            "--sim-requests", "500", "--model", "llama-3.1-70b"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.stderr
    # the short pool's 4,096-token requests fit a TP-2 group; the 65,536-token pool needs TP-4 for its KV cache
    assert "short: A100-80GB tp2" in res.output and "long: A100-80GB tp4" in res.output
    assert "roofline predictor" in res.output
    bad = CliRunner().invoke(cli, [*args, "--tensor-parallel-size", "3"])
    assert bad.exit_code == 2 and bad.stderr.startswith("error:")
    lone = CliRunner().invoke(cli, args[:-2] + ["--tensor-parallel-size", "2"])
    assert lone.exit_code == 2 and "--model" in lone.stderr
