"""size_pool: minimal GPU count, ρ cap, infeasibility reasons, agreement with brute force."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fleetplan.errors import ConfigError
from fleetplan.perf.linear import LinearStepModel
from fleetplan.queueing import (
    InfeasibleReason,
    PoolSizing,
    ServiceModel,
    mean_wait_s,
    pool_latency,
    pool_service_moments,
    size_pool,
    wait_quantile_s,
)

A100 = LinearStepModel(iter_base_s=0.008, iter_per_seq_s=0.00065)


def chat_pool(n_slots: int = 256, seed: int = 0, n_points: int = 48):
    rng = np.random.default_rng(seed)
    total = np.sort(rng.lognormal(6.0, 1.0, n_points).clip(2, 4000))
    prompt = np.floor(0.8 * total)
    model = ServiceModel(A100, n_slots, 512)
    return pool_service_moments(prompt, total - prompt, np.full(n_points, 1.0), model)


def decode_only_pool(mean_s: float, n_slots: int, cs2_mix: bool = False):
    """Prompt-free requests: zero-wait TTFT is one iteration, so TTFT_p = W_p + t_iter exactly."""
    step = LinearStepModel(iter_base_s=0.001, iter_per_seq_s=0.0)
    outputs = np.array([mean_s / 0.001]) if not cs2_mix else np.array([0.2, 9.0]) * mean_s / 0.001
    weights = np.array([1.0]) if not cs2_mix else np.array([0.88, 0.12])
    weights = weights / weights.sum()
    return pool_service_moments(np.zeros(outputs.size), outputs, weights,
                                ServiceModel(step, n_slots, 512, seq_cost="fixed"))


def assert_minimal(lam: float, sm, slo_s: float, result: PoolSizing, rho_max: float, **kw) -> None:
    assert result.feasible and result.reason is None
    here = pool_latency(lam, sm, result.n_gpus, **kw)
    assert here.ttft_p_s <= slo_s and here.rho <= rho_max * (1 + 1e-12)
    assert result.ttft_p_s == here.ttft_p_s and result.wait_p_s == here.wait_p_s
    if result.n_gpus > 1:
        below = pool_latency(lam, sm, result.n_gpus - 1, **kw)
        assert below.ttft_p_s > slo_s or below.rho > rho_max


def test_no_traffic_needs_no_gpus() -> None:
    assert size_pool(0.0, chat_pool(), 0.5) == PoolSizing(0, 0, 0.0, 0.0, 0.0, True, None)


@pytest.mark.parametrize("lam", [0.3, 5.0, 40.0, 200.0, 1500.0])
@pytest.mark.parametrize("slo_s", [0.45, 0.6, 2.0])
def test_result_is_the_minimal_feasible_count(lam: float, slo_s: float) -> None:
    sm = chat_pool()
    result = size_pool(lam, sm, slo_s)
    assert_minimal(lam, sm, slo_s, result, 0.85)


@pytest.mark.parametrize("lam, rho_max, slo_s",
                         [(50.0, 0.85, 0.05), (5000.0, 1.0, 0.02), (400.0, 0.95, 0.01)])
def test_search_beyond_the_first_block_matches_brute_force(lam: float, rho_max: float, slo_s: float) -> None:
    # One slot per GPU, Cs² ≈ 2.7: the SLO, not the ρ cap, sets the count, far above the first block.
    sm = decode_only_pool(1.0, n_slots=1, cs2_mix=True)
    result = size_pool(lam, sm, slo_s, rho_max=rho_max, max_gpus=100_000)
    lo = math.floor(lam * sm.mean_s) + 1
    counts = np.arange(lo, lo + 5000)
    wait_p = wait_quantile_s(counts, lam, 1.0 / sm.mean_s, sm.cs2, 0.99)
    ok = (wait_p + 0.001 <= slo_s) & (lam * sm.mean_s / counts <= rho_max)
    assert result.n_gpus == counts[np.argmax(ok)]
    assert result.n_gpus > math.ceil(lam * sm.mean_s / rho_max) + 8  # the bracket/bisection path ran
    assert result.ttft_p_s == pytest.approx(result.wait_p_s + 0.001, rel=1e-12)


def test_rho_cap_exact_ratio_is_not_rounded_up() -> None:
    sm = decode_only_pool(1.0, n_slots=1)
    result = size_pool(1.7, sm, 100.0)  # a_G = 1.7, 1.7 / 0.85 = 2.0000000000000004 in floating point
    assert result.n_gpus == 2 and result.rho == pytest.approx(0.85)


def test_rho_cap_binds_when_slots_are_plentiful() -> None:
    sm = chat_pool(n_slots=2048)
    lam = 120.0
    result = size_pool(lam, sm, 0.5)
    assert result.n_gpus == math.ceil(lam * sm.mean_gpu_s / 0.85)
    assert result.wait_p_s == 0.0 and result.rho <= 0.85


def test_min_spare_gpus_adds_headroom_over_the_load() -> None:
    sm = chat_pool(n_slots=2048)
    lam = 60.0
    load = lam * sm.mean_gpu_s
    assert size_pool(lam, sm, 0.5, min_spare_gpus=1).n_gpus == max(math.ceil(load) + 1,
                                                                    size_pool(lam, sm, 0.5).n_gpus)
    assert size_pool(lam, sm, 0.5, min_spare_gpus=3).n_gpus == math.ceil(load) + 3


def test_prefill_alone_over_slo_is_reported_not_sized() -> None:
    sm = chat_pool()
    floor_p99 = sm.zero_wait.quantile_s(0.99)
    result = size_pool(10.0, sm, 0.9 * floor_p99, max_gpus=100_000)
    assert not result.feasible and result.reason is InfeasibleReason.PREFILL_EXCEEDS_SLO
    assert result.n_gpus == math.ceil(10.0 * sm.mean_gpu_s / 0.85)
    assert result.ttft_p_s > 0.9 * floor_p99
    assert size_pool(10.0, sm, 1.1 * floor_p99).feasible


def test_unstable_and_max_gpu_reasons() -> None:
    sm = decode_only_pool(1.0, n_slots=1)
    unstable = size_pool(10.0, sm, 5.0, max_gpus=9)  # needs > 10 GPUs even at ρ = 1
    assert unstable.reason is InfeasibleReason.UNSTABLE and unstable.n_gpus == 9
    assert unstable.wait_p_s == math.inf and unstable.ttft_p_s == math.inf
    capped = size_pool(10.0, sm, 5.0, max_gpus=11)  # stable at 11, but ρ cap needs 12
    assert capped.reason is InfeasibleReason.EXCEEDS_MAX_GPUS and capped.n_gpus == 11
    slo_bound = size_pool(10.0, sm, 0.05, max_gpus=13)  # ρ ok at 12 but the SLO needs more
    assert slo_bound.reason is InfeasibleReason.EXCEEDS_MAX_GPUS and not slo_bound.feasible


def test_pool_latency_agrees_with_the_wait_functions() -> None:
    sm = chat_pool(n_slots=64)
    lam, n = 30.0, 4
    got = pool_latency(lam, sm, n)
    c, mu = n * 64, 1.0 / sm.mean_s
    assert got.n_servers == c and got.rho == pytest.approx(lam / (c * mu))
    assert got.wait_p_s == pytest.approx(wait_quantile_s(c, lam, mu, sm.cs2, 0.99), rel=1e-12)
    assert got.mean_wait_s == pytest.approx(mean_wait_s(c, lam, mu, sm.cs2), rel=1e-12)
    paper = pool_latency(lam, sm, n, tail_model="paper")
    assert paper.mean_wait_s == pytest.approx(got.mean_wait_s, rel=1e-12)


def test_inconsistent_sizing_record_is_rejected() -> None:
    with pytest.raises(ConfigError):
        PoolSizing(3, 30, 0.5, 0.0, 0.1, False, None)
    with pytest.raises(ConfigError):
        PoolSizing(3, 30, 0.5, 0.0, 0.1, True, InfeasibleReason.UNSTABLE)


@pytest.mark.parametrize("kwargs, fragment", [
    ({"slo_s": 0.0}, "SLO"),
    ({"p": 99.0}, "0.99"),
    ({"rho_max": 1.2}, "rho_max=1.2"),
    ({"max_gpus": 0}, "max_gpus=0"),
    ({"min_spare_gpus": -1}, "min_spare_gpus=-1"),
    ({"lam": -3.0}, "-3.0"),
])
def test_bad_arguments_raise(kwargs: dict, fragment: str) -> None:
    args = {"lam": 3.0, "service": chat_pool(), "slo_s": 0.5} | kwargs
    with pytest.raises(ConfigError, match=fragment.replace(".", r"\.")):
        size_pool(**args)
