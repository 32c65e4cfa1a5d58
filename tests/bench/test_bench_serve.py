"""``run_bench_serve``: vLLM's client model and metrics, checked against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fleetplan.bench import BenchServeConfig, DatasetSpec, EngineArgs, run_bench_serve
from fleetplan.bench.serve import send_times_s
from fleetplan.cli.errors import render_error
from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.models import Dtype, load_model
from fleetplan.perf.batch import BatchComposition

VLLM_KEYS = ("duration", "completed", "failed", "total_input_tokens", "total_output_tokens", "request_throughput",
             "output_throughput", "total_token_throughput")


@pytest.fixture(scope="module")
def engine() -> EngineArgs:
    return EngineArgs(load_model("llama-3.1-8b"), load_catalog().get("H100-SXM"))


def test_send_times_follow_vllm() -> None:
    rng = np.random.default_rng(0)
    assert np.all(send_times_s(5, math.inf, 1.0, rng) == 0)
    t = send_times_s(100, 4.0, 0.5, rng)
    assert t[-1] == pytest.approx(25.0) and np.all(np.diff(t) >= 0)  # normalised to N / rate
    np.testing.assert_allclose(send_times_s(4, 2.0, math.inf, rng), [0.5, 1.0, 1.5, 2.0])


def test_one_request_is_one_prefill_then_decodes(engine: EngineArgs) -> None:
    cfg = BenchServeConfig(DatasetSpec(random_input_len=512, random_output_len=2), num_prompts=1,
                           percentile_metrics=("ttft", "tpot", "itl", "e2el"))
    r = run_bench_serve(engine, cfg)
    p = engine.predictor()
    prefill_s = p.predict(BatchComposition.uniform(n_prefill=1, chunk_tokens=512)).total_s
    decode_s = p.predict(BatchComposition.uniform(1, 512)).total_s
    m = r.metrics
    assert m["mean_ttft_ms"] == pytest.approx(1e3 * prefill_s, rel=1e-9)
    assert m["mean_e2el_ms"] == pytest.approx(1e3 * (prefill_s + decode_s), rel=1e-9)
    assert m["mean_tpot_ms"] == pytest.approx(1e3 * decode_s, rel=1e-9)
    assert m["duration"] == pytest.approx(prefill_s + decode_s, rel=1e-9)
    assert all(k in m for k in VLLM_KEYS) and m["completed"] == 1 and m["failed"] == 0


def test_concurrency_one_serialises_requests(engine: EngineArgs) -> None:
    cfg = BenchServeConfig(DatasetSpec(random_input_len=256, random_output_len=8), num_prompts=6,
                           max_concurrency=1, percentile_metrics=("e2el",))
    r = run_bench_serve(engine, cfg)
    ends = r.start_s + r.e2el_s
    np.testing.assert_allclose(r.start_s[1:], ends[:-1], rtol=0, atol=0)  # next starts when one completes
    assert r.metrics["duration"] == pytest.approx(float(np.sum(r.e2el_s)), rel=1e-12)
    assert np.all(r.send_s == 0)


def test_itl_mean_is_token_weighted_and_keys_follow_percentiles(engine: EngineArgs) -> None:
    cfg = BenchServeConfig(DatasetSpec(random_input_len=300, random_output_len=40, random_range_ratio=0.5),
                           num_prompts=60, request_rate_per_s=20.0, metric_percentiles=(50.0, 99.0, 99.9))
    r = run_bench_serve(engine, cfg)
    decode_s = np.sum(r.e2el_s - r.ttft_s)
    assert r.metrics["mean_itl_ms"] == pytest.approx(1e3 * decode_s / np.sum(r.output_tokens - 1), rel=1e-9)
    assert {"p50_ttft_ms", "p99_ttft_ms", "p99.9_tpot_ms", "median_itl_ms", "std_itl_ms"} <= set(r.metrics)
    assert "mean_e2el_ms" not in r.metrics  # not asked for (vLLM's default ttft,tpot,itl)
    assert r.metrics["total_input_tokens"] == int(r.prompt_tokens.sum())


def test_more_concurrency_more_throughput_longer_tpot(engine: EngineArgs) -> None:
    figures = []
    for conc in (1, 8, 64):
        cfg = BenchServeConfig(DatasetSpec(random_input_len=512, random_output_len=64), num_prompts=128,
                               max_concurrency=conc, percentile_metrics=("tpot",))
        m = run_bench_serve(engine, cfg).metrics
        figures.append((m["output_throughput"], m["mean_tpot_ms"]))
    assert figures[0][0] < figures[1][0] < figures[2][0]
    assert figures[0][1] < figures[1][1] < figures[2][1]


def test_bad_client_values_are_one_line_errors() -> None:
    # the CLI's wording (render_error) names the flags
    with pytest.raises(ConfigError) as err:
        BenchServeConfig(max_concurrency=0)
    assert "--max-concurrency" in render_error(err.value, "bench serve")
    with pytest.raises(ConfigError) as err:
        DatasetSpec(random_range_ratio=1.0)
    assert "--random-range-ratio" in render_error(err.value, "bench serve")
    with pytest.raises(ConfigError) as err:
        BenchServeConfig(percentile_metrics=("ttfb",))
    assert "--percentile-metrics" in render_error(err.value, "bench serve")


def test_closed_loop_with_speculative_decoding(engine: EngineArgs) -> None:
    from dataclasses import replace

    from fleetplan.sim.features.speculative import SpeculativeConfig

    spec = SpeculativeConfig.from_json('{"method": "mtp", "num_speculative_tokens": 2, "acceptance_rate": 0.8}')
    cfg = BenchServeConfig(DatasetSpec(random_input_len=256, random_output_len=64), num_prompts=40,
                           max_concurrency=4, percentile_metrics=("tpot",))
    plain = run_bench_serve(engine, cfg).metrics
    fast = run_bench_serve(replace(engine, speculative=spec), cfg).metrics
    assert fast["completed"] == 40 and fast["mean_tpot_ms"] < plain["mean_tpot_ms"]


def test_speculative_itl_is_per_streamed_chunk(engine: EngineArgs) -> None:
    """vLLM appends one ITL per streamed chunk; a speculative step streams its accepted tokens together, so
    mean ITL = decode time / chunks exceeds TPOT by about the tokens per step (1 + 0.8 + 0.64 expected)."""
    from dataclasses import replace

    from fleetplan.sim.features.speculative import SpeculativeConfig

    spec = SpeculativeConfig.from_json('{"method": "mtp", "num_speculative_tokens": 2, "acceptance_rate": 0.8}')
    cfg = BenchServeConfig(DatasetSpec(random_input_len=256, random_output_len=64), num_prompts=40,
                           max_concurrency=4, percentile_metrics=("tpot", "itl"))
    m = run_bench_serve(replace(engine, speculative=spec), cfg).metrics
    assert 1.9 < m["mean_itl_ms"] / m["mean_tpot_ms"] < 2.9
    assert m["itl_percentiles_method"].startswith("pooled gaps")


def test_fp8_is_not_a_free_2x_with_the_vllm_profile() -> None:
    """vLLM per-tensor FP8 GEMMs reach ~0.50 of FP8 peak (engine_profiles/vllm.toml, read back from
    AIConfigurator's measured vLLM steps), against 0.66 of the BF16 peak for BF16: an H100 FP8 prefill gains
    less than the 2x of the peaks (0.50 x 2 / 0.66 = 1.5x at most), while batch-1 decode (weight streaming)
    gains from half the weight bytes."""
    from fleetplan.models import Dtype
    from fleetplan.perf.engine_profile import load_engine_profile

    gpu = load_catalog().get("H100-SXM")
    profile = load_engine_profile("vllm")
    assert profile.options.fp8_gemm_efficiency == pytest.approx(0.50) and "AIConfigurator" in profile.sources[
        "fp8_gemm_efficiency"]
    figures = {}
    for dtype in (Dtype.BF16, Dtype.FP8):
        engine = EngineArgs(load_model("llama-3.1-8b"), gpu, weight_dtype=dtype,
                            options=profile.options_for(gpu, dtype))
        cfg = BenchServeConfig(DatasetSpec(random_input_len=4096, random_output_len=32), num_prompts=1,
                               percentile_metrics=("ttft", "tpot"))
        m = run_bench_serve(engine, cfg).metrics
        figures[dtype] = (m["mean_ttft_ms"], m["mean_tpot_ms"])
    assert figures[Dtype.BF16][0] / 2 < figures[Dtype.FP8][0] < figures[Dtype.BF16][0]  # prefill: a partial gain
    assert 0.5 < figures[Dtype.FP8][1] / figures[Dtype.BF16][1] < 0.8  # decode: weight bytes halved, host time not


def test_two_instances_behind_the_router_serve_a_saturating_load_faster(engine: EngineArgs) -> None:
    from dataclasses import replace

    cfg = BenchServeConfig(DatasetSpec(random_input_len=1024, random_output_len=64), num_prompts=200,
                           percentile_metrics=("ttft",))
    one = run_bench_serve(engine, cfg).metrics
    two = run_bench_serve(replace(engine, instances=2), cfg).metrics
    assert 1.6 < two["request_throughput"] / one["request_throughput"] <= 2.05
    assert two["mean_ttft_ms"] < one["mean_ttft_ms"]


def test_capture_sizes_run_the_feature_kernel_with_padding(engine: EngineArgs) -> None:
    from dataclasses import replace

    cfg = BenchServeConfig(DatasetSpec(random_input_len=128, random_output_len=32), num_prompts=24,
                           max_concurrency=5, percentile_metrics=("tpot",))
    plain = run_bench_serve(engine, cfg).metrics
    graphs = run_bench_serve(replace(engine, cudagraph_capture_sizes=(1, 8, 16)), cfg).metrics
    assert graphs["completed"] == 24
    assert graphs["mean_tpot_ms"] >= plain["mean_tpot_ms"]  # batches of 5 padded to 8


@pytest.mark.parametrize("prefix_caching", [False, True])
def test_itl_spread_comes_from_the_step_log(engine: EngineArgs, prefix_caching: bool) -> None:
    """Long prompts arriving among decodes: chunked-prefill steps stall the decodes they share a step with, so
    P99 ITL (step log, or with prefix caching the feature kernel's gap histogram) exceeds P99 TPOT (per-request
    averages) while the mean ITL stays the exact one."""
    from dataclasses import replace

    cfg = BenchServeConfig(DatasetSpec(random_input_len=6000, random_output_len=64, random_range_ratio=0.5),
                           num_prompts=80, request_rate_per_s=4.0, percentile_metrics=("tpot", "itl"))
    m = run_bench_serve(replace(engine, enable_prefix_caching=prefix_caching), cfg).metrics
    assert m["itl_percentiles_method"].startswith("pooled gaps" if prefix_caching else "step log")
    assert m["p99_itl_ms"] > 1.2 * m["p99_tpot_ms"]
    assert m["median_itl_ms"] < m["mean_itl_ms"]


def test_gap_histogram_agrees_with_the_step_log_without_preemption(engine: EngineArgs) -> None:
    """Without preemption (and no shared prefix) prefix caching changes no step, and each token's gap is the
    step that made it: the feature kernel's histogram (bins of relative half-width 6.1e-5) gives the step log's
    median and P99 ITL within that precision."""
    from dataclasses import replace

    cfg = BenchServeConfig(DatasetSpec(random_input_len=3000, random_output_len=100, random_range_ratio=0.5),
                           num_prompts=60, request_rate_per_s=3.0, percentile_metrics=("itl",),
                           metric_percentiles=(50.0, 90.0, 99.0))
    log = run_bench_serve(replace(engine, enable_prefix_caching=False), cfg)
    hist = run_bench_serve(replace(engine, enable_prefix_caching=True), cfg)
    assert int(log.fleet.pools[0].limits.kv_blocks) > 0
    np.testing.assert_array_equal(log.e2el_s, hist.e2el_s)
    for key in ("median_itl_ms", "p50_itl_ms", "p90_itl_ms", "p99_itl_ms"):
        assert hist.metrics[key] == pytest.approx(log.metrics[key], rel=1.3e-4), key
    assert hist.metrics["mean_itl_ms"] == pytest.approx(log.metrics["mean_itl_ms"], rel=1e-12)


def test_median_itl_is_the_decode_step_and_leaves_out_prefill_chunks(engine: EngineArgs) -> None:
    """One request at a time (max_concurrency 1): every gap is a batch-1 decode step, so median ITL = mean ITL =
    TPOT within the bins' precision; with 8,000-token prompts at 8 clients most gaps are still pure decode
    steps, so the median stays below the mean that the prefill-chunk steps raise."""
    from dataclasses import replace

    one = BenchServeConfig(DatasetSpec(random_input_len=512, random_output_len=64), num_prompts=4, max_concurrency=1,
                           percentile_metrics=("tpot", "itl"))
    m = run_bench_serve(engine, one).metrics
    assert m["itl_percentiles_method"].startswith("pooled gaps")
    assert m["median_itl_ms"] == pytest.approx(m["mean_itl_ms"], rel=2e-3)
    assert m["mean_itl_ms"] == pytest.approx(m["mean_tpot_ms"], rel=1e-9)
    eight = BenchServeConfig(DatasetSpec(random_input_len=8000, random_output_len=200), num_prompts=32,
                             max_concurrency=8, percentile_metrics=("tpot", "itl"))
    m = run_bench_serve(replace(engine, max_num_batched_tokens=2048), eight).metrics
    assert m["median_itl_ms"] < 0.8 * m["mean_itl_ms"]


def test_chat_backend_adds_one_zero_role_gap_per_request(engine: EngineArgs) -> None:
    """``openai-chat``: the role chunk comes in the first token's iteration, so each request's ITL list gains one
    ~0 s gap.  Two outputs, one request at a time: the completions client pools one decode step s per request
    (median s); the chat client pools [0, s] per request, so numpy's median of n zeros and n steps is s / 2 and
    vLLM's mean ITL halves; TTFT, TPOT, E2EL and throughput do not move (a template of 0 tokens: the role chunk
    alone)."""
    from dataclasses import replace

    base = BenchServeConfig(DatasetSpec(random_input_len=256, random_output_len=2), num_prompts=6, max_concurrency=1,
                            percentile_metrics=("ttft", "tpot", "itl", "e2el"), metric_percentiles=(50.0, 99.0))
    plain = run_bench_serve(engine, base)
    chat = run_bench_serve(engine, replace(base, backend="openai-chat", chat_template_tokens=0))
    np.testing.assert_array_equal(plain.e2el_s, chat.e2el_s)
    for key in ("mean_ttft_ms", "mean_tpot_ms", "mean_e2el_ms", "output_throughput", "duration"):
        assert chat.metrics[key] == plain.metrics[key], key
    step_ms = plain.metrics["mean_tpot_ms"]
    assert plain.metrics["median_itl_ms"] == pytest.approx(step_ms, rel=2e-3)
    assert chat.metrics["median_itl_ms"] == pytest.approx(step_ms / 2, rel=2e-3)
    assert chat.metrics["mean_itl_ms"] == pytest.approx(step_ms / 2, rel=1e-9)
    assert chat.metrics["p99_itl_ms"] == pytest.approx(plain.metrics["p99_itl_ms"], rel=2e-3)
    with pytest.raises(ConfigError, match="openai-chat"):
        BenchServeConfig(backend="sglang-oai")


def test_chat_template_tokens_are_prefilled_but_not_counted_by_the_client() -> None:
    """``openai-chat`` prefills ``prompt + t`` (t = the model's ``chat_template_tokens``, gpt-oss's harmony prompt 65)
    while the client counts the dataset's lengths: the chat run of 128-token prompts times exactly like a
    completions run of 193-token prompts (same engine work, same seeds) but reports 128 tokens a request; the
    completions endpoints add nothing, and a given count overrides the model's."""
    from dataclasses import replace

    gpt = EngineArgs(load_model("gpt-oss-20b"), load_catalog().get("h100"), 1, Dtype.MXFP4)
    assert gpt.model.chat_template_tokens == 65
    cfg = BenchServeConfig(DatasetSpec(random_input_len=128, random_output_len=4), num_prompts=40,
                           percentile_metrics=("ttft", "tpot", "e2el"))
    chat = run_bench_serve(gpt, replace(cfg, backend="openai-chat"))
    wide = run_bench_serve(gpt, replace(cfg, dataset=DatasetSpec(random_input_len=193, random_output_len=4)))
    assert chat.chat_template_tokens == 65 and wide.chat_template_tokens == 0
    np.testing.assert_array_equal(chat.ttft_s, wide.ttft_s)
    np.testing.assert_array_equal(chat.e2el_s, wide.e2el_s)
    assert chat.metrics["total_input_tokens"] == 40 * 128 and wide.metrics["total_input_tokens"] == 40 * 193
    assert chat.metrics["output_throughput"] == wide.metrics["output_throughput"]
    given = run_bench_serve(gpt, replace(cfg, backend="openai-chat", chat_template_tokens=0))
    plain = run_bench_serve(gpt, cfg)
    np.testing.assert_array_equal(given.ttft_s, plain.ttft_s)
    assert given.chat_template_tokens == 0 and given.metrics["mean_ttft_ms"] < chat.metrics["mean_ttft_ms"]


def test_chat_template_tokens_refused_where_they_cannot_apply(engine: EngineArgs) -> None:
    """A model whose template size is unknown (the bundled Llama-3.1-8B base config) under the chat endpoint asks
    for the count; a count with a completions backend, or below 0, is refused."""
    cfg = BenchServeConfig(DatasetSpec(random_input_len=64, random_output_len=2), num_prompts=2, backend="openai-chat")
    assert engine.model.chat_template_tokens is None
    with pytest.raises(ConfigError, match="`chat_template_tokens` is not known for the model Llama-3.1-8B"):
        run_bench_serve(engine, cfg)
    with pytest.raises(ConfigError, match="applies to the chat endpoint only"):
        BenchServeConfig(chat_template_tokens=8)
    for bad in (-1, 2.5, True):
        with pytest.raises(ConfigError, match="must be an integer >= 0"):
            BenchServeConfig(backend="openai-chat", chat_template_tokens=bad)
