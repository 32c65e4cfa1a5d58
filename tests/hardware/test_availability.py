"""Availability (core paper §3.5, eq. 6) and spare sizing."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.hardware import (
    AVAILABILITY_PRESETS,
    AvailabilityPreset,
    availability_preset,
    load_catalog,
    node_availability,
    with_spares,
)

# The paper's §3.5 table, to the 4 decimals it prints (it truncates 0.98717 to 0.9871).
PAPER_PRESETS = {"a100-soft": 0.9989, "a100-hard": 0.9871, "h100-5pct": 0.95}


def test_equation_6_by_hand() -> None:
    assert node_availability(0.0065, 2.0) == pytest.approx(1.0 / 1.013)
    assert node_availability(0.0, 5.0) == 1.0
    assert node_availability(0.1, 0.0) == 1.0


@pytest.mark.parametrize("name", sorted(PAPER_PRESETS))
def test_presets_reproduce_paper_values(name: str) -> None:
    assert availability_preset(name).availability == pytest.approx(PAPER_PRESETS[name], abs=1e-4)


def test_rsc1_presets_derive_from_rate_and_repair_time() -> None:
    soft, hard = availability_preset("a100-soft"), availability_preset("a100-hard")
    assert soft.failures_per_day == hard.failures_per_day == pytest.approx(6.50 / 1000)
    assert soft.mttr_days == pytest.approx(4 / 24)
    assert hard.mttr_days == pytest.approx(48 / 24)
    assert soft.availability == pytest.approx(1 / (1 + 0.0065 / 6))


def test_preset_lookup_is_case_insensitive_and_strict() -> None:
    assert availability_preset(" A100-Soft ") is AVAILABILITY_PRESETS["a100-soft"]
    assert availability_preset("ideal").availability == 1.0
    with pytest.raises(UnknownNameError) as info:
        availability_preset("a100")
    assert set(info.value.valid) == set(AVAILABILITY_PRESETS)


def test_preset_needs_exactly_one_form() -> None:
    with pytest.raises(ConfigError):
        AvailabilityPreset("x", "d", "s")  # neither form
    with pytest.raises(ConfigError):
        AvailabilityPreset("x", "d", "s", failures_per_day=0.01)  # rate without repair time
    with pytest.raises(ConfigError):
        AvailabilityPreset("x", "d", "s", failures_per_day=0.01, mttr_days=1.0, stated_availability=0.9)


@pytest.mark.parametrize(
    "n, a, expected",
    [(20, 0.95, 22), (8, 1.0, 8), (19, 0.95, 20), (21, 0.7, 30), (0, 0.9, 0), (14, 0.9871, 15),
     (100, 0.9989, 101), (4, 0.5, 8)],
)
def test_with_spares_examples(n: int, a: float, expected: int) -> None:
    assert with_spares(n, a) == expected


def test_with_spares_guards_float_noise() -> None:
    assert 21 / 0.7 > 30  # the float quotient is 30.000000000000004
    assert with_spares(21, 0.7) == 30
    assert with_spares(168, 0.7) == 240


@given(st.integers(min_value=0, max_value=100_000), st.floats(min_value=0.01, max_value=1.0))
def test_with_spares_is_the_smallest_sufficient_count(n: int, a: float) -> None:
    deployed = with_spares(n, a)
    assert deployed >= n
    assert deployed * a >= n * (1 - 1e-9)
    assert deployed == 0 or (deployed - 1) * a < n


@pytest.mark.parametrize("n, a", [(-1, 0.9), (2.5, 0.9), (True, 0.9), (10, 0.0), (10, 1.01),
                                  (10, math.nan)])
def test_with_spares_rejects_bad_input(n, a) -> None:
    with pytest.raises(ConfigError):
        with_spares(n, a)


def test_profile_availability_from_published_rate() -> None:
    catalog = load_catalog()
    a100 = catalog.get("A100-80GB")
    assert a100.failure_rate_per_day == pytest.approx(0.0065)
    assert a100.availability == pytest.approx(PAPER_PRESETS["a100-hard"], abs=1e-4)
    assert catalog.get("H100-SXM").availability is None  # no published rate + repair time
    assert catalog.get("L4").availability is None
