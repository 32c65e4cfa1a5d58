"""Each engine's scheduler and defaults in ``bench serve`` (``fleetplan.bench.instance``, ``ENGINE_DEFAULTS``).

Prefix caching is on by default for vLLM (v1) and SGLang (radix cache), off for TensorRT-LLM and LMDeploy;
SGLang runs prefill batches apart from decode batches unless ``enable_mixed_chunk``; its token budget defaults
to its ``chunked_prefill_size`` by GPU memory.  CLI: the flags in each engine's spelling, the other engine's
flag in one line with exit 2.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from click.testing import CliRunner

from fleetplan.bench import BenchServeConfig, DatasetSpec, EngineArgs, run_bench_serve
from fleetplan.bench.instance import serving_fleet, sglang_chunked_prefill_tokens
from fleetplan.cli.main import cli
from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.hardware import load_catalog
from fleetplan.models import Dtype, load_model
from fleetplan.perf.kv_budget import kv_budget
from fleetplan.sim.features.spec import SchedulerPolicy


@pytest.fixture(scope="module")
def engine() -> EngineArgs:
    return EngineArgs(load_model("llama-3.1-8b"), load_catalog().get("H100-SXM"))


@pytest.mark.parametrize(("name", "on"), [("vllm", True), ("sglang", True), ("trtllm", False), ("lmdeploy", False)])
def test_prefix_caching_default_follows_the_engine(engine: EngineArgs, name: str, on: bool) -> None:
    args = replace(engine, engine=name)
    assert args.prefix_caching is on
    assert serving_fleet(args).pools[0].features.prefix_cache.enabled is on
    assert replace(args, enable_prefix_caching=not on).prefix_caching is (not on)


def test_sglang_policy_and_mixed_chunk(engine: EngineArgs) -> None:
    assert replace(engine, engine="sglang").scheduler_policy is SchedulerPolicy.SGLANG
    assert replace(engine, engine="sglang", enable_mixed_chunk=True).scheduler_policy is SchedulerPolicy.VLLM_V1
    assert engine.scheduler_policy is SchedulerPolicy.VLLM_V1
    with pytest.raises(ConfigError, match="enable_mixed_chunk"):
        replace(engine, enable_mixed_chunk=True)
    with pytest.raises(UnknownNameError):
        replace(engine, engine="tgi")


@pytest.mark.parametrize(("gpu", "tokens"), [("L4", 2048), ("A100-40GB", 4096), ("A100-80GB", 8192),
                                             ("H100-SXM", 8192), ("H200", 8192), ("B200", 16384), ("MI300X", 16384)])
def test_sglang_chunked_prefill_size_by_gpu_memory(gpu: str, tokens: int) -> None:
    """SGLang's ServerArgs tiers: < 35 GB 2048, < 60 GB 4096, < 160 GB 8192, else 16384."""
    g = load_catalog().get(gpu)
    assert sglang_chunked_prefill_tokens(g) == tokens
    args = EngineArgs(load_model("llama-3.1-8b"), g, engine="sglang")
    assert serving_fleet(args).pools[0].limits.max_num_batched_tokens == tokens
    assert serving_fleet(replace(args, max_num_batched_tokens=1024)).pools[0].limits.max_num_batched_tokens == 1024


def test_sglang_dp_attention_divides_the_chunked_prefill_size() -> None:
    """Under ``enable_dp_attention`` SGLang's ServerArgs divides the server's ``chunked_prefill_size`` by
    ``dp_size`` (``_handle_data_parallelism``): each of the 8 ranks of DeepSeek-V3 at ``--tp-size 8 --dp-size 8``
    on H200 schedules 8,192 // 8 = 1,024 tokens a step; ``dp_size`` without DP attention launches server copies,
    each with the whole budget; vLLM's data-parallel ranks keep vLLM's default each."""
    from fleetplan.bench.instance import engine_parallelism

    g, model = load_catalog().get("H200"), load_model("deepseek-v3")
    assert [sglang_chunked_prefill_tokens(g, d) for d in (1, 2, 8)] == [8192, 4096, 1024]
    with pytest.raises(ConfigError, match="dp_attention_ranks"):
        sglang_chunked_prefill_tokens(g, 0)
    par, copies = engine_parallelism("sglang", model, 8, data_parallel_size=8, enable_dp_attention=True)
    args = EngineArgs(model, g, 8, engine="sglang", weight_dtype=Dtype.FP8, parallelism_spec=par)
    pool = serving_fleet(args).pools[0]
    assert (copies, pool.n_instances, pool.limits.max_num_batched_tokens) == (1, 8, 1024)
    par, copies = engine_parallelism("sglang", model, 8, data_parallel_size=2)
    assert copies == 2 and serving_fleet(replace(args, parallelism_spec=par)).pools[0].limits.max_num_batched_tokens \
        == 8192
    vpar, _ = engine_parallelism("vllm", model, 1, data_parallel_size=8, enable_expert_parallel=True)
    vllm = serving_fleet(EngineArgs(model, g, 1, weight_dtype=Dtype.FP8, parallelism_spec=vpar)).pools[0]
    assert vllm.limits.max_num_batched_tokens == 8192


