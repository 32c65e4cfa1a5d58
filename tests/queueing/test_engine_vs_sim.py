"""The analytic engine model predicts the simulator it is derived from (one physics).

For single pools of the planner's own construction (``plan.pools.engine_of``: the very instance
the verifier simulates), the simulated P99 TTFT and TPOT over independent replications must lie
within the agreement band of the analytic figures: ratio sim / analytic in [0.75, 1.33]
(the [One physics] target of ±25 %), widened by the replications' 95 % Student-t half-width
(the simulator's own uncertainty).  Cases span the paper's linear constants and the operator
predictor, decode-heavy (lmsys, azure_conv) and prefill-heavy (azure_code) traffic, low and high
load, and a length-routed pool simulated beside its neighbours.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from fleetplan.hardware import load_catalog
from fleetplan.metrics import student_t_interval
from fleetplan.plan.placement import place_model
from fleetplan.plan.points import LengthPoints, pool_points
from fleetplan.plan.pools import engine_of
from fleetplan.plan.space import PoolRange, SizingRouter
from fleetplan.queueing.engine import EngineProfile
from fleetplan.sim import FleetSpec, PoolRouter, build_pool, simulate
from fleetplan.workload import load_workload

pytestmark = pytest.mark.slow

BAND = (0.75, 1.0 / 0.75)
N_REPLICATIONS = 3

# (workload, GPU, model or None, pool range lo-hi or None for one pool, rate, instances)
CASES = [
    ("lmsys", "h100", None, None, 20.0, 1),  # 65,536-token context: 32 slots per instance
    ("lmsys", "h100", None, None, 40.0, 3),
    ("azure_conv", "h100", None, None, 100.0, 2),
    ("azure_code", "a10g", None, None, 100.0, 16),
    ("azure_conv", "l40s", "llama-3.1-8b", None, 100.0, 48),
    ("lmsys", "h100", "llama-3.1-8b", (512, 2048), 100.0, 2),
    ("azure_conv", "h100", "llama-3.1-8b", (0, 1024), 230.0, 2),  # decode batch ~70: prompts arrive ~at random
    ("azure_code", "h200", "qwen3-30b-a3b", (1024, 3072), 60.0, 2),  # MoE, prefill-heavy
    # Slot-bound: max_num_seqs = 10 per instance (KV at 14,089 tokens), the batch often at its cap, where
    # steps are slower than at n*, P99 TTFT ~1.7 s (an M/G/c at h(n*) was 3.6x low on such a pool); 47 req/s
    # with the vLLM profile's MoE layer latency (48 x 0.1 ms a step; 58 req/s without it), rho 0.82
    ("azure_conv", "h100", "qwen3-30b-a3b", (2048, 14089), 47.0, 2),
    ("azure_conv", "a100", None, None, 60.0, 3),  # 74 slots per instance, n* = 57
]


def _setup(wl_name, gpu_name, model, rng, lam, g):
    wl = load_workload(wl_name)
    cat = load_catalog()
    gpu, steps = cat.get(gpu_name), {}
    if model is not None:
        from fleetplan.models.catalog import load_model

        placed = place_model(load_model(model), gpu)[0]
        gpu, steps = placed.gpu, {placed.gpu.name: placed.predictor}
    points = LengthPoints(wl, 512, 16384)
    lo, hi = rng if rng is not None else (0, points.max_tokens)
    sub = pool_points(points, PoolRange(lo, hi, rng is None), SizingRouter.LENGTH, 1.5)
    profile = EngineProfile(engine_of(gpu, hi, steps), np.maximum(sub.prompt_tokens, 1),
                            np.maximum(sub.output_tokens, 1), sub.weight)
    pool = build_pool(gpu, "pool1", g, hi)
    if gpu.name in steps:
        pool = replace(pool, step_model=steps[gpu.name])
    pools = [pool]
    if rng is not None:  # neighbours take the rest of the stream (a length router's sub-stream)
        h100 = cat.get("h100")
        low = [build_pool(h100, "low", 50, lo)] if lo > 0 else []
        pools = [*low, pool, build_pool(h100, "high", 50, 10 * hi)]
    return wl, profile, float(sub.weight.sum()) * lam, FleetSpec(pools=tuple(pools), pool_router=PoolRouter.LENGTH)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2] or 'paper'}-{c[5]}")
def test_simulated_percentiles_fall_in_the_agreement_band(case):
    wl_name, gpu_name, model, rng, lam, g = case
    wl, profile, lam_pool, spec = _setup(wl_name, gpu_name, model, rng, lam, g)
    st = profile.state(lam_pool, [g])
    analytic = {"ttft": profile.ttft_quantile_s(st, 0.99)[0], "tpot": profile.tpot_quantile_s(st, 0.99)[0]}
    n_requests = int(max(30_000, 40 * lam * st.mean_residence_s[0]))
    sims = {"ttft": [], "tpot": []}
    for seed in range(N_REPLICATIONS):
        summary = simulate(spec, wl, lam, n_requests, seed=100 + seed).summary.pool("pool1")
        sims["ttft"].append(summary.ttft.p99_s)
        sims["tpot"].append(summary.tpot.p99_s)
    for key, values in sims.items():
        mean, lo, hi = student_t_interval(values)
        ratio_lo, ratio_hi = lo / analytic[key], hi / analytic[key]
        assert ratio_hi >= BAND[0] and ratio_lo <= BAND[1], (key, analytic[key], values)
