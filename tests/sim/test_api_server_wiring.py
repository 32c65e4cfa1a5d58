"""The API server stage wired into the simulator (``fleetplan.sim.api_server.with_api_servers``): requests
reach the engine at their release, latencies run from the drawn arrival, rows come back in drawn order,
and a fleet without an API server cost is compiled exactly as before."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fleetplan.errors import ConfigError
from fleetplan.perf.overheads import PredictorOptions
from fleetplan.sim.api_server import with_api_servers
from fleetplan.sim.compile import CompiledRun, compile_fleet, compile_requests, compile_run
from fleetplan.sim.engine import run_compiled, simulate
from fleetplan.sim.features import RuntimeFeatures
from fleetplan.sim.spec import FleetSpec, PoolRouter
from fleetplan.sim.split import simulate_pools_parallel
from tests.sim.test_features_spec_compile import linear_pool, predictor_pool
from tests.sim.test_features_validation import FixedLengths

S_PER_REQUEST, S_PER_TOKEN = 0.5, 1e-3  # large on purpose: the stage dominates and is worked by hand


def _pool(s_per_request: float = S_PER_REQUEST, s_per_token: float = S_PER_TOKEN, n_api_servers: int = 1):
    pool = predictor_pool(RuntimeFeatures())
    options = PredictorOptions(api_server_s_per_request=s_per_request, api_server_s_per_token=s_per_token)
    return dataclasses.replace(pool, step_model=dataclasses.replace(pool.step_model, options=options),
                               n_api_servers=n_api_servers)


def _frame(pool, arrival_s, prompt, output):
    spec = FleetSpec(pools=(pool,))
    requests = compile_requests(spec, np.asarray(arrival_s, dtype=float), np.asarray(prompt), np.asarray(output),
                                np.random.default_rng(0))
    run = with_api_servers(spec, CompiledRun(fleet=compile_fleet(spec), requests=requests, horizon_s=np.inf))
    return run, run_compiled(spec, run, "iteration", 1.0, warmup_fraction=0.0).requests


def _alone(prompt: int, output: int):
    """TTFT, E2E and queue wait (s) of one request alone on the engine without an API server cost."""
    _, frame = _frame(_pool(0.0, 0.0), [0.0], [prompt], [output])
    return frame.loc[0, ["ttft_s", "e2e_s", "queue_wait_s"]].to_numpy(dtype=float)


def test_three_requests_by_hand_ttft_includes_the_stages_wait_and_tokenisation():
    """One process, t_api = 0.5 + 1e-3 (100 + 4) = 0.604 s, tokenisation 0.1 s; arrivals 0, 0.1, 0.2:
    starts 0, 0.604, 1.208; releases 0.1, 0.704, 1.308 -> wait + tokenisation 0.1, 0.604, 1.108 s.  The
    releases are 0.6 s apart, far more than one request's engine time, so each runs alone."""
    run, frame = _frame(_pool(), [0.0, 0.1, 0.2], [100] * 3, [4] * 3)
    ttft0, e2e0, wait0 = _alone(100, 4)
    stage = np.array([0.1, 0.604, 1.108])
    assert run.requests.arrival_s.tolist() == pytest.approx([0.1, 0.704, 1.308])  # the engine's arrivals
    assert frame["arrival_s"].tolist() == [0.0, 0.1, 0.2]
    assert frame["ttft_s"].to_numpy() == pytest.approx(stage + ttft0, abs=1e-12)
    assert frame["e2e_s"].to_numpy() == pytest.approx(stage + e2e0, abs=1e-12)
    assert frame["queue_wait_s"].to_numpy() == pytest.approx(stage + wait0, abs=1e-12)
    assert frame["tpot_s"].to_numpy() == pytest.approx(np.full(3, (e2e0 - ttft0) / 3), abs=1e-12)


