"""``simulate_pools_parallel``: one simulation split by pool equals the single run exactly."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetplan.errors import ConfigError
from fleetplan.exec import LocalExecutor
from fleetplan.hardware import load_catalog
from fleetplan.sim.builders import build_pool
from fleetplan.sim.engine import simulate
from fleetplan.sim.spec import FleetSpec, Level, PoolRouter
from fleetplan.sim.split import SPLIT_NOTE, PoolSplitResult, simulate_pools_parallel
from fleetplan.workload import load_workload

N_REQUESTS = 6_000


@pytest.fixture(scope="module")
def setup():
    cat = load_catalog()
    a100, h100 = cat.get("A100-80GB"), cat.get("H100-SXM")
    wl = load_workload("lmsys")
    return a100, h100, wl


def _fleet(a100, h100, router=PoolRouter.LENGTH, third_pool=False):
    pools = [build_pool(a100, "short", 2, 4096), build_pool(h100, "long", 3, 65_536)]
    if third_pool:  # longer than any request: it receives nothing
        pools.append(build_pool(h100, "huge", 1, 131_072))
    return FleetSpec(tuple(pools), pool_router=router)


def _assert_same(single, split: PoolSplitResult) -> None:
    pd.testing.assert_frame_equal(single.requests, split.requests, check_exact=True)
    assert single.to_json_dict() == split.to_json_dict()


@pytest.mark.slow  # spawns workers that load the numba kernels
def test_length_routed_two_pool_fleet_matches_simulate_exactly(setup):
    a100, h100, wl = setup
    spec = _fleet(a100, h100)
    single = simulate(spec, wl, 60.0, N_REQUESTS, seed=4, slo_ttft_s=0.5)
    with LocalExecutor(workers=2) as ex:
        split = simulate_pools_parallel(spec, wl, 60.0, N_REQUESTS, seed=4, slo_ttft_s=0.5, map_fn=ex)
    _assert_same(single, split)
    assert isinstance(split, PoolSplitResult) and split.n_pool_tasks == 2 and split.split_note == SPLIT_NOTE
    assert set(split.requests["pool"]) == {"short", "long"}
    # the two pools really served different requests, and instance numbers are fleet-wide
    assert split.requests.loc[split.requests["pool"] == "long", "instance"].min() >= 2


@pytest.mark.parametrize("router", [PoolRouter.COMPRESS_AND_ROUTE, PoolRouter.RANDOM, PoolRouter.ROUND_ROBIN])
def test_other_stateless_routers_and_request_level_match(setup, router):
    a100, h100, wl = setup
    spec = _fleet(a100, h100, router)
    for level in (Level.ITERATION, Level.REQUEST):
        single = simulate(spec, wl, 60.0, N_REQUESTS, level=level, seed=9)
        _assert_same(single, simulate_pools_parallel(spec, wl, 60.0, N_REQUESTS, level=level, seed=9))


def test_horizon_and_an_idle_pool_match(setup):
    a100, h100, wl = setup
    spec = _fleet(a100, h100, third_pool=True)
    single = simulate(spec, wl, 200.0, N_REQUESTS, seed=1, horizon_s=10.0)
    split = simulate_pools_parallel(spec, wl, 200.0, N_REQUESTS, seed=1, horizon_s=10.0)
    _assert_same(single, split)
    assert split.n_pool_tasks == 2  # the 128K pool got no requests and ran no task
    assert (split.requests["status"] == "unfinished").any()


def test_least_loaded_is_refused_in_one_line(setup):
    a100, h100, wl = setup
    spec = _fleet(a100, h100, PoolRouter.LEAST_LOADED)
    with pytest.raises(ConfigError, match="'least_loaded' decides pools from live load") as info:
        simulate_pools_parallel(spec, wl, 60.0, 1000)
    assert "\n" not in str(info.value)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), rate_per_s=st.floats(5.0, 300.0),
       router=st.sampled_from([r for r in PoolRouter if r is not PoolRouter.LEAST_LOADED and
                               r is not PoolRouter.MODEL_TAG]),
       level=st.sampled_from(list(Level)))
def test_split_equals_single_run_for_any_seed_rate_and_router(setup, seed, rate_per_s, router, level):
    a100, h100, wl = setup
    spec = _fleet(a100, h100, router)
    single = simulate(spec, wl, rate_per_s, 800, level=level, seed=seed)
    _assert_same(single, simulate_pools_parallel(spec, wl, rate_per_s, 800, level=level, seed=seed))


def test_model_tag_routing_matches(setup):
    from dataclasses import replace

    a100, h100, wl = setup
    pools = (replace(build_pool(a100, "chat", 2, 65_536), model_tag="chat"),
             replace(build_pool(h100, "code", 2, 65_536), model_tag="code"))
    spec = FleetSpec(pools, pool_router=PoolRouter.MODEL_TAG, tag_shares=(("chat", 0.7), ("code", 0.3)))
    single = simulate(spec, wl, 40.0, 3_000, seed=12)
    split = simulate_pools_parallel(spec, wl, 40.0, 3_000, seed=12)
    _assert_same(single, split)
    assert split.n_pool_tasks == 2


def test_runtime_features_are_refused_in_one_line(setup):
    import dataclasses

    from fleetplan.sim.features import RuntimeFeatures

    a100, h100, wl = setup
    spec = _fleet(a100, h100)
    pools = (dataclasses.replace(spec.pools[0], features=RuntimeFeatures(policy="spf")),) + spec.pools[1:]
    with pytest.raises(ConfigError, match="feature kernel as one task"):
        simulate_pools_parallel(dataclasses.replace(spec, pools=pools), wl, 10.0, 100)


def test_options_pass_through_and_unknown_ones_are_refused(setup):
    """``simulate_pools_parallel`` takes ``simulate``'s options by name (``RunOptions``): the same
    gamma arrivals and warm-up give the same table; a misspelt option is refused with the valid names."""
    a100, h100, wl = setup
    spec = _fleet(a100, h100)
    opts = {"arrival": "gamma", "cv": 2.0, "warmup_fraction": 0.2, "slo_ttft_s": 0.5}
    _assert_same(simulate(spec, wl, 60.0, 800, seed=3, **opts), simulate_pools_parallel(spec, wl, 60.0, 800, seed=3,
                                                                                         **opts))
    with pytest.raises(ConfigError, match="unknown simulation option.*warmup.*valid options are arrival, cv"):
        simulate_pools_parallel(spec, wl, 60.0, 800, warmup=0.2)
