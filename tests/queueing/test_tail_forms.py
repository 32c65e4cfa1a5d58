"""Wait-tail forms against the exact M/M/c waiting-time distribution."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.queueing import TailModel, erlang_c, mean_wait_s, tail_model, wait_quantile_s


def mmc_state_probabilities(c: int, lam: float, mu: float, n_states: int) -> np.ndarray:
    """Stationary P(N = n), n = 0..n_states-1, of M/M/c from the birth-death balance equations."""
    log_p = np.zeros(n_states)
    for n in range(1, n_states):
        log_p[n] = log_p[n - 1] + math.log(lam / (mu * min(n, c)))
    p = np.exp(log_p - log_p.max())
    return p / p.sum()  # truncation: the geometric tail beyond n_states is < 1e-16 for the cases used


def exact_mmc_wait_survival(c: int, lam: float, mu: float, t: float, probs: np.ndarray) -> float:
    """P(W > t): an arrival finding n >= c customers waits for n - c + 1 departures at rate cμ."""
    n = np.arange(c, probs.size)
    return float(np.sum(probs[c:] * stats.gamma.sf(t, a=n - c + 1, scale=1.0 / (c * mu))))


@pytest.mark.parametrize("c, rho, p", [(1, 0.5, 0.99), (2, 0.5, 0.99), (4, 0.85, 0.99), (8, 0.9, 0.95),
                                       (16, 0.95, 0.999), (32, 0.7, 0.99)])
def test_exp_tail_equals_exact_mmc_quantile(c: int, rho: float, p: float) -> None:
    mu = 2.0
    lam = rho * c * mu
    probs = mmc_state_probabilities(c, lam, mu, n_states=c + 2000)
    assert probs[c:].sum() == pytest.approx(erlang_c(c, lam / mu), rel=1e-9)  # PASTA: P(wait) = C
    exact = optimize.brentq(lambda t: exact_mmc_wait_survival(c, lam, mu, t, probs) - (1 - p), 0.0, 1e3,
                            xtol=1e-14)
    assert wait_quantile_s(c, lam, mu, 1.0, p) == pytest.approx(exact, rel=1e-8)


@pytest.mark.parametrize("c, rho", [(1, 0.6), (3, 0.8), (10, 0.95)])
def test_mean_wait_equals_exact_mmc_mean(c: int, rho: float) -> None:
    mu = 0.5
    lam = rho * c * mu
    probs = mmc_state_probabilities(c, lam, mu, n_states=c + 3000)
    n = np.arange(c, probs.size)
    exact_mean = float(np.sum(probs[c:] * (n - c + 1) / (c * mu)))
    assert mean_wait_s(c, lam, mu, 1.0) == pytest.approx(exact_mean, rel=1e-9)
    if c == 1:
        assert mean_wait_s(c, lam, mu, 1.0) == pytest.approx(rho / (mu - lam), rel=1e-12)  # M/M/1


@pytest.mark.parametrize("c, a", [(2, 1.0), (4, 3.4), (16, 14.0), (64, 60.0), (256, 250.0), (8, 2.0)])
def test_paper_form_ratio_to_exact_at_cs2_one(c: int, a: float) -> None:
    p = 0.99
    wait_prob = erlang_c(c, a)
    exp_form = wait_quantile_s(c, a, 1.0, 1.0, p, "exp")
    paper = wait_quantile_s(c, a, 1.0, 1.0, p, "paper")
    # eq. (2) is E[W]·ln(1/(1-p)); the exact M/M/c quantile is ln(C/(1-p))/(cμ-λ).
    assert paper == pytest.approx(wait_prob * math.log(1 / (1 - p)) / (c - a), rel=1e-12)
    if wait_prob > 1 - p:
        ratio = paper / exp_form
        assert ratio == pytest.approx(wait_prob * math.log(1 / (1 - p)) / math.log(wait_prob / (1 - p)),
                                      rel=1e-12)
        assert ratio < 1.0  # eq. (2) under-states the exact quantile whenever 0.01 < C < 1
    else:
        assert exp_form == 0.0 < paper


def test_no_wait_quantile_when_few_arrivals_wait() -> None:
    c, a = 64, 30.0
    assert erlang_c(c, a) < 0.01
    assert wait_quantile_s(c, a, 1.0, 4.0, 0.99) == 0.0


def test_two_moment_scaling_in_cs2() -> None:
    base = wait_quantile_s(8, 6.0, 1.0, 1.0, 0.99)
    for cs2 in (0.0, 0.5, 4.0, 16.0):
        assert wait_quantile_s(8, 6.0, 1.0, cs2, 0.99) == pytest.approx(base * (1 + cs2) / 2, rel=1e-13)
        assert mean_wait_s(8, 6.0, 1.0, cs2) == pytest.approx(mean_wait_s(8, 6.0, 1.0, 1.0) * (1 + cs2) / 2,
                                                              rel=1e-13)


def test_unstable_queue_waits_are_infinite_not_finite() -> None:
    for model in TailModel:
        assert wait_quantile_s(4, 4.0, 1.0, 1.0, 0.99, model) == math.inf
        assert wait_quantile_s(4, 9.0, 1.0, 0.0, 0.5, model) == math.inf
    assert mean_wait_s(4, 4.0, 1.0, 1.0) == math.inf
    out = wait_quantile_s(np.array([3, 4, 5]), 4.0, 1.0, 1.0, 0.99)
    assert np.isinf(out[:2]).all() and np.isfinite(out[2])


def test_zero_arrivals_wait_zero() -> None:
    assert wait_quantile_s(3, 0.0, 1.0, 1.0, 0.99) == 0.0
    assert wait_quantile_s(3, 0.0, 1.0, 1.0, 0.99, "paper") == 0.0
    assert mean_wait_s(3, 0.0, 1.0, 1.0) == 0.0


def test_tail_model_registry_fails_loudly() -> None:
    assert tail_model("exp") is TailModel.EXP
    assert tail_model("paper") is TailModel.PAPER
    assert tail_model(TailModel.PAPER) is TailModel.PAPER
    with pytest.raises(UnknownNameError, match="kimura.*exp, paper"):
        tail_model("kimura")
    with pytest.raises(UnknownNameError):
        wait_quantile_s(2, 1.0, 1.0, 1.0, 0.99, "EXP")


@pytest.mark.parametrize("p", [0.0, 1.0, 99.0, -0.5])
def test_probability_level_must_be_a_fraction(p: float) -> None:
    with pytest.raises(ConfigError, match="0.99"):
        wait_quantile_s(2, 1.0, 1.0, 1.0, p)


@pytest.mark.parametrize("lam, mu, cs2", [(-1.0, 1.0, 1.0), (1.0, 0.0, 1.0), (1.0, 1.0, -0.1),
                                          (float("nan"), 1.0, 1.0)])
def test_bad_rates_raise(lam: float, mu: float, cs2: float) -> None:
    with pytest.raises(ConfigError):
        wait_quantile_s(2, lam, mu, cs2, 0.99)
