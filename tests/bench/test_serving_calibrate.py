"""Calibration on serving measurements: a round trip through result files recovers known factors."""

from __future__ import annotations

import dataclasses
import json

import pytest

from fleetplan.bench import BenchServeConfig, DatasetSpec, EngineArgs, run_bench_serve
from fleetplan.bench.calibrate import (
    FIT_OPTIONS,
    fit_serving,
    measurement_from_metrics,
    read_bench_result,
    read_prometheus_metrics,
)
from fleetplan.errors import DataFormatError
from fleetplan.hardware import load_catalog
from fleetplan.models import load_model
from fleetplan.perf.overheads import PredictorOptions
from fleetplan.perf.profile_io import load_perf_profile, save_perf_profile

TRUTH = {"gemm_efficiency": 0.55, "weight_bandwidth_efficiency": 0.70, "cpu_overhead_s": 2.5e-3}
#: (input, output, concurrency): prefill-heavy, balanced, decode-heavy
RUNS = ((2048, 16, 4), (1024, 128, 1), (1024, 128, 16), (256, 256, 32))


@pytest.fixture(scope="module")
def engine() -> EngineArgs:
    return EngineArgs(load_model("llama-3.1-8b"), load_catalog().get("H100-SXM"))


def _write_results(engine: EngineArgs, options: PredictorOptions, folder) -> list:
    paths = []
    for i, (n_in, n_out, conc) in enumerate(RUNS):
        cfg = BenchServeConfig(DatasetSpec(random_input_len=n_in, random_output_len=n_out), num_prompts=48,
                               max_concurrency=conc, percentile_metrics=("ttft", "tpot", "itl", "e2el"))
        m = dict(run_bench_serve(dataclasses.replace(engine, options=options), cfg).metrics)
        doc = {"date": "20261125-000000", "backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B-Instruct",
               "num_prompts": 48, "request_rate": "inf", "burstiness": 1.0, "max_concurrency": conc, **m}
        path = folder / f"run{i}.json"
        path.write_text(json.dumps(doc))
        paths.append(path)
    return paths


def test_round_trip_recovers_the_factors(engine: EngineArgs, tmp_path) -> None:
    paths = _write_results(engine, dataclasses.replace(PredictorOptions(), **TRUTH), tmp_path)
    measurements = [read_bench_result(p) for p in paths]
    assert measurements[0].dataset.random_input_len == 2048 and measurements[0].max_concurrency == 4
    fit = fit_serving(engine, measurements)
    for name in FIT_OPTIONS:
        assert getattr(fit.options, name) == pytest.approx(TRUTH[name], rel=0.05), name
    assert max(abs(fit.residuals_after)) < 0.01 < max(abs(fit.residuals_before))
    out = tmp_path / "profile.json"
    save_perf_profile(fit.profile, out)
    loaded = load_perf_profile(out)
    again = run_bench_serve(dataclasses.replace(engine, perf_profile=loaded), measurements[1].config()).metrics
    assert again["mean_tpot_ms"] == pytest.approx(measurements[1].measured["mean_tpot_ms"], rel=0.02)


METRICS_TEXT = """# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 10.0
vllm:time_to_first_token_seconds_sum{model_name="m"} 2.5
vllm:time_to_first_token_seconds_count{model_name="m"} 20.0
vllm:time_per_output_token_seconds_sum{model_name="m"} 12.0
vllm:time_per_output_token_seconds_count{model_name="m"} 1000.0
vllm:iteration_tokens_total_sum{model_name="m"} 64000.0
vllm:iteration_tokens_total_count{model_name="m"} 500.0
"""


def test_prometheus_dump_means(tmp_path) -> None:
    path = tmp_path / "metrics.txt"
    path.write_text(METRICS_TEXT)
    means = read_prometheus_metrics(path)
    assert means == {"ttft_s": 0.125, "tpot_s": 0.012, "iteration_tokens": 128.0}
    m = measurement_from_metrics(path, BenchServeConfig(num_prompts=20, max_concurrency=4))
    assert m.measured["mean_ttft_ms"] == pytest.approx(125.0) and m.max_concurrency == 4


def test_bad_files_are_data_format_errors(tmp_path) -> None:
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"throughput": 12.0, "latency": {"p50": 3}}))
    with pytest.raises(DataFormatError, match="is not a vllm bench serve result"):
        read_bench_result(other)
    metrics = tmp_path / "metrics.txt"
    metrics.write_text("vllm:num_requests_running 3\n")
    with pytest.raises(DataFormatError, match="vllm:time_to_first_token_seconds"):
        read_prometheus_metrics(metrics)


def test_profile_round_trips_as_toml(engine: EngineArgs, tmp_path) -> None:
    paths = _write_results(engine, dataclasses.replace(PredictorOptions(), **TRUTH), tmp_path)
    fit = fit_serving(engine, [read_bench_result(p) for p in paths[:3]])
    out = tmp_path / "profile.toml"
    save_perf_profile(fit.profile, out)
    assert out.read_text().startswith('format = "fleetplan-perf-profile"')
    assert load_perf_profile(out) == fit.profile
