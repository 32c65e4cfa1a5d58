"""``fleetplan optimize`` end to end: the README command, exports, and bad input."""

from __future__ import annotations

import csv
import json

import pytest

from tests.cli.cli_check import one_line_error, run


def test_readme_command_states_the_rate_and_recommends():
    res = run("optimize", "--workload", "lmsys.json", "--slo-ttft", "500")
    assert res.exit_code == 0, res.stderr
    assert "λ = 100 req/s" in res.output and "no rate" in res.output
    assert "Recommendation:" in res.output and "$" in res.output


def test_trace_fitted_workload_defaults_lam_to_its_own_rate():
    res = run("optimize", "--workload", "azure_conv", "--slo-ttft", "1000", "--topology", "homo")
    assert res.exit_code == 0, res.stderr
    assert "workload's own arrival rate" in res.output and "λ = 5.53" in res.output


def test_csv_and_json_exports(tmp_path):
    out_csv, out_json = tmp_path / "fleet.csv", tmp_path / "run.json"
    res = run(
        "optimize",
        "--workload",
        "lmsys",
        "--slo-ttft",
        "500",
        "--topology",
        "homo,two-pool",
        "--candidates-csv",
        str(out_csv),
        "--json",
        str(out_json),
        "--seed",
        "7",
    )
    assert res.exit_code == 0, res.stderr
    rows = list(csv.DictReader(out_csv.open()))
    doc = json.loads(out_json.read_text(), parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    # --candidates-csv has every candidate; --json the cheapest 30 and every simulated one (--json-full: all)
    assert len(rows) == doc["n_candidates"] > len(doc["candidates"]) == 30
    assert [c["rank"] for c in doc["candidates"]] == [int(r["rank"]) for r in rows[:30]]
    for col in (
        "rank",
        "topology",
        "total_gpus_needed",
        "cost_usd_per_year",
        "p99_ttft_ms",
        "feasible",
        "reason",
        "pool1_gpu",
        "pool1_count",
        "pool2_max_tokens",
    ):
        assert col in rows[0]
    assert doc["seed"] == 7 and doc["inputs"]["lam_per_s"] == 100.0 and doc["version"]
    best = doc["recommendation"]
    assert best["feasible"] is True and best["verified"] is True
    simulated = [c for c in doc["candidates"] if c["verified"] is not None]
    assert len(simulated) == 5 and doc["verification"]["n_verified"] == 5
    passed_costs = [c["verification"]["cost_usd_per_year"] for c in simulated if c["verified"]]
    assert best["cost_usd_per_year"] == pytest.approx(min(passed_costs))
    assert best["p99_ttft_ms_sim"] <= 500
    assert all(c["verified"] is None and c["p99_ttft_ms_sim"] is None for c in doc["candidates"][5:])
    for key in ("rank", "topology", "total_gpus_needed", "cost_usd_per_year", "p99_ttft_ms", "feasible", "reason",
                "p99_ttft_ms_sim", "p99_tpot_ms_sim", "verified"):
        assert key in best
    for pool in best["pools"]:
        assert set(pool) >= {"gpu", "count", "spares", "min_tokens", "max_tokens", "lam_per_s", "rho"}
    assert best["total_gpus_needed"] == sum(p["count"] + p["spares"] for p in best["pools"])
    assert int(rows[0]["total_gpus_needed"]) == doc["candidates"][0]["total_gpus_needed"]
    assert rows[0]["verified"] in ("True", "False") and rows[-1]["verified"] == ""
    four = {"p99_ttft_ms_analytic", "p99_ttft_ms_sim", "p99_tpot_ms_analytic", "p99_tpot_ms_sim"}
    for c in simulated:  # like for like at the analytic counts: fleet-wide and per pool
        at = c["verification"]["at_analytic"]
        assert set(at) >= four | {"pools"} and len(at["pools"]) == len(c["pools"])
        assert all(p is None or set(p) >= four for p in at["pools"])
        assert c["verification"]["direction"] in ("exact", "too_high", "too_low", "mixed")
    assert "an/sim" in res.output and "fleet" in res.output  # analytic and simulated side by side
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temp files


def test_unwritable_report_leaves_nothing(tmp_path):
    target = tmp_path / "missing-dir" / "fleet.csv"
    res = run("optimize", "--workload", "lmsys", "--slo-ttft", "500", "--csv", str(target))
    one_line_error(res, "does not exist")
    assert not target.exists()


@pytest.mark.parametrize(
    "content, needle",
    [
        ("[[64, 0.5], [128, 1.0]", "JSON"),
        ("[]", "point"),
        ("[[64, 0.5], [128, 0.9]]", "1"),
        ("[[128, 0.5], [64, 1.0]]", "increasing"),
    ],
    ids=["malformed-json", "empty-cdf", "not-ending-at-1", "unsorted"],
)
def test_bad_cdf_files(tmp_path, content, needle):
    path = tmp_path / "bad.json"
    path.write_text(content)
    res = run("optimize", "--workload", str(path), "--slo-ttft", "500")
    one_line_error(res, "bad.json")
    assert needle.lower() in res.stderr.lower()


@pytest.mark.parametrize(
    "args, needles",
    [
        (["--lam", "-5"], ["--lam", "-5"]),
        (["--lam", "0"], ["--lam"]),
        (["--lam", "nan"], ["--lam"]),
        (["--slo-ttft", "0"], ["--slo-ttft"]),
        (["--slo-ttft", "-10"], ["--slo-ttft"]),
        (["--gpus", "tpu-v9"], ["tpu-v9", "A100-80GB"]),
        (["--b-short", "0"], ["--b-short"]),
        (["--b-short", "-512"], ["--b-short"]),
        (["--topology", "ring"], ["ring", "two-pool"]),
        (["--avail-preset", "always"], ["always", "h100-5pct"]),
        (["--workload", "no-such-workload"], ["no-such-workload", "lmsys"]),
    ],
)
def test_bad_options(args, needles):
    base = {"--workload": "lmsys", "--slo-ttft": "500"}
    for k, v in zip(args[::2], args[1::2], strict=True):
        base[k] = v
    flat = [x for kv in base.items() for x in kv]
    one_line_error(run("optimize", *flat), *needles)


def test_lambda_too_large_names_the_binding_constraint():
    res = run(
        "optimize",
        "--workload",
        "lmsys",
        "--slo-ttft",
        "500",
        "--lam",
        "1e6",
        "--max-gpus",
        "64",
        "--topology",
        "homo,two-pool",
    )
    one_line_error(res, "infeasible up to 64 GPUs", "binding constraint")


def test_prefill_bound_slo_says_gpus_cannot_help():
    res = run("optimize", "--workload", "agent_heavy", "--slo-ttft", "100", "--topology", "homo", "--gpus", "a100")
    one_line_error(res, "prefill alone exceeds the SLO")


def test_no_verify_is_analytic_only_and_runs_are_reproducible(tmp_path):
    docs = []
    for name, extra in (("a.json", []), ("b.json", []), ("c.json", ["--no-verify"])):
        res = run("optimize", "--workload", "azure_conv", "--slo-ttft", "500", "--lam", "50", "--topology",
                  "homo,two-pool", "--sim-requests", "4000", "--seed", "3", "--json", str(tmp_path / name), *extra)
        assert res.exit_code == 0, res.stderr
        docs.append(json.loads((tmp_path / name).read_text()))
    a, b, c = docs
    strip = lambda d: {k: v for k, v in d.items() if not k.endswith("time_s")}  # noqa: E731
    assert strip(a) == strip(b)  # same inputs and seed: identical numbers
    assert c["recommendation"]["verified"] is None and c["verification"] is None
    assert c["recommendation"]["rank"] == 1


def test_an_impossible_tpot_slo_is_pruned_analytically():
    # A 0.5 ms TPOT is below any GPU's lone decode step: phase 1 already says so (no simulation).
    res = run("optimize", "--workload", "azure_conv", "--slo-ttft", "500", "--lam", "50", "--topology", "homo",
              "--sim-requests", "3000", "--slo-tpot", "0.5")
    one_line_error(res, "TPOT <= 0.5 ms", "decode alone exceeds the TPOT SLO", "--slo-tpot")
