"""The serving-level validation table (benchmarks/bench_validation.py -> docs/serving_validation.md).

In-sample rows (``held_out`` no, the table the engine profiles were fitted on): provenance, coverage and the
targets of issue "[Serving accuracy]" (mean signed error within +-10 %, mean absolute error at most 15 %, every
row within 35 % or listed as an outlier with its reason, outliers at most 10 % of rows).

Issue-26 rows (item 5: published vLLM and SGLang runs; ``held_out`` yes = held out, ``fit`` = the source
engine-profile values are fitted on, split by source): every row cited (repository@commit:path or
URL) with its run's flags, metrics in known units, the coverage pinned (row count, engines, GPUs, models), the
parallelism flags valid in the engine's meaning, and every row whose model is bundled predicted.  Their
accuracy is a benchmark figure (docs/serving_validation.md), not asserted here: it moves with the step model.
"""

from __future__ import annotations

import importlib.util
import re
from collections import Counter
from pathlib import Path

import pytest

from fleetplan.errors import UnknownNameError
from fleetplan.models import load_model
from fleetplan.perf.engine_profile import load_engine_profile

ROOT = Path(__file__).resolve().parents[2]

#: Issue-26 coverage, pinned: rows per engine and per GPU, and the model names (MoE and dense).
HELD_OUT_ROWS = 567
HELD_OUT_ENGINES = {"sglang": 275, "vllm": 292}
HELD_OUT_GPUS = {"A100-80GB": 136, "H100-SXM": 124, "H200": 111, "B200": 99, "MI300X": 93, "H20-3e": 4}
MOE_MODELS = {"deepseek-v3", "deepseek-v3.2", "qwen3-235b-a22b", "qwen3-235b-a22b-fp8", "qwen3-coder-480b-a35b",
              "minimax-m2.5", "glm-4.6", "gpt-oss-120b", "gpt-oss-20b", "llama-4-scout", "llama-4-maverick", "kimi-k2"}
