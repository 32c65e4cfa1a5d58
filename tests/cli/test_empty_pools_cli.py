"""Pools with no GPUs and no traffic (a range the workload leaves empty) are not shown: optimize
table, JSON candidates, procurement CSV; the candidates CSV leaves their cells empty."""

from __future__ import annotations

import csv
import json

from click.testing import CliRunner

from fleetplan.cli.main import cli

GAP = '{"source": "test: no requests between 500 and 2000 tokens", ' \
      '"cdf": [[100, 0.0], [500, 0.5], [2000, 0.5], [3000, 1.0]]}'


def test_empty_middle_pool_is_hidden_everywhere(tmp_path):
    wl = tmp_path / "gap.json"
    wl.write_text(GAP)
    out = {k: tmp_path / f"{k}" for k in ("run.json", "p.csv", "c.csv")}
    res = CliRunner().invoke(cli, ["optimize", "--workload", str(wl), "--slo-ttft", "2000", "--gpus", "h100",
                                   "--topology", "multi-pool", "--b-short", "500,2000", "--router", "length",
                                   "--no-verify", "--quiet", "--json", str(out["run.json"]), "--csv",
                                   str(out["p.csv"]), "--candidates-csv", str(out["c.csv"])], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    # the layout has three pools; the middle one (500, 2000] holds no request and gets no GPU
    assert "1-500" in res.output and "2001-3000" in res.output and "501-2000" not in res.output
    best = json.loads(out["run.json"].read_text())["recommendation"]
    assert [(p["pool_index"], p["min_tokens"], p["max_tokens"]) for p in best["pools"]] == [(1, 0, 500),
                                                                                           (3, 2000, 3000)]
    assert best["total_gpus_needed"] == sum(p["count"] for p in best["pools"])
    procurement = list(csv.DictReader(out["p.csv"].open()))
    assert [r["pool"] for r in procurement] == ["pool1", "pool3", "total"]
    row = next(csv.DictReader(out["c.csv"].open()))
    assert row["pool2_gpu"] == row["pool2_count"] == "" and row["pool3_max_tokens"] == "3000"
