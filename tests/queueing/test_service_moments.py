"""Service-time moments (eqs. 3-4) and zero-wait TTFT (eq. 5) against hand computation."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.perf.linear import LinearStepModel
from fleetplan.queueing import SeqCostScaling, ServiceModel, pool_service_moments, seq_cost_scaling

A100 = LinearStepModel(iter_base_s=0.008, iter_per_seq_s=0.00065)


def test_single_request_fixed_cost_by_hand() -> None:
    model = ServiceModel(A100, n_slots=128, chunk_tokens=512, seq_cost=SeqCostScaling.FIXED)
    sm = pool_service_moments([1000.0], [200.0], [1.0], model)
    t_iter = 0.008 + 0.00065 * 128  # 91.2 ms
    assert sm.mean_s == pytest.approx((2 + 200) * t_iter, rel=1e-14)  # 18.4224 s per slot
    assert sm.mean_gpu_s == pytest.approx((2 + 200) / 128 * t_iter, rel=1e-14)  # eq. (4)
    assert sm.cs2 == 0.0
    assert sm.prefill_s[0] == pytest.approx(2 * t_iter, rel=1e-14)  # eq. (5), n_prefill = n_max
    assert sm.zero_wait_ttft_s[0] == pytest.approx(3 * t_iter, rel=1e-14)


def test_request_length_scaling_by_hand() -> None:
    model = ServiceModel(A100, n_slots=256, chunk_tokens=512, ref_context_tokens=8192)
    sm = pool_service_moments([3000.0], [1000.0], [1.0], model)
    t_iter = 0.008 + 0.00065 * (4000 / 8192) * 256
    assert model.seq_cost is SeqCostScaling.REQUEST_LENGTH
    assert sm.mean_s == pytest.approx((6 + 1000) * t_iter, rel=1e-14)
    assert sm.prefill_s[0] == pytest.approx(6 * t_iter, rel=1e-14)


def test_two_point_mean_and_cs2_by_hand() -> None:
    model = ServiceModel(A100, n_slots=16, chunk_tokens=512, seq_cost="fixed")
    t_iter = 0.008 + 0.00065 * 16
    # S1 = (1 + 99) t, S2 = (4 + 396) t with probabilities 3/4, 1/4 (weights given unnormalised).
    sm = pool_service_moments([100.0, 2048.0], [99.0, 396.0], [3.0, 1.0], model)
    s = np.array([100.0, 400.0]) * t_iter
    p = np.array([0.75, 0.25])
    mean = p @ s
    assert sm.mean_s == pytest.approx(mean, rel=1e-14)
    assert sm.cs2 == pytest.approx((p @ s**2 - mean**2) / mean**2, rel=1e-12)
    assert sm.cs2 == pytest.approx(27 / 49, rel=1e-12)  # 16875/30625
    assert sm.weight.sum() == pytest.approx(1.0, abs=1e-15)
    assert sm.mean_prefill_s == pytest.approx(0.75 * t_iter + 0.25 * 4 * t_iter, rel=1e-14)


def test_prefill_concurrency_parameter_changes_only_the_ttft_floor() -> None:
    prompt, output, w = np.array([4096.0, 600.0]), np.array([512.0, 80.0]), np.array([0.5, 0.5])
    paper = pool_service_moments(prompt, output, w, ServiceModel(A100, 128, 512, seq_cost="fixed"))
    single = pool_service_moments(prompt, output, w, ServiceModel(A100, 128, 512, 1, seq_cost="fixed"))
    assert single.mean_s == paper.mean_s and single.cs2 == paper.cs2
    # Chunks cost t_iter(n_prefill): W + H·n_max = 91.2 ms (paper) vs W + H = 8.65 ms (one sequence).
    ratio = (0.008 + 0.00065 * 128) / (0.008 + 0.00065)
    np.testing.assert_allclose(paper.zero_wait_ttft_s / single.zero_wait_ttft_s, ratio, rtol=1e-13)
    assert paper.zero_wait_ttft_s[-1] == pytest.approx((8 + 1) * 0.0912, rel=1e-13)  # 8 chunks + 1


def test_points_are_sorted_by_zero_wait_ttft_and_read_only() -> None:
    sm = pool_service_moments([5000.0, 10.0, 900.0], [10.0, 10.0, 10.0], [0.2, 0.5, 0.3],
                              ServiceModel(A100, 64, 512))
    assert np.all(np.diff(sm.zero_wait_ttft_s) >= 0)
    np.testing.assert_allclose(sm.weight, [0.5, 0.3, 0.2])
    with pytest.raises(ValueError):
        sm.weight[0] = 1.0


@pytest.mark.parametrize("kwargs, fragment", [
    ({"n_slots": 0}, "n_slots=0"),
    ({"n_slots": 2.5}, "n_slots=2.5"),
    ({"chunk_tokens": 0}, "chunk_tokens=0"),
    ({"n_prefill_seqs": 500}, "n_prefill_seqs=500"),
    ({"ref_context_tokens": 0.0}, "ref_context_tokens=0.0"),
])
def test_service_model_validation(kwargs: dict, fragment: str) -> None:
    args = {"step": A100, "n_slots": 128, "chunk_tokens": 512} | kwargs
    with pytest.raises(ConfigError, match=fragment):
        ServiceModel(**args)


def test_unknown_seq_cost_scaling_fails_loudly() -> None:
    with pytest.raises(UnknownNameError, match="request-length, fixed"):
        seq_cost_scaling("linear")
    with pytest.raises(UnknownNameError):
        ServiceModel(A100, 128, 512, seq_cost="quadratic")


@pytest.mark.parametrize("prompt, output, weight", [
    ([1.0, 2.0], [1.0], [0.5, 0.5]),
    ([-1.0], [3.0], [1.0]),
    ([0.0], [0.0], [1.0]),
    ([10.0], [3.0], [0.0]),
    ([], [], []),
])
def test_bad_request_points_raise(prompt: list, output: list, weight: list) -> None:
    with pytest.raises(ConfigError):
        pool_service_moments(prompt, output, weight, ServiceModel(A100, 128, 512))
