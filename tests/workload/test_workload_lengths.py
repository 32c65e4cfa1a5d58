"""Workload.sample and Workload.quadrature: hand values and the shared coupling."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.errors import ConfigError
from fleetplan.workload import DEFAULT_INPUT_FRACTION, LengthCDF, Workload

UNIFORM_100 = LengthCDF([50, 100], [0.5, 1.0])  # U(0, 100]


def test_default_input_fraction_is_documented_constant():
    assert DEFAULT_INPUT_FRACTION == 0.8
    assert Workload("u", UNIFORM_100).input_fraction == 0.8


def test_totals_only_quadrature_hand_values():
    w = Workload("u", UNIFORM_100)
    prompt, output, weight = w.quadrature(4)
    # totals at u = .125, .375, .625, .875 -> 12.5, 37.5, 62.5, 87.5 -> ceil 13, 38, 63, 88
    np.testing.assert_array_equal(prompt + output, [13, 38, 63, 88])
    np.testing.assert_array_equal(prompt, [10, 30, 50, 70])  # round(0.8 * total)
    np.testing.assert_array_equal(output, [3, 8, 13, 18])
    np.testing.assert_allclose(weight, 0.25)


def test_tiny_totals_keep_one_output_token():
    w = Workload("tiny", LengthCDF([1, 2], [0.5, 1.0]), input_fraction=0.9)
    prompt, output, _ = w.quadrature(8)
    assert prompt.min() >= 1 and output.min() >= 1


def test_sample_uses_same_split_rule():
    w = Workload("u", UNIFORM_100, input_fraction=0.5)
    prompt, output = w.sample(np.random.default_rng(0), 10_000)
    total = prompt + output
    assert prompt.dtype == np.int64 and output.dtype == np.int64
    np.testing.assert_array_equal(prompt, np.maximum(1, np.round(0.5 * total)))
    assert total.max() <= 101 and prompt.min() >= 1 and output.min() >= 1


def _split_workload(copula=None) -> Workload:
    return Workload(
        "split",
        total=LengthCDF([110, 220], [0.5, 1.0]),
        input=LengthCDF([100, 200], [0.5, 1.0]),
        output=LengthCDF([10, 20], [0.5, 1.0]),
        copula=copula,
    )


def test_independent_marginals_quadrature_reproduces_marginals():
    prompt, output, weight = _split_workload().quadrature(4000)
    assert weight.sum() == pytest.approx(1.0)
    # marginals are U(0, 200] and U(0, 20] (integerised by ceil: +0.5 on average)
    assert prompt @ weight == pytest.approx(100.5, abs=0.1)
    assert output @ weight == pytest.approx(10.5, abs=0.05)
    assert abs(np.corrcoef(prompt, output)[0, 1]) < 0.02


def test_comonotone_copula_couples_bins():
    # K = 2: all mass on the diagonal -> short prompt with short output, long with long
    prompt, output, _ = _split_workload(np.array([[0.5, 0.0], [0.0, 0.5]])).quadrature(1000)
    assert np.all((prompt <= 100) == (output <= 10))
    anti_p, anti_o = _split_workload(np.array([[0.0, 0.5], [0.5, 0.0]])).sample(
        np.random.default_rng(1), 5000
    )
    assert np.all((anti_p <= 100) == (anti_o > 10))


def test_sample_and_quadrature_agree_in_distribution():
    w = _split_workload(np.array([[0.4, 0.1], [0.1, 0.4]]))
    p, o = w.sample(np.random.default_rng(2), 200_000)
    qp, qo, qw = w.quadrature(4096)
    # P(prompt <= 100 and output <= 10) = C[0, 0] = 0.4; binomial SE ~ 0.0011
    assert np.mean((p <= 100) & (o <= 10)) == pytest.approx(0.4, abs=0.006)
    assert qw @ ((qp <= 100) & (qo <= 10)) == pytest.approx(0.4, abs=1e-3)
    assert (p + o).mean() == pytest.approx(qw @ (qp + qo), rel=0.01)


def test_quadrature_is_deterministic():
    a = _split_workload().quadrature(100)
    b = _split_workload().quadrature(100)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"input": LengthCDF([1, 2], [0.5, 1.0])},
        {"input_fraction": 1.0},
        {"input_fraction": 0.0},
        {"arrival_rate_per_s": -1.0},
        {"copula": np.ones((2, 2)) / 4},
    ],
)
def test_invalid_workloads_raise(kwargs):
    with pytest.raises(ConfigError):
        Workload("bad", UNIFORM_100, **kwargs)


def test_bad_sizes_raise():
    w = Workload("u", UNIFORM_100)
    with pytest.raises(ConfigError):
        w.quadrature(0)
    with pytest.raises(ConfigError):
        w.sample(np.random.default_rng(0), -1)
