"""``fleetplan gpus list|show`` through click's CliRunner."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from fleetplan.cli.gpus_cmd import gpus

NAMES = ["A100-40GB", "A100-80GB", "A10G", "B200", "H100-PCIe", "H100-SXM", "H20", "H20-3e", "H200", "H800", "L4",
         "L40S", "MI300X"]
WIDE = {"COLUMNS": "250"}  # rich wraps to the terminal width; keep rows on one line


def run(*args: str):
    return CliRunner().invoke(gpus, list(args), env=WIDE)


def table_rows(output: str) -> list[list[str]]:
    rows = []
    for line in output.splitlines():
        if line.startswith("│"):
            rows.append([cell.strip() for cell in line.strip("│").split("│")])
    return rows


def test_list_has_one_row_per_gpu() -> None:
    result = run("list")
    assert result.exit_code == 0, result.output
    rows = table_rows(result.stdout)
    assert [r[0] for r in rows] == NAMES
    by_name = {r[0]: r for r in rows}
    # name, aliases, BF16, FP8, mem GiB, TB/s, $/h, availability, calibrated
    assert by_name["A100-80GB"][1:] == ["a100, a100-80g, a100-sxm4-80gb", "312", "none", "80", "2.039",
                                        "2.21", "0.9872", "yes"]
    assert by_name["H20"][6] == "none"  # no public price
    assert [r[0] for r in rows if r[8] == "yes"] == ["A100-80GB", "A10G", "H100-SXM"]


def test_show_h100_prints_fields_with_sources() -> None:
    result = run("show", "h100")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "H100-SXM" in out
    assert "NVIDIA H100 Tensor Core GPU datasheet (2023), SXM5 column" in out
    assert "arXiv:2603.16054" in out and "Llama-3-70B" in out
    rows = {r[0]: r for r in table_rows(out)}
    assert rows["bf16_tflops"][1] == "989.5 TFLOPS"
    assert rows["serving.iter_base_ms (W)"][1] == "4 ms"
    assert rows["serving.kv_blocks"][1] == "131072"
    assert rows["power.floor_w"][1] == "300 W"
    assert all(r[2] for r in rows.values())  # every field row carries a source


def test_show_uncalibrated_gpu_marks_absent_values() -> None:
    rows = {r[0]: r for r in table_rows(run("show", "L4").stdout)}
    assert rows["nvlink_gb_per_s"][1] == "none"
    assert not any(k.startswith("serving.") for k in rows)


def test_unknown_gpu_is_one_line_exit_2() -> None:
    result = run("show", "h999")
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: unknown GPU 'h999'")
    for name in NAMES:
        assert name in lines[0]


def test_user_profiles_and_price_flag(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text('[gpu.H100-SXM]\nprice_usd_per_h = 2.49\n')
    result = run("list", "--gpu-profiles", str(path), "--price", "h20=1.5")
    rows = {r[0]: r for r in table_rows(result.stdout)}
    assert rows["H100-SXM"][6] == "2.49"
    assert rows["H20"][6] == "1.50"
    show = {r[0]: r for r in table_rows(run("show", "h100", "--gpu-profiles", str(path)).stdout)}
    assert show["price_usd_per_h"][1] == "2.49 USD/GPU-h"
    assert "user override in" in show["price_usd_per_h"][2]


def test_malformed_user_profiles_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[gpu.H100-SXM]\ntdp_w = "hot"\n')
    result = run("list", "--gpu-profiles", str(path))
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and "tdp_w" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("price", ["h100", "h100=abc", "h100=-2", "=3"])
def test_bad_price_flag_exit_2(price: str) -> None:
    result = run("list", "--price", price)
    assert result.exit_code == 2 and "--price" in result.stderr


def test_unknown_gpu_in_price_flag_exit_2() -> None:
    result = run("list", "--price", "h999=2")
    assert result.exit_code == 2 and result.stderr.startswith("error: unknown GPU 'h999'")


@pytest.mark.parametrize("args", [["--help"], ["list", "--help"], ["show", "--help"]])
def test_help_ends_with_examples(args: list[str]) -> None:
    result = run(*args)
    assert result.exit_code == 0
    lines = [line.strip() for line in result.stdout.strip().splitlines()]
    examples_at = lines.index("Examples:")
    assert examples_at > lines.index("Options:")  # after the options: help ends with examples
    examples = lines[examples_at + 1:]
    assert len(examples) >= 3 and all(e.startswith("fleetplan gpus ") for e in examples)
