"""``simulate(..., failures=FailureSpec(...))`` and the failure schedule it draws.

* Failures off, MTTR = 0 and MTBF = inf give bit-identical request tables (same seed).
* Heavy failure rates: every request is DONE or UNFINISHED (none lost, none rejected on this
  fleet); without a horizon every request finishes; per-request failure counts add up.
* The schedule follows the alternating renewal model: at t = 0 a fraction 1 - A of instances is
  down (binomial tolerance), the long-run up fraction is A, fixed repairs last exactly MTTR.
* Catalog rates (per node-day) become per-instance MTBF/MTTR; missing ones are a one-line error.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fleetplan.cli.errors import render_error
from fleetplan.errors import ConfigError, FleetplanError
from fleetplan.hardware import load_catalog
from fleetplan.sim.builders import build_pool
from fleetplan.sim.engine import simulate
from fleetplan.sim.failures import FailureSpec, draw_failure_schedule, failure_spec_from_catalog
from fleetplan.sim.spec import FleetSpec
from fleetplan.workload import load_workload

N_REQUESTS = 3000


@pytest.fixture(scope="module")
def fleet() -> FleetSpec:
    a100 = load_catalog().get("a100")
    return FleetSpec((build_pool(a100, "short", 3, 4096), build_pool(a100, "long", 5, 65_536)))


@pytest.fixture(scope="module")
def lmsys():
    return load_workload("lmsys")


def run(fleet, lmsys, failures=None, **kwargs):
    return simulate(fleet, lmsys, 100.0, n_requests=N_REQUESTS, seed=3, failures=failures, **kwargs)


@pytest.mark.parametrize("failures", [FailureSpec(mtbf_s=30.0, mttr_s=0.0),
                                      FailureSpec(mtbf_s=math.inf, mttr_s=60.0),
                                      FailureSpec(mtbf_s=1e9, mttr_s=1.0, start="up")])
def test_no_outage_equals_failures_off(fleet, lmsys, failures) -> None:
    off = run(fleet, lmsys)
    on = run(fleet, lmsys, failures)
    pd.testing.assert_frame_equal(off.requests, on.requests)
    assert on.summary.failures.n_outages == 0 and on.summary.failures.up_fraction == 1.0
    assert off.summary.overall == on.summary.overall


def test_heavy_failures_conserve_requests(fleet, lmsys) -> None:
    failures = FailureSpec(mtbf_s=5.0, mttr_s=3.0)
    result = run(fleet, lmsys, failures)
    df = result.requests
    assert len(df) == N_REQUESTS and (df["status"] == "done").all()  # no horizon: every request finishes
    assert (df["instance"] >= 0).all()
    f = result.summary.failures
    assert f.n_outages > 20 and f.n_evictions == df["failures"].sum() > 0
    assert f.n_requests_evicted == (df["failures"] > 0).sum()
    assert 0 < f.up_fraction < 1 and f.min_instances_up < 8
    again = run(fleet, lmsys, failures)
    pd.testing.assert_frame_equal(df, again.requests)  # same seed, same run


def test_heavy_failures_with_horizon_only_done_or_unfinished(fleet, lmsys) -> None:
    result = run(fleet, lmsys, FailureSpec(mtbf_s=2.0, mttr_s=6.0, repair="fixed"), horizon_s=20.0)
    status = result.requests["status"]
    assert status.isin(["done", "unfinished"]).all() and (status == "unfinished").any()
    done = result.requests[status == "done"]
    assert (done["done_s"] <= 20.0).all() and (done["ttft_s"] <= done["e2e_s"]).all()


def test_failures_raise_p99_ttft(fleet, lmsys) -> None:
    off = run(fleet, lmsys).summary.overall.ttft.p99_s
    on = run(fleet, lmsys, FailureSpec(mtbf_s=20.0, mttr_s=10.0)).summary.overall.ttft.p99_s
    assert on > off


def test_stationary_start_and_long_run_availability() -> None:
    """Alternating renewal process: P(down at 0) = 1 - A; time-average up fraction -> A."""
    n_inst, mtbf, mttr = 4000, 100.0, 25.0
    a = mtbf / (mtbf + mttr)
    events, lo = draw_failure_schedule(FailureSpec(mtbf, mttr), np.zeros(n_inst, np.int64), 2000.0, seed=1)
    starts = events[lo[:-1][lo[1:] > lo[:-1]]]
    down_at_0 = np.count_nonzero(starts == 0.0) / n_inst
    assert abs(down_at_0 - (1 - a)) < 4 * math.sqrt(a * (1 - a) / n_inst)
    window = 2000.0
    down_s = np.clip(np.minimum(events[1::2], window) - events[0::2], 0, None).sum()
    assert abs(1 - down_s / (n_inst * window) - a) < 0.005
    assert np.all(np.diff(events[lo[0]:lo[1]]) >= 0)


def test_fixed_repairs_last_mttr() -> None:
    events, lo = draw_failure_schedule(FailureSpec(50.0, 7.0, repair="fixed", start="up"),
                                       np.zeros(50, np.int64), 1000.0, seed=2)
    np.testing.assert_allclose(events[1::2] - events[0::2], 7.0)
    assert events.size > 100 and events[0::2].max() <= 1000.0


def test_catalog_rates_per_instance(fleet) -> None:
    spec = failure_spec_from_catalog(fleet, load_catalog())
    a100 = load_catalog().get("a100")
    assert spec.mtbf_s == (86_400.0 / a100.failure_rate_per_day,) * 2
    assert spec.mttr_s == (86_400.0 * a100.mttr_days,) * 2
    np.testing.assert_allclose(spec.pool_availability(2), a100.availability)
    assert failure_spec_from_catalog(fleet, load_catalog(), mtbf_s=3600.0).mtbf_s == (3600.0, 3600.0)


def test_missing_catalog_rate_is_a_one_line_error() -> None:
    a10g = load_catalog().get("a10g")
    spec = FleetSpec((build_pool(a10g, "a", 2, 2048),))
    with pytest.raises(ConfigError) as err:
        failure_spec_from_catalog(spec, load_catalog())
    assert "\n" not in str(err.value)
    assert "--mtbf-h" in render_error(err.value)  # the CLI's wording names the flag


@pytest.mark.parametrize("kwargs", [dict(mtbf_s=0.0, mttr_s=1.0), dict(mtbf_s=1.0, mttr_s=-1.0),
                                    dict(mtbf_s=1.0, mttr_s=math.inf), dict(mtbf_s=1.0, mttr_s=1.0, repair="x"),
                                    dict(mtbf_s=1.0, mttr_s=1.0, window_s=0.0)])
def test_bad_failure_specs_raise(kwargs) -> None:
    with pytest.raises(FleetplanError):
        FailureSpec(**kwargs)


def test_failures_need_iteration_level(fleet, lmsys) -> None:
    with pytest.raises(ConfigError, match="level iteration"):
        run(fleet, lmsys, FailureSpec(10.0, 1.0), level="request")
