"""Calibration on serving measurements: a round trip through result files recovers known factors."""

from __future__ import annotations

import dataclasses
import json

import pytest

from fleetplan.bench import BenchServeConfig, DatasetSpec, EngineArgs, run_bench_serve
from fleetplan.bench.calibrate import (
    FIT_OPTIONS,
    client_backend,
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


@pytest.mark.parametrize(("value", "client"), [
    (None, "vllm"), ("vllm", "vllm"), ("openai", "openai"), ("openai-chat", "openai-chat"),
    ("sglang-oai-chat", "openai-chat"), ("vllm-chat", "openai-chat"), ("lmdeploy-chat", "openai-chat"),
    ("sglang", "openai"), ("sglang-oai", "openai"), ("tgi", "openai")])
def test_client_backend_of_a_result_files_backend(value, client) -> None:
    assert client_backend("r.json", value) == client


@pytest.mark.parametrize("value", [3, "", ["openai-chat"]])
def test_client_backend_that_is_not_a_name_is_refused(value) -> None:
    with pytest.raises(DataFormatError, match="`backend`"):
        client_backend("r.json", value)


def _chat_doc(engine: EngineArgs, cfg: BenchServeConfig, backend: str) -> dict:
    m = dict(run_bench_serve(engine, cfg).metrics)
    return {"date": "20261208-000000", "backend": backend, "model_id": "Qwen/Qwen3-30B-A3B", "num_prompts":
            cfg.num_prompts, "request_rate": "inf", "burstiness": 1.0, "max_concurrency": cfg.max_concurrency, **m}


def test_a_chat_run_is_re_simulated_as_the_chat_endpoint(tmp_path) -> None:
    """A ``vllm bench serve --backend openai-chat`` result (and ``sglang.bench_serving``'s ``sglang-oai-chat``) is
    replayed as a chat run: its prompts prefilled with Qwen3's 8 template tokens and the role chunk streamed, so the
    calibration's simulation of the file reproduces the run exactly; read as a completions run (the file's backend
    ``vllm``) the same settings come out faster to first token."""
    engine = EngineArgs(load_model("qwen3-30b-a3b"), load_catalog().get("H100-SXM"))
    cfg = BenchServeConfig(DatasetSpec(random_input_len=512, random_output_len=8), num_prompts=24,
                           max_concurrency=8, percentile_metrics=("ttft", "tpot", "itl"), backend="openai-chat")
    chat = _chat_doc(engine, cfg, "openai-chat")
    for backend in ("openai-chat", "sglang-oai-chat"):
        path = tmp_path / f"{backend}.json"
        path.write_text(json.dumps({**chat, "backend": backend}))
        m = read_bench_result(path)
        assert (m.backend, m.chat_template_tokens) == ("openai-chat", None)
        again = run_bench_serve(engine, m.config()).metrics
        for key in ("mean_ttft_ms", "mean_tpot_ms", "output_throughput"):
            assert again[key] == pytest.approx(chat[key], rel=1e-12), key
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({**chat, "backend": "vllm"}))
    as_completions = run_bench_serve(engine, read_bench_result(plain).config()).metrics
    assert as_completions["mean_ttft_ms"] < chat["mean_ttft_ms"]
    m = read_bench_result(tmp_path / "openai-chat.json", chat_template_tokens=0)
    assert run_bench_serve(engine, m.config()).metrics["mean_ttft_ms"] == pytest.approx(
        as_completions["mean_ttft_ms"], rel=1e-12)
    assert read_bench_result(plain, chat_template_tokens=5).chat_template_tokens is None  # completions: not applied


def test_fleetplans_own_chat_result_names_its_client_and_template(tmp_path) -> None:
    """``fleetplan bench serve``'s result JSON records the client under ``fleetplan.client_backend`` and the
    template tokens it prefilled; read back, the run is a chat run with that count (a file of an earlier release,
    without ``client_backend``, is one when it prefilled template tokens)."""
    from fleetplan.cli.bench_cmd import result_json

    engine = EngineArgs(load_model("qwen3-30b-a3b"), load_catalog().get("H100-SXM"))
    cfg = BenchServeConfig(DatasetSpec(random_input_len=256, random_output_len=4), num_prompts=8, max_concurrency=4,
                           backend="openai-chat", chat_template_tokens=12)
    doc = result_json(run_bench_serve(engine, cfg), "t", "Qwen/Qwen3-30B-A3B", "vllm", "20261208-000000")
    assert doc["backend"] == "fleetplan-sim" and doc["fleetplan"]["client_backend"] == "openai-chat"
    path = tmp_path / "own.json"
    path.write_text(json.dumps(doc))
    m = read_bench_result(path)
    assert (m.backend, m.chat_template_tokens) == ("openai-chat", 12)
    assert read_bench_result(path, chat_template_tokens=3).chat_template_tokens == 3
    earlier = {**doc, "fleetplan": {k: v for k, v in doc["fleetplan"].items() if k != "client_backend"}}
    path.write_text(json.dumps(earlier))
    assert read_bench_result(path).backend == "openai-chat"
    earlier["fleetplan"]["chat_template_tokens"] = 0
    path.write_text(json.dumps(earlier))
    assert read_bench_result(path).backend == "vllm"


def test_metrics_run_takes_the_client_from_its_config(tmp_path) -> None:
    path = tmp_path / "metrics.txt"
    path.write_text(METRICS_TEXT)
    m = measurement_from_metrics(path, BenchServeConfig(num_prompts=20, backend="openai-chat", chat_template_tokens=4))
    assert (m.backend, m.chat_template_tokens) == ("openai-chat", 4)
    assert m.config().backend == "openai-chat" and m.config().chat_template_tokens == 4
