"""``whatif`` takes ``optimize``'s serving flags end to end (issue #26 item 4): ``--mtp`` / ``--mtp-acceptance``,
``--timing-source``, ``--tensor-parallel-size``, ``--max-gpus-per-instance`` and ``--engine`` reach the sweep of
every rate (the fleets' GPU types show them), and the first rate's fleet exported with ``--deploy`` carries the
MTP drafts in the engine's spelling; bad values are one line, exit 2."""

from __future__ import annotations

import json

import pytest

from fleetplan.perf.measured import aic
from tests.cli.cli_check import one_line_error, run

BASE = ("whatif", "--workload", "azure_conv", "--lam-range", "10:20:10", "--slo-ttft", "2000", "--slo-tpot", "35",
        "--topology", "homo", "--model", "deepseek-v3")
FAST = (*BASE, "--no-verify")


def _fleets(tmp_path, *args: str) -> list[str]:
    out = tmp_path / "whatif.json"
    res = run(*FAST, *args, "--json", str(out))
    assert res.exit_code == 0, res.output + res.stderr
    return [p["fleet"] for p in json.loads(out.read_text())["points"]]


def test_mtp_and_its_acceptance_reach_every_rate(tmp_path):
    on = _fleets(tmp_path, "--gpus", "h200", "--timing-source", "roofline", "--mtp")
    assert len(on) == 2 and all(f.endswith("mtp1") for f in on)  # at 0.85 MTP needs fewer nodes for 35 ms TPOT
    assert not any("mtp" in f for f in _fleets(tmp_path, "--gpus", "h200", "--timing-source", "roofline"))
    low = _fleets(tmp_path, "--gpus", "h200", "--timing-source", "roofline", "--mtp", "--mtp-acceptance", "0.05")
    assert low != on  # the acceptance is read: a draft almost never accepted does not pay
    one_line_error(run(*FAST, "--gpus", "h200", "--mtp", "--mtp-acceptance", "1.5"), "--mtp-acceptance", "1.5")


def test_parallelism_and_instance_size_reach_the_sweep(tmp_path):
    assert all(" tp8" in f and "dp" not in f for f in _fleets(tmp_path, "--gpus", "h200", "-tp", "8"))
    res = run(*FAST, "--gpus", "h100,h200", "--max-gpus-per-instance", "8")
    assert res.exit_code == 0, res.stderr
    assert "H100-SXM left out" in res.stderr and "up to 8 H100-SXM GPUs" in res.stderr  # DeepSeek-V3 needs 16
    one_line_error(run(*FAST, "--gpus", "h100", "--max-gpus-per-instance", "8"), "fits on no GPU type")
    assert any("H100-SXM" in f for f in _fleets(tmp_path, "--gpus", "h100", "--max-gpus-per-instance", "16"))


def test_engine_reaches_the_sweep(tmp_path):
    assert _fleets(tmp_path, "--gpus", "h200", "--engine", "sglang", "--timing-source", "roofline")
    one_line_error(run(*FAST, "--gpus", "h200", "--engine", "nosuch"), "nosuch")


@pytest.mark.skipif(aic.package_version() is not None, reason="aiconfigurator-core is installed here")
def test_timing_source_measured_without_the_package_is_one_line():
    one_line_error(run(*FAST, "--gpus", "h200", "--timing-source", "measured"), "--timing-source measured",
                   "aiconfigurator-core")


def test_deploy_of_the_first_fleet_carries_the_mtp_drafts(tmp_path):
    out = tmp_path / "fleet"
    res = run(*BASE, "--lam-range", "20:20:10", "--gpus", "h200", "--timing-source", "roofline", "--mtp",
              "--sim-requests", "2000", "--replications", "3", "--deploy", str(out), "-q")
    assert res.exit_code == 0, res.output + res.stderr
    (script,) = (out / "engines").iterdir()
    text = script.read_text()
    assert """--speculative-config '{"method":"deepseek_mtp","num_speculative_tokens":1}'""" in text
    assert "speculative_config" in (out / "fleet.toml").read_text()


def test_deploy_writes_the_planned_engines_flags(tmp_path):
    """``--engine sglang --deploy DIR``: the first fleet's launch lines are SGLang's, MTP as EAGLE drafts."""
    out = tmp_path / "fleet"
    res = run(*BASE, "--lam-range", "20:20:10", "--gpus", "h200", "--timing-source", "roofline", "--mtp", "--engine",
              "sglang", "--sim-requests", "2000", "--replications", "3", "--deploy", str(out), "-q")
    assert res.exit_code == 0, res.output + res.stderr
    (script,) = (out / "engines").iterdir()
    text = script.read_text()
    assert "sglang.launch_server" in text and "--speculative-algorithm EAGLE --speculative-num-steps 1" in text
    assert json.loads((out / "deployment.json").read_text())["engine"] == "sglang"
