"""``optimize --step-time-margin``, the headroom of the recommendation, and ``--perf-profile`` in
``optimize`` / ``whatif``: JSON keys, table and HTML lines, one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fleetplan.hardware import load_catalog
from fleetplan.models import load_model
from fleetplan.perf.calibrate import CalibratedStepModel
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.perf.profile_io import save_perf_profile
from tests.cli.cli_check import one_line_error, run

SMALL = ("--workload", "lmsys", "--slo-ttft", "500", "--topology", "homo,two-pool", "--verify-top", "2",
         "--sim-requests", "2000", "--replications", "2", "--quiet")
MODEL = ("--model", "llama-3.1-8b", "--gpus", "h100", "-tp", "1", "--lam", "300")
BASE = ("--workload", "lmsys", "--slo-ttft", "500", "--topology", "homo,two-pool", "--quiet")  # default run length
HEADROOM_KEYS = {"step_slowdown_max", "step_slowdown_capped", "rate_multiplier_max", "rate_multiplier_capped",
                 "resolution", "step_time_margin", "step_binding_pools", "rate_binding_pools", "n_simulations",
                 "method"}


def _doc(path) -> dict:
    return json.loads(path.read_text())


def test_headroom_is_in_the_json_the_summary_and_the_html(tmp_path):
    out, page = tmp_path / "run.json", tmp_path / "run.html"
    res = run("optimize", *SMALL, "--json", str(out), "--html", str(page))
    assert res.exit_code == 0, res.stderr
    doc = _doc(out)
    h = doc["headroom"]
    assert set(h) == HEADROOM_KEYS and h["resolution"] == 0.02 and h["step_time_margin"] == 0.0
    assert 0.0 <= h["step_slowdown_max"] <= 2.0 and 1.0 <= h["rate_multiplier_max"] <= 4.0
    assert doc["headroom_time_s"] > 0 and doc["inputs"]["step_time_margin"] == 0.0
    assert doc["inputs"]["perf_profile"] is None
    line = next(ln for ln in res.output.splitlines() if ln.startswith("Headroom:"))
    assert "steps may be" in line and "traffic" in line and "higher" in line
    assert "id='headroom'" in page.read_text() and "steps may be" in page.read_text()


def test_no_headroom_and_no_verify_skip_it(tmp_path):
    out = tmp_path / "run.json"
    res = run("optimize", *SMALL, "--no-headroom", "--json", str(out))
    assert res.exit_code == 0, res.stderr
    assert _doc(out)["headroom"] is None and "Headroom" not in res.output
    res = run("optimize", *SMALL, "--no-verify", "--json", str(out))
    assert res.exit_code == 0, res.stderr
    assert _doc(out)["headroom"] is None and "Headroom: not searched" in res.output


def test_a_margin_sizes_for_slower_steps(tmp_path):
    plain, slow = tmp_path / "plain.json", tmp_path / "slow.json"
    assert run("optimize", *SMALL, "--no-headroom", "--json", str(plain)).exit_code == 0
    res = run("optimize", *SMALL, "--step-time-margin", "15%", "--json", str(slow))
    assert res.exit_code == 0, res.stderr
    a, b = _doc(plain), _doc(slow)
    assert b["inputs"]["step_time_margin"] == pytest.approx(0.15)
    assert b["recommendation"]["cost_usd_per_year"] >= a["recommendation"]["cost_usd_per_year"]
    assert b["headroom"]["step_time_margin"] == pytest.approx(0.15) and b["headroom"]["step_slowdown_max"] >= 0.15
    assert "Step-time margin: sized and verified for every engine step 15 % slower" in res.output
    assert "(sized for 15 %)" in res.output


@pytest.mark.parametrize("value, needle", [("-5%", "'-5%'"), ("300%", "300%"), ("15", "'15'"), ("abc", "'abc'"),
                                           ("nan", "'nan'")])
def test_bad_margins_are_one_line_errors(value, needle):
    one_line_error(run("optimize", "--workload", "lmsys", "--slo-ttft", "500", "--step-time-margin", value),
                   "--step-time-margin", needle)


def test_a_margin_with_disaggregated_topologies_is_refused():
    one_line_error(run("optimize", "--workload", "lmsys", "--slo-ttft", "500", "--slo-tpot", "50", "--topology",
                       "homo,pdd", "--step-time-margin", "10%"), "--step-time-margin", "pdd/afd")


@pytest.fixture(scope="module")
def slower_profile(tmp_path_factory):
    """A profile of Llama-3.1-8B on one H100 whose every cost is 1.4x the predictor's (TOML)."""
    pred = StepTimePredictor(load_model("llama-3.1-8b"), load_catalog().get("H100-SXM"), Parallelism(tp=1))
    coef = pred.kernel_coefficients()[1].copy()
    keep = coef[[5, 6, 15]].copy()
    coef *= 1.4
    coef[[5, 6, 15]] = keep
    profile = CalibratedStepModel(coefficients=tuple(coef), scales={"all": 1.4}, model=pred.model.name,
                                  gpu="H100-SXM", parallelism=pred.parallelism.flags(), weight_dtype="bf16",
                                  kv_dtype="bf16", holdout_mape=0.05, n_rows=100, source="test steps")
    path = tmp_path_factory.mktemp("profile") / "h100.toml"
    save_perf_profile(profile, path)
    return path, coef


