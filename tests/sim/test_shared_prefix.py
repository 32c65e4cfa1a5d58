"""Shared system prompts on plain request streams (``fleetplan.sim.shared_prefix``)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.sim.builders import build_pool
from fleetplan.sim.engine import simulate
from fleetplan.sim.features import PrefixCacheConfig, RuntimeFeatures
from fleetplan.sim.shared_prefix import SharedPrefix, parse_shared_prefix
from fleetplan.sim.spec import FleetSpec


class Fixed:
    name = "fixed"

    def sample(self, rng, n):
        return np.full(n, 1000, dtype=np.int64), np.full(n, 8, dtype=np.int64)


def _spec(cache: bool, n_instances: int = 1, router: str = "least_outstanding"):
    pool = build_pool(load_catalog().get("h100"), "p", n_instances, 8192, router=router)
    return FleetSpec((dataclasses.replace(pool, features=RuntimeFeatures(prefix_cache=PrefixCacheConfig(cache))),))


def test_sequential_requests_hit_exactly_the_cached_system_prompt():
    """One instance, requests far apart: every request after the first finds the 512-token prompt
    (32 full blocks) cached, so the hit ratio is (n - 1) * 512 / (n * 1000) exactly."""
    n = 40
    result = simulate(_spec(True), Fixed(), 0.2, n, seed=3, warmup_fraction=0.0, shared_prefix=SharedPrefix(512))
    assert result.summary.pools[0].prefix_hit_ratio == pytest.approx((n - 1) * 512 / (n * 1000), rel=1e-12)
    cached = result.requests["cached_tokens"].to_numpy()
    assert cached[0] == 0 and np.all(cached[1:] == 512)


def test_cache_hits_shorten_ttft_and_keys_follow_the_seed():
    plain = simulate(_spec(False), Fixed(), 0.2, 40, seed=3, warmup_fraction=0.0, shared_prefix=SharedPrefix(512))
    cached = simulate(_spec(True), Fixed(), 0.2, 40, seed=3, warmup_fraction=0.0, shared_prefix=SharedPrefix(512))
    assert cached.summary.overall.ttft.mean_s < plain.summary.overall.ttft.mean_s
    assert plain.summary.pools[0].prefix_hit_ratio is None


def test_prefix_affinity_router_raises_the_hit_ratio_over_round_robin():
    prefix = SharedPrefix(768, 8)
    hits = {}
    for router in ("round_robin", "prefix_affinity"):
        spec = _spec(True, n_instances=8, router=router)
        hits[router] = simulate(spec, Fixed(), 4.0, 400, seed=1, shared_prefix=prefix).summary.pools[0].prefix_hit_ratio
    assert hits["prefix_affinity"] > hits["round_robin"]


@pytest.mark.parametrize("text", ["0", "512x0", "abc", "1x2x3", "-5"])
def test_bad_shared_prefix_is_one_line(text):
    with pytest.raises(ConfigError) as err:
        parse_shared_prefix(text)
    assert "\n" not in str(err.value)


def test_parse_forms():
    assert parse_shared_prefix("1024") == SharedPrefix(1024, 1)
    assert parse_shared_prefix("1024x4") == SharedPrefix(1024, 4)
