"""Sessions -> kernel rows and extras, and the session metric definitions on hand-built results."""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.sim.builders import build_pool
from fleetplan.sim.session_metrics import release_times, round_frame, session_metrics
from fleetplan.sim.sessions import compile_session_run, simulate_sessions
from fleetplan.sim.spec import FleetSpec, PoolRouter
from fleetplan.workload.rollouts import OutputLengths, RlRollout
from fleetplan.workload.session_io import load_session_workload
from fleetplan.workload.session_table import SessionTable, ToolDelay
from fleetplan.workload.sessions import SessionTemplate, SessionWorkload


def two_pools(router: PoolRouter = PoolRouter.LENGTH) -> FleetSpec:
    a100 = load_catalog().get("a100")
    return FleetSpec(pools=(build_pool(a100, "short", 2, 8192), build_pool(a100, "long", 2, 65536)),
                     pool_router=router)


def frontier_table(n: int = 40, seed: int = 0) -> SessionTable:
    w = load_session_workload("frontier_agentic", tool_delay=ToolDelay("exponential", 1.0))
    return w.sample(np.random.default_rng(seed), n, 0.5)


def test_prompt_is_the_cumulative_context_and_prev_links_rounds():
    table = frontier_table()
    run = compile_session_run(two_pools(), table, seed=3)
    r, x = run.requests, run.extras
    for s in range(table.n_sessions):
        rows = np.flatnonzero(table.session == s)
        context = 0
        for k, i in enumerate(rows):
            assert r.prompt_tokens[i] == context + table.new_prompt_tokens[i]
            assert x.prefix_tokens[i, 1] == context and x.prefix_tokens[i, 0] == 0
            assert x.prev_req[i] == (-1 if k == 0 else i - 1)
            assert x.new_tokens[i] == table.new_prompt_tokens[i]
            assert r.arrival_s[i] == table.session_arrival_s[rows[0]]
            context = r.prompt_tokens[i] + r.output_tokens[i]
    assert np.array_equal(x.delay_s, table.delay_s) and x.n_sessions == table.n_sessions
    assert np.all(np.diff(r.arrival_s) >= 0)


def test_one_pool_per_session_by_the_length_rule_on_its_largest_round():
    table = frontier_table(200)
    run = compile_session_run(two_pools(), table, seed=1)
    pools = run.requests.req_pool
    for s in range(table.n_sessions):
        rows = table.session == s
        assert np.unique(pools[rows]).size == 1
        final_total = run.requests.prompt_tokens[rows][-1] + run.requests.output_tokens[rows][-1]
        assert pools[rows][0] == (0 if final_total <= 8192 else 1)  # short final context 6880, heavy 62176
    assert set(np.unique(pools)) == {0, 1}


def test_prefix_keys_never_collide_between_sessions_and_system_prompts():
    tpl = (SessionTemplate("a", ((100, 10), (20, 5)), tool_delay=ToolDelay("fixed", 0.1), system_prompt="p",
                           system_tokens=256),
           SessionTemplate("b", ((100, 10),), system_prompt="q", system_tokens=512),
           SessionTemplate("c", ((50, 10),)))
    table = SessionWorkload("w", tpl, (1, 1, 1)).sample(np.random.default_rng(0), 300, 1.0)
    x = compile_session_run(two_pools(), table, seed=0).extras
    key0, key1 = x.prefix_key[:, 0], x.prefix_key[:, 1]
    assert set(np.unique(key0)) == {-1, 0, 1}
    assert not set(key1) & set(key0[key0 >= 0])
    first = table.round_index == 0
    assert np.unique(key1[first]).size == table.n_sessions  # one key per session
    assert all(np.unique(key1[table.session == s]).size == 1 for s in range(20))
    assert np.array_equal(x.prefix_tokens[:, 0], table.system_tokens)
    assert np.all(x.prefix_tokens[:, 0] <= x.prefix_tokens[:, 1])
    assert np.all(x.prefix_tokens[:, 1] <= compile_session_run(two_pools(), table, 0).requests.prompt_tokens)


def test_routing_is_reproducible_and_compress_is_refused():
    table = frontier_table()
    a = compile_session_run(two_pools(PoolRouter.RANDOM), table, seed=5).requests
    b = compile_session_run(two_pools(PoolRouter.RANDOM), table, seed=5).requests
    assert np.array_equal(a.route_u, b.route_u) and np.array_equal(a.req_pool, b.req_pool)
    with pytest.raises(ConfigError, match="compress_and_route .* use pool_router length"):
        compile_session_run(two_pools(PoolRouter.COMPRESS_AND_ROUTE), table, seed=5)


