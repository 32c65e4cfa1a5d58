"""``simulate`` / ``replicate``: hand-computed latencies, invariants, validation, replications."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from fleetplan.errors import ConfigError
from fleetplan.perf.linear import LinearStepModel
from fleetplan.rng import task_seed
from fleetplan.sim.engine import simulate
from fleetplan.sim.replications import replicate
from fleetplan.sim.spec import FleetSpec, PoolSpec, SchedulerLimits
from fleetplan.workload import load_workload

W_S, H_S, PREFILL_S_PER_TOKEN = 0.01, 0.001, 1e-4


@dataclass(frozen=True)
class FixedLengths:
    """Every request has the same prompt and output length."""

    prompt_tokens: int
    output_tokens: int
    name: str = "fixed"
    trace: None = None

    def sample(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        return np.full(n, self.prompt_tokens, np.int64), np.full(n, self.output_tokens, np.int64)


@dataclass(frozen=True)
class UniformLengths:
    max_prompt_tokens: int
    max_output_tokens: int
    name: str = "uniform"
    trace: None = None

    def sample(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        return (rng.integers(1, self.max_prompt_tokens + 1, n).astype(np.int64),
                rng.integers(1, self.max_output_tokens + 1, n).astype(np.int64))


def one_pool(seqs: int = 4, n: int = 1, ctx: int = 4096) -> FleetSpec:
    step = LinearStepModel(W_S, H_S, PREFILL_S_PER_TOKEN)
    return FleetSpec((PoolSpec("p", "a100", n, ctx, step, SchedulerLimits(seqs, 512, 65536)),))


def two_pools() -> FleetSpec:
    step = LinearStepModel(W_S, H_S, PREFILL_S_PER_TOKEN)
    return FleetSpec((
        PoolSpec("short", "a100", 2, 1024, step, SchedulerLimits(16, 512, 65536)),
        PoolSpec("long", "a100", 2, 4096, step, SchedulerLimits(8, 512, 65536)),
    ))


def test_request_level_tpot_hand_computed():
    # Isolated requests (0.01 req/s, 4 slots): no queueing.  k = ceil(100/512) = 1,
    # t = t_iter(4) = W + 4H.  TTFT = (k+1) t (eq. 5), E2E = (k + L_out) t, so
    # TPOT = (E2E - TTFT) / (L_out - 1) = (11 - 1) t / 10 = t.
    res = simulate(one_pool(seqs=4), FixedLengths(100, 11), 0.01, n_requests=5, level="request",
                   warmup_fraction=0.0)
    t = W_S + 4 * H_S
    df = res.requests
    assert np.allclose(df["ttft_s"], 2 * t) and np.allclose(df["e2e_s"], 12 * t)
    assert np.allclose(df["tpot_s"], t) and np.allclose(df["queue_wait_s"], 0.0)
    assert res.summary.overall.tpot.p99_s == pytest.approx(t)


def test_iteration_level_tpot_hand_computed():
    # One request alone: a prefill step W + H*1 + 100 * c_prefill emits token 1, then
    # 10 decode steps of W + H each.  TPOT = (E2E - TTFT) / 10 = W + H.
    res = simulate(one_pool(), FixedLengths(100, 11), 0.01, n_requests=4, level="iteration",
                   warmup_fraction=0.0)
    ttft = W_S + H_S + 100 * PREFILL_S_PER_TOKEN
    df = res.requests
    assert np.allclose(df["ttft_s"], ttft)
    assert np.allclose(df["e2e_s"], ttft + 10 * (W_S + H_S))
    assert np.allclose(df["tpot_s"], W_S + H_S)
    assert (df["status"] == "done").all() and (df["preemptions"] == 0).all()


@pytest.mark.parametrize("level", ["request", "iteration"])
def test_invariants_and_length_routing(level):
    spec = two_pools()
    res = simulate(spec, UniformLengths(3000, 1500), 40.0, n_requests=3000, level=level, seed=3)
    df = res.requests
    total = df["prompt_tokens"] + df["output_tokens"]
    o = res.summary.overall
    assert len(df) == 3000 and o.n_done + o.n_unfinished + o.n_rejected == o.n_requests == 2700
    # length routing: smallest fitting pool; totals over 4096 fit nowhere and are rejected
    assert (df.loc[total <= 1024, "pool"] == "short").all()
    assert (df.loc[(total > 1024) & (total <= 4096), "pool"] == "long").all()
    assert (df.loc[total > 4096, "status"] == "rejected").all()
    assert (df.loc[total <= 4096, "status"] == "done").all()
    done = df[df["status"] == "done"]
    assert (done["queue_wait_s"] >= 0).all() and (done["queue_wait_s"] <= done["ttft_s"] + 1e-12).all()
    assert (done["ttft_s"] <= done["e2e_s"] + 1e-12).all()
    rejected = df[df["status"] == "rejected"]
    assert np.isinf(rejected["ttft_s"]).all() and np.isinf(rejected["e2e_s"]).all()
    assert o.n_rejected > 0 and math.isinf(o.ttft.p99_s) is (o.n_rejected / o.n_requests > 0.01)
    assert all(0 <= u <= 1 for u in o.instance_utilisation) and len(o.instance_utilisation) == 4


def test_horizon_leaves_unfinished_requests_at_inf():
    # 1 slot, 8 req/s, service 12 t = 12 (W + H) = 0.132 s: rho = 1.06, so a 20 s horizon
    # strands requests.  A request started before the horizon may finish after it.
    res = simulate(one_pool(seqs=1), FixedLengths(100, 11), 8.0, n_requests=400, level="request",
                   horizon_s=20.0)
    o = res.summary.overall
    df = res.requests
    assert o.n_unfinished > 0 and math.isinf(o.ttft.p99_s) and math.isinf(o.e2e.p99_s)
    assert (df.loc[df["status"] == "unfinished", "arrival_s"] <= 20.0).any()
    last_done = df.loc[np.isfinite(df["done_s"]), "done_s"].max()
    end = max(20.0, last_done)  # window: first measured arrival (request 40) to max(horizon, last done)
    assert res.summary.measured_duration_s == pytest.approx(end - df["arrival_s"].iloc[40])


def test_same_seed_same_result_other_seed_differs():
    args = (two_pools(), UniformLengths(1000, 500), 20.0)
    a = simulate(*args, n_requests=500, seed=11).requests
    b = simulate(*args, n_requests=500, seed=11).requests
    c = simulate(*args, n_requests=500, seed=12).requests
    assert a.equals(b) and not a["arrival_s"].equals(c["arrival_s"])


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"rate_per_s": -1.0}, "rate_per_s = -1.0"),
        ({"rate_per_s": float("nan")}, "rate_per_s = nan"),
        ({"n_requests": 0}, "n_requests = 0"),
        ({"warmup_fraction": 1.0}, "warmup_fraction = 1.0"),
        ({"slo_ttft_s": 0.0}, "slo_ttft_s = 0.0"),
        ({"arrival": "replay"}, "arrival replay needs a trace"),
    ],
)
def test_bad_arguments_are_one_line_config_errors(kwargs, fragment):
    args = {"rate_per_s": 1.0, **kwargs}
    with pytest.raises(ConfigError, match=fragment) as err:
        simulate(one_pool(), FixedLengths(10, 10), n_requests=kwargs.get("n_requests", 10),
                 **{k: v for k, v in args.items() if k != "n_requests"})
    assert "\n" not in str(err.value)


def test_replications_ci_contains_mean_and_upper_bound():
    rep = replicate(two_pools(), UniformLengths(3000, 300), 30.0, n_requests=1500, level="request", seed=5,
                    n_replications=4)
    assert rep.seeds == tuple(task_seed(5, "replication", r) for r in range(4))
    assert len(set(rep.p99_ttft_s)) == 4  # independent streams
    lo, hi = rep.p99_ttft_interval_s
    assert lo < rep.mean_p99_ttft_s < hi
    assert rep.mean_p99_ttft_s == pytest.approx(np.mean(rep.p99_ttft_s))
    assert rep.upper_p99_ttft_s == hi
    tlo, thi = rep.p99_tpot_interval_s
    assert tlo <= rep.mean_p99_tpot_s <= thi
    calls = []
    replicate(two_pools(), UniformLengths(300, 30), 5.0, n_requests=50, level="request", n_replications=2,
              progress=lambda done, total: calls.append((done, total)))
    assert calls == [(1, 2), (2, 2)]


def test_replay_uses_trace_times_and_lengths(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n0.0,100,5\n0.5,200,6\n1.5,300,7\n2.0,400,8\n")
    wl = load_workload(str(path))
    own = simulate(two_pools(), wl, wl.arrival_rate_per_s, n_requests=10, arrival="replay", warmup_fraction=0.0)
    df = own.requests
    assert len(df) == 4  # the trace is shorter than n_requests: all of it, no more
    assert np.allclose(df["arrival_s"], [0.0, 0.5, 1.5, 2.0])
    assert df["prompt_tokens"].tolist() == [100, 200, 300, 400] and df["output_tokens"].tolist() == [5, 6, 7, 8]
    doubled = simulate(two_pools(), wl, 2 * wl.arrival_rate_per_s, n_requests=3, arrival="replay")
    assert np.allclose(doubled.requests["arrival_s"], [0.0, 0.25, 0.75])  # time-scaled to twice the rate


def test_gamma_arrivals_keep_the_mean_rate():
    res = simulate(two_pools(), FixedLengths(10, 2), 50.0, n_requests=20000, level="request", arrival="gamma",
                   cv=3.0, seed=1)
    gaps = np.diff(res.requests["arrival_s"].to_numpy())
    assert abs(1 / gaps.mean() - 50.0) < 50.0 * 0.07  # CV 3: standard error ~2 %
    assert 2.5 < gaps.std() / gaps.mean() < 3.5