def test_async_scheduling_overlaps_the_steps_host_time(engine: EngineArgs, tmp_path) -> None:
    """vLLM's ``async_scheduling``: each step is the same step less the profile's per-step host time (its
    ``cpu_overhead_s``), so a run's TPOT falls; under SGLang (its scheduler overlaps already) it is one error."""
    from fleetplan.perf.batch import BatchComposition

    batch = BatchComposition.uniform(n_decode=32, context_tokens=2048)
    plain = engine.predictor().predict(batch).total_s
    overlapped = replace(engine, async_scheduling=True).predictor().predict(batch).total_s
    assert engine.options.cpu_overhead_s > 0
    assert overlapped == pytest.approx(plain - engine.options.cpu_overhead_s, rel=1e-12)
    cfg = BenchServeConfig(DatasetSpec(random_input_len=512, random_output_len=64), num_prompts=30,
                           request_rate_per_s=8.0)
    slow = run_bench_serve(engine, cfg).metrics
    fast = run_bench_serve(replace(engine, async_scheduling=True), cfg).metrics
    assert fast["mean_tpot_ms"] < slow["mean_tpot_ms"] and fast["completed"] == slow["completed"] == 30
    with pytest.raises(ConfigError, match="async_scheduling"):
        replace(engine, engine="sglang", async_scheduling=True)
    res = CliRunner().invoke(cli, [*BASE, "--engine", "sglang", "--async-scheduling"])
    assert res.exit_code == 2 and "--async-scheduling is vLLM's engine argument" in res.output
    for extra, name in (([], "p.json"), (["--async-scheduling"], "a.json")):
        res = CliRunner().invoke(cli, [*BASE, *extra, "--result-dir", str(tmp_path), "--result-filename", name])
        assert res.exit_code == 0, res.output
    plain, fast = (json.loads((tmp_path / n).read_text()) for n in ("p.json", "a.json"))
    assert (plain["fleetplan"]["async_scheduling"], fast["fleetplan"]["async_scheduling"]) == (False, True)
    assert fast["mean_tpot_ms"] < plain["mean_tpot_ms"]


def test_sglang_prefill_batches_leave_decodes_out(engine: EngineArgs) -> None:
    """16,000-token prompts at 4 req/s (a backlog of prefills): vLLM puts a prefill chunk into almost every step
    its decodes run in, so P90 ITL is a mixed step, several times the median; SGLang runs the prefill batches
    alone and its decodes in decode-only batches, so P90 ITL stays a decode step (the waits across prefill
    batches are a few long gaps); with ``enable_mixed_chunk`` SGLang's batches are vLLM's (same token budget on
    H100, and the same KV blocks: SGLang's fraction is given as vLLM's 0.9 less the activations and graphs vLLM
    takes off its pool, since SGLang's ``mem_fraction_static`` leaves those outside)."""
    cfg = BenchServeConfig(DatasetSpec(random_input_len=16000, random_output_len=200), num_prompts=40,
                           request_rate_per_s=4.0, percentile_metrics=("itl",), metric_percentiles=(90.0,))
    vllm = run_bench_serve(engine, cfg).metrics
    v = serving_fleet(engine).pools[0].limits
    vb = kv_budget(engine.model, engine.gpu, engine.parallelism, weight_dtype=engine.weight_dtype,
                   kv_dtype=engine.kv_cache_dtype, max_num_seqs=1024, max_num_batched_tokens=v.max_num_batched_tokens)
    same_kv = 0.9 - (vb.activation_peak_bytes + vb.cudagraph_pool_bytes) / vb.hbm_bytes
    sglang = run_bench_serve(replace(engine, engine="sglang"), cfg).metrics
    mixed_engine = replace(engine, engine="sglang", enable_mixed_chunk=True, gpu_memory_utilization=same_kv)
    assert serving_fleet(mixed_engine).pools[0].limits.kv_blocks == v.kv_blocks
    mixed = run_bench_serve(mixed_engine, cfg).metrics
    assert sglang["completed"] == vllm["completed"] == 40
    assert vllm["p90_itl_ms"] > 3 * vllm["median_itl_ms"]
    assert sglang["p90_itl_ms"] < 1.05 * sglang["median_itl_ms"]
    assert sglang["mean_itl_ms"] < vllm["mean_itl_ms"]
    for key in ("median_itl_ms", "p90_itl_ms", "mean_itl_ms"):
        assert mixed[key] == pytest.approx(vllm[key], rel=1e-12), key


