"""fit(): fitted CDFs reproduce the trace (mean within 0.5%, quantiles within 1% or 2 tokens)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fleetplan.workload import (
    SPLIT_THRESHOLDS_TOKENS,
    Trace,
    TraceFormat,
    empirical_cdf_points,
    empirical_copula,
    fit,
    parse_cdf_document,
    read_trace,
    workload_from_document,
)

MEAN_RTOL = 0.005
QUANTILE_RTOL = 0.01
QUANTILE_ATOL_TOKENS = 2
LEVELS = (0.1, 0.25, 0.5, 0.75, 0.9, 0.99)


def test_empirical_points_hand_example():
    pts = empirical_cdf_points(np.array([3, 3, 5, 9]), n_quantiles=4, thresholds=(4, 100))
    # leading v_min - 1 = 2, quantiles at 1/4..1 -> 3, 3, 5, 9; threshold 4 inside the range
    assert pts == [[2, 0.0], [3, 0.5], [4, 0.5], [5, 0.75], [9, 1.0]]


def test_copula_of_identical_ranks_is_diagonal():
    x = np.arange(1, 101)
    c = empirical_copula(x, x, bins=4)
    np.testing.assert_allclose(c, np.eye(4) / 4)
    np.testing.assert_allclose(empirical_copula(x, -x + 200, bins=4), np.fliplr(np.eye(4)) / 4)


def _check_reproduces(doc: dict, trace: Trace) -> None:
    parsed = parse_cdf_document(json.loads(json.dumps(doc)), "fit")
    for cdf, values in (
        (parsed.total, trace.total_tokens),
        (parsed.input, trace.prompt_tokens),
        (parsed.output, trace.output_tokens),
    ):
        # the piecewise-linear mean differs from the trace's by bin-interior spread only
        assert cdf.mean() == pytest.approx(values.mean(), rel=MEAN_RTOL)
        for u in LEVELS:
            emp = np.quantile(values, u, method="inverted_cdf")
            assert abs(float(cdf.quantile(u)) - emp) <= max(QUANTILE_ATOL_TOKENS, QUANTILE_RTOL * emp)
        # exact at every breakpoint, hence at split thresholds
        for t in SPLIT_THRESHOLDS_TOKENS:
            if values.min() <= t <= values.max():
                assert cdf.cdf(t) == pytest.approx(np.mean(values <= t), abs=1e-9)
    w = workload_from_document("fit", parsed)
    prompt, output, weight = w.quadrature(8192)
    assert weight @ (prompt + output) == pytest.approx(trace.total_tokens.mean(), rel=0.01)


def test_fit_reproduces_synthetic_trace():
    rng = np.random.default_rng(11)
    n = 5000
    prompt = np.maximum(1, rng.lognormal(6.5, 1.0, n).astype(np.int64))
    output = np.maximum(1, (rng.lognormal(4.5, 0.8, n) + 0.05 * prompt).astype(np.int64))
    trace = Trace(
        np.cumsum(np.r_[0.0, rng.exponential(0.1, n - 1)]), prompt, output, "synthetic.csv", TraceFormat.PLAIN
    )
    doc = fit(trace, command="test")
    _check_reproduces(doc, trace)
    assert doc["arrival_rate_per_s"] == pytest.approx(trace.arrival_rate_per_s)
    assert doc["license"] == "unspecified" and doc["n_samples"] == n
    assert doc["provenance"]["trace_format"] == "plain"


def test_fit_records_azure_provenance_and_reproduces_trace(shared_dir):
    trace = read_trace(shared_dir / "traces" / "azure2023" / "AzureLLMInferenceTrace_conv.csv")
    doc = fit(trace, command="fleetplan workloads fit conv.csv --out x.json")
    _check_reproduces(doc, trace)
    assert doc["license"] == "CC-BY-4.0"
    assert "Splitwise" in doc["source"]
    assert doc["generated_by"] == "fleetplan workloads fit conv.csv --out x.json"
    assert doc["provenance"]["n_rows"] == 19366
    assert doc["provenance"]["fleetplan_version"]
    assert fit(trace, command="c", license="mine")["license"] == "mine"


def test_fit_keeps_prompt_output_dependence(shared_dir):
    trace = read_trace(shared_dir / "traces" / "azure2023" / "AzureLLMInferenceTrace_code.csv")
    w = workload_from_document("code", parse_cdf_document(fit(trace, command="c"), "code"))
    p, o = w.sample(np.random.default_rng(5), 100_000)
    rank = np.corrcoef(np.argsort(np.argsort(p)), np.argsort(np.argsort(o)))[0, 1]
    trace_rank = np.corrcoef(
        np.argsort(np.argsort(trace.prompt_tokens)), np.argsort(np.argsort(trace.output_tokens))
    )[0, 1]
    assert rank == pytest.approx(trace_rank, abs=0.05)
