"""``optimize --mtp``: placements of a model with MTP heads are swept with MTP on as well as off; the plan's
JSON and the recommendation name the MTP variant ("... mtp1"); bad input is one line, exit 2."""

from __future__ import annotations

import json

from tests.cli.cli_check import one_line_error, run

BASE = ("optimize", "--workload", "azure_conv", "--model", "deepseek-v3", "--gpus", "h200", "--lam", "20",
        "--slo-ttft", "2000", "--slo-tpot", "35", "--topology", "homo", "--no-verify", "--timing-source", "roofline")


def test_mtp_on_and_off_are_both_swept(tmp_path):
    out = tmp_path / "plan.json"
    res = run(*BASE, "--mtp", "--json", str(out))
    assert res.exit_code == 0, res.stderr
    gpus = {p["gpu"] for c in json.loads(out.read_text())["candidates"] for p in c["pools"]}
    assert {"H200 tp8", "H200 tp8 mtp1", "H200 tp1 dp8", "H200 tp1 dp8 mtp1"} <= gpus
    line = next(ln for ln in res.output.splitlines() if ln.startswith("Recommendation:"))
    assert " mtp1 " in line  # at acceptance 0.85 MTP needs fewer GPUs for a 35 ms TPOT (3 TP8 nodes, not 6)
    # the spelling fleetplan deploy writes (deploy.engines.Speculation): DeepSeek's MTP method at vLLM v0.11
    assert """MTP on: --speculative-config '{"method":"deepseek_mtp","num_speculative_tokens":1}'""" in line
    sglang = run(*BASE, "--mtp", "--engine", "sglang")
    assert sglang.exit_code == 0, sglang.stderr
    line = next(ln for ln in sglang.output.splitlines() if ln.startswith("Recommendation:"))
    assert "MTP on: --speculative-algorithm EAGLE --speculative-num-steps 1" in line
    off = run(*BASE, "--json", str(out))
    assert off.exit_code == 0, off.stderr
    assert not any("mtp" in p["gpu"] for c in json.loads(out.read_text())["candidates"] for p in c["pools"])


def test_a_model_without_heads_gets_no_mtp_candidates(tmp_path):
    out = tmp_path / "plan.json"
    res = run("optimize", "--workload", "azure_conv", "--model", "llama-3.1-8b", "--gpus", "h100", "--lam", "5",
              "--slo-ttft", "2000", "--topology", "homo", "--no-verify", "--mtp", "--json", str(out))
    assert res.exit_code == 0, res.stderr
    assert not any("mtp" in p["gpu"] for c in json.loads(out.read_text())["candidates"] for p in c["pools"])


def test_bad_mtp_input_is_one_line():
    one_line_error(run("optimize", "--workload", "azure_conv", "--gpus", "h100", "--lam", "5", "--slo-ttft", "2000",
                       "--no-verify", "--mtp"), "--mtp needs --model")
    res = run(*BASE, "--mtp", "--mtp-acceptance", "1.5")
    assert res.exit_code == 2 and "--mtp-acceptance" in res.stderr and "Traceback" not in res.stderr
