"""``fleetplan whatif --plan``: files, messages and one-line refusals."""

from __future__ import annotations

import csv
import json

from tests.cli.cli_check import one_line_error, run

BASE = ("whatif", "--workload", "azure_conv", "--slo-ttft", "500", "--gpus", "h100,a100", "--topology", "homo",
        "--no-verify", "--quiet")


def _forecast(tmp_path, text="date,p50,p90\n2026-01-01,40,50\n2026-02-01,50,70\n2026-03-01,60,90\n"):
    p = tmp_path / "demand.csv"
    p.write_text(text)
    return str(p)


def test_plan_writes_csv_json_html(tmp_path):
    out = {k: tmp_path / f"plan.{k}" for k in ("csv", "json", "html")}
    fleet = tmp_path / "owned.toml"
    fleet.write_text('[[pool]]\nname = "a"\ngpu = "h100"\ninstances = 1\nmax_context_tokens = 16384\n')
    res = run(*BASE, "--forecast", _forecast(tmp_path), "--current-fleet", str(fleet), "--lead-time-weeks", "2",
              "--csv", str(out["csv"]), "--json", str(out["json"]), "--html", str(out["html"]))
    assert res.exit_code == 0, res.output + res.stderr
    assert "Horizon-optimal plan: $" in res.output and "saving" in res.output
    rows = list(csv.DictReader(out["csv"].open()))
    assert rows and list(rows[0]) == ["date", "order_by", "action", "gpu", "count", "pool", "fleet_after",
                                      "cost_usd_period", "cumulative_cost_usd", "terms"]
    assert {r["action"] for r in rows} <= {"buy", "rent", "release", "move", "retire"}
    doc = json.loads(out["json"].read_text())
    assert doc["initial_fleet"] == {"H100-SXM": 1} and len(doc["periods"]) == 3
    assert doc["total_cost_usd"] <= doc["baseline_cost_usd"] and doc["prices"]["H100-SXM"]["sources"]
    assert "data:image/png;base64" in out["html"].read_text()


def test_forecast_out_of_order_is_one_line(tmp_path):
    f = _forecast(tmp_path, "date,rate\n2026-02-01,40\n2026-01-01,50\n")
    one_line_error(run(*BASE, "--forecast", f), "row 3, column date", "sort the rows")


def test_negative_rate_is_one_line(tmp_path):
    one_line_error(run(*BASE, "--forecast", _forecast(tmp_path, "date,rate\n2026-01-01,-3\n")), "must be > 0")


def test_unknown_gpu_in_current_fleet_is_one_line(tmp_path):
    fleet = tmp_path / "owned.toml"
    fleet.write_text('[[pool]]\nname = "a"\ngpu = "tpu9"\ninstances = 1\nmax_context_tokens = 16384\n')
    one_line_error(run(*BASE, "--forecast", _forecast(tmp_path), "--current-fleet", str(fleet)), "tpu9")


def test_budget_that_cannot_meet_the_forecast_names_the_period(tmp_path):
    one_line_error(run(*BASE, "--forecast", _forecast(tmp_path), "--budget-per-period", "10"),
                   "cannot cover period 0 (2026-01-01", "needs a spend of", "raise the budget")


def test_plan_options_without_plan_and_lam_range_with_plan_are_refused(tmp_path):
    one_line_error(run(*BASE, "--lam-range", "50:100:50", "--allow-retire"), "--allow-retire", "--plan")
    one_line_error(run(*BASE, "--plan", "--lam-range", "50:100:50", "--growth", "10%"), "--lam-range")
    one_line_error(run(*BASE), "--lam-range is required")
    one_line_error(run(*BASE, "--plan"), "needs a forecast")


def test_retire_and_availability_through_the_cli(tmp_path):
    fleet = tmp_path / "owned.toml"
    fleet.write_text('[[pool]]\nname = "a"\ngpu = "h100"\ninstances = 8\nmax_context_tokens = 16384\n')
    out = tmp_path / "plan.csv"
    f = _forecast(tmp_path, "date,rate\n2026-01-01,20\n2026-02-01,20\n")
    res = run(*BASE, "--forecast", f, "--current-fleet", str(fleet), "--allow-retire", "--csv", str(out))
    assert res.exit_code == 0, res.output + res.stderr
    retired = [r for r in csv.DictReader(out.open()) if r["action"] == "retire"]
    assert retired and retired[0]["gpu"] == "H100-SXM" and int(retired[0]["count"]) > 0
    kept = run(*BASE, "--forecast", f, "--current-fleet", str(fleet), "--csv", str(out))
    assert kept.exit_code == 0 and not [r for r in csv.DictReader(out.open()) if r["action"] == "retire"]
    later = run(*BASE, "--forecast", f, "--gpu-available", "h100=2026-02-01", "--json", str(tmp_path / "p.json"))
    assert later.exit_code == 0, later.stderr
    first = json.loads((tmp_path / "p.json").read_text())["periods"][0]["fleet"]
    assert "H100" not in first
    one_line_error(run(*BASE, "--forecast", f, "--gpu-available", "h100=soon"), "--gpu-available", "YYYY-MM-DD")
