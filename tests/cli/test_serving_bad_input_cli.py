"""Bad input of issue #26 [Modern serving], through the CLI: one line naming the value, the rule and the fix,
exit 2, no traceback.

* a config.json with inconsistent fields (heads not divisible by KV heads, top-k above the expert count, an
  unknown architecture), given to ``optimize``, ``perf explain`` and ``bench serve``;
* a parallelism the model cannot take (EP above the expert count, TP not dividing the heads);
* a ``--bench-result`` JSON with negative or missing measured values (``perf calibrate``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetplan.models.catalog import model_path
from tests.cli.cli_check import one_line_error, run

QWEN3_MOE = "qwen3-30b-a3b"  # 32 query heads, 4 KV heads, 128 experts, top-8


def _config(tmp_path: Path, base: str, **changes) -> str:
    doc = json.loads(model_path(base).read_text(encoding="utf-8"))
    doc.update(changes)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return str(path)


def _commands(model: str) -> list[tuple[str, ...]]:
    return [
        ("optimize", "--workload", "azure_conv", "--model", model, "--gpus", "h100", "--lam", "5", "--slo-ttft",
         "2000", "--no-verify"),
        ("perf", "explain", "--model", model, "--gpu", "h100", "-tp", "8", "--batch", "decode=8x1024"),
        ("bench", "serve", "--model", model, "--gpu", "h100", "-tp", "8", "--num-prompts", "10"),
    ]


BAD_CONFIGS = [
    ({"num_key_value_heads": 5}, ("num_key_value_heads", "5", "32")),
    ({"num_experts_per_tok": 129}, ("num_experts_per_tok", "129", "128")),
    ({"architectures": ["FancyNewForCausalLM"], "model_type": "fancy_new"}, ("FancyNewForCausalLM",)),
]


@pytest.mark.parametrize(("changes", "words"), BAD_CONFIGS, ids=["kv-heads", "top-k", "architecture"])
@pytest.mark.parametrize("command", [0, 1, 2], ids=["optimize", "perf-explain", "bench-serve"])
def test_an_inconsistent_config_is_one_line(tmp_path, changes, words, command):
    args = _commands(_config(tmp_path, QWEN3_MOE, **changes))[command]
    one_line_error(run(*args), *words)


@pytest.mark.parametrize(("args", "words"), [
    # EP above the expert count: 256 GPUs of expert parallelism for 128 experts
    (("perf", "explain", "--model", QWEN3_MOE, "--gpu", "h100", "-tp", "1", "-dp", "256", "--enable-expert-parallel",
      "--batch", "decode=8x1024"), ("128",)),
    # TP not dividing the heads: 32 heads over 3 GPUs
    (("perf", "explain", "--model", QWEN3_MOE, "--gpu", "h100", "-tp", "3", "--batch", "decode=8x1024"),
     ("3", "32")),
    (("optimize", "--workload", "azure_conv", "--model", QWEN3_MOE, "--gpus", "h100", "-tp", "3", "--lam", "5",
      "--slo-ttft", "2000", "--no-verify"), ("3", "32")),
    (("bench", "serve", "--model", QWEN3_MOE, "--gpu", "h100", "-tp", "3", "--num-prompts", "10"), ("3", "32")),
], ids=["ep-above-experts", "tp-not-dividing-heads-explain", "tp-not-dividing-heads-optimize",
        "tp-not-dividing-heads-bench"])
def test_a_parallelism_the_model_cannot_take_is_one_line(args, words):
    one_line_error(run(*args), *words)


GOOD_RESULT = {"completed": 32, "total_input_tokens": 32768, "total_output_tokens": 4096, "duration": 10.0,
               "request_rate": "inf", "max_concurrency": 4, "mean_ttft_ms": 120.0, "mean_tpot_ms": 12.0,
               "output_throughput": 400.0}


@pytest.mark.parametrize(("key", "value", "words"), [
    ("mean_ttft_ms", -5.0, ("mean_ttft_ms", "-5.0", "must be above 0")),
    ("mean_tpot_ms", 0.0, ("mean_tpot_ms", "must be above 0")),
    ("output_throughput", None, ("output_throughput", "null")),
    ("mean_ttft_ms", "missing", ("mean_ttft_ms", "missing")),
    ("completed", "missing", ("completed",)),
], ids=["negative-ttft", "zero-tpot", "null-throughput", "missing-ttft", "missing-completed"])
def test_a_bench_result_with_bad_measured_values_is_one_line(tmp_path, key, value, words):
    doc = dict(GOOD_RESULT)
    if value == "missing":
        del doc[key]
    else:
        doc[key] = value
    path = tmp_path / "result.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    one_line_error(run("perf", "calibrate", "--model", "llama-3.1-8b", "--gpu", "h100", "--out",
                       str(tmp_path / "p.json"), "--bench-result", str(path)), str(path), *words)
