"""GpuProfile: validation on construction, explicit absence, provenance of every value."""

from __future__ import annotations

import dataclasses

import pytest

from fleetplan.cli.errors import render_error
from fleetplan.errors import ConfigError
from fleetplan.hardware import GpuProfile, load_catalog
from fleetplan.hardware.profile import SPEC_FIELDS
from fleetplan.units import usd_per_year

CATALOG = load_catalog()
BASE = CATALOG.get("A100-80GB")


def variant(**changes) -> GpuProfile:
    return dataclasses.replace(BASE, **changes)


def test_core_paper_prices_and_their_yearly_cost() -> None:
    # §4: A10G $8.85K/yr, A100 $19.4K/yr, H100 $35.2K/yr = price x 8760 h
    expected = {"A10G": (1.01, 8.85e3), "A100-80GB": (2.21, 19.4e3), "H100-SXM": (4.02, 35.2e3)}
    for name, (price, per_year) in expected.items():
        profile = CATALOG.get(name)
        assert profile.price_usd_per_h == price
        assert usd_per_year(profile.price_usd_per_h) == pytest.approx(per_year, abs=60.0)


def test_absence_is_none_never_zero() -> None:
    for name in ("A10G", "A100-40GB", "A100-80GB"):
        assert CATALOG.get(name).fp8_tflops is None  # Ampere has no FP8
    for name in ("A10G", "L4", "L40S"):
        assert CATALOG.get(name).nvlink_gb_per_s is None  # PCIe-only cards
    for profile in CATALOG:
        for field in SPEC_FIELDS:
            assert getattr(profile, field) != 0, (profile.name, field)


def test_fp8_is_twice_bf16_where_present() -> None:
    # Dense FP8 is 2x dense BF16 on every FP8-capable part here; a sparse figure would break it.
    for profile in CATALOG:
        if profile.fp8_tflops is not None:
            assert profile.fp8_tflops / profile.bf16_tflops == pytest.approx(2.0, rel=0.02), profile.name


def test_every_value_has_a_source() -> None:
    for profile in CATALOG:
        for field in SPEC_FIELDS:
            assert profile.sources[field].strip(), (profile.name, field)
        if profile.serving is not None:
            assert "arXiv:2603.16054" in profile.sources["serving"]
        if profile.power is not None:
            assert profile.sources["power"].strip()


def test_estimates_say_so() -> None:
    for profile in CATALOG:
        assert "estimate" in profile.sources["idle_w"], profile.name


def test_missing_price_is_explicit() -> None:
    h20 = CATALOG.get("H20")
    assert h20.price_usd_per_h is None
    with pytest.raises(ConfigError) as err:
        h20.require_price_usd_per_h()
    assert "--price H20=" in render_error(err.value)  # the CLI's wording names the flag
    assert CATALOG.get("L4").require_price_usd_per_h() == pytest.approx(0.7992)


def test_with_price_replaces_value_and_source() -> None:
    cheaper = BASE.with_price(1.5, "our contract")
    assert cheaper.price_usd_per_h == 1.5 and cheaper.sources["price_usd_per_h"] == "our contract"
    assert BASE.price_usd_per_h == 2.21  # original untouched


def test_profile_is_frozen_hashable_and_sources_read_only() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        BASE.tdp_w = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        BASE.sources["tdp_w"] = "x"  # type: ignore[index]
    assert hash(BASE) == hash(variant())


@pytest.mark.parametrize(
    "changes, match",
    [
        (dict(fp8_tflops=0.0), "fp8_tflops"),
        (dict(bf16_tflops=-1.0), "bf16_tflops"),
        (dict(hbm_gib=float("nan")), "hbm_gib"),
        (dict(idle_w=400.0), "idle_w"),
        (dict(price_usd_per_h=0.0), "price_usd_per_h"),
        (dict(mttr_days=-1.0), "mttr_days"),
        (dict(aliases=("A100",)), "lower case"),
        (dict(aliases=("a100", "a100")), "repeats"),
        (dict(aliases=("a100-80gb",)), "repeats"),
        (dict(name=""), "name"),
        (dict(description=""), "description"),
    ],
)
def test_invalid_profiles_raise_one_line(changes, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        variant(**changes)
    assert "\n" not in str(info.value)


def test_missing_source_is_rejected() -> None:
    sources = dict(BASE.sources)
    del sources["tdp_w"]
    with pytest.raises(ConfigError, match="no source for tdp_w"):
        variant(sources=sources)


def test_zero_failure_rate_is_a_valid_value() -> None:
    assert variant(failure_rate_per_day=0.0).availability == 1.0
