"""The two-sided search of phase 2 (``plan.verify``) on cases whose answer is known by brute force.

One homogeneous pool: every count in a range is simulated exactly as the search simulates it
(``check_pool``: same streams, seeds and pass rule); with common random numbers the pass/fail
pattern over counts is monotone (checked), so the smallest passing count n* is the answer.  The
search must land on n* from an over-sized start (shrinking: the analytic count was too high) and
from an under-sized one (growing), and its numbers must not depend on the order in which an
executor completes tasks.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from fleetplan.hardware import load_catalog
from fleetplan.parallel import serial_map
from fleetplan.plan.optimize import OptimizeRequest, optimize, resolve_gpus
from fleetplan.plan.space import SizingRouter, Topology
from fleetplan.plan.verify import VerifySettings, check_pool, verify_candidate, verify_colocated
from fleetplan.workload import load_workload

SLO_S = 0.5
RATE_PER_S = 60.0
N_REQUESTS = 2_000  # per replication: small, the brute force simulates every count


@pytest.fixture(scope="module")
def case():
    cat = load_catalog()
    req = OptimizeRequest(workload=load_workload("azure_conv"), gpus=resolve_gpus(cat, ["a100"]), slo_ttft_s=SLO_S,
                          rate_per_s=RATE_PER_S, topologies=(Topology.HOMO,), routers=(SizingRouter.LENGTH,))
    cand = optimize(req).recommendation
    vs = VerifySettings(slo_ttft_s=SLO_S, slo_tpot_s=None, rate_per_s=RATE_PER_S, max_gpus=200,
                        n_requests=N_REQUESTS, n_replications=3, seed=1)
    gpus = {g.name: g for g in req.gpus}
    n0 = cand.pools[0].count
    passes = {n: check_pool(cand, 0, n, gpus, req.workload, vs).passes for n in range(1, 2 * n0 + 6)}
    return req, cand, vs, gpus, passes


def _sized(cand, n: int):
    return replace(cand, pools=(replace(cand.pools[0], count=n),))


def _minimal(passes: dict[int, bool]) -> int:
    flips = [n for n in sorted(passes) if passes[n] and not passes.get(n - 1, False)]
    assert len(flips) == 1, f"pass/fail not monotone over counts: {passes}"  # precondition of the brute force
    return flips[0]


def _answer(cand, passes: dict[int, bool]) -> int:
    """The smallest passing count the sizing rules allow: the search never goes below the pool's floor
    (the utilisation cap, stability, spares), whatever the simulator would pass."""
    return max(_minimal(passes), cand.pools[0].floor_count)


def test_search_shrinks_an_oversized_pool_to_the_minimal_passing_count(case):
    req, cand, vs, gpus, passes = case
    n_star = _answer(cand, passes)
    v = verify_candidate(_sized(cand, n_star + 4), gpus, req.workload, vs, req.availability_of)
    assert v.passed and v.verified_counts == (n_star,)
    assert v.pool_direction == ("too_high",) and v.direction == "too_high"


def test_search_grows_an_undersized_pool_to_the_minimal_passing_count(case):
    req, cand, vs, gpus, passes = case
    n_star = _answer(cand, passes)
    assert n_star > 1, "the case needs a pool that fails with one instance"
    v = verify_candidate(_sized(cand, max(1, n_star - 2)), gpus, req.workload, vs, req.availability_of)
    assert v.passed and v.verified_counts == (n_star,)
    assert v.direction == "too_low"


def test_search_from_the_analytic_count(case):
    req, cand, vs, gpus, passes = case
    v = verify_candidate(cand, gpus, req.workload, vs, req.availability_of)
    assert v.verified_counts == (_answer(cand, passes),)
    assert v.at_analytic is not None and v.at_analytic.pools[0] is not None


def test_search_does_not_depend_on_task_completion_order(case):
    """Outcomes arriving in reverse order (as a parallel executor may deliver them) change nothing."""
    req, cand, vs, gpus, _ = case

    def reversed_map(fn, tasks):
        return reversed(list(serial_map(fn, tasks)))

    fleets = [_sized(cand, cand.pools[0].count + 3), cand]
    serial = verify_colocated(fleets, gpus, req.workload, vs, req.availability_of)
    shuffled = verify_colocated(fleets, gpus, req.workload, vs, req.availability_of, map_fn=reversed_map)
    assert repr(serial) == repr(shuffled)


def test_a_shared_pool_is_searched_once(case):
    """Two candidates with the same pool (same traffic, GPU) get the same answer from one search."""
    req, cand, vs, gpus, _ = case
    calls = []

    def counting_map(fn, tasks):
        calls.append(len(tasks))
        return serial_map(fn, tasks)

    one = verify_colocated([cand], gpus, req.workload, vs, req.availability_of, map_fn=counting_map)
    n_one = sum(calls)
    calls.clear()
    two = verify_colocated([cand, replace(cand, rank=cand.rank + 1)], gpus, req.workload, vs, req.availability_of,
                           map_fn=counting_map)
    assert sum(calls) == n_one and two[0].verified_counts == two[1].verified_counts == one[0].verified_counts


def test_new_pool_searches_counts_what_a_verification_would_simulate_anew(case):
    """Before any verification every pool is new; after it, the same pool (same starting count) is
    settled and verifying it again simulates nothing; another starting count is a new search."""
    from fleetplan.plan.verify import new_pool_searches

    req, cand, vs, gpus, _ = case
    searches: dict = {}
    assert new_pool_searches(cand, gpus, searches) == 1
    verify_colocated([cand], gpus, req.workload, vs, req.availability_of, searches=searches)
    assert new_pool_searches(cand, gpus, searches) == 0
    assert new_pool_searches(_sized(cand, cand.pools[0].count + 1), gpus, searches) == 1


def test_verified_cost_floor_uses_settled_counts_and_shrinks_the_rest(case):
    """Unsearched, the floor is the analytic instances shrunk by ``shrink`` (spares left out); once the
    pool is settled it is the verified count's cost, never above the verified fleet's cost."""
    from fleetplan.plan.verify import verified_cost_floor_usd_per_year
    from fleetplan.units import H_PER_YEAR

    req, cand, vs, gpus, _ = case
    p = cand.pools[0]
    per_count = p.gpus_per_instance * p.price_usd_per_h * H_PER_YEAR
    searches: dict = {}
    assert verified_cost_floor_usd_per_year(cand, gpus, searches, 0.1) == pytest.approx(0.9 * p.count * per_count)
    v = verify_colocated([cand], gpus, req.workload, vs, req.availability_of, searches=searches)[0]
    floor = verified_cost_floor_usd_per_year(cand, gpus, searches, 0.1)
    assert floor == pytest.approx(v.verified_counts[0] * per_count)
    assert floor <= v.cost_usd_per_year + 1e-6