BASE = ["bench", "serve", "--model", "llama-3.1-8b", "--gpu", "h100", "--num-prompts", "12",
        "--random-input-len", "256", "--random-output-len", "16"]


def test_cli_reports_the_engine_defaults(tmp_path) -> None:
    for extra, name, caching, policy in (([], "v.json", True, "vllm_v1"),
                                         (["--engine", "sglang"], "s.json", True, "sglang"),
                                         (["--engine", "sglang", "--disable-radix-cache"], "d.json", False, "sglang"),
                                         (["--engine", "sglang", "--enable-mixed-chunk"], "m.json", True, "vllm_v1"),
                                         (["--no-enable-prefix-caching"], "n.json", False, "vllm_v1"),
                                         (["--engine", "lmdeploy"], "l.json", False, "vllm_v1")):
        res = CliRunner().invoke(cli, [*BASE, *extra, "--result-dir", str(tmp_path), "--result-filename", name])
        assert res.exit_code == 0, res.output
        doc = json.loads((tmp_path / name).read_text())["fleetplan"]
        assert (doc["enable_prefix_caching"], doc["scheduler_policy"]) == (caching, policy), extra


@pytest.mark.parametrize(("extra", "words"), [
    (["--enable-mixed-chunk"], "--enable-mixed-chunk"),
    (["--disable-radix-cache"], "--disable-radix-cache is SGLang's spelling"),
    (["--engine", "sglang", "--disable-radix-cache", "--enable-prefix-caching"], "disagree"),
])
def test_cli_other_engines_flag_is_one_line(extra: list[str], words: str) -> None:
    res = CliRunner().invoke(cli, [*BASE, *extra])
    assert res.exit_code == 2
    assert words in res.output and "Traceback" not in res.output


def test_each_meaning_of_the_engine_name_is_a_named_field(engine: EngineArgs) -> None:
    """``EngineArgs.engine`` names the profile; its scheduler, token-budget rule, prefix-caching default and
    measured tables are ``ENGINE_DEFAULTS`` fields, read by name (nothing compares the engine string)."""
    from fleetplan.bench.instance import ENGINE_DEFAULTS, TokenBudgetRule

    sglang = ENGINE_DEFAULTS["sglang"]
    assert (sglang.scheduler, sglang.token_budget, sglang.measured_tables) == (
        SchedulerPolicy.SGLANG, TokenBudgetRule.SGLANG, "sglang")
    assert all(ENGINE_DEFAULTS[e].scheduler is SchedulerPolicy.VLLM_V1 for e in ("vllm", "trtllm", "lmdeploy"))
    assert [e for e, d in ENGINE_DEFAULTS.items() if d.measured_tables is None] == ["lmdeploy"]
    assert [e for e, d in ENGINE_DEFAULTS.items() if d.async_scheduling_switch] == ["vllm"]
    assert replace(engine, engine="sglang").scheduler_policy is SchedulerPolicy.SGLANG
    assert replace(engine, engine="sglang", enable_mixed_chunk=True).scheduler_policy is SchedulerPolicy.VLLM_V1
    lmdeploy = replace(engine, engine="lmdeploy", timing_source="auto")
    assert lmdeploy.step_model() is not None  # no tables: the roofline, as the choice allows
    with pytest.raises(ConfigError, match="no measured tables") as err:
        replace(engine, engine="lmdeploy", timing_source="measured").step_model()
    assert "\n" not in str(err.value)
