"""``bench serve``'s engine flags in each engine's spelling, each mapped onto an existing mechanism:
``--enforce-eager`` / SGLang ``--disable-cuda-graph`` -> the step model's eager execution (kernel launches on
every step: a longer TPOT), ``--stream-interval`` -> the API server's chunk interval (fewer chunks: a higher
API-server ceiling), SGLang ``--max-running-requests`` / ``--chunked-prefill-size`` (whole server, divided by
``--dp-size`` under ``--enable-dp-attention``) / ``--mem-fraction-static`` -> vLLM's limits, ``--block-size`` ->
the KV block size.  A flag of the other engine or a bad value: one line, exit 2."""

from __future__ import annotations

import dataclasses
import json

import pytest
from click.testing import CliRunner

from fleetplan.cli.main import cli
from fleetplan.perf.api_server import api_server_max_request_rate_per_s
from fleetplan.perf.engine_profile import load_engine_profile

SMALL = ["--random-input-len", "256", "--random-output-len", "64", "--num-prompts", "200", "--request-rate", "inf"]
LLAMA = ["bench", "serve", "--model", "llama-3.1-8b", "--gpu", "H100-SXM"]
DPA = ["bench", "serve", "--model", "qwen3-30b-a3b", "--gpu", "H200", "--engine", "sglang", "--tp-size", "2",
       "--dp-size", "2", "--enable-dp-attention"]


def _run(tmp_path, name: str, *argv: str) -> dict:
    res = CliRunner().invoke(cli, [*argv, "--save-result", "--result-dir", str(tmp_path), "--result-filename", name])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / name).read_text())
    doc.pop("date")
    return doc


def test_enforce_eager_lengthens_the_steps(tmp_path) -> None:
    """Eager steps pay the kernel launches CUDA graphs hide: measured TPOT 18.98 -> 21.51 ms."""
    graphs = _run(tmp_path, "g.json", *LLAMA, *SMALL)
    eager = _run(tmp_path, "e.json", *LLAMA, *SMALL, "--enforce-eager")
    assert graphs["fleetplan"]["execution"] == "cuda_graph" and eager["fleetplan"]["execution"] == "eager"
    assert eager["mean_tpot_ms"] > 1.05 * graphs["mean_tpot_ms"]
    sglang = _run(tmp_path, "s.json", *LLAMA, *SMALL, "--engine", "sglang", "--disable-cuda-graph")
    assert sglang["fleetplan"]["execution"] == "eager"


def test_stream_interval_raises_the_api_server_ceiling(tmp_path) -> None:
    """16-token outputs offered far above the API server's ceiling (as test_bench_serve_api_server): with
    ``--stream-interval 8`` a request streams 2 chunks instead of 16, and the throughput is the ceiling of that
    interval within 3 %."""
    tiny = ["--random-input-len", "16", "--random-output-len", "16", "--num-prompts", "1000", "--request-rate",
            "2000", "--percentile-metrics", "ttft"]
    vllm = load_engine_profile("vllm").options
    one = _run(tmp_path, "1.json", *LLAMA, *tiny)
    eight = _run(tmp_path, "8.json", *LLAMA, *tiny, "--stream-interval", "8")
    ceiling = api_server_max_request_rate_per_s(
        dataclasses.replace(vllm, api_server_stream_interval_tokens=8), 16, 16, 1)
    assert eight["fleetplan"]["stream_interval"] == 8
    assert eight["request_throughput"] == pytest.approx(ceiling, rel=0.03)
    assert eight["request_throughput"] > one["request_throughput"]


def test_sglang_limits_are_the_vllm_limits_per_attention_rank(tmp_path) -> None:
    """Under --enable-dp-attention with --dp-size 2 SGLang's whole-server limits are halved per rank: the run
    equals the vLLM spelling's with the per-rank values."""
    sglang = _run(tmp_path, "s.json", *DPA, *SMALL, "--max-running-requests", "128", "--chunked-prefill-size",
                  "4096", "--mem-fraction-static", "0.8")
    vllm = _run(tmp_path, "v.json", *DPA, *SMALL, "--max-num-seqs", "64", "--max-num-batched-tokens", "2048",
                "--gpu-memory-utilization", "0.8")
    assert sglang["fleetplan"]["max_num_seqs"] == 64 and sglang["fleetplan"]["max_num_batched_tokens"] == 2048
    assert sglang == vllm


def test_block_size_sets_the_kv_blocks(tmp_path) -> None:
    """--block-size 32 holds the same KV memory in half as many blocks (28,043 -> 14,021 on this H100)."""
    b16 = _run(tmp_path, "16.json", *LLAMA, *SMALL)
    b32 = _run(tmp_path, "32.json", *LLAMA, *SMALL, "--block-size", "32")
    assert b32["fleetplan"]["block_size"] == 32 and b16["fleetplan"]["block_size"] == 16
    assert b32["fleetplan"]["kv_blocks"] == b16["fleetplan"]["kv_blocks"] // 2


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--disable-cuda-graph"], "under --engine vllm give --enforce-eager"),
    (["--max-running-requests", "64"], "give --max-num-seqs 64"),
    (["--chunked-prefill-size", "4096"], "give --max-num-batched-tokens 4096"),
    (["--mem-fraction-static", "0.8"], "give --gpu-memory-utilization 0.8"),
    (["--enforce-eager", "--cudagraph-capture-sizes", "1,2"], "drop --cudagraph-capture-sizes"),
    (["--engine", "sglang", "--chunked-prefill-size", "4096", "--max-num-batched-tokens", "2048"], "disagree"),
    (["--stream-interval", "0"], "--stream-interval"),
    (["--block-size", "0"], "--block-size"),
    (["--engine", "sglang", "--mem-fraction-static", "1.5"], "--mem-fraction-static"),
])
def test_bad_flags_are_one_line(argv, fragment) -> None:
    res = CliRunner().invoke(cli, [*LLAMA, *argv])
    assert res.exit_code == 2, res.output
    assert fragment in res.output and len(res.output.strip().splitlines()) == 1, res.output


def test_dpa_limit_below_the_ranks_is_one_line() -> None:
    res = CliRunner().invoke(cli, [*DPA, "--max-running-requests", "1"])
    assert res.exit_code == 2 and "give at least 2" in res.output, res.output
    res = CliRunner().invoke(cli, [*DPA, "--max-running-requests", "256", "--max-num-seqs", "64"])
    assert res.exit_code == 2 and "(= 128 per attention rank)" in res.output, res.output
