"""Logistic power curve (core paper §4.8, Table 9) and its inverse."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetplan.errors import ConfigError
from fleetplan.hardware import PowerCurve, batch_for_power, load_catalog, power_w

H100 = load_catalog().get("H100-SXM")

# Table 9 of the paper: batch cap (n_max) -> W per GPU.
PAPER_TABLE_9 = [(128, 583.0), (48, 540.0), (24, 479.0), (13, 413.0), (6, 350.0), (1, 304.0)]


def test_h100_fit_reproduces_paper_end_points_within_1pct() -> None:
    assert power_w(H100, 1) == pytest.approx(304.0, rel=0.01)
    assert power_w(H100, 128) == pytest.approx(583.0, rel=0.01)


def test_floor_and_range_derived_consistently() -> None:
    curve = H100.power
    assert curve is not None
    assert (curve.k, curve.x0_log2_batch) == (1.0, 4.2)
    # P_range = P_nom - P_idle; solving P(1)=304, P(128)=583 gives P_idle ~ 299.6, P_range ~ 300.7
    s1 = 1.0 / (1.0 + np.exp(4.2))
    s128 = 1.0 / (1.0 + np.exp(-(7.0 - 4.2)))
    range_solved = (583.0 - 304.0) / (s128 - s1)
    assert curve.range_w == pytest.approx(range_solved, rel=0.01)
    assert curve.floor_w == pytest.approx(304.0 - range_solved * s1, rel=0.01)


@pytest.mark.parametrize("batch, watts", PAPER_TABLE_9)
def test_paper_table_9_rows(batch: int, watts: float) -> None:
    assert power_w(H100, batch) == pytest.approx(watts, rel=0.01)


def test_vectorised_and_monotone() -> None:
    batches = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256])
    watts = power_w(H100, batches)
    assert isinstance(watts, np.ndarray) and watts.shape == batches.shape
    assert np.all(np.diff(watts) > 0)
    assert np.all((watts > 300.0) & (watts < 600.0))
    assert isinstance(power_w(H100, 4), float)


def test_inverse_recovers_paper_batch_caps() -> None:
    # 540 W -> batch 48 and 413 W -> batch 13 (Table 9), to within 2%
    assert batch_for_power(H100, 540.0) == pytest.approx(48.0, rel=0.02)
    assert batch_for_power(H100, 413.0) == pytest.approx(13.0, rel=0.02)
    out = batch_for_power(H100, np.array([350.0, 479.0]))
    np.testing.assert_allclose(out, [6.0, 24.0], rtol=0.03)


@given(st.floats(min_value=0.5, max_value=4096.0))
def test_inverse_round_trips(batch: float) -> None:
    assert batch_for_power(H100, power_w(H100, batch)) == pytest.approx(batch, rel=1e-6)


@pytest.mark.parametrize("watts", [300.0, 250.0, 600.0, 700.0, float("nan")])
def test_inverse_rejects_power_outside_the_curve(watts: float) -> None:
    with pytest.raises(ConfigError, match="outside the curve"):
        batch_for_power(H100, watts)


@pytest.mark.parametrize("batch", [0, -1, np.array([4.0, 0.0])])
def test_power_rejects_non_positive_batch(batch) -> None:
    with pytest.raises(ConfigError):
        power_w(H100, batch)


@pytest.mark.parametrize("name", ["A100-80GB", "A10G", "MI300X"])
def test_gpus_without_a_published_fit_raise(name: str) -> None:
    profile = load_catalog().get(name)
    assert profile.power is None
    with pytest.raises(ConfigError, match="no published power curve"):
        power_w(profile, 8)
    with pytest.raises(ConfigError, match="no published power curve"):
        batch_for_power(profile, 300.0)


@pytest.mark.parametrize(
    "kwargs",
    [dict(k=0.0, x0_log2_batch=4.2, floor_w=300.0, nominal_w=600.0),
     dict(k=1.0, x0_log2_batch=4.2, floor_w=600.0, nominal_w=600.0),
     dict(k=1.0, x0_log2_batch=float("nan"), floor_w=300.0, nominal_w=600.0),
     dict(k=1.0, x0_log2_batch=4.2, floor_w=0.0, nominal_w=600.0)],
)
def test_invalid_curves_raise(kwargs) -> None:
    with pytest.raises(ConfigError):
        PowerCurve(**kwargs)
