"""``fleetplan whatif``, ``grid-flex`` and ``report`` end to end; bad input is one line, exit 2."""

from __future__ import annotations

import csv
import json

import pytest
from click.testing import CliRunner

from fleetplan.cli.main import cli

BAR_CHARS = ("━", "\r", "\x1b[")


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def one_line_error(result, *needles: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])


def test_whatif_analytic_with_growth_schedule(tmp_path):
    out_json, out_csv = tmp_path / "w.json", tmp_path / "w.csv"
    res = run("whatif", "--workload", "lmsys", "--lam-range", "50:150:50", "--slo-ttft", "500", "--gpus", "h100",
              "--topology", "homo,two-pool", "--no-verify", "--growth", "15%/month", "--months", "12",
              "--start-lam", "50", "--lead-time-weeks", "8", "--start-date", "2026-01-01",
              "--json", str(out_json), "--csv", str(out_csv))
    assert res.exit_code == 0, res.output + res.stderr
    assert "holds until" in res.output and "Procurement schedule" in res.output
    assert "holds until λ (analytic): the largest rate at which every pool" in " ".join(res.output.split())
    assert not any(c in res.stderr for c in BAR_CHARS)  # not a terminal: no progress bars
    doc = json.loads(out_json.read_text(), parse_constant=lambda c: pytest.fail(c))
    assert doc["kind"] == "whatif" and [p["lam_per_s"] for p in doc["points"]] == [50.0, 100.0, 150.0]
    rows = list(csv.DictReader(out_csv.open()))
    assert rows[0]["month"] == "0" and rows[0]["order_by"] == "2025-11-06"  # 2026-01-01 - 56 days
    assert all(int(r["gpus_to_add"]) >= 0 or r["fleet"] for r in rows)


def test_whatif_simulated_legend_says_the_threshold_tests_the_slo_at_the_percentile():
    res = CliRunner().invoke(cli, ["whatif", "--workload", "lmsys", "--lam-range", "40:40:10", "--slo-ttft", "500",
                                   "--gpus", "a100", "--topology", "homo", "--percentile", "90", "--sim-requests",
                                   "2000", "--replications", "2", "--verify-top", "1", "--workers", "1", "--quiet"],
                             env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output + res.stderr
    assert "P90 TTFT <= 500 ms; thresholds simulated" in res.output
    assert "holds until λ (simulated): the largest rate at which the fixed fleet's simulated P90 TTFT" in res.output


def test_grid_flex_analytic_table(tmp_path):
    out = tmp_path / "flex.json"
    res = run("grid-flex", "--workload", "azure_conv", "--lam", "100", "--gpus", "h100", "--n-gpus", "10",
              "--levels", "0,20,50", "--no-sim", "--json", str(out), "--quiet")
    assert res.exit_code == 0, res.output + res.stderr
    doc = json.loads(out.read_text())
    assert [r["flex_pct"] for r in doc["levels"]] == [0.0, 20.0, 50.0]
    assert [r["n_max"] for r in doc["levels"]][1:] == [24, 1]
    kw = [r["fleet_kw"] for r in doc["levels"]]
    assert kw == sorted(kw, reverse=True)


def test_report_renders_whatif_and_grid_flex(tmp_path):
    w, f = tmp_path / "w.json", tmp_path / "f.json"
    assert run("whatif", "--workload", "lmsys", "--lam-range", "50:100:50", "--slo-ttft", "500", "--gpus", "h100",
               "--topology", "homo", "--no-verify", "--json", str(w)).exit_code == 0
    assert run("grid-flex", "--workload", "azure_conv", "--lam", "50", "--gpus", "h100", "--n-gpus", "4",
               "--no-sim", "--json", str(f)).exit_code == 0
    for doc in (w, f):
        res = run("report", str(doc), "--html", str(tmp_path / f"{doc.stem}.html"))
        assert res.exit_code == 0, res.output
        page = (tmp_path / f"{doc.stem}.html").read_text()
        assert page.startswith("<!DOCTYPE html>") and ("What-if" in page or "Grid flex" in page)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["whatif", "--workload", "lmsys", "--lam-range", "50-100", "--slo-ttft", "500"], "START:STOP:STEP"),
        (["whatif", "--workload", "lmsys", "--lam-range", "100:50:10", "--slo-ttft", "500"], "--lam-range"),
        (["whatif", "--workload", "lmsys", "--lam-range", "50:100:50", "--slo-ttft", "500", "--no-verify",
          "--growth", "fast"], "--growth"),
        (["whatif", "--workload", "lmsys", "--lam-range", "50:100:50", "--slo-ttft", "500", "--no-verify",
          "--growth", "10%", "--start-date", "01/02/2026"], "YYYY-MM-DD"),
        (["grid-flex", "--workload", "lmsys", "--lam", "50", "--gpus", "h100", "--n-gpus", "4", "--levels", "0,x"],
         "--levels"),
        (["grid-flex", "--workload", "lmsys", "--lam", "50", "--gpus", "h100", "--n-gpus", "4", "--levels", "100"],
         "curtailment level"),
        (["grid-flex", "--workload", "lmsys", "--lam", "50", "--gpus", "nosuchgpu", "--n-gpus", "4"], "nosuchgpu"),
        (["report", "missing.json", "--html", "x.html"], "missing.json"),
    ],
)
def test_bad_input_is_one_line(args, needle):
    one_line_error(run(*args), needle)


def test_report_needs_an_output(tmp_path):
    doc = tmp_path / "f.json"
    assert run("grid-flex", "--workload", "azure_conv", "--lam", "50", "--gpus", "h100", "--n-gpus", "4",
               "--no-sim", "--json", str(doc)).exit_code == 0
    one_line_error(run("report", str(doc)), "--html")
