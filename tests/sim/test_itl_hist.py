"""The feature kernel's inter-token histogram (``fleetplan.sim._kernels.features.itl``).

The twin counts every streamed chunk's gap step by step; ``tests.sim.test_features_cases.run_one``
keeps the histogram on, so every kernel = twin test of the feature kernel compares it bin for bin.
Here: the binning's precision (a bin's centre within 6.1e-5 of each gap in it), and the telescoping
theorem: a request's gaps add up to ``last token - first token``, so over completed requests the
histogram holds ``output - 1`` gaps each (one chunk per token without speculative decoding) and its
centres weighted by the counts add up to ``sum(done - first token)`` within the bins' precision,
preemption waits included (the featureless kernel's step log leaves those out)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.sim._kernels import STATUS_DONE
from fleetplan.sim._kernels.features.itl import ITL_BINS, ITL_OCTAVE_LO, ITL_SUB_BINS, itl_bin, itl_bin_centre_s
from fleetplan.sim.features.arrays import no_extras
from tests.reference.features_level import itl_bin as twin_bin
from tests.sim.test_features_cases import assert_twin, features_off, run_one
from tests.sim.test_features_cases import run_iteration_features as kernel
from tests.sim.test_preempt_cache import long_prompt_case, prefix_on

HALF_WIDTH = 1.0 / (2 * ITL_SUB_BINS)  # relative, at the bottom of an octave


@settings(deadline=None)  # the first call compiles itl_bin
@given(st.floats(min_value=2.0 ** (ITL_OCTAVE_LO + 0.01), max_value=4000.0, allow_nan=False))
def test_bin_centre_is_within_half_a_bin_of_the_gap(gap_s: float) -> None:
    b = itl_bin(gap_s)
    assert b == twin_bin(gap_s)
    assert 0 <= b < ITL_BINS
    assert abs(float(itl_bin_centre_s(np.array([b]))[0]) - gap_s) <= HALF_WIDTH * gap_s * (1 + 1e-12)


def test_a_tenth_of_a_millisecond_up_to_1_6_s() -> None:
    gaps = np.linspace(1e-3, 1.6, 20001)
    centres = itl_bin_centre_s(np.array([itl_bin(g) for g in gaps]))
    assert np.max(np.abs(centres - gaps)) < 1e-4


def test_bins_are_monotone_and_out_of_range_gaps_clamp() -> None:
    gaps = np.geomspace(1e-7, 1e4, 5000)
    bins = np.array([itl_bin(g) for g in gaps])
    assert np.all(np.diff(bins) >= 0)
    assert itl_bin(0.0) == 0 and itl_bin(1e-9) == 0 and itl_bin(1e6) == ITL_BINS - 1


def _gap_sums(case: dict, feats: dict) -> tuple[dict, int, float, float]:
    n_steps, out = run_one(kernel, case, feats, no_extras(case["prompt_tokens"]))
    done = (out["out_status"] == STATUS_DONE) & (case["output_tokens"] > 1)
    hist = out["pool_itl_hist"].sum(axis=0)
    bins = np.flatnonzero(hist)
    centre_sum = float(np.sum(itl_bin_centre_s(bins) * hist[bins]))
    decode_s = float(np.sum(out["out_done_s"][done] - out["out_first_token_s"][done]))
    return out, int(hist.sum()), centre_sum, decode_s


@pytest.mark.parametrize("seed", range(8))
def test_gaps_telescope_to_the_decode_time_under_preemption(seed: int) -> None:
    """KV-saturated cases with prefix caching on (preemptions on most steps): every gap is counted,
    the waits of preempted requests included."""
    case = long_prompt_case(seed)
    feats = prefix_on(len(case["pool_router"]))
    out, n_gaps, centre_sum, decode_s = _gap_sums(case, feats)
    done = (out["out_status"] == STATUS_DONE) & (case["output_tokens"] > 1)
    assert n_gaps == int(np.sum(case["output_tokens"][done] - 1))
    assert centre_sum == pytest.approx(decode_s, rel=HALF_WIDTH)
    np.testing.assert_array_equal(out["out_last_token_s"][done], out["out_done_s"][done])
    assert_twin(case, feats, no_extras(case["prompt_tokens"]))


@pytest.mark.parametrize("seed", range(6))
def test_gaps_telescope_without_features(seed: int) -> None:
    """All features off: runs of identical decode steps are committed as one event (itl_run)."""
    case = long_prompt_case(seed)
    case["pool_kv_blocks"] = case["pool_kv_blocks"] * 50
    _, n_gaps, centre_sum, decode_s = _gap_sums(case, features_off(len(case["pool_router"])))
    assert centre_sum == pytest.approx(decode_s, rel=HALF_WIDTH)
    assert n_gaps > 0 and math.isfinite(centre_sum)
