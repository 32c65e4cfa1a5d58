"""Peak and valley: busiest-window rate, utilisation over the day, rented peak never dearer."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from fleetplan.cli.main import cli
from fleetplan.errors import DataFormatError
from fleetplan.hardware import load_catalog
from fleetplan.hardware.procurement import load_gpu_prices
from fleetplan.plan.optimize import OptimizeRequest, optimize
from fleetplan.plan.peak import RateProfile, peak_valley, read_rate_profile_csv
from fleetplan.plan.space import Topology
from fleetplan.workload import load_workload

DAY = tuple(float(x) for x in [10] * 8 + [40] * 4 + [80, 120, 80] + [40] * 5 + [10] * 4)


def test_busiest_window_is_the_largest_circular_mean():
    p = RateProfile(DAY, 3600.0, "day")
    assert p.busiest_window_rate(3600.0) == (120.0, 13)
    assert p.busiest_window_rate(3 * 3600.0)[0] == pytest.approx((80 + 120 + 80) / 3)
    assert p.busiest_window_rate(1800.0)[0] == 120.0  # a window inside one interval is its rate
    wrap = RateProfile((50.0, 1.0, 1.0, 60.0), 3600.0, "wrap")
    assert wrap.busiest_window_rate(7200.0) == (55.0, 3)  # the window wraps to the next day


def test_peak_sizing_utilisation_and_rented_peak():
    cat = load_catalog()
    h100 = cat.get("h100")
    profile = RateProfile(DAY, 3600.0, "day")
    peak, _ = profile.busiest_window_rate(3600.0)
    req = OptimizeRequest(workload=load_workload("azure_conv"), gpus=(h100,), slo_ttft_s=0.5, rate_per_s=peak,
                          topologies=(Topology.HOMO,))
    fleet = optimize(req).recommendation
    pv = peak_valley(req, fleet, profile, 3600.0, load_gpu_prices(cat, (h100.name,)))
    assert pv.peak_rate_per_s == 120.0
    assert max(pv.utilisation) == pytest.approx(pv.utilisation[13]) and max(pv.utilisation) < 1.0
    assert pv.utilisation[0] == pytest.approx(pv.utilisation[13] * 10 / 120)
    assert pv.base_plus_on_demand_usd_per_day <= pv.all_owned_usd_per_day + 1e-9
    assert dict(pv.base_gpus)[h100.name] <= dict(pv.peak_gpus)[h100.name]


def test_profile_csv_rules(tmp_path):
    f = tmp_path / "p.csv"
    f.write_text("timestamp,rate\n0,5\n3600,7\n7000,9\n")
    with pytest.raises(DataFormatError, match="evenly spaced"):
        read_rate_profile_csv(f)
    f.write_text("timestamp,rate\n2026-01-01T00:00:00,5\n2026-01-01T01:00:00,7\n")
    assert read_rate_profile_csv(f).step_s == 3600.0


def test_cli_rate_profile(tmp_path):
    f = tmp_path / "p.csv"
    f.write_text("timestamp,rate\n" + "".join(f"{h * 3600},{r}\n" for h, r in enumerate(DAY)))
    base = ("optimize", "--workload", "azure_conv", "--slo-ttft", "500", "--gpus", "h100", "--topology", "homo",
            "--no-verify")
    res = CliRunner().invoke(cli, [*base, "--rate-profile", str(f)])
    assert res.exit_code == 0, res.output + res.stderr
    assert "λ = 120 req/s (busiest 3600 s of the rate profile)" in res.output
    assert "Utilisation per interval:" in res.output and "renting the rest on demand" in res.output
    both = CliRunner().invoke(cli, [*base, "--rate-profile", str(f), "--lam", "50"])
    assert both.exit_code == 2 and "--rate-profile replaces --lam" in both.stderr
    none = CliRunner().invoke(cli, [*base, "--rate-profile", "workload"])
    assert none.exit_code == 2 and "no saved daily profile" in none.stderr
