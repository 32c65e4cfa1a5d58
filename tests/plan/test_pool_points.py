"""Pool request points keep the workload's conditional moments, and the sweep lists each fleet once.

The analytic engine model's operating point (decode batch n = λ E[d] t̄) is linear in the pool's
mean output, so a pool's points must carry E[prompt | range] and E[output | range] of the workload
itself.  Reference: a Monte-Carlo sample of 400,000 requests from the same workload (its standard
error of the mean is below 0.5 % on every range tested), tolerance 2 %.
"""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.hardware import load_catalog
from fleetplan.plan.optimize import OptimizeRequest, optimize, resolve_gpus
from fleetplan.plan.points import LengthPoints, pool_points
from fleetplan.plan.space import PoolRange, SizingRouter
from fleetplan.workload import load_workload

RANGES = [(0, 1024), (1024, 2048), (2048, 4096), (4096, None)]


@pytest.mark.parametrize("name", ["azure_conv", "azure_code", "lmsys"])
def test_pool_points_keep_conditional_means(name):
    wl = load_workload(name)
    points = LengthPoints(wl, 512, 16384)
    prompt, output = wl.sample(np.random.default_rng(1), 400_000)[:2]
    total = prompt + output
    for lo, hi in RANGES:
        last = hi is None
        hi_tokens = points.max_tokens if last else hi
        sub = pool_points(points, PoolRange(lo, hi_tokens, last), SizingRouter.LENGTH, 1.5)
        mask = (total > lo) & (total <= hi_tokens)
        if mask.sum() < 2_000:
            continue
        w = sub.weight / sub.weight.sum()
        assert float(w @ sub.output_tokens) == pytest.approx(output[mask].mean(), rel=0.02), (lo, hi)
        assert float(w @ sub.prompt_tokens) == pytest.approx(prompt[mask].mean(), rel=0.02), (lo, hi)
        assert float(sub.weight.sum()) == pytest.approx(mask.mean(), abs=0.003), (lo, hi)


def test_sweep_lists_each_fleet_once():
    """Layouts differing only in a pool no request reaches (a threshold above the longest
    request, any GPU named for it) build one fleet and appear once."""
    catalog = load_catalog()
    result = optimize(OptimizeRequest(workload=load_workload("azure_code"),
                                      gpus=resolve_gpus(catalog, ("h100", "a100", "a10g")),
                                      slo_ttft_s=0.5, rate_per_s=100.0), verify=None)
    keys = [c.fleet_key() for c in result.candidates]
    assert len(keys) == len(set(keys))
