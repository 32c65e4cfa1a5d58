"""The measured step table: aggregates of its rows, its interpolation (exact at the grid, monotone between,
no extrapolation) and its cache file."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.errors import ConfigError
from fleetplan.perf.measured.table import (
    DECODE_BATCH,
    DECODE_CONTEXT_TOKENS,
    GRID_VERSION,
    PREFILL_TOKENS,
    MeasuredTable,
    decode_step_s,
    grid_shapes,
    prefill_step_s,
    read_cached,
    write_cached,
)


def known_step_s(phase: str, batch: int, tokens: int) -> float:
    """A step that rises with batch, context and prompt (and is not linear in their logarithms)."""
    if phase == "prefill":
        return 4e-3 + 2e-6 * batch * tokens + 1e-10 * batch * tokens**2
    return 5e-3 + 3e-5 * batch + 2e-9 * batch * tokens + 1e-3 * math.sqrt(batch)


ROWS = grid_shapes()
TABLE = MeasuredTable.from_rows("synthetic", "org/model", ROWS, [known_step_s(p, b, t) for p, b, t, _ in ROWS])


@pytest.fixture(scope="module")
def table() -> MeasuredTable:
    return TABLE


def test_grid_rows_carry_the_kernel_aggregates(table: MeasuredTable) -> None:
    fit = table.calibration_data()
    held = table.calibration_data(held_out=True)
    assert fit.n_rows + held.n_rows == len(grid_shapes())
    for i in range(fit.n_rows):
        if fit.n_decode[i] == 0:  # b prompts of P tokens from offset 0: attn2 = sum c (2 o + c) = b P^2
            per_prompt = fit.prefill_tokens[i] // fit.n_seqs[i]
            assert fit.attn2[i] == fit.n_seqs[i] * per_prompt**2
            assert fit.decode_context_tokens[i] == 0
        else:
            assert fit.n_decode[i] == fit.n_seqs[i] and fit.prefill_tokens[i] == 0 and fit.attn2[i] == 0
            assert fit.decode_context_tokens[i] % fit.n_seqs[i] == 0


def test_interpolation_is_exact_at_grid_points(table: MeasuredTable) -> None:
    for p in PREFILL_TOKENS:
        assert prefill_step_s(table, p) == pytest.approx(known_step_s("prefill", 1, p), rel=1e-12)
    for n in DECODE_BATCH:
        for c in DECODE_CONTEXT_TOKENS:
            assert decode_step_s(table, n, c) == pytest.approx(known_step_s("decode", n, c), rel=1e-12)


@settings(max_examples=100, deadline=None)
@given(x=st.floats(0.0, 1.0), y=st.floats(0.0, 1.0), dx=st.floats(0.0, 1.0), dy=st.floats(0.0, 1.0))
def test_decode_interpolation_rises_between_grid_points(x: float, y: float, dx: float, dy: float) -> None:
    tab = TABLE
    lo_n, hi_n = math.log(DECODE_BATCH[0]), math.log(DECODE_BATCH[-1])
    lo_c, hi_c = math.log(DECODE_CONTEXT_TOKENS[0]), math.log(DECODE_CONTEXT_TOKENS[-1])

    def at(u: float, v: float) -> float:
        return decode_step_s(tab, math.exp(lo_n + u * (hi_n - lo_n)), math.exp(lo_c + v * (hi_c - lo_c)))

    u2, v2 = min(1.0, x + dx * (1 - x)), min(1.0, y + dy * (1 - y))
    base = at(x, y)
    assert at(u2, y) >= base * (1 - 1e-12)
    assert at(x, v2) >= base * (1 - 1e-12)


@settings(max_examples=100, deadline=None)
@given(a=st.floats(0.0, 1.0), b=st.floats(0.0, 1.0))
def test_prefill_interpolation_rises(a: float, b: float) -> None:
    tab = TABLE
    lo, hi = math.log(PREFILL_TOKENS[0]), math.log(PREFILL_TOKENS[-1])
    x1, x2 = sorted((a, b))
    assert prefill_step_s(tab, math.exp(lo + x1 * (hi - lo))) <= prefill_step_s(tab, math.exp(lo + x2 * (hi - lo))) * (
        1 + 1e-12)


def test_no_extrapolation(table: MeasuredTable) -> None:
    with pytest.raises(ConfigError, match="outside the measured grid"):
        prefill_step_s(table, PREFILL_TOKENS[-1] * 2)
    with pytest.raises(ConfigError, match="n_seqs"):
        decode_step_s(table, DECODE_BATCH[-1] + 1, 1024)


def test_cache_round_trip_and_other_grid_versions(table: MeasuredTable, tmp_path) -> None:
    path = tmp_path / "sub" / "t.json"
    write_cached(path, table)
    back = read_cached(path)
    assert back is not None and back.label == table.label and back.phase == table.phase
    np.testing.assert_array_equal(back.step_s, table.step_s)
    np.testing.assert_array_equal(back.held_out, table.held_out)
    path.write_text(table.to_json().replace(f'"grid_version": {GRID_VERSION}', '"grid_version": -1'))
    assert read_cached(path) is None
    assert read_cached(tmp_path / "missing.json") is None


def test_bad_tables_are_refused() -> None:
    rows = grid_shapes()[:3]
    with pytest.raises(ConfigError, match="finite and > 0"):
        MeasuredTable.from_rows("bad", "org/model", rows, [1e-3, 0.0, 1e-3])
