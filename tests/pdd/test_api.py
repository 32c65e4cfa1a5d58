"""``simulate_pdd``: the per-request table, the summary and reproducibility."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fleetplan.errors import ConfigError
from fleetplan.sim.pdd import TTFT_DEFINITION, KvTransferSpec, PddSpec, simulate_pdd, simulate_pdd_arrays
from fleetplan.workload import load_workload
from tests.pdd.helpers import pool


def _spec(**kw) -> PddSpec:
    return PddSpec(pool("prefill", 2, ctx=4096), pool("decode", 3, blocks=2048, ctx=8192),
                   KvTransferSpec(1e-3, 25e9, 131072.0, True, 32), **kw)


def test_simulate_pdd_returns_breakdown_and_summary():
    res = simulate_pdd(_spec(policy="sibyl"), load_workload("lmsys"), 4.0, n_requests=300, seed=3)
    df = res.requests
    for col in ("queue_s", "prefill_s", "transfer_s", "first_decode_s", "ttft_s", "tpot_s", "decode_instance"):
        assert col in df
    s = res.summary
    assert s.n_requests == 300 and s.n_warmup == 30
    assert s.n_done + s.n_unfinished + s.n_rejected == 270
    assert 0.0 <= s.optimal_assignment_ratio <= 1.0
    assert s.ttft_definition == TTFT_DEFINITION
    assert res.to_json_dict()["policy"] == "sibyl"


def test_same_seed_same_result_other_seed_differs():
    wl = load_workload("lmsys")
    a = simulate_pdd(_spec(), wl, 4.0, n_requests=200, seed=1).requests
    b = simulate_pdd(_spec(), wl, 4.0, n_requests=200, seed=1).requests
    c = simulate_pdd(_spec(), wl, 4.0, n_requests=200, seed=2).requests
    assert a.equals(b) and not a["ttft_s"].equals(c["ttft_s"])


def test_transfer_time_is_latency_plus_bytes_over_bandwidth_when_unloaded():
    spec = PddSpec(pool("prefill", 1), pool("decode", 1), KvTransferSpec(2e-3, 1e9, 1000.0), binding="late")
    df = simulate_pdd_arrays(spec, [0.0], [320], [5], warmup_fraction=0.0).requests
    assert df["transfer_s"][0] == pytest.approx(2e-3 + 320 * 1000.0 / 1e9, rel=1e-12)


def test_layerwise_hides_all_but_the_last_layer_behind_prefill():
    common = dict(latency_s=0.0, bandwidth_bytes_per_s=1e8, kv_bytes_per_token=1000.0, n_layers=10)
    prompt, out = [400], [3]
    plain = simulate_pdd_arrays(PddSpec(pool("p", 1), pool("d", 1), KvTransferSpec(**common)), [0.0], prompt, out,
                                warmup_fraction=0.0).requests
    layer = simulate_pdd_arrays(PddSpec(pool("p", 1), pool("d", 1), KvTransferSpec(layerwise=True, **common)),
                                [0.0], prompt, out, warmup_fraction=0.0).requests
    full_s = 400 * 1000.0 / 1e8
    assert plain["transfer_s"][0] == pytest.approx(full_s)
    prefill_s = layer["prefill_s"][0]
    assert layer["transfer_s"][0] == pytest.approx(max(0.0, 0.9 * full_s - prefill_s) + 0.1 * full_s)


def test_backpressure_keeps_kv_on_the_prefill_side():
    """A decode instance with room for one prompt: the second request waits for the first to finish."""
    spec = PddSpec(pool("p", 1), pool("d", 1, blocks=40, ctx=600), KvTransferSpec(), binding="late")
    df = simulate_pdd_arrays(spec, [0.0, 0.0], [400, 400], [100, 100], warmup_fraction=0.0).requests
    assert df["grant_s"][1] == df["done_s"][0]
    assert df["transfer_s"][1] > 0 and math.isfinite(df["done_s"][1])


def test_bad_arrays_are_config_errors():
    with pytest.raises(ConfigError, match="sort the trace"):
        simulate_pdd_arrays(_spec(), [1.0, 0.0], [10, 10], [10, 10])
    with pytest.raises(ConfigError, match="output_tokens >= 1"):
        simulate_pdd_arrays(_spec(), [0.0], [10], [0])
    with pytest.raises(ConfigError, match="rate_per_s"):
        simulate_pdd(_spec(), load_workload("lmsys"), -1.0)
    assert np.isnan(simulate_pdd_arrays(_spec(), [0.0], [10], [1]).summary.tpot.p99_s)


def test_arrival_process_is_the_simulators_and_burstiness_lengthens_the_queue():
    """``simulate_pdd(arrival="gamma", cv=...)`` draws the same arrival stream as ``fleetplan.sim.simulate``
    (``sim.compile.draw_requests``); with gaps of CV 3 the P99 prefill queue is longer than with Poisson
    gaps at the same rate and lengths."""
    from fleetplan.sim.compile import draw_requests

    wl = load_workload("lmsys")
    gamma = simulate_pdd(_spec(), wl, 6.0, n_requests=3_000, seed=5, arrival="gamma", cv=3.0)
    arrival_s, prompt, _ = draw_requests(wl, 6.0, 3_000, 5, "gamma", 3.0)
    df = gamma.requests
    assert np.array_equal(df["arrival_s"].to_numpy(), arrival_s) and np.array_equal(df["prompt_tokens"], prompt)
    poisson = simulate_pdd(_spec(), wl, 6.0, n_requests=3_000, seed=5)
    assert gamma.summary.queue.p99_s > 1.5 * poisson.summary.queue.p99_s
