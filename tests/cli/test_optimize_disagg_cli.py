"""``fleetplan optimize --topology homo,pdd,afd``: one ranking in table, JSON and CSV; bad inputs."""

from __future__ import annotations

import csv
import json

import pytest
from click.testing import CliRunner

from fleetplan.cli.main import cli
from tests.cli.cli_check import one_line_error, run

ARGS = ("optimize", "--workload", "lmsys.json", "--slo-ttft", "500", "--slo-tpot", "50",
        "--topology", "homo,pdd,afd", "--quiet")


def _check_run(doc: dict, rows: list[dict]) -> None:
    inputs = doc["inputs"]
    assert inputs["topologies"] == ["homo", "pdd", "afd"] and inputs["slo_tpot_ms"] == 50
    assert inputs["min_ce_gain"] == 1.08 and inputs["disagg"]["kv_bytes_per_token"] == 327680
    cands = doc["candidates"]
    assert {c["topology"] for c in cands} == {"homo", "pdd", "afd"}
    feasible = [c for c in cands if c["feasible"]]
    assert [c["cost_usd_per_year"] for c in feasible] == sorted(c["cost_usd_per_year"] for c in feasible)
    pdd = next(c for c in feasible if c["topology"] == "pdd")
    afd = next(c for c in feasible if c["topology"] == "afd")
    assert pdd["roles"] == ["prefill", "decode"] and afd["roles"] == ["prefill", "attention", "ffn"]
    assert set(pdd["role_counts"]) == {"prefill", "decode"} and afd["af_unit"] in ("1:1", "2:1", "1:2")
    for c in (pdd, afd):
        assert c["p99_ttft_ms"] <= 500 and c["p99_tpot_ms_analytic"] <= 50 and c["decode_batch"] >= 1
        assert c["spend_ratio"] > 0 and c["ce_gain"] > 0 and c["binding"].startswith("prefill:")
    homo = next(c for c in feasible if c["topology"] == "homo")
    assert homo["roles"] == [] and homo["spend_ratio"] is not None
    assert set(doc["baselines"]) == {"colocated", "pdd", "afd"}
    gated = [c for c in cands if c["reason"] and "min_ce_gain 1.08" in c["reason"]]
    assert gated and all(c["topology"] in ("pdd", "afd") for c in gated)
    assert {p["topology"] for p in doc["cost_latency_frontier"]} >= {"homo", "pdd", "afd"}
    assert len(rows) == doc["n_candidates"]
    assert {"roles", "spend_ratio", "ce_gain", "p99_tpot_ms_analytic", "verified_by", "pool1_role"} <= set(rows[0])
    assert {r["topology"] for r in rows} == {"homo", "pdd", "afd"}