#: The split by source: the fitted source and its rows; every other issue-26 source is held out.
FITTED_SOURCES = {"sgl-project/sgl-cookbook": 216}
HELD_OUT_ONLY_ROWS = 351
DENSE_MODELS = {"llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "qwen3-32b"}


@pytest.fixture(scope="module")
def bv():
    spec = importlib.util.spec_from_file_location("bench_validation", ROOT / "benchmarks" / "bench_validation.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def rows(bv):
    return bv.read_rows()


def _bundled(bv, name: str):
    try:
        return bv._model(name)
    except UnknownNameError:
        return None


def test_every_row_is_cited_and_well_formed(bv, rows) -> None:
    for r in rows:
        assert len(r["source"]) > 40 and float(r["measured"]) > 0
        assert r["metric"] in bv.METRIC_UNITS
        assert not r["outlier_reason"] or len(r["outlier_reason"]) > 80
        assert not r["unusable_reason"] or (len(r["unusable_reason"]) > 80 and not r["outlier_reason"])
        assert r["held_out"] in ("yes", "fit", "no") and r["range_ratio_rule"] in ("", "vllm", "sglang")
        assert int(r["tp"]) >= 1 and int(r["num_prompts"]) >= 1 and int(r["input_tokens"]) >= 1
        load_engine_profile(r["profile"])
    in_sample = [r for r in rows if r["held_out"] == "no"]
    pairs = {(r["model"], r["gpu"], r["tp"]) for r in in_sample}
    assert len(pairs) >= 4 and {"lmdeploy", "sglang", "trtllm", "vllm"} <= {r["engine"] for r in in_sample}
    assert {"1", "4", "8"} <= {r["tp"] for r in in_sample}
    models = {name: bv._model(name) for name in {r["model"] for r in in_sample}}
    assert any(m.is_moe for m in models.values()) and any(not m.is_moe for m in models.values())
    assert any(m.n_kv_heads == m.n_heads for m in models.values())  # MHA (Llama-2-7B/13B)
    assert any(m.n_kv_heads < m.n_heads for m in models.values())  # GQA


def _issue26(rows) -> list[dict]:
    return [r for r in rows if r["held_out"] in ("yes", "fit")]


def test_held_out_rows_cite_their_run_and_its_flags(bv, rows) -> None:
    held = _issue26(rows)
    for r in held:
        src = r["source"]
        assert re.search(bv.CITATION, src), src[:80]
        assert r["engine"] in ("vllm", "sglang") and r["engine_version"]
        assert r["dataset"] == "random" and r["range_ratio_rule"] in ("vllm", "sglang")
        flags = ("--random-input", "--random-output", "--num-prompt", "benchmark_latency")
        assert any(f in src for f in flags), src[:80]  # the client's command
        assert "serve" in src or "launch_server" in src or "benchmark_latency" in src  # the server's command
        assert r["metric"].split("_")[0] in src.lower() or "throughput" in src.lower() or "latency" in src.lower()


def test_split_is_by_source(bv, rows) -> None:
    """A source is fitted or held out as a whole: every row of a fitted source is ``fit``, no other is."""
    fit = Counter(bv.source_key(r) for r in rows if r["held_out"] == "fit")
    assert dict(fit) == FITTED_SOURCES
    assert not any(bv.source_key(r) in FITTED_SOURCES for r in rows if r["held_out"] == "yes")
    assert sum(r["held_out"] == "yes" for r in rows) == HELD_OUT_ONLY_ROWS


def test_held_out_coverage_is_pinned(rows) -> None:
    held = _issue26(rows)
    assert len(held) == HELD_OUT_ROWS >= 150
    assert dict(Counter(r["engine"] for r in held)) == HELD_OUT_ENGINES
    assert dict(Counter(r["gpu"] for r in held)) == HELD_OUT_GPUS
    names = {r["model"] for r in held}
    assert names == MOE_MODELS | DENSE_MODELS
    assert len(MOE_MODELS) >= 6 and len(DENSE_MODELS) >= 3 and {"MI300X", "B200"} <= set(HELD_OUT_GPUS)
    for name in names:  # where bundled, the family is the one claimed
        try:
            m = load_model(name)
        except UnknownNameError:
            continue
        assert m.is_moe == (name in MOE_MODELS), name
    assert Counter(r["range_ratio_rule"] for r in held) == {"vllm": 339, "sglang": 228}
    assert sum(r["dp_attention"] == "true" for r in held) == 32 and sum(r["ep"] not in ("", "1") for r in held) == 48


def test_held_out_parallelism_flags_parse_in_the_engines_meaning(bv, rows) -> None:
    for r in rows:
        if r["held_out"] not in ("yes", "fit") or (model := _bundled(bv, r["model"])) is None:
            continue
        par, copies = bv.row_parallelism(r, model)
        assert par is not None and par.tp == int(r["tp"]) and copies >= 1
        if r["dp_attention"] == "true":
            assert par.attn_dp == int(r["dp"]) and par.attn_tp * par.attn_dp == int(r["tp"])


def test_every_expressible_held_out_row_is_predicted(bv, rows) -> None:
    """Misses come only from models the tool does not bundle; every other issue-26 row is simulated."""
    results = bv.evaluate(_issue26(rows))
    for r in results:
        if r["predicted"] is None:
            assert r["miss"].startswith(f"unknown model '{r['model']}'"), r["miss"]
        else:
            assert r["predicted"] > 0 and r["error"] == pytest.approx(r["predicted"] / float(r["measured"]) - 1)
    s = bv.held_out_summary(results)
    assert s["n"] == HELD_OUT_ROWS and s["predicted"] + s["misses"] == s["n"]
    assert s["predicted"] == sum(_bundled(bv, r["model"]) is not None for r in results)


def test_in_sample_targets_are_met(bv, rows) -> None:
    results = bv.evaluate([r for r in rows if r["held_out"] == "no"])
    s = bv.summary(results)
    assert abs(s["mean_signed"]) <= bv.MEAN_SIGNED_TARGET
    assert s["mean_abs"] <= bv.MEAN_ABS_TARGET
    assert s["unexplained"] == 0
    assert s["listed"] <= bv.OUTLIER_SHARE_MAX * s["n"]


def test_client_backend_is_read_from_the_cited_client_command(bv, rows) -> None:
    """Rows whose cited client is ``vllm bench serve --backend openai-chat`` run the chat client (a role chunk
    first); every other row a completions client."""
    chat = [r for r in rows if r["client_backend"] == "openai-chat"]
    assert chat and all("vllm bench serve" in r["source"] and "--backend openai-chat" in r["source"] for r in chat)
    assert all(r["client_backend"] == "vllm" for r in rows if "--backend openai-chat" not in r["source"])
    assert all(r["client_backend"] == "openai-chat" for r in rows if r["source"].startswith("gpustack/gpustack"))
    assert bv.client_backend({"source": "client `vllm bench serve --backend vllm --dataset-name random`"}) == "vllm"


def test_memory_fraction_is_read_from_the_cited_server_command(bv, rows) -> None:
    """A row runs at the memory fraction its cited server command gives, in its engine's meaning (vLLM
    ``--gpu-memory-utilization``, SGLang ``--mem-fraction-static``), else at the engine's default ("")."""
    stated = [r for r in rows if r["memory_fraction"]]
    assert len(stated) == 51 and Counter(r["memory_fraction"] for r in stated) == {"0.85": 51}
    assert all("--mem-fraction-static 0.85" in r["source"] for r in stated if r["engine"] == "sglang")
    assert all("--gpu-memory-utilization 0.85" in r["source"] for r in stated if r["engine"] == "vllm")
    assert bv.memory_fraction({"source": "server `vllm serve m --gpu-memory-utilization=0.95`"}) == "0.95"
    assert bv.memory_fraction({"source": "server `python3 -m sglang.launch_server --mem-fraction-static .8`"}) == ".8"
    assert bv.memory_fraction({"source": "server `vllm serve m -tp 8`"}) == ""


def test_async_scheduling_is_read_from_the_cited_vllm_server_command(bv, rows) -> None:
    """vLLM rows whose cited server command has ``--async-scheduling`` run with it (GPUStack's paired runs)."""
    on = [r for r in rows if r["async_scheduling"]]
    assert len(on) == 64 and all(r["engine"] == "vllm" and "--async-scheduling" in r["source"] for r in on)
    assert bv.async_scheduling({"engine": "vllm", "source": "server `vllm serve m --async-scheduling`"}) == "true"
    assert bv.async_scheduling({"engine": "vllm", "source": "server `vllm serve m -tp 2`"}) == ""


def test_bound_is_api_server_then_kv_cache_then_phase(bv) -> None:
    """``regime_of``'s ``bound``: the API server when its simulated processes are busy >= 90 % of the run, else
    the KV cache when saturated, else the phase."""
    row = {"num_prompts": "1000", "max_concurrency": "", "request_rate": "inf", "input_tokens": "128",
           "output_tokens": "4"}
    roomy = {"_kv_tokens": 10**9, "_max_num_seqs": 1024, "mean_e2el_ms": 1.0}
    assert bv.regime_of(row, {**roomy, "_api_utilisation": 0.95})["bound"] == "API server"
    assert bv.regime_of(row, {**roomy, "_api_utilisation": 0.5})["bound"] == "prefill"
    tight = {**roomy, "_kv_tokens": 1000, "_api_utilisation": 0.5}
    assert bv.regime_of(row, tight)["bound"] == "KV cache"
    assert bv.regime_of(row, {**tight, "_api_utilisation": 0.9})["bound"] == "API server"
    assert bv.regime_of({**row, "input_tokens": "4", "output_tokens": "128"}, roomy)["bound"] == "decode"


def test_burst_table_compares_a_burst_with_its_long_prompt_run(bv) -> None:
    """``burst_lines``: per request 1e3 / (throughput / output) ms; prompt rate against the same run's
    2,000-token prompt rate."""
    base = {"engine": "vllm", "engine_version": "0.11.0", "model": "m", "gpu": "H100-SXM", "tp": "1",
            "dp_attention": "", "request_rate": "inf", "max_concurrency": "", "metric": "output_throughput",
            "regime": {"bound": "API server"}}
    burst = {**base, "input_tokens": "128", "output_tokens": "4", "measured": "1000", "predicted": 500.0}
    long = {**base, "input_tokens": "2000", "output_tokens": "100", "measured": "1600", "predicted": 1600.0}
    lines = bv.burst_lines([burst, long])
    row = next(line for line in lines if line.startswith("| vllm"))
    # 250 requests/s: 4.0 ms each, 32,000 prompt tok/s against 16 x 2,000 = 32,000; predicted 8.0 ms
    assert row == "| vllm 0.11.0 | m | H100-SXM x1 | 128 / 4 | 4.0 | 32,000 | 100% | 8.0 | API server |"
    assert bv.burst_lines([long]) == []


def test_unusable_rows_are_few_listed_and_out_of_every_figure(bv, rows) -> None:
    """A row marked unusable (a statistic that cannot test a prediction) is in no error figure, and such rows stay
    rare: the marking is a stated exception, not a way to drop misses."""
    marked = [r for r in rows if r["unusable_reason"]]
    assert 0 < len(marked) <= 0.01 * len(rows)
    for r in marked:
        assert not (bv.held_out(r) or bv.fitted(r) or bv.in_sample(r))
    fake = [{**r, "predicted": 1.0, "error": 0.0} for r in marked]
    lines = bv.unusable_lines(fake)
    assert len([ln for ln in lines if ln.startswith("| ") and ln[2].isdigit()]) == len(marked)


@pytest.mark.parametrize(("stated", "profiled"), [
    ("0.11.0", "0.11.0"), ("0.9.0 static batching", "0.9.0"), ("0.5.6.post1", "0.5.6.post1"),
    ("not stated (2024)", "0.6.3"), ("not stated (2025-11)", None), ("main 2026-06 (not stated)", None),
])
def test_rows_run_their_own_releases_values(bv, stated, profiled) -> None:
    """A row's engine-profile values are its stated release's (the leading release number), a year stated instead
    read through ``UNSTATED_RELEASES``, else the default version (None)."""
    assert bv.profile_version({"engine_version": stated}) == profiled


def test_a_run_replays_with_a_given_step_model(bv, rows) -> None:
    """``simulate_run(perf_profile=...)`` (the measured-overhead fit's replay) runs the run's engine, limits and client
    with that step model: the roofline's own coefficients as a profile reproduce the roofline run, and twice every
    cost coefficient doubles its decode-bound TPOT (a batch-1 run: each step is the step model's)."""
    import dataclasses

    import numpy as np

    from fleetplan.hardware import load_catalog
    from fleetplan.perf.calibrate import CalibratedStepModel
    from fleetplan.perf.linear import ROOFLINE_SHAPE_COEFS

    row = next(r for r in rows if r["engine"] == "vllm" and r["model"] == "llama-3.1-8b" and r["max_concurrency"] == "1"
               and r["metric"] == "mean_tpot_ms")
    key = tuple(row[k] for k in bv.RUN_KEYS)
    catalog = load_catalog()
    engine = bv.engine_args(dict(zip(bv.RUN_KEYS, key, strict=True)), catalog, "roofline")
    code, coef = engine.predictor().kernel_coefficients()
    p = engine.predictor()
    profile = CalibratedStepModel(tuple(float(c) for c in coef), {}, p.model.name, p.gpu.name, p.parallelism.flags(),
                                  p.weight_dtype.value, p.kv_dtype.value, 0.0, 1, "the roofline's coefficients")
    base = bv.simulate_run(key, catalog)
    same = bv.simulate_run(key, catalog, perf_profile=profile)
    assert same["mean_tpot_ms"] == pytest.approx(base["mean_tpot_ms"], rel=1e-9)
    doubled = np.array(coef) * 2.0
    doubled[list(ROOFLINE_SHAPE_COEFS)] = coef[list(ROOFLINE_SHAPE_COEFS)]
    slow = bv.simulate_run(key, catalog, perf_profile=dataclasses.replace(profile, coefficients=tuple(doubled)))
    assert slow["mean_tpot_ms"] == pytest.approx(2.0 * base["mean_tpot_ms"], rel=0.02)
