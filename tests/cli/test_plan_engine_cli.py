"""``--engine`` on ``optimize`` / ``whatif`` (one declaration with ``bench serve`` and ``perf explain``):
the recommendation gives the pools' limits in the engine's own launch flags, the run's JSON records the
engine, the placements are timed with its profile; ``perf explain`` applies the profile's per-GPU
overrides (``options_for``)."""

from __future__ import annotations

import json
import re

import pytest

from fleetplan.cli.options import ENGINE_LIMIT_FLAGS
from fleetplan.perf.engine_profile import ENGINE_NAMES
from tests.cli.cli_check import one_line_error, run

PLAN = ("--workload", "lmsys", "--slo-ttft", "1000", "--model", "qwen3-30b-a3b", "--gpus", "h100", "--lam", "20",
        "--no-verify", "--quiet")


def test_every_engine_profile_has_its_limit_flags():
    assert set(ENGINE_LIMIT_FLAGS) == set(ENGINE_NAMES)


@pytest.mark.parametrize(("engine", "seqs", "tokens"), [
    (None, "vLLM --max-num-seqs", "--max-num-batched-tokens"),
    ("sglang", "SGLang --max-running-requests", "--chunked-prefill-size"),
    ("trtllm", "TensorRT-LLM --max_batch_size", "--max_num_tokens"),
])
def test_optimize_recommends_in_the_engine_vocabulary_and_records_it(tmp_path, engine, seqs, tokens):
    out = tmp_path / "run.json"
    res = run("optimize", *PLAN, *(() if engine is None else ("--engine", engine)), "--json", str(out))
    assert res.exit_code == 0, res.output + res.stderr
    (line,) = [ln for ln in res.stdout.splitlines() if ln.startswith("Recommendation:")]
    assert re.search(rf"\({re.escape(seqs)} \d+ {re.escape(tokens)} \d+\)", line), line
    assert json.loads(out.read_text())["inputs"]["engine"] == (engine or "vllm")


def test_whatif_records_the_engine(tmp_path):
    out = tmp_path / "whatif.json"
    res = run("whatif", *PLAN[:-4], "--lam-range", "10:20:10", "--no-verify", "--quiet", "--engine", "sglang",
              "--json", str(out))
    assert res.exit_code == 0, res.output + res.stderr
    assert json.loads(out.read_text())["inputs"]["engine"] == "sglang"


def test_an_unknown_engine_is_one_line():
    one_line_error(run("optimize", *PLAN, "--engine", "vllmx"), "vllmx", "vllm, sglang, trtllm")


@pytest.mark.parametrize(("gpu", "ms"), [("h100", "4.800"), ("mi300x", "14.400")])
def test_perf_explain_applies_the_profile_per_gpu(gpu, ms):
    """SGLang's profile: 100 us per MoE layer, 300 us on MI300X ([gpu_options]); Qwen3-30B-A3B has 48."""
    res = run("perf", "explain", "--model", "qwen3-30b-a3b", "--gpu", gpu, "--engine", "sglang", "--batch",
              "decode=16x2048")
    assert res.exit_code == 0, res.output + res.stderr
    assert re.search(rf"moe_layer_latency\s*│\s*{re.escape(ms)}\s*│", res.stdout), res.stdout


def test_sglang_limits_of_a_dp_attention_instance_are_the_servers():
    """SGLang divides --max-running-requests and --chunked-prefill-size over the DP attention ranks
    (server_args.py), so the line gives the instance's totals; vLLM's per rank (test_optimize_dp_limits)."""
    base = ("optimize", "--workload", "lmsys", "--model", "deepseek-v3", "--gpus", "h200", "--slo-ttft", "2000",
            "--topology", "homo", "--no-verify", "--lam", "20", "--quiet")
    lines = {}
    for engine in ("vllm", "sglang"):
        res = run(*base, "--engine", engine)
        assert res.exit_code == 0, res.stderr
        lines[engine] = next(ln for ln in res.stdout.splitlines() if ln.startswith("Recommendation:"))
    got = re.search(r"\(SGLang --max-running-requests (\d+) --chunked-prefill-size (\d+), over 8 DP attention "
                    r"ranks\)", lines["sglang"])
    rank = re.search(r"\(vLLM per DP rank: --max-num-seqs (\d+) --max-num-batched-tokens (\d+), 8 ranks\)",
                     lines["vllm"])
    assert got and rank, lines
    seqs, tokens = int(got[1]), int(got[2])
    # the same placement (H200 tp1 dp8) and context: the sequence limit comes from each engine's own KV cache (SGLang
    # budgets its way, perf.sglang_memory: its derived mem_fraction_static with activations and graphs outside it),
    # so SGLang's server total is its rank figure times 8; the token budget is every rank's chunk (SGLang divides
    # --chunked-prefill-size over its ranks), and vLLM's per-rank budget holds the rank's own decodes plus a whole
    # chunk (perf.dp_instance.per_rank_token_budget)
    assert seqs // 8 >= 1 and int(rank[1]) >= 1 and tokens >= 8 * 512 and tokens % 8 == 0
    assert int(rank[2]) >= int(rank[1]) + 512


def test_optimize_records_the_engine_version_default_and_named(tmp_path):
    """``--engine-version``: the run's JSON names the release (default: the profile's newest profiled release) and
    the profiled release whose values timed the placements."""
    from fleetplan.perf.engine_profile import load_engine_profile

    default = load_engine_profile("vllm").default_version
    for named, values in ((None, default), ("0.9.2", "0.9.1")):
        out = tmp_path / f"run-{named}.json"
        res = run("optimize", *PLAN, *(() if named is None else ("--engine-version", named)), "--json", str(out))
        assert res.exit_code == 0, res.output + res.stderr
        inputs = json.loads(out.read_text())["inputs"]
        assert (inputs["engine_version"], inputs["engine_values_version"]) == (named or default, values)


@pytest.mark.parametrize("command", [
    ("optimize", *PLAN),
    ("perf", "explain", "--model", "llama-3.1-8b", "--gpu", "h100", "--engine", "vllm"),
    ("bench", "serve", "--model", "llama-3.1-8b", "--gpu", "h100", "--num-prompts", "4"),
])
def test_a_bad_engine_version_is_one_line(command):
    one_line_error(run(*command, "--engine-version", "latest"), "--engine-version", "'latest' is not a release number")


def test_perf_explain_names_the_release_and_its_values():
    """MI300X under vLLM 0.9.2: the title names the release and the profiled one whose values run (0.9.1's 0.32
    weight streaming: the batch-1 GEMMs of Llama-3.1-70B FP8 take 0.40 / 0.32 of the default's time)."""
    def gemm_ms(*extra: str) -> float:
        res = run("perf", "explain", "--model", "llama-3.1-70b", "--gpu", "mi300x", "-tp", "8", "--weight-dtype",
                  "fp8", "--engine", "vllm", "--batch", "decode=1x1152", *extra)
        assert res.exit_code == 0, res.output + res.stderr
        title = " ".join(res.stdout.split())
        assert ("values of 0.9.1" in title) == bool(extra), title
        return float(re.search(r"gemm\s*│\s*([\d.]+)\s*│", res.stdout).group(1))

    assert gemm_ms("--engine-version", "0.9.2") == pytest.approx(gemm_ms() * 0.40 / 0.32, rel=2e-3)