def test_analytic_run_ranks_colocated_pdd_and_afd_together(tmp_path):
    out_json, out_csv = tmp_path / "run.json", tmp_path / "c.csv"
    res = run(*ARGS, "--no-verify", "--json", str(out_json), "--json-full", "--candidates-csv", str(out_csv))
    assert res.exit_code == 0, res.stderr
    assert "All-premium baselines" in res.output and "Recommendation:" in res.output
    assert "pdd/afd candidates with CE < 1.08 are rejected" in " ".join(res.output.split())
    doc = json.loads(out_json.read_text(), parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    rows = list(csv.DictReader(out_csv.open()))
    _check_run(doc, rows)
    assert all(c["verified_by"] == "analytic" for c in doc["candidates"])


@pytest.mark.slow
def test_verified_run_simulates_pdd_and_afd(tmp_path):
    out_json, out_csv = tmp_path / "run.json", tmp_path / "c.csv"
    res = run(*ARGS, "--sim-requests", "3000", "--replications", "2", "--verify-top", "2", "--workers", "1",
              "--json", str(out_json), "--json-full", "--candidates-csv", str(out_csv))
    assert res.exit_code == 0, res.stderr
    doc = json.loads(out_json.read_text())
    _check_run(doc, list(csv.DictReader(out_csv.open())))
    by = {c["verified_by"] for c in doc["candidates"]}
    assert {"simulated (PDD simulator)", "simulated (PDD simulator, AFD step linearised)"} <= by
    sim = [c for c in doc["candidates"] if c["topology"] in ("pdd", "afd") and c["verification"]]
    assert all(c["p99_ttft_ms_sim"] is not None and c["p99_tpot_ms_sim"] is not None for c in sim)
    assert doc["recommendation"]["verified"] is True


@pytest.mark.parametrize(("extra", "needles"), [
    (("--topology", "homo,pdq"), ("pdq", "topology")),
    (("--topology", "pdd", "--min-ce-gain", "-1"), ("--min-ce-gain",)),
    (("--topology", "pdd", "--slo-tpot", "0"), ("--slo-tpot",)),
    (("--topology", "pdd", "--af-ratios", "2x1"), ("--af-ratios",)),
    # the (with tests/plan/disagg/test_disagg_cli.py): an xPyD ratio among good ones that leaves a role
    # empty, a role that cannot hold the model's longest request (a mixed run: each topology's own line)
    (("--topology", "pdd", "--pd-ratios", "1:1,2:0"), ("--pd-ratios", "'2:0'", "leaves the decode role empty")),
    (("--topology", "pdd,afd", "--model", "llama-3.1-70b", "--weight-dtype", "fp8", "--gpus", "h100", "--tp", "1"),
     ("no pdd fleet of H100-SXM tp1", "longest request", "--tensor-parallel-size", "--max-model-len")),
])
def test_bad_inputs_exit_2_with_one_line(extra, needles):
    base = ["optimize", "--workload", "lmsys", "--slo-ttft", "500", "--slo-tpot", "50", "--no-verify"]
    one_line_error(run(*base, *extra), *needles)


def test_pdd_without_tpot_target_is_one_line():
    one_line_error(run("optimize", "--workload", "lmsys", "--slo-ttft", "500", "--topology", "pdd", "--no-verify"),
                   "needs --slo-tpot")


def test_labels_follow_the_slo_percentile_and_disaggregated_picks_name_no_router():
    res = CliRunner().invoke(cli, ["optimize", "--workload", "lmsys.json", "--slo-ttft", "500", "--slo-tpot", "50",
                                   "--topology", "pdd", "--percentile", "90", "--sim-requests", "2000",
                                   "--replications", "2", "--verify-top", "1", "--workers", "1", "--quiet"],
                             env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.stderr
    assert "SLO P90 TTFT <= 500 ms, P90 TPOT <= 50 ms" in res.output and "sim P90 TTFT ms" in res.output
    assert "95% CI of P90" in res.output and "P99" not in res.output
    line = next(x for x in res.output.splitlines() if x.startswith("Recommendation: pdd"))
    assert "router" not in line and "simulated P90 TTFT" in line


def test_colocated_run_states_no_disaggregation_gate():
    res = run("optimize", "--workload", "lmsys.json", "--slo-ttft", "500", "--no-verify", "--quiet")
    assert res.exit_code == 0, res.stderr
    assert "All-premium baselines" in res.output and "rejected" not in res.output


def test_pdd_of_an_moe_model_sweeps_wide_dp_attention_decode_instances(tmp_path):
    """``--topology pdd --model deepseek-v3``: the roles' wide DP-attention + EP instances over 2 and 4 nodes
    (``plan.disagg.placements``) are swept beside the co-located search's TP8 and DP8; a co-located run does
    not sweep them."""
    out = tmp_path / "run.json"
    base = ("optimize", "--workload", "azure_conv", "--model", "deepseek-v3", "--gpus", "h200", "--slo-ttft",
            "2000", "--slo-tpot", "100", "--lam", "200", "--no-verify", "--quiet", "--min-ce-gain", "0")
    res = run(*base, "--topology", "pdd", "--json", str(out), "--json-full")
    assert res.exit_code == 0, res.stderr
    cands = json.loads(out.read_text())["candidates"]
    pairs = {tuple(p["gpu"] for p in c["pools"]) for c in cands}
    shapes = ("H200 tp8", "H200 tp1 dp8", "H200 tp1 dp16", "H200 tp1 dp32")
    assert pairs == {(a, b) for a in shapes for b in shapes}
    homo = tmp_path / "homo.json"
    res = run(*base, "--topology", "homo", "--json", str(homo), "--json-full")
    assert res.exit_code == 0, res.stderr
    gpus = {p["gpu"] for c in json.loads(homo.read_text())["candidates"] for p in c["pools"]}
    assert gpus == {"H200 tp8", "H200 tp1 dp8"}