def test_a_long_prompt_overtaken_in_the_stage_comes_back_in_drawn_order():
    """Two processes; prompts 400, 100, 100 at 0, 0.1, 0.2 (t_api 0.904, 0.604, 0.604): request 0 is
    released at 0.4, request 1 at 0.2 (it overtakes), request 2 waits for request 1's process (free at
    0.704) and is released at 0.804.  The kernel runs 1, 0, 2; the rows come back as 0, 1, 2."""
    run, frame = _frame(_pool(n_api_servers=2), [0.0, 0.1, 0.2], [400, 100, 100], [4, 4, 4])
    assert run.api_stage.order.tolist() == [1, 0, 2]
    assert run.requests.arrival_s.tolist() == pytest.approx([0.2, 0.4, 0.804])
    long_ttft, _, _ = _alone(400, 4)
    short_ttft, _, _ = _alone(100, 4)
    assert frame["prompt_tokens"].tolist() == [400, 100, 100]
    assert frame["request_id"].tolist() == [0, 1, 2]
    assert frame["ttft_s"].to_numpy() == pytest.approx([0.4 + long_ttft, 0.1 + short_ttft, 0.604 + short_ttft],
                                                      abs=1e-12)


def test_fleet_without_api_cost_compiles_exactly_as_drawn():
    """No pool with a modelled cost: no stage, the drawn arrivals go to the kernel untouched."""
    spec = FleetSpec(pools=(linear_pool("a"), _pool(0.0, 0.0)))
    run = compile_run(spec, FixedLengths(200, 20), 50.0, 300, seed=2)
    assert run.api_stage is None
    assert np.all(np.diff(run.requests.arrival_s) >= 0)


@pytest.mark.parametrize("level", ["iteration", "request"])
def test_simulate_measures_from_the_drawn_arrival_and_keeps_the_warmup_in_arrival_order(level):
    """Poisson arrivals at 1.5 req/s into one process of 0.5 s + tokens (ρ 0.9): every TTFT is at least
    the tokenisation above the engine's fastest, the rows are in arrival order and the warm-up is the
    first 10 % of arrivals."""
    spec = FleetSpec(pools=(_pool(n_api_servers=1),))
    staged = simulate(spec, FixedLengths(100, 8), 1.5, 200, level=level, seed=4).requests
    plain = simulate(FleetSpec(pools=(_pool(0.0, 0.0),)), FixedLengths(100, 8), 1.5, 200, level=level,
                     seed=4).requests
    assert staged["arrival_s"].tolist() == plain["arrival_s"].tolist()  # the same draws, in drawn order
    assert staged["warmup"].tolist() == plain["warmup"].tolist()
    assert np.all(staged["ttft_s"] >= plain["ttft_s"].min() + 100 * S_PER_TOKEN - 1e-12)
    assert staged["release_s"].tolist() == staged["arrival_s"].tolist()  # latencies start at the drawn arrival


def test_pool_split_equals_simulate_with_the_stage():
    """The per-pool split (stateless router) merges the staged run exactly as simulate."""
    spec = FleetSpec(pools=(_pool(n_api_servers=2), linear_pool("lin")),
                     pool_router=PoolRouter.ROUND_ROBIN)
    one = simulate(spec, FixedLengths(100, 8), 4.0, 300, seed=1).requests
    split = simulate_pools_parallel(spec, FixedLengths(100, 8), 4.0, 300, seed=1).requests
    assert one.equals(split)


def test_n_api_servers_is_checked_on_the_pool():
    with pytest.raises(ConfigError, match="n_api_servers = 0 must be an integer >= 1") as err:
        _pool(n_api_servers=0)
    assert err.value.param == "n_api_servers"


def test_steady_pool_run_pays_the_stage_from_the_drawn_arrival():
    """Verification's steady-state pool run (``sim.steady.simulate_pool``) puts its stream through the same
    stage: with a cost (10 ms + 0.1 ms/token, one process: utilisation 0.42 at 20 req/s), the P99 TTFT is
    longer than the no-cost run's by at least a prompt's tokenisation (100 x 0.1 ms)."""
    from fleetplan.sim.steady import simulate_pool

    wl = FixedLengths(100, 8)
    costly = simulate_pool(FleetSpec(pools=(_pool(0.01, 1e-4),)), 0, wl, 20.0, 2000, seed=3)
    free = simulate_pool(FleetSpec(pools=(_pool(0.0, 0.0),)), 0, wl, 20.0, 2000, seed=3)
    assert costly.n_requests == free.n_requests
    assert costly.p_ttft_s >= free.p_ttft_s + 100 * 1e-4
