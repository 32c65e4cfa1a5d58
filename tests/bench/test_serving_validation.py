"""The serving-level validation table (benchmarks/bench_validation.py -> docs/serving_validation.md).

Asserts the data's provenance and coverage (issue "[Serving accuracy]" item 2: at least 25 cited rows,
4 model/GPU pairs, 2 engines including SGLang, MHA and GQA, dense and MoE, 1 to 8 GPUs per instance) and
the targets: mean signed error within +-10 %, mean absolute error at most 15 %, every row within 35 % or
listed as an outlier with its reason, outliers at most 10 % of rows.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from fleetplan.perf.engine_profile import load_engine_profile

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bv():
    spec = importlib.util.spec_from_file_location("bench_validation", ROOT / "benchmarks" / "bench_validation.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def results(bv):
    return bv.evaluate(bv.read_rows())


def test_every_row_is_cited_and_well_formed(bv) -> None:
    rows = bv.read_rows()
    assert len(rows) >= 25
    for r in rows:
        assert len(r["source"]) > 40 and float(r["measured"]) > 0
        assert r["metric"] in ("output_throughput", "mean_ttft_ms", "median_ttft_ms", "median_itl_ms", "mean_tpot_ms",
                               "mean_e2el_ms")
        assert not r["outlier_reason"] or len(r["outlier_reason"]) > 80
        load_engine_profile(r["profile"])
    pairs = {(r["model"], r["gpu"], r["tp"]) for r in rows}
    assert len(pairs) >= 4 and {"lmdeploy", "sglang", "trtllm", "vllm"} <= {r["engine"] for r in rows}
    assert {"1", "4", "8"} <= {r["tp"] for r in rows}
    models = {name: bv._model(name) for name in {r["model"] for r in rows}}
    assert any(m.is_moe for m in models.values()) and any(not m.is_moe for m in models.values())
    assert any(m.n_kv_heads == m.n_heads for m in models.values())  # MHA (Llama-2-7B/13B)
    assert any(m.n_kv_heads < m.n_heads for m in models.values())  # GQA


def test_targets_are_met(bv, results) -> None:
    s = bv.summary(results)
    assert abs(s["mean_signed"]) <= bv.MEAN_SIGNED_TARGET
    assert s["mean_abs"] <= bv.MEAN_ABS_TARGET
    assert s["unexplained"] == 0
    assert s["listed"] <= bv.OUTLIER_SHARE_MAX * s["n"]
