"""Percentile of W + T0 (wait plus zero-wait TTFT) against direct root finding."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize

from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.queueing import TtftModel, ttft_model, ttft_quantile_s
from fleetplan.queueing.ttft import ZeroWaitTtft


def survival_of_sum(x: float, mass: float, decay: float, t0: np.ndarray, w: np.ndarray) -> float:
    """P(W + T0 > x) with P(W > y) = mass·exp(-decay·y) for y >= 0 and 1 for y < 0."""
    y = x - t0
    return float(np.sum(w * np.where(y < 0, 1.0, mass * np.exp(-decay * np.maximum(y, 0.0)))))


def random_floor(seed: int, n: int) -> ZeroWaitTtft:
    rng = np.random.default_rng(seed)
    t0 = np.sort(rng.lognormal(mean=-2.0, sigma=0.8, size=n))
    w = rng.random(n)
    return ZeroWaitTtft(t0, w / w.sum())


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("mass, decay", [(0.5, 20.0), (0.02, 100.0), (0.005, 3.0), (0.9, 5.0),
                                         (0.3, 5000.0), (1.0, 1.5)])
def test_quantile_of_sum_solves_the_survival_equation(seed: int, mass: float, decay: float) -> None:
    dist = random_floor(seed, 40)
    p = 0.99
    got = ttft_quantile_s(np.array([mass]), np.array([decay]), dist, p)[0]
    # The p-quantile is inf{x : P(W + T0 > x) <= 1 - p}: just below it the survival exceeds 1 - p.
    assert survival_of_sum(got, mass, decay, dist.ttft_s, dist.weight) <= (1 - p) + 1e-12
    assert survival_of_sum(got * (1 - 1e-9) - 1e-12, mass, decay, dist.ttft_s, dist.weight) > 1 - p
    # And it agrees with a bracketing root finder whenever the crossing is continuous.
    f = lambda x: survival_of_sum(x, mass, decay, dist.ttft_s, dist.weight) - (1 - p)  # noqa: E731
    hi = dist.ttft_s[-1] + 60.0 / decay
    if f(got * (1 - 1e-6)) > 0 > f(got * (1 + 1e-6)):
        assert got == pytest.approx(optimize.brentq(f, 0.0, hi, xtol=1e-15), rel=1e-9)


def test_single_point_floor_adds_the_wait_quantile() -> None:
    dist = ZeroWaitTtft(np.array([0.120]), np.array([1.0]))
    mass, decay, p = 0.4, 12.0, 0.99
    wait_p = math.log(mass / (1 - p)) / decay
    assert ttft_quantile_s([mass], [decay], dist, p)[0] == pytest.approx(0.120 + wait_p, rel=1e-13)


def test_nobody_waits_gives_the_floor_quantile() -> None:
    dist = ZeroWaitTtft(np.array([0.1, 0.2, 0.3, 0.9]), np.array([0.5, 0.3, 0.195, 0.005]))
    assert ttft_quantile_s([0.0], [5.0], dist, 0.99)[0] == 0.3  # 99.5% of the mass is <= 0.3
    assert ttft_quantile_s([0.0], [5.0], dist, 0.999)[0] == 0.9
    assert dist.quantile_s(0.99) == 0.3


def test_mean_prefill_model_adds_mean_floor_to_wait_quantile() -> None:
    dist = ZeroWaitTtft(np.array([0.1, 0.2, 0.9]), np.array([0.5, 0.3, 0.2]))
    mass, decay = 0.5, 10.0
    wait_p = math.log(mass / 0.01) / decay
    got = ttft_quantile_s([mass], [decay], dist, 0.99, "mean-prefill")[0]
    assert got == pytest.approx(wait_p + (0.05 + 0.06 + 0.18), rel=1e-13)


def test_quantile_lies_between_its_bounds() -> None:
    dist = random_floor(11, 64)
    p = 0.99
    mass = np.array([0.05, 0.3, 0.8])
    decay = np.array([40.0, 8.0, 2.0])
    got = ttft_quantile_s(mass, decay, dist, p)
    wait_p = np.log(mass / (1 - p)) / decay
    assert np.all(got >= np.maximum(dist.quantile_s(p), wait_p + dist.ttft_s[0]) - 1e-12)
    assert np.all(got <= wait_p + dist.ttft_s[-1] + 1e-12)


def test_unstable_rows_are_infinite() -> None:
    dist = random_floor(3, 10)
    out = ttft_quantile_s([1.0, 0.5], [0.0, 3.0], dist, 0.99)
    assert out[0] == math.inf and math.isfinite(out[1])
    assert ttft_quantile_s([1.0], [0.0], dist, 0.99, "mean-prefill")[0] == math.inf


def test_registry_and_validation() -> None:
    assert ttft_model("quantile") is TtftModel.QUANTILE
    assert ttft_model("mean-prefill") is TtftModel.MEAN_PREFILL
    with pytest.raises(UnknownNameError, match="quantile, mean-prefill"):
        ttft_model("mean")
    with pytest.raises(ConfigError):
        ZeroWaitTtft(np.array([0.2, 0.1]), np.array([0.5, 0.5]))  # not ascending
    with pytest.raises(ConfigError):
        ZeroWaitTtft(np.array([0.1, 0.2]), np.array([0.5, 0.6]))  # weights do not sum to 1
