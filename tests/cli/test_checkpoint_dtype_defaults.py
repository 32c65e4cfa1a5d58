"""``perf explain``, ``perf calibrate`` and ``bench serve`` default the weight storage to the checkpoint's
(``ModelConfig.default_weight_dtype``) and FP8 scaling to its scheme; an explicit flag overrides."""

from __future__ import annotations

import json

from click.testing import CliRunner

from fleetplan.cli.main import cli

WIDE = {"COLUMNS": "250"}
EXPLAIN = ("perf", "explain", "--gpu", "h200", "--batch", "decode=16x2048")


def explain(*args: str) -> str:
    result = CliRunner().invoke(cli, [*EXPLAIN, *args], env=WIDE)
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())  # the table title wraps


def test_explain_defaults_to_the_checkpoint_storage_and_scaling() -> None:
    dsv3 = ("--model", "deepseek-v3", "-tp", "8", "--enable-expert-parallel")
    assert "fp8 (block) weights" in explain(*dsv3)  # quantization_config: fp8, weight_block_size [128, 128]
    qwen_fp8 = ("--model", "qwen3-235b-a22b-fp8", "-tp", "8", "--enable-expert-parallel")
    assert "fp8 (block) weights" in explain(*qwen_fp8)
    assert "bf16 weights" in explain(*qwen_fp8, "--weight-dtype", "bf16")
    assert "fp8 (per_tensor) weights" in explain(*dsv3, "--fp8-scaling", "per_tensor")
    assert "fp8 (per_tensor) weights" in explain("--model", "qwen3-32b", "--weight-dtype", "fp8")  # online FP8
    assert "bf16 weights" in explain("--model", "qwen3-32b")
    gpt_oss = explain("--model", "gpt-oss-120b")
    assert "mxfp4 weights" in gpt_oss
    # 18 sliding layers' ceil(128 / 16) + 1 = 9 blocks per running request = 144 tokens of the full layers' blocks
    assert "sliding-window KV: 144 tokens of the KV blocks per running request" in gpt_oss
    assert "reserved per GPU" not in gpt_oss


def test_calibrate_profile_records_the_checkpoint_storage(tmp_path) -> None:
    out = tmp_path / "p.json"
    args = ["perf", "calibrate", "examples/calibration_example.csv", "--model", "qwen3-32b-fp8", "--gpu", "h100",
            "--out", str(out)]
    result = CliRunner().invoke(cli, args, env=WIDE)
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["weight_dtype"] == "fp8"
    result = CliRunner().invoke(cli, [*args, "--weight-dtype", "bf16"], env=WIDE)
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["weight_dtype"] == "bf16"


def test_bench_serve_defaults_to_the_checkpoint_storage(tmp_path) -> None:
    def weights(model: str, *extra: str) -> str:
        name = f"{model}{len(extra)}.json"
        result = CliRunner().invoke(cli, [
            "bench", "serve", "--model", model, "--gpu", "h100", "--num-prompts", "20", "--random-input-len", "256",
            "--random-output-len", "16", "--result-dir", str(tmp_path), "--result-filename", name, *extra], env=WIDE)
        assert result.exit_code == 0, result.output
        return json.loads((tmp_path / name).read_text())["fleetplan"]["weight_dtype"]

    assert weights("qwen3-32b-fp8") == "fp8"
    assert weights("llama-3.1-8b") == "bf16"
    assert weights("llama-3.1-8b", "--quantization", "fp8") == "fp8"
