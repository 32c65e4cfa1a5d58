"""Golden CSVs of a small, fast run (analytic only, one GPU type, homo + two-pool).

Command pinned: ``fleetplan optimize --workload lmsys --slo-ttft 500 --gpus h100 --topology
homo,two-pool --no-verify --csv procurement_lmsys_h100.csv --candidates-csv
candidates_lmsys_h100.csv``.  Cells are compared as text, numbers to a relative 1e-6 (the
files round to 6 significant decimals).  After an intended model change, regenerate both
files with that command and review the diff.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from fleetplan.cli.main import cli

HERE = Path(__file__).resolve().parent
ARGS = ["optimize", "--workload", "lmsys", "--slo-ttft", "500", "--gpus", "h100", "--topology", "homo,two-pool",
        "--no-verify", "--quiet"]


def _same(a: str, b: str) -> bool:
    try:
        x, y = float(a), float(b)
    except ValueError:
        return a == b
    return math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-9)


@pytest.fixture(scope="module")
def produced(tmp_path_factory):
    out = tmp_path_factory.mktemp("golden")
    res = CliRunner().invoke(cli, [*ARGS, "--csv", str(out / "p.csv"), "--candidates-csv", str(out / "c.csv")])
    assert res.exit_code == 0, res.output
    return {"procurement_lmsys_h100.csv": out / "p.csv", "candidates_lmsys_h100.csv": out / "c.csv"}


@pytest.mark.parametrize("name", ["procurement_lmsys_h100.csv", "candidates_lmsys_h100.csv"])
def test_csv_matches_golden(produced, name):
    got = list(csv.reader(produced[name].open()))
    want = list(csv.reader((HERE / name).open()))
    assert got[0] == want[0] and len(got) == len(want)
    for i, (g, w) in enumerate(zip(got[1:], want[1:], strict=True), start=2):
        assert len(g) == len(w) and all(_same(a, b) for a, b in zip(g, w, strict=True)), (name, i, g, w)


def test_procurement_total_row_conserves_pools(produced):
    rows = list(csv.DictReader(produced["procurement_lmsys_h100.csv"].open()))
    pools, total = rows[:-1], rows[-1]
    assert total["pool"] == "total"
    for col in ("count", "spares", "total_gpus"):
        assert int(total[col]) == sum(int(r[col]) for r in pools)
    for col in ("cost_usd_per_year", "power_kw", "traffic_share"):
        assert float(total[col]) == pytest.approx(sum(float(r[col]) for r in pools), abs=2e-3)
    assert float(total["traffic_share"]) == pytest.approx(1.0, abs=1e-6)
