"""The incremental plan through the Python API: forecasts, ownership, budget, lead time, availability."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

import pytest

from fleetplan.errors import ConfigError, DataFormatError
from fleetplan.hardware import load_catalog
from fleetplan.hardware.procurement import load_gpu_prices
from fleetplan.plan.horizon.forecast import compound_forecast, read_forecast_csv
from fleetplan.plan.horizon.plan import HorizonSettings, fleet_needs, plan_horizon
from fleetplan.plan.horizon.schedule import BUY, RENT, actions
from fleetplan.plan.optimize import OptimizeRequest
from fleetplan.plan.space import Topology
from fleetplan.workload import load_workload

START = dt.date(2026, 1, 1)


@pytest.fixture(scope="module")
def setup():
    cat = load_catalog()
    gpus = (cat.get("h100"), cat.get("a100"))
    req = OptimizeRequest(workload=load_workload("azure_conv"), gpus=gpus, slo_ttft_s=0.5, rate_per_s=50.0,
                          topologies=(Topology.HOMO,))
    return req, load_gpu_prices(cat, tuple(g.name for g in gpus))


def test_forecast_csv_reads_p50_p90_and_refuses_bad_rows(tmp_path):
    good = tmp_path / "f.csv"
    good.write_text("date,p50,p90\n2026-01-01,40,50\n2026-02-01,45,60\n")
    f = read_forecast_csv(good)
    assert f.p90_per_s == (50.0, 60.0) and f.p50_per_s == (40.0, 45.0) and f.end_date == dt.date(2026, 3, 1)
    bad = tmp_path / "b.csv"
    bad.write_text("date,rate\n2026-02-01,40\n2026-01-01,50\n")
    with pytest.raises(DataFormatError, match="row 3, column date.*not after 2026-02-01"):
        read_forecast_csv(bad)
    bad.write_text("date,rate\n2026-01-01,-4\n")
    with pytest.raises(DataFormatError, match="row 2, column rate.*must be > 0"):
        read_forecast_csv(bad)


def test_owned_gpus_persist_and_plan_never_dearer(setup):
    req, prices = setup
    fc = compound_forecast(60.0, 0.5, 4, START)
    plan = plan_horizon(req, HorizonSettings(fc, prices, current_fleet=(("H100-SXM", 2),)))
    h = plan.types.index("H100-SXM")
    owned = [p.owned[h] for p in plan.periods]
    assert min(owned) >= 2 and owned == sorted(owned)
    for p in plan.periods:  # every period's fleet is served: owned + rented cover its needs
        need = fleet_needs(p.fleet, plan.types)
        assert all(o + r >= n for o, r, n in zip(p.owned, p.rented, need, strict=True))
    assert plan.total_cost_usd <= plan.baseline_cost_usd + 1e-6


def test_retire_only_when_allowed(setup):
    req, prices = setup
    fc = compound_forecast(20.0, 0.0, 3, START)
    kept = plan_horizon(req, HorizonSettings(fc, prices, current_fleet=(("H100-SXM", 6),)))
    assert all(p.owned[kept.types.index("H100-SXM")] == 6 for p in kept.periods)
    sold = plan_horizon(req, HorizonSettings(fc, prices, current_fleet=(("H100-SXM", 6),), allow_retire=True))
    assert sum(sum(p.retired) for p in sold.periods) > 0 and sold.total_cost_usd < kept.total_cost_usd


def test_lead_time_rents_until_an_order_can_arrive(setup):
    req, prices = setup
    fc = compound_forecast(100.0, 0.1, 3, START)
    plan = plan_horizon(req, HorizonSettings(fc, prices, lead_time_weeks=6))
    first = [a for a in actions(plan) if a.date == START]
    assert first and all(a.action == RENT for a in first)  # nothing can be delivered in period 0
    buys = [a for a in actions(plan) if a.action == BUY]
    assert all(a.order_by >= START and a.order_by == a.date - dt.timedelta(weeks=6) for a in buys)


def test_gpu_available_only_from_a_date(setup):
    req, prices = setup
    fc = compound_forecast(50.0, 0.1, 3, START)
    plan = plan_horizon(req, HorizonSettings(fc, prices, available_from=(("H100-SXM", dt.date(2026, 3, 1)),)))
    h = plan.types.index("H100-SXM")
    for p in plan.periods[:2]:
        assert fleet_needs(p.fleet, plan.types)[h] == 0 and p.owned[h] == 0


def test_budget_too_small_names_the_first_period_and_the_spend(setup):
    req, prices = setup
    fc = compound_forecast(50.0, 0.1, 3, START)
    with pytest.raises(ConfigError, match=r"cannot cover period 0 \(2026-01-01, 50 req/s\).*needs a spend of"):
        plan_horizon(req, HorizonSettings(fc, prices, budget_usd_per_period=10.0))


def test_every_chosen_fleet_is_simulated_at_its_period_rate(setup):
    from fleetplan.plan.verify import VerifySettings

    req, prices = setup
    fc = compound_forecast(60.0, 0.3, 2, START)
    ver = VerifySettings(0.5, None, 60.0, req.max_gpus, n_requests=3000, n_replications=2)
    plan = plan_horizon(req, HorizonSettings(fc, prices), verify=ver)
    for p in plan.periods + plan.baseline:
        assert p.verified and p.fleet.verification.p99_ttft_s_sim <= 0.5
    assert plan.total_cost_usd <= plan.baseline_cost_usd + 1e-6


def test_bridge_to_a_later_gpu_type_is_rented_on_demand_and_lasting_need_reserved(setup):
    """A10G (rent only) is the only type until H100 arrives in month 3: renting the A10Gs on demand for
    two months beats a 12-month reservation of which the horizon would pay four months; a rent-only
    type needed for the whole horizon is reserved instead."""
    req, _ = setup
    cat = load_catalog()
    gpus = (cat.get("a10g"), cat.get("h100"))
    req = OptimizeRequest(workload=load_workload("azure_code"), gpus=gpus, slo_ttft_s=0.5, rate_per_s=50.0,
                          topologies=(Topology.HOMO,))
    prices = load_gpu_prices(cat, tuple(g.name for g in gpus))
    fc = compound_forecast(100.0, 0.0, 4, START)
    plan = plan_horizon(req, HorizonSettings(fc, prices, available_from=(("H100-SXM", dt.date(2026, 3, 1)),)))
    a = plan.types.index("A10G")
    first = plan.periods[0]
    assert first.rented[a] > 0 and first.on_demand[a] == first.rented[a] and first.signed[a] == 0
    assert all(p.rented[a] == 0 for p in plan.periods[2:])
    rows = [r for r in actions(plan) if r.action == RENT and r.gpu == "A10G"]
    assert rows and all(r.terms == "on demand" for r in rows)
    # without H100 the A10Gs are needed all along: reserved, one contract until a year later
    only = plan_horizon(replace(req, gpus=gpus[:1]), HorizonSettings(fc, {"A10G": prices["A10G"]}))
    assert only.types == ("A10G",)
    p0 = only.periods[0]
    assert p0.signed[0] == p0.rented[0] > 0 and p0.on_demand[0] == 0
    assert p0.reserved_until[0] == dt.date(2027, 1, 1)
    assert only.total_cost_usd <= only.baseline_cost_usd + 1e-6


def test_prices_file_without_a_reserved_term_is_one_line_naming_the_field(tmp_path):
    """The reserved term is read from the prices file, never defaulted: a file without it is refused,
    naming the file, the missing field and the fix; a bad term names the rule."""
    from fleetplan.hardware.procurement import default_prices_path

    text = default_prices_path().read_text()
    missing = tmp_path / "prices.toml"
    missing.write_text(text.replace("reserved_term_months = 12\n", "", 1))
    with pytest.raises(DataFormatError) as err:
        load_gpu_prices(load_catalog(), ("H100-SXM",), missing)
    msg = str(err.value)
    assert "\n" not in msg and "reserved_term_months" in msg and "prices.toml" in msg
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("reserved_term_months = 12\n", "reserved_term_months = 0\n", 1))
    with pytest.raises(ConfigError, match="reserved_term_months = 0 must be a whole number >= 1"):
        load_gpu_prices(load_catalog(), ("H100-SXM",), bad)
