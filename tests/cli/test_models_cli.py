"""``fleetplan models list|show`` and ``parallelism_options`` through click's CliRunner."""

from __future__ import annotations

import re

import click
from click.testing import CliRunner

from fleetplan.cli.errors import FleetplanGroup
from fleetplan.cli.models_cmd import models, parallelism_options
from fleetplan.models import list_models
from fleetplan.perf.parallelism import Parallelism

WIDE = {"COLUMNS": "250"}  # rich wraps to the terminal width; keep rows on one line


def run(*args: str):
    return CliRunner().invoke(models, list(args), env=WIDE)


def table_rows(output: str) -> dict[str, list[str]]:
    rows = {}
    for line in output.splitlines():
        if line.startswith("│"):
            cells = [cell.strip() for cell in line.strip("│").split("│")]
            rows[cells[0]] = cells[1:]
    return rows


def test_list_shows_every_bundled_model():
    result = run("list")
    assert result.exit_code == 0, result.output
    rows = table_rows(result.stdout)
    assert tuple(rows) == list_models()
    # attn, layers, hidden, heads/kv, experts, params, active, checkpoint dtype, its GiB, KV B/token
    assert rows["llama-3.1-70b"] == ["gqa", "80", "8192", "64/8", "-", "70.6B", "70.6B", "bf16", "131.4", "327,680"]
    # DeepSeek-V3's checkpoint is FP8 with 128 x 128 block scales (its config.json quantization_config)
    assert rows["deepseek-v3"][4:] == ["8/256+1", "671.0B", "37.6B", "fp8 block 128x128", "624.9", "70,272"]
    assert rows["gpt-oss-120b"][0] == "gqa+swa" and rows["gpt-oss-120b"][7] == "mxfp4 group 32"


def test_show_prints_shape_and_sizes():
    result = run("show", "qwen3-30b-a3b")
    assert result.exit_code == 0, result.output
    rows = table_rows(result.stdout)
    assert rows["experts"] == ["8 of 128"]
    # the checkpoint's 30,532,122,624 minus Qwen3's per-head q/k norms (2 x 128 x 48 = 12,288), not modelled
    assert rows["params total"] == ["30,532,110,336"]
    assert rows["bf16"] == ["56.9", "98,304"]
    assert "KV-cache budget" not in result.stdout
    assert rows["chat template tokens"] == ["8"]  # <|im_start|>user\n ... <|im_end|>\n<|im_start|>assistant\n
    assert table_rows(run("show", "kimi-k2").stdout)["chat template tokens"] == ["not known"]


def test_show_with_gpu_prints_the_budget():
    result = run("show", "llama-3.1-8b", "--gpu", "h100")
    assert result.exit_code == 0, result.output
    rows = table_rows(result.stdout)
    assert rows["usable (x 0.9)"] == ["72.0 GiB"]
    assert rows["KV bytes / token"] == ["131,072"]
    assert rows["KV blocks (16 tokens)"] == ["28,231"]  # tests/perf/test_kv_budget.py by hand
    assert rows["max tokens per replica"] == [f"{28_231 * 16:,}"]


def test_show_with_vllm_sharding_flags():
    result = run("show", "deepseek-v3", "--gpu", "h200", "-tp", "8", "--weight-dtype", "fp8",
                 "--enable-expert-parallel", "--kv-cache-dtype", "fp8")
    assert result.exit_code == 0, result.output
    rows = table_rows(result.stdout)
    assert rows["KV bytes / token"] == [f"{61 * 576:,}"]
    assert "--tensor-parallel-size 8 --enable-expert-parallel" in result.stdout


def test_unknown_model_is_one_error_line_listing_names():
    result = run("show", "gpt-5")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: unknown model 'gpt-5': valid model names are ")
    assert all(name in lines[0] for name in list_models())
    assert result.stdout == ""


def test_model_that_does_not_fit_gives_the_tp_fix_and_no_tables():
    result = run("show", "llama-3.1-70b", "--gpu", "a100-80gb")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.strip() == (
        "error: Llama-3.1-70B in bf16 needs 131.4 GiB of weights per GPU at --tensor-parallel-size 1, has 72.0 "
        "GiB usable of 80 GiB (A100-80GB x 0.9): use --tensor-parallel-size >= 2"
    )


def test_invalid_tp_for_the_model_exits_2():
    result = run("show", "llama-3.1-70b", "--tensor-parallel-size", "3")
    assert result.exit_code == 2
    assert "64 attention heads are not divisible by tensor parallel size 3" in result.stderr


def test_unknown_gpu_exits_2():
    result = run("show", "llama-3.1-8b", "--gpu", "tpu-v5")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: unknown GPU")


def test_every_help_ends_with_examples():
    for args in ([], ["list"], ["show"]):
        result = run(*args, "--help")
        assert result.exit_code == 0
        tail = result.stdout.rstrip().splitlines()
        examples = tail.index(next(line for line in tail if line.strip() == "Examples:"))
        assert all(line.strip().startswith("fleetplan models") for line in tail[examples + 1:])


def test_parallelism_options_give_one_parallelism_argument():
    seen: list[Parallelism] = []

    @click.group(cls=FleetplanGroup)
    def root() -> None:
        """Test group."""

    @root.command("probe")
    @parallelism_options
    def probe(parallelism: Parallelism) -> None:
        seen.append(parallelism)

    result = CliRunner().invoke(root, ["probe", "--tensor-parallel-size", "4", "--data-parallel-size", "2",
                                       "--pipeline-parallel-size", "2", "--enable-expert-parallel"])
    assert result.exit_code == 0, result.output
    assert seen == [Parallelism(tp=4, pp=2, dp=2, ep=8)]
    result = CliRunner().invoke(root, ["probe", "-tp", "0"])
    assert result.exit_code == 2 and "error:" in result.stderr


def test_expert_parallel_above_the_expert_count_is_one_error_line():
    result = run("show", "mixtral-8x7b", "-tp", "16", "--enable-expert-parallel")
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error:")
    assert "8 routed experts are not divisible by expert parallel size 16" in lines[0]
    assert result.stdout == ""


def test_show_itemises_the_per_request_window_of_windowed_layers():
    """gpt-oss-120b on one H100: no reservation; each running request holds ceil(128 / 16) + 1 = 9 blocks of
    its 18 sliding layers, 144 tokens of the full layers' KV blocks (vLLM's hybrid allocator)."""
    result = run("show", "gpt-oss-120b", "--gpu", "h100")
    assert result.exit_code == 0, result.output
    assert "per-sequence state" not in result.output
    assert re.search(r"sliding-window KV per running request +│ +144 tokens", result.output)
    assert "MXFP4 as vllm-triton loads it" in result.output  # 64.2 GiB, not the checkpoint's 60.7
    llama = run("show", "llama-3.1-8b", "--gpu", "h100")
    assert "per-sequence state" not in llama.output
