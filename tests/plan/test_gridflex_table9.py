"""Grid flex against the core paper's Table 9 (40 H100, λ = 200, Azure, SLO 500 ms).

Paper rows (flex %: n_max, W/GPU, fleet kW): 0: 128, 583, 23.3; 10: 48, 540, 21.6;
20: 24, 479, 19.1; 30: 13, 413, 16.5; 40: 6, 350, 14.0; 50: 1, 304, 12.2.

Mapping (``plan.gridflex``): target = P_nom (1 - flex/100) with P_nom = 600 W; n_max = the
largest integer batch whose logistic power fits (floor of the inverse), capped at the
uncapped n_max = 128 (16K context).  Tolerances: n_max exact; W/GPU within 1 W of the
paper's (rounded) figure; kW within 0.05 kW (rounding of 40 x W).  Exception, documented:
at 40 % the paper prints n_max = 6 (350 W, 14.0 kW), but P(7) = 359.7 W <= 360 W, so the
exact floor is 7 (359.7 W, 14.4 kW); the reference tool's integer bisection stops one
short.  The test checks the power column at the paper's own n_max for that row as well.
"""

from __future__ import annotations

import math

import pytest

from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.plan.gridflex import batch_cap, grid_flex, pool_power_w
from fleetplan.workload import load_workload

PAPER = {0: (128, 583, 23.3), 10: (48, 540, 21.6), 20: (24, 479, 19.1), 30: (13, 413, 16.5),
         40: (6, 350, 14.0), 50: (1, 304, 12.2)}
OURS_AT_40 = (7, 359.7, 14.39)


@pytest.fixture(scope="module")
def h100():
    return load_catalog().get("h100")


@pytest.fixture(scope="module")
def table(shared_dir, h100):
    wl = load_workload(shared_dir / "anchors" / "fleet_sim_cdfs" / "azure_cdf.json")
    return grid_flex(wl, h100, 200.0, 40, 0.5, tuple(PAPER), window_s=None, steady_requests=None,
                     ttft_model="mean-prefill", n_prefill_seqs=1)


def test_uncapped_pool_matches_the_paper(table):
    assert table.max_context_tokens == 16384 and table.n_max_uncapped == 128


def test_table9_n_max_watts_and_kw(table):
    for lv in table.levels:
        n_max, watts, kw = PAPER[int(lv.flex_pct)]
        if lv.flex_pct == 40:
            n_max, watts, kw = OURS_AT_40
        assert lv.n_max == n_max, lv
        assert lv.power_w_per_gpu == pytest.approx(watts, abs=1.0), lv
        assert lv.fleet_kw == pytest.approx(kw, abs=0.05), lv


def test_power_column_at_the_papers_own_caps(h100):
    for n_max, watts, kw in PAPER.values():
        assert float(h100.power.power_w(n_max)) == pytest.approx(watts, abs=1.0)
        assert 40 * float(h100.power.power_w(n_max)) / 1000 == pytest.approx(kw, abs=0.05)


def test_power_and_cap_fall_with_curtailment_and_analytic_stability_limit(table):
    caps = [lv.n_max for lv in table.levels]
    watts = [lv.power_w_per_gpu for lv in table.levels]
    assert caps == sorted(caps, reverse=True) and watts == sorted(watts, reverse=True)
    # paper: analytically stable to 30 %, unstable (inf) at 40 % and 50 %
    for lv in table.levels:
        assert (lv.flex_pct <= 30) == math.isfinite(lv.p99_ttft_s_analytic), lv
        assert (lv.flex_pct <= 30) == lv.slo_ok_steady


def test_batch_cap_is_the_largest_fitting_integer(h100):
    curve = h100.power
    for flex in (1, 5, 12.5, 25, 33, 45):
        b = batch_cap(curve, flex, 10_000)
        target = curve.nominal_w * (1 - flex / 100)
        assert curve.power_w(b) <= target < curve.power_w(b + 1) or b == 1
    assert batch_cap(curve, 0, 77) == 77
    with pytest.raises(ConfigError, match="curtailment level"):
        batch_cap(curve, 100, 128)


def test_pool_power_basis_states_tdp_estimates():
    cat = load_catalog()
    watts, basis = pool_power_w(cat.get("h100"), 0.5, 128)
    assert basis.startswith("logistic") and watts == pytest.approx(float(cat.get("h100").power.power_w(64)))
    a10g = cat.get("a10g")
    if a10g.power is None:
        watts, basis = pool_power_w(a10g, 0.5, 64)
        assert "TDP-based estimate" in basis
        assert watts == pytest.approx(a10g.idle_w + 0.5 * (a10g.tdp_w - a10g.idle_w))


def test_gpu_without_power_curve_is_a_one_line_error(shared_dir):
    cat = load_catalog()
    no_curve = next((cat.get(n) for n in cat.names() if cat.get(n).power is None and cat.get(n).serving), None)
    if no_curve is None:
        pytest.skip("every calibrated GPU has a power curve")
    wl = load_workload("azure_conv")
    with pytest.raises(ConfigError, match="no power curve"):
        grid_flex(wl, no_curve, 10.0, 2, 0.5, window_s=None, steady_requests=None)


@pytest.mark.slow
def test_simulated_window_and_steady_state(shared_dir, h100):
    """Iteration-level simulation: 0-30 % meet the SLO in a 75 s window and in steady state
    (paper DES 35-51 ms; here ~30-35 ms); 50 % collapses in both.  At 40 % (n_max 7, ρ = 1.14)
    our window P99 is seconds, not the paper's 190 ms: the iteration-level simulator with a
    7-sequence cap cannot serve 200 req/s, which the analytic ρ agrees with."""
    wl = load_workload(shared_dir / "anchors" / "fleet_sim_cdfs" / "azure_cdf.json")
    res = grid_flex(wl, h100, 200.0, 40, 0.5, (0, 30, 50), steady_requests=10_000, n_replications=2)
    by = {int(lv.flex_pct): lv for lv in res.levels}
    for f in (0, 30):
        assert by[f].slo_ok_window and by[f].slo_ok_steady, by[f]
        assert by[f].p99_ttft_s_window < 0.1
    assert not by[50].slo_ok_window and by[50].p99_ttft_s_steady == math.inf
