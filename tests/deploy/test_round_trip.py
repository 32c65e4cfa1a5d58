"""`simulate --fleet DIR/fleet.toml` on the plan's workload and rate reproduces verification's P99 TTFT.

Verification simulated each pool apart on its own Poisson sub-stream (``plan.verify``) and reports the
fleet-wide P99 TTFT's mean over replications and the upper end of its 95 % Student-t interval; the
exported file is simulated whole, behind its between-pool router, with independent seeds.  The two
estimates agree when their difference is within the combined half-widths of the two intervals,
sqrt(h_verify² + h_sim²) (two independent estimates of one percentile).
"""

from __future__ import annotations

import math
import tomllib

import pytest

from fleetplan.deploy import deployment_files
from fleetplan.models import Dtype, load_model
from fleetplan.plan.model_fleet import ModelServing, fleet_for_serving
from fleetplan.sim.fleet_toml import parse_fleet_file
from fleetplan.sim.replications import replicate
from fleetplan.units import s_to_ms
from fleetplan.workload import load_workload
from tests.cli.cli_check import run
from tests.deploy.conftest import load

README_COMMAND = ("--workload", "lmsys.json", "--slo-ttft", "500", "-q")


def _agrees(doc: dict, serving: ModelServing | None, n_requests: int, max_model_len: int | None = None) -> tuple:
    rec = doc["recommendation"]
    v = rec["verification"]
    _, files = deployment_files(doc)
    fleet = parse_fleet_file(tomllib.loads(files["fleet.toml"]))
    spec = fleet_for_serving(fleet, serving, max_model_len).spec
    inputs = doc["inputs"]
    rep = replicate(spec, load_workload(inputs["workload"], inputs["input_fraction"]), inputs["lam_per_s"],
                    n_requests=n_requests, seed=12345, n_replications=3)
    sim_mean = s_to_ms(rep.mean_p99_ttft_s)
    sim_half = s_to_ms(rep.p99_ttft_interval_s[1]) - sim_mean
    ver_mean, ver_half = v["p99_ttft_ms_sim_mean"], v["p99_ttft_ms_sim"] - v["p99_ttft_ms_sim_mean"]
    return sim_mean, ver_mean, math.hypot(sim_half, ver_half), rep


def test_small_compress_plan_round_trips(small_run):
    sim, ver, tol, rep = _agrees(load(small_run), None, 20_000)
    assert abs(sim - ver) <= tol, (sim, ver, tol)
    assert s_to_ms(rep.upper_p99_ttft_s) <= 500  # the exported fleet passes the SLO too


def test_70b_fp8_two_pool_plan_round_trips(fp8_run):
    doc = load(fp8_run)
    serving = ModelServing(load_model("llama-3.1-70b"), None, Dtype.FP8, Dtype.FP8)
    sim, ver, tol, rep = _agrees(doc, serving, 20_000, doc["inputs"]["max_model_len_tokens"])
    assert abs(sim - ver) <= tol, (sim, ver, tol)
    assert s_to_ms(rep.upper_p99_ttft_s) <= doc["inputs"]["slo_ttft_ms"]


@pytest.mark.slow
def test_readme_command_plan_round_trips(tmp_path):
    """The README's `optimize --workload lmsys.json --slo-ttft 500` (λ = 100), exported and re-simulated."""
    path = tmp_path / "run.json"
    result = run("optimize", *README_COMMAND, "--json", str(path))
    assert result.exit_code == 0, result.stderr
    sim, ver, tol, rep = _agrees(load(path), None, 200_000)
    assert abs(sim - ver) <= tol, (sim, ver, tol)
    assert s_to_ms(rep.upper_p99_ttft_s) <= 500
