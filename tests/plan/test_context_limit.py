"""The served model's max_model_len in phase 1: no pool reaches past it, longer requests are
rejected (sized into no pool) and their request and token shares are reported exactly."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.plan.context_limit import rejected_traffic
from fleetplan.plan.optimize import OptimizeRequest, analytical_phase
from fleetplan.plan.points import LengthPoints
from fleetplan.plan.space import SizingRouter, Topology
from fleetplan.workload import load_workload

LIMIT = 131_072  # Llama-3.1's max_position_embeddings


@pytest.fixture(scope="module")
def agents():
    return load_workload("agent_heavy")


def request(workload, limit, routers=(SizingRouter.LENGTH, SizingRouter.COMPRESS)):
    gpus = (load_catalog().get("h100"),)
    return OptimizeRequest(workload=workload, gpus=gpus, slo_ttft_s=5.0, rate_per_s=20.0, routers=routers,
                           topologies=(Topology.HOMO, Topology.TWO_POOL, Topology.MULTI_POOL),
                           thresholds_tokens=(4096, 65536, 100_000, 200_000), max_model_len_tokens=limit)


def test_rejected_shares_match_a_large_sample_of_the_workload(agents):
    assert agents.total.max_tokens > LIMIT  # the workload really has longer requests
    r = rejected_traffic(agents, LIMIT)
    totals = agents.total.sample(np.random.default_rng(0), 2_000_000).astype(np.float64)
    above = totals > LIMIT
    # Binomial standard error of the share: sqrt(p (1 - p) / n) ~ 3e-5 here; 5 sigma.
    assert r.request_share == pytest.approx(above.mean(), abs=5 * np.sqrt(r.request_share / totals.size))
    assert r.token_share == pytest.approx(totals[above].sum() / totals.sum(), rel=0.03)
    assert 0 < r.request_share < r.token_share < 1  # the long tail carries more tokens than requests


def test_no_limit_rejects_nothing_and_a_limit_below_every_request_is_refused(agents):
    assert rejected_traffic(agents, None).request_share == 0.0
    with pytest.raises(ConfigError, match="every request"):
        rejected_traffic(agents, 1)


def test_points_stop_at_the_limit(agents):
    free = LengthPoints(agents, 256, 4096)
    capped = LengthPoints(agents, 256, 4096, LIMIT)
    assert free.max_tokens > LIMIT and capped.max_tokens == LIMIT
    served = capped.between(0, np.inf)
    assert served.total_tokens.max() <= LIMIT
    assert served.weight.sum() == pytest.approx(1 - rejected_traffic(agents, LIMIT).request_share, abs=1e-9)
    assert capped.mean_total_tokens < free.mean_total_tokens


def test_every_pool_ends_at_or_below_the_limit_and_shares_sum_to_the_served_share(agents):
    served = 1 - rejected_traffic(agents, LIMIT).request_share
    cands = analytical_phase(request(agents, LIMIT))
    assert cands
    for c in cands:
        assert c.pools[-1].hi_tokens == LIMIT and all(p.hi_tokens <= LIMIT for p in c.pools)
        assert 200_000 not in c.thresholds_tokens  # a split above the limit is no candidate
        # compress-and-route never squeezes a request above the limit into a pool
        assert sum(p.traffic_share for p in c.pools) == pytest.approx(served, abs=1e-6), c.key()


def test_without_a_limit_the_last_pool_holds_the_longest_request(agents):
    for c in analytical_phase(request(agents, None, routers=(SizingRouter.LENGTH,))):
        assert c.pools[-1].hi_tokens > LIMIT
        assert sum(p.traffic_share for p in c.pools) == pytest.approx(1.0, abs=1e-6)