def hand_table() -> SessionTable:
    """Two 2-round sessions (arrivals 0 and 1 s, delays 0.5 and 0.25 s) and one 1-round session at 2 s."""
    return SessionTable(
        session=[0, 0, 1, 1, 2], round_index=[0, 1, 0, 1, 0], is_final=[False, True, False, True, True],
        new_prompt_tokens=[100, 20, 100, 20, 50], output_tokens=[10, 5, 10, 1, 3], delay_s=[0, 0.5, 0, 0.25, 0],
        system_prompt_id=[-1] * 5, system_tokens=[0] * 5, session_arrival_s=[0, 0, 1, 1, 2], template=[0] * 5,
        template_names=("t",), burst=[-1] * 5,
    )


def frame(first_token_s, done_s, status, prompt=(0,) * 5) -> pd.DataFrame:
    return pd.DataFrame({"first_token_s": first_token_s, "done_s": done_s, "status": status,
                         "prompt_tokens": prompt})


def test_metric_definitions_on_known_times():
    t = hand_table()
    # session 0: r0 first token 0.2, done 1.0; r1 released 1.5, first token 1.9, done 2.3
    # session 1: r0 1.3 / 2.0; r1 released 2.25, first token 2.5, done 2.5 (one-token answer)
    # session 2: 2.4 / 3.0
    f = frame([0.2, 1.9, 1.3, 2.5, 2.4], [1.0, 2.3, 2.0, 2.5, 3.0], ["done"] * 5)
    assert np.allclose(release_times(t, f["done_s"].to_numpy()), [0, 1.5, 1, 2.25, 2])
    m = session_metrics(f, t, warmup_fraction=0.0)
    attft = np.array([1.9 - 0, 2.5 - 1, 2.4 - 2])
    assert m.n_finished == 3 and math.isclose(m.attft.mean_s, attft.mean())
    assert math.isclose(m.attft.p50_s, 1.5) and math.isclose(m.attft.p99_s, 1.9)
    assert m.atpot.n == 2 and math.isclose(m.atpot.mean_s, ((2.3 - 1.9) / 4 + (3.0 - 2.4) / 2) / 2)
    r1, r2 = m.round_ttft
    assert (r1.round_number, r2.round_number) == (1, 2)
    assert math.isclose(r1.ttft.mean_s, (0.2 + 0.3 + 0.4) / 3)
    assert math.isclose(r2.ttft.mean_s, ((1.9 - 1.5) + (2.5 - 2.25)) / 2)
    # hidden: round 1 of sessions 0 and 1, (100 + 10) tokens each, over 0 -> 3.0 s
    assert (m.hidden_prompt_tokens, m.hidden_output_tokens) == (200, 20)
    assert math.isclose(m.hidden_span_s, 3.0) and math.isclose(m.hidden_tokens_per_s, 220 / 3.0)
    assert m.bursts == ()
    rows = round_frame(f, t)
    assert np.allclose(rows["round_ttft_s"], [0.2, 0.4, 0.3, 0.25, 0.4])


def test_warmup_and_unfinished_sessions_count_as_infinite():
    t = hand_table()
    f = frame([0.2, 1.9, 1.3, np.inf, 2.4], [1.0, 2.3, 2.0, np.inf, 3.0], ["done", "done", "done", "unfinished",
                                                                         "done"])
    m = session_metrics(f, t, warmup_fraction=0.34)  # floor(0.34 * 3) = 1 session of warm-up
    assert (m.n_warmup_sessions, m.n_measured, m.n_finished) == (1, 2, 1)
    assert m.attft.p99_s == math.inf and math.isclose(m.attft.p50_s, 0.4)
    assert m.round_ttft[1].ttft.p50_s == math.inf
    assert (m.hidden_prompt_tokens, m.hidden_output_tokens) == (100, 10)  # session 1's round 1 only


