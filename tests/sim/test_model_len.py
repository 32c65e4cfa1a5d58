"""The served model's max_model_len in the simulator: pools capped, longer requests rejected as vLLM
rejects them (never squeezed), counted with their token share and left out of the percentiles."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from fleetplan.errors import ConfigError
from fleetplan.perf.linear import LinearStepModel
from fleetplan.sim.engine import simulate
from fleetplan.sim.spec import FleetSpec, PoolRouter, PoolSpec, SchedulerLimits
from tests.sim.test_api_engine import UniformLengths

STEP = LinearStepModel(0.01, 0.001, 1e-4)
LIMIT = 4096


def fleet(router: PoolRouter = PoolRouter.LENGTH, limit: int | None = LIMIT) -> FleetSpec:
    return FleetSpec((
        PoolSpec("short", "a100", 2, 1024, STEP, SchedulerLimits(16, 512, 65536)),
        PoolSpec("long", "a100", 2, 4096, STEP, SchedulerLimits(8, 512, 65536)),
    ), pool_router=router, max_model_len_tokens=limit)


def test_a_pool_longer_than_the_model_limit_is_refused_with_the_fix():
    with pytest.raises(ConfigError, match=r"pool 'long': max_context_tokens = 4,096 exceeds .* max_model_len 2,048"):
        fleet(limit=2048)


@pytest.mark.parametrize("router", [PoolRouter.LENGTH, PoolRouter.COMPRESS_AND_ROUTE])
def test_too_long_requests_are_counted_and_left_out_of_the_percentiles(router):
    # Totals up to 5000: about 8 % exceed 4096, far above the 1 % that would make P99 inf.
    res = simulate(fleet(router), UniformLengths(3500, 1500), 20.0, n_requests=3000, level="iteration", seed=5)
    df = res.requests[~res.requests["warmup"]]
    total = df["original_prompt_tokens"] + df["output_tokens"]
    too_long = total > LIMIT
    o = res.summary.overall
    assert too_long.mean() > 0.02
    assert (df.loc[too_long, "status"] == "rejected").all()
    # never squeezed by compress-and-route: the served prompt is the original one
    assert (df.loc[too_long, "prompt_tokens"] == df.loc[too_long, "original_prompt_tokens"]).all()
    assert o.n_too_long == int(too_long.sum()) == o.n_rejected
    assert o.too_long_token_share == pytest.approx(total[too_long].sum() / total.sum())
    assert math.isfinite(o.ttft.p99_s) and math.isfinite(o.e2e.p99_s)
    assert o.ttft.n == o.n_requests - o.n_too_long
    assert sum(p.n_too_long for p in res.summary.pools) == o.n_too_long


def test_without_a_model_limit_rejections_stay_infinite():
    res = simulate(fleet(limit=None), UniformLengths(3500, 1500), 20.0, n_requests=3000, level="iteration", seed=5)
    o = res.summary.overall
    assert o.n_too_long == 0 and o.n_rejected / o.n_requests > 0.01 and math.isinf(o.ttft.p99_s)


def test_compress_and_route_still_squeezes_requests_within_the_limit():
    spec = replace(fleet(PoolRouter.COMPRESS_AND_ROUTE), compress_gamma=1.5)
    res = simulate(spec, UniformLengths(1400, 100), 5.0, n_requests=500, level="iteration", seed=1)
    df = res.requests
    squeezed = df["prompt_tokens"] < df["original_prompt_tokens"]
    assert squeezed.any() and (df.loc[squeezed, "pool"] == "short").all()
    assert np.all(df.loc[squeezed, "prompt_tokens"] + df.loc[squeezed, "output_tokens"] == 1024)


def test_pdd_counts_too_long_requests_out_of_the_percentiles_and_caps_both_pools():
    from fleetplan.sim.pdd import PddSpec, simulate_pdd

    pf = PoolSpec("prefill", "a100", 2, LIMIT, STEP, SchedulerLimits(8, 2048, 65536))
    dec = PoolSpec("decode", "a100", 2, LIMIT, STEP, SchedulerLimits(32, 512, 65536))
    with pytest.raises(ConfigError, match="decode pool: max_context_tokens = 4,096 exceeds .* 2,048"):
        PddSpec(replace(pf, max_context_tokens=2048), dec, max_model_len_tokens=2048)
    res = simulate_pdd(PddSpec(pf, dec, max_model_len_tokens=LIMIT), UniformLengths(3500, 1500), 5.0, 2000, 5)
    df = res.requests[~res.requests["warmup"]]
    total = df["prompt_tokens"] + df["output_tokens"]
    s = res.summary
    assert (total > LIMIT).mean() > 0.02 and s.n_too_long == int((total > LIMIT).sum())
    assert (df.loc[total > LIMIT, "status"] == "rejected").all()
    assert s.too_long_token_share == pytest.approx(total[total > LIMIT].sum() / total.sum())
    assert math.isfinite(s.ttft.p99_s) and s.ttft.n == len(df) - s.n_too_long
