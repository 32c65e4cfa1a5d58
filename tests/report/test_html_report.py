"""HTML / JSON reports: strict JSON round trip, re-render without recomputing, embedded PNGs,
the no-matplotlib fallback, and (when ``chromium`` is on PATH) a headless render."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from html.parser import HTMLParser

import pytest
from click.testing import CliRunner

from fleetplan.cli.main import cli
from fleetplan.report import html as html_mod
from fleetplan.report.plots import PLOT_HINT, plots_available

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class _Images(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.srcs: dict[str, str] = {}
        self.remote: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.srcs[a.get("alt", "")] = a.get("src", "")
        for key in ("src", "href"):
            if a.get(key, "").startswith(("http:", "https:", "//")):
                self.remote.append(a[key])


def run(*args):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture(scope="module")
def run_json(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "run.json"
    res = run("optimize", "--workload", "azure_conv", "--lam", "50", "--slo-ttft", "500", "--gpus", "h100",
              "--topology", "homo,two-pool", "--sim-requests", "2000", "--replications", "2", "--verify-top", "2",
              "--json", str(out), "--quiet")
    assert res.exit_code == 0, res.output
    return out


def test_run_json_is_strict_and_complete(run_json):
    doc = json.loads(run_json.read_text(), parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert doc["kind"] == "optimize-run" and doc["version"] and doc["seed"] == 0
    assert len(doc["candidates"]) == doc["n_candidates"] and len(doc["verification_results"]) == 2
    assert doc["procurement"][-1]["pool"] == "total"
    prof = doc["latency_profiles"]
    assert prof and all(p["ttft_ms"] == sorted(p["ttft_ms"]) for p in prof)  # quantiles are a CDF
    assert doc["cost_latency_frontier"]


@pytest.mark.skipif(not plots_available(), reason="matplotlib not installed (fleetplan[plot])")
def test_report_rerenders_html_with_png_plots(run_json, tmp_path):
    out = tmp_path / "report.html"
    res = run("report", str(run_json), "--html", str(out), "--plots", str(tmp_path / "plots"))
    assert res.exit_code == 0, res.output
    parser = _Images()
    parser.feed(out.read_text())
    assert not parser.remote
    for name in ("pareto", "gpu_breakdown", "latency_cdf"):
        src = parser.srcs[name]
        assert src.startswith("data:image/png;base64,")
        data = base64.b64decode(src.split(",", 1)[1])
        assert data.startswith(PNG_MAGIC) and len(data) > 1000
    assert (tmp_path / "plots" / "pareto.svg").read_text().lstrip().startswith(("<?xml", "<svg"))


def test_html_without_matplotlib_keeps_tables_and_says_how(run_json, monkeypatch, tmp_path):
    monkeypatch.setattr("fleetplan.report.plots.plots_available", lambda: False)
    doc = json.loads(run_json.read_text())
    page = html_mod.render_html(doc)
    assert PLOT_HINT.replace("'", "&#x27;") in page and "<img" not in page
    assert "Procurement" in page and "Candidates" in page and "Recommendation:" in page


def test_report_of_a_bad_file_is_one_line(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"kind": "nope"}')
    res = run("report", str(bad), "--html", str(tmp_path / "o.html"))
    assert res.exit_code == 2 and "is not one of" in res.stderr


@pytest.mark.skipif(shutil.which("chromium") is None or not plots_available(), reason="chromium or matplotlib absent")
def test_headless_chromium_renders_the_plots(run_json, tmp_path):
    out = tmp_path / "report.html"
    assert run("report", str(run_json), "--html", str(out)).exit_code == 0
    dom = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", out.as_uri()],
                         capture_output=True, text=True, timeout=60).stdout
    parser = _Images()
    parser.feed(dom)
    assert {"pareto", "gpu_breakdown"} <= set(parser.srcs)
    assert all(len(s) > 1000 for s in parser.srcs.values())
