"""Summary statistics on hand-built request tables: goodput, inf percentiles, exports."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from fleetplan.report.sim_export import write_requests_csv, write_summary_json
from fleetplan.sim.result import CSV_COLUMNS, SimResult, summarise

INF = math.inf


def table(arrival, done, ttft, tpot, status, pool=None, output=None, warmup=None) -> pd.DataFrame:
    n = len(arrival)
    arrival = np.asarray(arrival, dtype=float)
    done = np.asarray(done, dtype=float)
    return pd.DataFrame({
        "request_id": np.arange(n),
        "pool": pool or ["a"] * n,
        "instance": np.zeros(n, dtype=int),
        "arrival_s": arrival,
        "prompt_tokens": np.full(n, 100),
        "original_prompt_tokens": np.full(n, 100),
        "output_tokens": output or [10] * n,
        "first_sched_s": arrival,
        "first_token_s": arrival + np.asarray(ttft, dtype=float),
        "done_s": done,
        "ttft_s": np.asarray(ttft, dtype=float),
        "tpot_s": np.asarray(tpot, dtype=float),
        "e2e_s": done - arrival,
        "queue_wait_s": np.zeros(n),
        "preemptions": np.zeros(n, dtype=int),
        "status": status,
        "warmup": warmup or [False] * n,
    })


def summary(df: pd.DataFrame, pools=("a",), **kw):
    n_pools = len(pools)
    return summarise(
        df, pool_names=tuple(pools), pool_gpus=("A100",) * n_pools, inst_pool=np.arange(n_pools),
        inst_utilisation=np.full(n_pools, 0.5), inst_mean_batch=np.full(n_pools, 3.0), level="request",
        rate_per_s=1.0, warmup_fraction=0.0, **kw,
    )


def goodput_case() -> pd.DataFrame:
    # r0 meets both SLOs; r1 misses TTFT; r2 misses TPOT; r3 is a one-token output (TPOT
    # undefined, counted as 0 for goodput as vLLM does); r4 is unfinished at the horizon.
    return table(
        arrival=[0, 1, 2, 3, 4], done=[1.0, 2.5, 3.5, 3.1, INF], ttft=[0.2, 0.8, 0.3, 0.1, INF],
        tpot=[0.05, 0.01, 0.2, np.nan, INF], status=["done"] * 4 + ["unfinished"], output=[10, 10, 10, 1, 10],
    )


def test_goodput_and_attainment_hand_computed():
    s = summary(goodput_case(), slo_ttft_s=0.5, slo_tpot_s=0.1, horizon_s=10.0)
    # measured window: first arrival 0 to the horizon 10 (r4 unfinished) = 10 s; good = {r0, r3}
    assert s.measured_duration_s == 10.0
    assert s.overall.goodput_per_s == pytest.approx(2 / 10)
    assert s.overall.slo_attainment == pytest.approx(2 / 5)
    assert s.overall.throughput_per_s == pytest.approx(4 / 10)
    ttft_only = summary(goodput_case(), slo_ttft_s=0.5, horizon_s=10.0)
    assert ttft_only.overall.goodput_per_s == pytest.approx(3 / 10)  # r0, r2, r3
    no_slo = summary(goodput_case(), horizon_s=10.0)
    assert no_slo.overall.goodput_per_s is None and no_slo.overall.slo_attainment is None


def test_window_ends_at_last_completion_without_horizon():
    df = goodput_case().iloc[:4]
    s = summary(df, slo_ttft_s=0.5)
    assert s.measured_duration_s == 3.5  # arrival 0 to r2's completion
    assert s.overall.goodput_per_s == pytest.approx(3 / 3.5)


def test_unfinished_requests_make_high_percentiles_infinite():
    n = 100
    ttft = np.arange(1, n + 1) * 0.01
    status = ["done"] * n
    ttft[-2:] = INF  # two unfinished: never silently dropped
    status[-2:] = ["unfinished", "rejected"]
    done = np.where(np.isfinite(ttft), np.arange(n) + 1.0, INF)
    s = summary(table(np.arange(n) * 0.1, done, ttft, np.full(n, 0.01), status))
    o = s.overall
    assert o.ttft.p99_s == INF and o.e2e.p99_s == INF and o.ttft.mean_s == INF
    assert o.ttft.p90_s == pytest.approx(0.90)  # inverted-CDF order statistic: 90th smallest
    assert o.ttft.p50_s == pytest.approx(0.50)
    assert (o.n_done, o.n_unfinished, o.n_rejected, o.n_requests) == (98, 1, 1, 100)


def test_one_token_outputs_are_left_out_of_tpot_percentiles():
    s = summary(goodput_case().iloc[:4])
    assert s.overall.tpot.n == 3  # r3's TPOT is undefined (NaN)
    assert s.overall.tpot.p50_s == pytest.approx(0.05)


def test_warmup_rows_excluded_and_pools_split():
    df = table(arrival=[0, 1, 2, 3], done=[9.0, 2.0, 3.0, 4.0], ttft=[5.0, 0.1, 0.2, 0.3], tpot=[0.1] * 4,
               status=["done"] * 4, pool=["a", "a", "b", "b"], warmup=[True, False, False, False])
    s = summary(df, pools=("a", "b"))
    assert s.n_warmup == 1 and s.overall.n_requests == 3
    assert s.overall.ttft.p99_s == pytest.approx(0.3)  # the warm-up outlier (5 s) is excluded
    assert s.pool("a").n_requests == 1 and s.pool("b").n_requests == 2
    assert s.pool("b").ttft.mean_s == pytest.approx(0.25)
    assert s.pool("a").utilisation == 0.5 and s.overall.mean_batch == 3.0


def test_csv_export_is_ms_and_complete(tmp_path):
    df = goodput_case()
    result = SimResult(df, summary(df, slo_ttft_s=0.5, horizon_s=10.0))
    path = tmp_path / "requests.csv"
    write_requests_csv(result, path)
    back = pd.read_csv(path)
    assert tuple(back.columns) == CSV_COLUMNS
    assert len(back) == 5
    assert back["ttft_ms"].iloc[0] == pytest.approx(200.0) and back["tpot_ms"].iloc[0] == pytest.approx(50.0)
    assert back["e2e_ms"].iloc[1] == pytest.approx(1500.0)
    assert math.isinf(back["ttft_ms"].iloc[4]) and back["status"].iloc[4] == "unfinished"
    assert [p.name for p in tmp_path.iterdir()] == ["requests.csv"]  # no temp file left behind


def test_json_is_strict_with_nulls(tmp_path):
    df = goodput_case()
    result = SimResult(df, summary(df, slo_ttft_s=0.5, horizon_s=10.0))
    path = tmp_path / "summary.json"
    write_summary_json(result, path)

    def reject(token):
        raise AssertionError(f"bare {token} in JSON")

    doc = json.loads(path.read_text(), parse_constant=reject)
    assert doc["overall"]["ttft"]["p99_s"] is None  # inf -> null
    assert doc["overall"]["goodput_per_s"] == pytest.approx(0.3)  # TTFT SLO only: r0, r2, r3
    assert doc["slo_tpot_s"] is None and doc["pools"][0]["name"] == "a"
    assert "TPOT = (E2E - TTFT)" in doc["tpot_definition"]
