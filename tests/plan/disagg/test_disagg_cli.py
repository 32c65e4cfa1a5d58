"""``optimize --topology pdd/afd`` bad input: one line naming the value, the rule and the fix, exit 2."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from fleetplan.cli.main import cli

BASE = ["optimize", "--workload", "lmsys", "--slo-ttft", "1000", "--slo-tpot", "50", "--no-verify", "-q"]


def _fails(args: list[str]):
    res = CliRunner().invoke(cli, BASE + args)
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in res.output, res.output
    return lines[0]


@pytest.mark.parametrize(("args", "words"), [
    (["--topology", "pdd", "--pd-ratios", "1:0"], ("--pd-ratios", "1:0", "leaves the decode role empty", "e.g.")),
    (["--topology", "pdd", "--pd-ratios", "0:2"], ("--pd-ratios", "0:2", "leaves the prefill role empty")),
    (["--topology", "afd", "--af-ratios", "1:0"], ("--af-ratios", "1:0", "leaves the FFN role empty")),
    (["--topology", "pdd", "--kv-bandwidth-gb-per-s", "0"], ("--kv-bandwidth-gb-per-s", "0", "> 0")),
])
def test_bad_disaggregated_input_is_one_line(args, words):
    line = _fails(args)
    for w in words:
        assert w in line, line


def test_a_role_gpu_that_cannot_hold_the_model_names_the_fix():
    """Llama-3.1-70B FP8 on one H100 (tp 1, chosen explicitly) holds 738 KV blocks: no prefill or decode role
    of it holds lmsys's longest request."""
    line = _fails(["--topology", "pdd", "--model", "llama-3.1-70b", "--weight-dtype", "fp8", "--gpus", "h100",
                   "-tp", "1"])
    assert "H100-SXM tp1" in line and "longest request" in line and "larger --tensor-parallel-size" in line, line
    assert "--max-model-len" in line, line


def test_pd_ratios_deploy_whole_groups():
    """--pd-ratios 1:2: every PDD fleet is whole 1P:2D groups."""
    res = CliRunner().invoke(cli, BASE + ["--topology", "pdd", "--pd-ratios", "1:2", "--format", "json",
                                          "--lam", "20"])
    assert res.exit_code == 0, res.output
    rows, _ = json.JSONDecoder().raw_decode(res.output)  # the table; notes follow it
    pdd = [r for r in rows if str(r.get("tokens", "")).startswith(("prefill", "decode"))]
    assert pdd, rows[:2]
    pairs = [(pf, dec) for pf, dec in zip(pdd[::2], pdd[1::2], strict=True) if not pf["verdict"].startswith("no")]
    assert pairs
    for pf, dec in pairs:
        assert int(dec["count"]) == 2 * int(pf["count"]), (pf, dec)


def test_a_role_gpu_that_cannot_hold_the_weights_names_the_fix():
    """Llama-3.1-70B BF16 on one L40S (tp 1, chosen explicitly): 131.4 GiB of weights on a 48 GiB GPU, so no
    prefill or decode role of it exists; the line names the GPU, the rule and the tensor-parallel fix."""
    line = _fails(["--topology", "pdd", "--model", "llama-3.1-70b", "--gpus", "l40s", "-tp", "1"])
    assert "L40S" in line and "fits on no GPU type" in line and "--tensor-parallel-size >= 4" in line, line
