"""The analytic engine model's compiled kernels (``fleetplan.queueing._kernels``) against their pure-Python
twins: bit for bit where the kernel performs the twin's operations in the twin's order."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.queueing.engine import (
    _UNSTABLE,
    N_TABLE_POINTS,
    SurvivalTable,
    _geomspace,
    _table,
    load_mixture_kernel,
    mixture_quantile_s,
    mixture_quantiles_s,
)


def _random_table(rng: np.random.Generator) -> SurvivalTable:
    """A survival table as the engine builds one: exponential-ish tail on a geometric grid (``_table``)."""
    lo = float(rng.uniform(1e-3, 0.5))
    hi = lo * float(rng.uniform(1.6, 40.0))
    scale = float(rng.uniform(0.01, 2.0))
    mass = float(rng.uniform(0.0, 1.0))
    return _table(lambda x: mass * np.exp(-(x - lo) / scale) + (1 - mass) * (x < 1.2 * lo), lo, hi)


def _special_tables() -> list[SurvivalTable]:
    flat = SurvivalTable(np.array([0.0, 0.1, 0.1, 0.2]), np.array([1.0, 0.5, 0.5, 0.0]))  # repeated point
    step = SurvivalTable(np.array([0.0, 1e-9]), np.array([1.0, 0.0]))  # no decode steps (tpot_table)
    single = SurvivalTable(np.array([0.5]), np.array([0.3]))
    unsorted = SurvivalTable(np.array([0.0, 0.3, 0.2, 0.4]), np.array([1.0, 0.2, 0.4, 0.0]))  # left to the twin
    return [_UNSTABLE, flat, step, single, unsorted]


def _fleets(rng: np.random.Generator, tables: list[SurvivalTable], n: int) -> list[tuple[list, list[float]]]:
    out = []
    for _ in range(n):
        k = int(rng.integers(1, 5))
        chosen = [tables[int(i)] for i in rng.integers(0, len(tables), k)]
        shares = [float(s) if rng.random() > 0.15 else 0.0 for s in rng.dirichlet(np.ones(k))]
        out.append((chosen, shares))
    return out


@pytest.mark.parametrize("p", [0.5, 0.9, 0.99, 0.999])
def test_mixture_quantiles_match_the_twin_bit_for_bit(p):
    rng = np.random.default_rng(7)
    tables = [_random_table(rng) for _ in range(40)] + _special_tables()
    fleets = _fleets(rng, tables, 600) + [([], []), ([tables[0]], [0.0]), ([_UNSTABLE, tables[1]], [0.5, 0.5])]
    got = mixture_quantiles_s(fleets, p)
    want = np.array([mixture_quantile_s(t, s, p) for t, s in fleets])
    assert got.shape == want.shape
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    assert same.all(), [(f, g, w) for f, g, w, ok in zip(fleets, got, want, same, strict=True) if not ok][:3]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0.5, 0.9999))
def test_mixture_quantiles_property_match(seed, p):
    rng = np.random.default_rng(seed)
    tables = [_random_table(rng) for _ in range(6)] + _special_tables()
    fleets = _fleets(rng, tables, 20)
    got = mixture_quantiles_s(fleets, p)
    want = np.array([mixture_quantile_s(t, s, p) for t, s in fleets])
    assert np.array_equal(got, want, equal_nan=True)


def test_mixture_quantile_of_two_exponential_pools_is_the_root():
    """Theory: with survivals e^{-x/a} and e^{-x/b} tabulated finely, the quantile solves
    w e^{-x/a} + (1 - w) e^{-x/b} = 1 - p (to the table's interpolation error)."""
    a, b, w, p = 0.05, 0.2, 0.7, 0.99
    ta = _table(lambda x: np.exp(-x / a), 1e-4, 1.0)
    tb = _table(lambda x: np.exp(-x / b), 1e-4, 4.0)
    x = float(mixture_quantiles_s([([ta, tb], [w, 1 - w])], p)[0])
    lo, hi = 0.0, 10.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if w * math.exp(-mid / a) + (1 - w) * math.exp(-mid / b) > 1 - p else (lo, mid)
    assert x == pytest.approx(lo, rel=2e-2)
    assert N_TABLE_POINTS == _geomspace(1.0, 2.0, N_TABLE_POINTS).size


def test_load_mixture_kernel_leaves_the_kernel_loaded_and_the_figures_alone():
    """The command line's head start (``load_mixture_kernel``) loads the compiled pass with the argument
    types of a sweep's calls: afterwards it has a signature and still matches the twin."""
    from fleetplan.queueing._kernels.mixture import mixture_quantiles

    load_mixture_kernel()
    if hasattr(mixture_quantiles, "signatures"):  # not under NUMBA_DISABLE_JIT=1
        assert len(mixture_quantiles.signatures) == 1
    rng = np.random.default_rng(3)
    tables = [_random_table(rng) for _ in range(5)]
    fleets = _fleets(rng, tables, 30)
    assert mixture_quantiles_s(fleets, 0.99).tolist() == [mixture_quantile_s(t, s, 0.99) for t, s in fleets]
