"""Run files in proportion (the README command's ``--json`` under 1 MB; ``--json-full`` keeps the sweep),
re-rendered by ``fleetplan report``, with plots embedded by default (matplotlib is a dependency)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from fleetplan.cli.main import cli
from fleetplan.report import plots

README = ("optimize", "--workload", "lmsys.json", "--slo-ttft", "500", "--quiet")
RUN_FIGURES = ("pareto", "gpu_breakdown", "utilisation", "latency_cdf")
MAX_RUN_FILE_BYTES = 1_000_000


def invoke(*args: str):
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    invoke(*README, "--json", str(out / "run.json"), "--html", str(out / "report.html"), "--plots", str(out / "plots"))
    return out


def test_readme_run_file_holds_what_the_report_shows(readme_run):
    path = readme_run / "run.json"
    assert path.stat().st_size < MAX_RUN_FILE_BYTES
    doc = json.loads(path.read_text())
    ranks = [c["rank"] for c in doc["candidates"]]
    assert ranks == list(range(1, len(ranks) + 1)) and doc["n_candidates"] > len(ranks) >= 30
    assert doc["candidates_in_file"] == f"the {len(ranks)} cheapest"
    assert all(c["verification"] is not None for c in doc["candidates"] if c["verified"] is not None)
    assert doc["recommendation"]["rank"] in ranks
    profile = doc["latency_profiles"][0]
    assert len(profile["levels_pct"]) > 100 and 99.0 in profile["levels_pct"]
    assert profile["ttft_ms"] == sorted(profile["ttft_ms"]) and 0 < profile["utilisation_sim"] <= 1


def test_html_embeds_every_run_plot_and_fetches_nothing(readme_run):
    page = (readme_run / "report.html").read_text()
    for name in RUN_FIGURES:
        assert f"id='plot-{name}' src='data:image/png;base64," in page
    assert "http://" not in page and "https://" not in page and plots.PLOT_HINT not in page
    assert {p.name for p in (readme_run / "plots").iterdir()} == {f"{n}.{f}" for n in RUN_FIGURES
                                                                  for f in ("png", "svg")}


def test_report_re_renders_the_trimmed_file(readme_run, tmp_path):
    invoke("report", str(readme_run / "run.json"), "--html", str(tmp_path / "again.html"))
    assert (tmp_path / "again.html").read_text().count("src='data:image/png;base64,") == len(RUN_FIGURES)


def test_json_full_keeps_every_candidate_and_re_renders(tmp_path):
    path = tmp_path / "full.json"
    invoke(*README, "--no-verify", "--json", str(path), "--json-full")
    doc = json.loads(path.read_text())
    assert len(doc["candidates"]) == doc["n_candidates"] and doc["candidates_in_file"] == "all"
    invoke("report", str(path), "--html", str(tmp_path / "full.html"))
    assert "id='plot-pareto'" in (tmp_path / "full.html").read_text()


def test_json_full_needs_json():
    result = CliRunner().invoke(cli, [*README, "--no-verify", "--json-full"])
    assert result.exit_code == 2 and "--json-full goes with --json" in result.stderr


def test_plots_worth_looking_at(readme_run):
    doc = json.loads((readme_run / "run.json").read_text())
    pareto = plots._pareto(doc)
    labels = {c.get_label() for c in pareto.axes[0].collections}
    assert "simulated P99 (95% upper bound)" in labels  # simulated values drawn, not analytic only
    breakdown = plots._breakdown(doc)
    breakdown.canvas.draw()  # realise the tick locator
    ticks = [t for t in breakdown.axes[0].get_yticks() if t >= 0]
    assert ticks and all(float(t).is_integer() for t in ticks)  # GPU counts: integer ticks
    cdf = plots._latency_cdf(doc)
    assert [ax.get_title() for ax in cdf.axes] == ["TTFT distribution per pool", "TPOT distribution per pool"]
    assert all(len(line.get_xdata()) > 100 for line in cdf.axes[0].get_lines() if line.get_label().startswith("pool"))
