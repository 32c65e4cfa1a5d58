"""Between-pool routing, request-level service times and fleet arrays, checked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.errors import ConfigError
from fleetplan.perf.linear import LinearStepModel
from fleetplan.sim._kernels import codes
from fleetplan.sim.compile import compile_fleet, compile_requests, request_level_times, route_pools
from fleetplan.sim.spec import FleetSpec, PoolSpec, SchedulerLimits


def pool(name: str, ctx: int, n: int = 1, seqs: int = 8, chunk: int = 512, w: float = 0.01, **kw) -> PoolSpec:
    step = LinearStepModel(w, 0.001, 0.0)
    return PoolSpec(name, "a100", n, ctx, step, SchedulerLimits(seqs, chunk, 65536), **kw)


def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def test_length_routing_picks_smallest_fitting_pool_regardless_of_order():
    # pools listed long-first: routing must sort by context, labels must keep spec order
    spec = FleetSpec((pool("long", 65536), pool("mid", 8192), pool("short", 4096)))
    prompt = np.array([50, 4000, 4000, 8000, 60000, 70000])
    output = np.array([50, 96, 97, 192, 5536, 10])
    # totals:          100  4096  4097  8192  65536  70010
    req_pool, served = route_pools(spec, prompt, output, rng())
    names = np.array(spec.pool_names())[req_pool]
    assert names.tolist() == ["short", "short", "mid", "mid", "long", "long"]  # 70010 fits none: largest
    assert np.array_equal(served, prompt)


def test_compress_and_route_squeezes_only_the_band():
    spec = FleetSpec((pool("short", 4096), pool("long", 65536)), pool_router="compress_and_route",
                     compress_gamma=1.5)
    # totals: 4096 (fits), 5000 (in band), 6144 (band edge, in), 6145 (above band), 4500 w/ output >= B
    prompt = np.array([4000, 4000, 6000, 6000, 300])
    output = np.array([96, 1000, 144, 145, 4200])
    req_pool, served = route_pools(spec, prompt, output, rng())
    assert served.tolist() == [4000, 4096 - 1000, 4096 - 144, 6000, 300]
    assert (served + output)[:3].tolist() == [4096, 4096, 4096]
    assert np.array(spec.pool_names())[req_pool].tolist() == ["short", "short", "short", "long", "long"]


def test_round_robin_random_and_least_loaded():
    spec = FleetSpec((pool("a", 4096), pool("b", 4096), pool("c", 4096)), pool_router="round_robin")
    ones = np.ones(7, dtype=np.int64)
    assert route_pools(spec, ones, ones, rng())[0].tolist() == [0, 1, 2, 0, 1, 2, 0]
    spec = FleetSpec(spec.pools, pool_router="random")
    picks = route_pools(spec, np.ones(30000, dtype=np.int64), np.ones(30000, dtype=np.int64), rng())[0]
    shares = np.bincount(picks, minlength=3) / picks.size
    assert np.all(np.abs(shares - 1 / 3) < 0.015)  # 5 binomial standard deviations
    spec = FleetSpec(spec.pools, pool_router="least_loaded")
    assert np.all(route_pools(spec, ones, ones, rng())[0] == codes.POOL_LEAST_LOADED)


def test_model_tag_routes_by_tag_then_length():
    pools = (pool("llama-s", 4096, model_tag="llama"), pool("llama-l", 65536, model_tag="llama"),
             pool("qwen", 65536, model_tag="qwen"))
    spec = FleetSpec(pools, pool_router="model_tag", tag_shares=(("llama", 0.75), ("qwen", 0.25)))
    n = 40000
    prompt = np.where(np.arange(n) % 2 == 0, 100, 10000).astype(np.int64)
    req_pool, _ = route_pools(spec, prompt, np.ones(n, dtype=np.int64), rng())
    names = np.array(spec.pool_names())[req_pool]
    assert abs(np.mean(names == "qwen") - 0.25) < 0.01
    llama = names != "qwen"
    assert set(names[llama & (prompt == 100)]) == {"llama-s"}
    assert set(names[llama & (prompt == 10000)]) == {"llama-l"}


def test_request_level_times_follow_eqs_4_and_5():
    # token budget 520 = 8 decodes + a 512-token prefill chunk
    spec = FleetSpec((pool("a", 4096, seqs=8, chunk=520, w=0.01),))
    fleet = compile_fleet(spec)
    t_full = 0.01 + 0.001 * 8  # t_iter(n_max) = W + H n_max, eq. 3 (this step model is not context-scaled)
    prompt, output = np.array([1, 512, 513]), np.array([1, 10, 20])
    hold, first = request_level_times(fleet, np.zeros(3, np.int32), prompt, output)
    # k = ceil(L_in/chunk) = 1, 1, 2; hold = (k + L_out) t = n_max * eq.(4); first = (k + 1) t, eq. (5)
    assert hold == pytest.approx(np.array([2, 11, 22]) * t_full)
    assert first == pytest.approx(np.array([2, 2, 3]) * t_full)
    assert np.all(first <= hold)


def test_least_loaded_request_level_needs_identical_pools():
    spec = FleetSpec((pool("a", 4096, w=0.01), pool("b", 65536, w=0.02)), pool_router="least_loaded")
    fleet = compile_fleet(spec)
    with pytest.raises(ConfigError, match="least_loaded at level request"):
        request_level_times(fleet, np.array([-1], np.int32), np.array([10]), np.array([10]))


def test_compile_fleet_arrays():
    spec = FleetSpec((pool("a", 4096, n=2, seqs=8), pool("b", 65536, n=3, seqs=4, router="power_of_two")))
    f = compile_fleet(spec)
    assert f.pool_inst_start.tolist() == [0, 2, 5] and f.pool_inst_start.dtype == np.int32
    assert f.inst_slots.tolist() == [8, 8, 4, 4, 4] and f.inst_pool.tolist() == [0, 0, 1, 1, 1]
    assert f.pool_router.tolist() == [codes.ROUTE_LEAST_OUTSTANDING, codes.ROUTE_POWER_OF_TWO]
    assert f.pool_step_coef.shape == (2, codes.N_STEP_COEFS) and f.pool_step_coef[0, 0] == 0.01
    assert f.pool_max_context.dtype == np.int64 and f.pool_kv_blocks.tolist() == [65536, 65536]


def test_compile_requests_validates_stream():
    spec = FleetSpec((pool("a", 4096),))
    with pytest.raises(ConfigError, match="non-decreasing"):
        compile_requests(spec, np.array([1.0, 0.5]), np.array([1, 1]), np.array([1, 1]), rng())
    with pytest.raises(ConfigError, match="output_tokens >= 1"):
        compile_requests(spec, np.array([0.0, 0.5]), np.array([1, 1]), np.array([1, 0]), rng())
    r = compile_requests(spec, np.array([0.0, 0.5]), np.array([3, 4]), np.array([1, 2]), rng())
    assert r.route_u.shape == (2, 2) and np.all((r.route_u >= 0) & (r.route_u < 1))
    assert r.total_tokens.tolist() == [4, 6]


def test_request_level_times_scale_per_sequence_cost_with_context():
    from fleetplan.hardware import load_catalog
    from fleetplan.sim import build_pool

    a100 = load_catalog().get("a100")
    spec = FleetSpec((build_pool(a100, "short", 1, 4096),))
    fleet = compile_fleet(spec)
    prompt, output = np.array([800, 100]), np.array([200, 50])
    hold, first = request_level_times(fleet, np.zeros(2, np.int32), prompt, output)
    n, chunk = 256, 512  # n_max(4096) on A100; budget 256 + 512 leaves a 512-token chunk
    t = 0.008 + 0.00065 * (prompt + output) / 8192 * n  # W + H (L / L_ref) n, the analytic model's t_iter
    k = -(-prompt // chunk)
    assert hold == pytest.approx((k + output) * t)
    assert first == pytest.approx((k + 1) * t)
