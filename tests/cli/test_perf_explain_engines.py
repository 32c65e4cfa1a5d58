"""``perf explain`` takes each engine's parallelism flags, checks --nnodes against the catalog's node size,
names which source timed each operator, and adds the MTP draft passes."""

from __future__ import annotations

import re

from click.testing import CliRunner

from fleetplan.cli.main import cli

WIDE = {"COLUMNS": "250"}
DSV3 = ("perf", "explain", "--model", "deepseek-v3", "--gpu", "h200", "--weight-dtype", "fp8")


def run(*args: str):
    result = CliRunner().invoke(cli, list(args), env=WIDE)
    result.text = " ".join(result.output.split())  # the table title wraps
    return result


def test_vllm_expert_parallel_flags_and_sources() -> None:
    r = run(*DSV3, "--engine", "vllm", "-tp", "8", "--enable-expert-parallel", "--fp8-scaling", "block",
            "--mtp-tokens", "2", "--batch", "decode=16x2048")
    assert r.exit_code == 0, r.output
    assert "--tensor-parallel-size 8 --enable-expert-parallel" in r.text and "fp8 (block)" in r.text
    assert "1 node of 8 GPUs" in r.text and re.search(r"vllm [\w.]+ \(default\) profile", r.text)
    assert "ep_all_to_all" in r.output and "mtp_draft x2" in r.output
    assert "engine profile" in r.output and "roofline" in r.output  # the source column


def test_sglang_dp_attention_spelling() -> None:
    r = run(*DSV3, "--engine", "sglang", "--tp", "8", "--dp", "8", "--enable-dp-attention", "--ep-size", "8",
            "--batch", "decode=4x1024")
    assert r.exit_code == 0, r.output
    assert "attention tp=1 dp=8, ffn tp=1 ep=8" in r.text and re.search(r"sglang [\w.]+ \(default\) profile", r.text)
    # SGLang's own KV accounting at the fraction it derives with DP attention (perf.sglang_memory): 0.770
    assert "at SGLang's derived --mem-fraction-static 0.77;" in r.text
    v = run(*DSV3, "--engine", "vllm", "-tp", "8", "--batch", "decode=4x1024")
    assert "at --gpu-memory-utilization 0.9;" in v.text


def test_sglang_dp_without_dp_attention_times_one_replica() -> None:
    r = CliRunner().invoke(cli, [*DSV3, "--engine", "sglang", "--tp", "8", "--dp", "2", "--batch", "decode=4x1024"],
                           env=WIDE)
    assert r.exit_code == 0 and "2 independent replicas" in r.output


def test_two_node_instance_and_a_wrong_nnodes() -> None:
    args = ("perf", "explain", "--model", "qwen3-235b-a22b", "--gpu", "h100", "-tp", "16", "--enable-expert-parallel",
            "--weight-dtype", "fp8", "--batch", "decode=8x2048")
    ok = run(*args, "--nnodes", "2")
    assert ok.exit_code == 0, ok.output
    assert "2 nodes of 8 GPUs" in ok.text
    bad = run(*args, "--nnodes", "3")
    assert bad.exit_code == 2
    assert "--nnodes 3" in bad.text and "use --nnodes 2" in bad.text and "Traceback" not in bad.output


def test_mtp_needs_decodes() -> None:
    r = run(*DSV3, "-tp", "8", "--mtp-tokens", "1", "--batch", "prefill=512@0")
    assert r.exit_code == 2 and "--mtp-tokens needs decoding requests" in r.text


def test_bad_parallelism_is_one_line() -> None:
    dp_attn_vllm = run("perf", "explain", "--model", "llama-3.1-70b", "--gpu", "h100", "-tp", "4",
                       "--enable-dp-attention")
    assert dp_attn_vllm.exit_code == 2 and "--engine sglang" in dp_attn_vllm.text
    ep_too_big = run(*DSV3, "--engine", "sglang", "--tp", "8", "--ep-size", "3")
    assert ep_too_big.exit_code == 2 and "--ep-size 3 must divide --tp 8" in ep_too_big.text


def test_vllm_data_parallel_attention_with_expert_parallel() -> None:
    r = run(*DSV3, "--engine", "vllm", "-tp", "1", "--data-parallel-size", "8", "--enable-expert-parallel",
            "--batch", "decode=4x1024")
    assert r.exit_code == 0, r.output
    assert "--tensor-parallel-size 1 --data-parallel-size 8 --enable-expert-parallel" in r.text
    assert "8x H200" in r.text and "ep_all_to_all" in r.text


def test_vllm_api_server_ceiling_from_its_profile() -> None:
    """vLLM's sourced API server cost (engine_profiles/vllm.toml): 4.60 ms + 1.2 us per token + 22.5 us per
    streamed chunk; SGLang's is not measured, so no ceiling is printed."""
    r = run(*DSV3, "--engine", "vllm", "-tp", "8", "--enable-expert-parallel", "--batch", "decode=4x1024")
    assert r.exit_code == 0, r.output
    assert ("API server: 4.6 ms per request + 1.2 us per token + 22.5 us per streamed chunk (one per output "
            "token): at most 69 requests/s") in r.text  # 1 / 14.43 ms (8,192 prompt tokens, no output)
    r4 = run(*DSV3, "--engine", "vllm", "-tp", "8", "--batch", "decode=4x1024", "--api-server-count", "4")
    assert "at most 277 requests/s of 8192 tokens with 4 API server processes" in r4.text
    assert run(*DSV3, "--engine", "vllm", "--api-server-count", "0").exit_code == 2
    r = run(*DSV3, "--engine", "sglang", "--tp", "8", "--batch", "decode=4x1024")
    assert r.exit_code == 0, r.output
    assert "API server" not in r.text