def test_a_rejected_round_leaves_its_session_unreleased_and_counted_rejected():
    """Session 0's first round is rejected: its second round is never released (release inf),
    both count as infinite, the session as rejected; no inf - inf warnings on the way."""
    t = hand_table()
    f = frame([np.nan, np.nan, 1.3, 2.5, 2.4], [np.nan, np.nan, 2.0, 2.5, 3.0],
              ["rejected", "unfinished", "done", "done", "done"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = session_metrics(f, t)
        rows = round_frame(f, t)
    assert (m.n_measured, m.n_finished, m.n_rejected) == (3, 2, 1)
    assert m.attft.p99_s == math.inf and m.round_ttft[1].ttft.p99_s == math.inf
    assert rows["release_s"][1] == math.inf
    assert np.allclose(rows["round_ttft_s"].to_numpy(), [np.inf, np.inf, 0.3, 0.25, 0.4])


def test_burst_makespan_and_tail_share():
    r = RlRollout(n_trajectories=10, n_bursts=2, burst_interval_s=100.0, prompt_tokens=10,
                  output=OutputLengths("pareto", 10, 2.0, 100))
    t = r.sample(np.random.default_rng(0))
    done = np.concatenate([np.arange(1.0, 11.0), 100.0 + np.array([1, 1, 1, 1, 1, 1, 1, 1, 2, 20.0])])
    m = session_metrics(frame(done - 0.5, done, ["done"] * 20, (0,) * 20), t)
    b0, b1 = m.bursts
    assert (b0.release_s, b0.makespan_s, b0.t90_s) == (0.0, 10.0, 9.0) and math.isclose(b0.tail_share, 0.1)
    assert (b1.release_s, b1.makespan_s, b1.t90_s) == (100.0, 20.0, 2.0) and math.isclose(b1.tail_share, 0.9)
    status = ["done"] * 19 + ["unfinished"]
    m = session_metrics(frame(done - 0.5, np.where(np.arange(20) < 19, done, np.inf), status, (0,) * 20), t)
    assert m.bursts[1].makespan_s == math.inf and math.isnan(m.bursts[1].tail_share) and m.bursts[1].n_finished == 9


def test_simulated_sessions_respect_release_and_affinity():
    table = frontier_table(60, seed=4)
    res = simulate_sessions(two_pools(), table, seed=2, warmup_fraction=0.0)
    req = res.sim.requests
    done = req["status"].to_numpy() == "done"
    assert done.all()
    release = release_times(table, req["done_s"].to_numpy())
    assert np.all(req["first_sched_s"].to_numpy() >= release - 1e-12)
    inst = req["instance"].to_numpy()
    assert all(np.unique(inst[table.session == s]).size == 1 for s in range(table.n_sessions))
    m = res.metrics
    assert m.n_finished == 60 and m.attft.p50_s > 0 and m.hidden_tokens_per_s > 0
    again = simulate_sessions(two_pools(), dataclasses.replace(table), seed=2, warmup_fraction=0.0)
    assert again.metrics.to_json_dict() == m.to_json_dict()


def test_kernel_releases_rounds_as_the_metrics_assume():
    from fleetplan.sim.features.compile import no_features
    from fleetplan.sim.features.run import run_features

    table = frontier_table(20, seed=4)
    run = compile_session_run(two_pools(), table, seed=2)
    out = run_features(run.fleet, run.requests, no_features(2), run.extras, run.horizon_s)
    assert np.all(out["status"] == 0)
    assert np.array_equal(release_times(table, out["done_s"]), out["release_s"])  # same rule, bit for bit
    assert np.all(out["first_sched_s"] >= out["release_s"])
    assert all(np.unique(out["inst"][table.session == s]).size == 1 for s in range(table.n_sessions))


def test_later_rounds_hit_the_previous_context_with_prefix_caching():
    from fleetplan.sim.features import PrefixCacheConfig, RuntimeFeatures

    spec = two_pools()
    on = RuntimeFeatures(prefix_cache=PrefixCacheConfig(True))
    spec = dataclasses.replace(spec, pools=tuple(dataclasses.replace(p, features=on) for p in spec.pools))
    table = frontier_table(20, seed=6)  # 0.5 sessions/s on 4 instances: no eviction pressure
    res = simulate_sessions(spec, table, seed=1, warmup_fraction=0.0)
    req = res.sim.requests
    block = spec.pools[0].limits.block_size_tokens
    _, previous = table.context_tokens()
    later = table.round_index > 0
    # every full block the previous round computed is a hit: its prompt and all output tokens but the last
    # (the last sampled token is never fed back, so its KV does not exist; vLLM the same)
    assert np.array_equal(req["cached_tokens"].to_numpy()[later], ((previous[later] - 1) // block) * block)
    assert np.all(req["cached_tokens"].to_numpy()[~later] == 0)
    assert np.allclose(req["release_s"].to_numpy(), release_times(table, req["done_s"].to_numpy()))