def test_a_slower_perf_profile_sizes_a_larger_fleet_and_is_recorded(tmp_path, slower_profile):
    path, coef = slower_profile
    plain, calibrated = tmp_path / "plain.json", tmp_path / "cal.json"
    res = run("optimize", *BASE, *MODEL, "--no-headroom", "--json", str(plain))
    assert res.exit_code == 0, res.stderr
    res = run("optimize", *BASE, *MODEL, "--no-headroom", "--perf-profile", str(path), "--json", str(calibrated))
    assert res.exit_code == 0, res.stderr
    a, b = _doc(plain), _doc(calibrated)
    assert b["recommendation"]["total_gpus_needed"] >= a["recommendation"]["total_gpus_needed"]
    assert b["recommendation"]["cost_usd_per_year"] > a["recommendation"]["cost_usd_per_year"]
    assert a["inputs"]["perf_profile"] is None
    (used,) = b["inputs"]["perf_profile"]
    assert used["gpu_type"] == "H100-SXM tp1" and used["gpu"] == "H100-SXM" and used["source"] == "test steps"
    np.testing.assert_allclose(used["coefficients"], coef)
    assert "Perf profile: H100-SXM tp1 runs the step model calibrated for Llama-3.1-8B" in res.output


def test_a_slower_perf_profile_also_enlarges_the_analytic_paper_fleet(tmp_path, slower_profile):
    path, _ = slower_profile
    plain, calibrated = tmp_path / "plain.json", tmp_path / "cal.json"
    base = ("optimize", *BASE, *MODEL, "--no-verify", "--service-model", "paper")
    assert run(*base, "--json", str(plain)).exit_code == 0
    assert run(*base, "--perf-profile", str(path), "--json", str(calibrated)).exit_code == 0
    assert (_doc(calibrated)["recommendation"]["total_gpus_needed"]
            >= _doc(plain)["recommendation"]["total_gpus_needed"])


def test_perf_profile_errors_are_one_line(slower_profile):
    path, _ = slower_profile
    one_line_error(run("optimize", "--workload", "lmsys", "--slo-ttft", "500", "--perf-profile", str(path)),
                   "--perf-profile needs --model")
    one_line_error(run("optimize", *BASE, *MODEL[:4], "-tp", "2", "--perf-profile", str(path), "--no-verify"),
                   "--perf-profile", "no swept placement matches", "H100-SXM tp2")
    one_line_error(run("optimize", *BASE, "--model", "llama-3.1-70b", "--gpus", "h100", "--perf-profile", str(path),
                       "--no-verify"), "calibrated for Llama-3.1-8B, not Llama-3.1-70B")
    one_line_error(run("whatif", "--workload", "lmsys", "--slo-ttft", "500", "--lam-range", "100:100:1",
                       "--perf-profile", str(path)), "--perf-profile needs --model")


def test_whatif_takes_the_margin_and_the_profile(tmp_path, slower_profile):
    path, _ = slower_profile
    out = tmp_path / "whatif.json"
    res = run("whatif", "--workload", "lmsys", "--slo-ttft", "500", "--lam-range", "300:300:1", "--no-verify",
              "--topology", "homo", *MODEL[:6], "--perf-profile", str(path), "--step-time-margin", "0.1",
              "--json", str(out))
    assert res.exit_code == 0, res.stderr
    assert "H100-SXM tp1" in res.output
    inputs = _doc(out)["inputs"]
    assert inputs["step_time_margin"] == pytest.approx(0.1) and inputs["perf_profile"][0]["gpu"] == "H100-SXM"
