"""Erlang-B/C against exact theory: rational sums, literature values, 50-digit sums."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from fleetplan.errors import ConfigError
from fleetplan.queueing import erlang_b, erlang_c


def exact_erlang_c(c: int, a: Fraction) -> Fraction:
    """Eq. (1) with exact rational arithmetic."""
    term = Fraction(1)
    head = Fraction(0)
    for k in range(c):
        head += term
        term = term * a / (k + 1)  # term = a^(k+1)/(k+1)!
    last = term / (1 - a / c)
    return last / (head + last)


def exact_erlang_b(c: int, a: Fraction) -> Fraction:
    term, total = Fraction(1), Fraction(1)
    for k in range(1, c + 1):
        term = term * a / k
        total += term
    return term / total


def test_single_server_wait_probability_is_rho() -> None:
    rho = np.linspace(0.0, 0.9999, 101)
    np.testing.assert_allclose(erlang_c(np.ones_like(rho, dtype=int), rho), rho, rtol=1e-14, atol=0)


def test_literature_value_two_servers_one_erlang() -> None:
    # M/M/2 at a = 1: C = (1/2 / (1/2)) / (1 + 1 + 1) = 1/3.
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3, rel=1e-15)
    assert exact_erlang_c(2, Fraction(1)) == Fraction(1, 3)


@pytest.mark.parametrize("c", [1, 2, 3, 5, 8, 13, 15, 16, 17, 24, 40])
@pytest.mark.parametrize("rho", [Fraction(1, 100), Fraction(1, 3), Fraction(17, 20), Fraction(99, 100),
                                 Fraction(9999, 10000)])
def test_matches_exact_rational_sums(c: int, rho: Fraction) -> None:
    a = rho * c
    assert erlang_c(c, float(a)) == pytest.approx(float(exact_erlang_c(c, a)), rel=1e-13)
    assert erlang_b(c, float(a)) == pytest.approx(float(exact_erlang_b(c, a)), rel=1e-13)


def test_erlang_b_beyond_saturation_matches_exact() -> None:
    for c, a in [(1, Fraction(3)), (4, Fraction(10)), (20, Fraction(45, 2))]:
        assert erlang_b(c, float(a)) == pytest.approx(float(exact_erlang_b(c, a)), rel=1e-13)


@pytest.mark.parametrize("c", [100, 1000, 10_000, 100_000])
@pytest.mark.parametrize("rho", [0.5, 0.9, 0.99, 0.999, 0.9999])
def test_large_server_counts_match_50_digit_log_sum(c: int, rho: float) -> None:
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 50
    a = mpmath.mpf(rho) * c
    # Σ_{k<c} a^k/k! accumulated term by term at 50 digits, then eq. (1).
    head, term = mpmath.mpf(0), mpmath.mpf(1)
    for k in range(c):
        head += term
        term = term * a / (k + 1)
    last = term / (1 - a / c)
    expected = float(last / (head + last))
    got = erlang_c(c, rho * c)
    if expected < 1e-290:
        assert got < 1e-280
    else:
        assert got == pytest.approx(expected, rel=1e-11)


def test_unstable_load_gives_exactly_one_and_zero_load_gives_zero() -> None:
    c = np.array([1, 4, 100, 100_000])
    assert np.all(erlang_c(c, c * 1.0) == 1.0)
    assert np.all(erlang_c(c, c * 1.7) == 1.0)
    assert np.all(erlang_c(c, 0.0) == 0.0)


def test_vectorised_broadcast_and_scalar_types() -> None:
    c = np.array([[1], [2], [50]])
    a = np.array([0.5, 0.9, 1.5])
    out = erlang_c(c, a)
    assert out.shape == (3, 3)
    for i in range(3):
        for j in range(3):
            assert out[i, j] == erlang_c(int(c[i, 0]), float(a[j]))
    assert isinstance(erlang_c(3, 1.0), float)


@pytest.mark.parametrize("c, a, fragment", [(0, 1.0, "c=0"), (2.5, 1.0, "c=2.5"), (3, -1.0, "a=-1"),
                                           (3, float("nan"), "a=nan"), (np.inf, 1.0, "c=inf")])
def test_bad_input_raises_one_line_config_error(c: float, a: float, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        erlang_c(c, a)
    message = str(info.value)
    assert fragment in message and "\n" not in message


@pytest.mark.parametrize("c, rho", [(5000, 1.7), (20_000, 1.05), (100_000, 3.0)])
def test_erlang_b_heavy_overload_matches_50_digit_sum(c: int, rho: float) -> None:
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 50
    a = mpmath.mpf(rho) * c
    term, total = mpmath.mpf(1), mpmath.mpf(1)
    for k in range(1, c + 1):
        term = term * a / k
        total += term
    assert erlang_b(c, rho * c) == pytest.approx(float(term / total), rel=1e-12)
