"""Invariants of the analytical queueing layer (hypothesis)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.perf.linear import LinearStepModel
from fleetplan.queueing import (
    ServiceModel,
    TailModel,
    erlang_c,
    pool_latency,
    pool_service_moments,
    size_pool,
    wait_quantile_s,
)

RTOL = 1e-12
servers = st.integers(min_value=1, max_value=100_000)
rho = st.floats(min_value=0.0, max_value=0.9999)
cs2 = st.floats(min_value=0.0, max_value=50.0)
tails = st.sampled_from(list(TailModel))
levels = st.sampled_from([0.5, 0.9, 0.95, 0.99, 0.999])


def close_or_below(x: float, y: float) -> bool:
    return x <= y * (1 + RTOL) + 1e-300 or x == y


@given(c=servers, rho=rho)
def test_erlang_c_is_a_probability(c: int, rho: float) -> None:
    value = erlang_c(c, rho * c)
    assert 0.0 <= value <= 1.0


@given(c=servers, r1=rho, r2=rho)
def test_erlang_c_is_monotone_in_load(c: int, r1: float, r2: float) -> None:
    lo, hi = sorted((r1, r2))
    assert close_or_below(erlang_c(c, lo * c), erlang_c(c, hi * c))


@given(c=st.integers(1, 20_000), extra=st.integers(1, 500), a_frac=rho)
def test_erlang_c_falls_with_servers(c: int, extra: int, a_frac: float) -> None:
    a = a_frac * c
    assert close_or_below(erlang_c(c + extra, a), erlang_c(c, a))


@given(c=st.integers(1, 20_000), extra=st.integers(1, 500), rho=rho, cs2=cs2, tail=tails, p=levels)
def test_more_servers_never_raise_the_wait_quantile(c: int, extra: int, rho: float, cs2: float,
                                                     tail: TailModel, p: float) -> None:
    mu = 0.7
    lam = rho * c * mu
    more = wait_quantile_s(c + extra, lam, mu, cs2, p, tail)
    assert close_or_below(more, wait_quantile_s(c, lam, mu, cs2, p, tail))


@given(c=servers, r1=st.floats(0.0, 1.5), r2=st.floats(0.0, 1.5), cs2=cs2, tail=tails, p=levels)
def test_more_traffic_never_lowers_the_wait_quantile(c: int, r1: float, r2: float, cs2: float,
                                                      tail: TailModel, p: float) -> None:
    mu = 2.0
    lo, hi = sorted((r1, r2))
    assert close_or_below(wait_quantile_s(c, lo * c * mu, mu, cs2, p, tail),
                          wait_quantile_s(c, hi * c * mu, mu, cs2, p, tail))


def _service(seed: int, n_slots: int):
    rng = np.random.default_rng(seed)
    total = np.sort(rng.lognormal(6.5, 1.2, 24).clip(4, 16_000))
    prompt = np.floor(0.8 * total)
    return pool_service_moments(prompt, total - prompt, rng.random(24) + 0.05,
                                ServiceModel(LinearStepModel(0.008, 0.00065), n_slots, 512, n_prefill_seqs=1))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 50), n_slots=st.sampled_from([1, 16, 128, 1024]), lam1=st.floats(0.01, 500.0),
       lam2=st.floats(0.01, 500.0), tail=tails, slo=st.floats(0.2, 5.0))
def test_size_pool_count_is_monotone_in_lambda(seed: int, n_slots: int, lam1: float, lam2: float,
                                               tail: TailModel, slo: float) -> None:
    service = _service(seed, n_slots)
    lo, hi = sorted((lam1, lam2))
    small = size_pool(lo, service, slo, tail_model=tail, max_gpus=1_000_000)
    large = size_pool(hi, service, slo, tail_model=tail, max_gpus=1_000_000)
    assert small.feasible == large.feasible  # the prefill floor does not depend on λ
    assert small.n_gpus <= large.n_gpus


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 50), n_slots=st.sampled_from([1, 16, 256]), load=st.floats(0.05, 0.99),
       n=st.integers(1, 200), extra=st.integers(1, 50), tail=tails)
def test_more_gpus_never_raise_the_ttft_quantile(seed: int, n_slots: int, load: float, n: int, extra: int,
                                                 tail: TailModel) -> None:
    service = _service(seed, n_slots)
    lam = load * n / service.mean_gpu_s
    assert close_or_below(pool_latency(lam, service, n + extra, tail_model=tail).ttft_p_s,
                          pool_latency(lam, service, n, tail_model=tail).ttft_p_s)
