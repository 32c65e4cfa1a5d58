"""A pool simulated on its own (``fleetplan.sim.steady``): its sub-stream, warm-up cut and drift figures."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.hardware import load_catalog
from fleetplan.sim import FleetSpec, PoolRouter, build_pool, steady
from fleetplan.sim.steady import GRID_LEVELS, mixture_quantile, mser5_truncation, pool_stream, simulate_pool
from fleetplan.workload import load_workload


@pytest.fixture(scope="module")
def fleet():
    h100 = load_catalog().get("H100-SXM")
    return FleetSpec((build_pool(h100, "short", 2, 1024), build_pool(h100, "mid", 1, 3072),
                      build_pool(h100, "long", 1, 14_089)), pool_router=PoolRouter.LENGTH)


def test_mser5_cuts_a_known_transient():
    """A series that decays from 10 to 1 over its first 500 values, then fluctuates around 1: MSER-5 cuts
    close to the end of the transient and nowhere near the half-way limit."""
    rng = np.random.default_rng(3)
    series = np.concatenate([np.linspace(10.0, 1.0, 500), 1.0 + 0.1 * rng.standard_normal(4_500)])
    n_cut, at_limit = mser5_truncation(series)
    assert 350 <= n_cut <= 600 and not at_limit


def test_mser5_keeps_a_stationary_series():
    rng = np.random.default_rng(4)
    n_cut, at_limit = mser5_truncation(1.0 + 0.1 * rng.standard_normal(5_000))
    assert n_cut < 500 and not at_limit


def test_sub_stream_share_and_lengths_follow_the_router(fleet):
    """Thinning: the kept share estimates P(route to the pool) (binomial tolerance, 4 sigma, over the draws
    behind it), and every kept request is one the length router sends to the pool."""
    wl = load_workload("azure_conv")
    draws = 1 << 20
    prompt, output = wl.sample(np.random.default_rng(9), draws)
    total = prompt + output
    for pool, (lo, hi) in enumerate(((0, 1024), (1024, 3072), (3072, 14_089))):
        p = float(np.mean((total > lo) & (total <= hi)))
        req, q = pool_stream(fleet, pool, wl, 100.0, 5_000, seed=2)
        drawn = steady.CHUNK_DRAWS * max(1, int(np.ceil(5_000 / max(q, 1e-9) / steady.CHUNK_DRAWS)))
        tol = 4 * np.sqrt(p * (1 - p) / draws + q * (1 - q) / drawn)
        assert abs(q - p) <= tol + 1e-3, (pool, q, p)
        tot = req.original_prompt_tokens + req.output_tokens
        assert np.all((tot > lo) & (tot <= hi))
        gaps = np.diff(req.arrival_s)
        assert np.mean(gaps) == pytest.approx(1.0 / (100.0 * q), rel=0.05)  # Poisson at λ·q


def test_a_shorter_stream_is_a_prefix_of_a_longer_one(fleet):
    wl = load_workload("azure_conv")
    steady._STREAM_CACHE.clear()
    short, q1 = pool_stream(fleet, 1, wl, 100.0, 1_000, seed=5)
    steady._STREAM_CACHE.clear()
    long, q2 = pool_stream(fleet, 1, wl, 100.0, 3_000, seed=5)
    assert q1 == q2  # both within the first chunk of draws
    for name in ("arrival_s", "prompt_tokens", "output_tokens", "route_u"):
        assert np.array_equal(getattr(long, name)[:1_000], getattr(short, name))
    cached, _ = pool_stream(fleet, 1, wl, 100.0, 1_000, seed=5)  # from the cache: the very same numbers
    assert np.array_equal(cached.prompt_tokens, short.prompt_tokens)


def test_overload_drifts_and_light_load_does_not(fleet):
    """One H100 for the 1,025-3,072-token band: at 2 req/s it is lightly loaded and its halves agree; at 40
    req/s of that band it cannot keep up, the queue grows and the second half's P99 TTFT is above the
    first's even after MSER-5's cut, which runs into its limit."""
    wl = load_workload("azure_conv")
    light = simulate_pool(fleet, 1, wl, 2.0 / 0.18, 3_000, seed=1)
    heavy = simulate_pool(fleet, 1, wl, 40.0 / 0.18, 3_000, seed=1)
    assert light.p_ttft_second_half_s < 1.5 * light.p_ttft_first_half_s and light.n_not_done == 0
    assert heavy.warmup_at_limit and heavy.p_ttft_second_half_s > 1.2 * heavy.p_ttft_first_half_s


def test_mixture_quantile_of_two_samples():
    """The mixture's quantile from per-sample grids equals the pooled sample's quantile, up to the grid's
    resolution (neighbouring grid levels bracket it)."""
    rng = np.random.default_rng(1)
    a, b = rng.exponential(1.0, 20_000), 3.0 + rng.exponential(0.5, 5_000)
    grids = [np.quantile(x, GRID_LEVELS, method="inverted_cdf") for x in (a, b)]
    got = mixture_quantile(grids, [a.size, b.size], 0.99)
    pooled = np.concatenate([a, b])
    lo, hi = np.quantile(pooled, [0.985, 0.995])
    assert lo <= got <= hi


@pytest.mark.parametrize("a, b", [(6_144, 14_089), (9_216, float("inf")), (1_024, 1_536)])
def test_the_sub_stream_region_is_a_tight_superset(a, b):
    """``_u1_region``: every draw whose total lies in (a, b] has its first uniform inside the region (so
    sampling there is exact), and the region is not much larger than the band's own probability (a pool of
    a tiny share, e.g. 6,145-14,089 tokens behind a compress router, draws its stream in ~0.1 s, not ~3 s)."""
    wl = load_workload("azure_conv")
    starts, widths = steady._u1_region(wl, a, b)
    rng = np.random.default_rng(11)
    u1, u2 = rng.random(1 << 21), rng.random(1 << 21)
    prompt, output = wl.lengths_at(u1, u2)
    inside = (prompt + output > a) & (prompt + output <= b)
    order = np.argsort(starts)
    j = np.searchsorted(starts[order], u1, side="right") - 1
    in_region = (j >= 0) & (u1 < (starts[order] + widths[order])[np.maximum(j, 0)])
    assert inside.any() and np.all(in_region[inside])
    assert widths.sum() <= 25 * inside.mean() + 1e-4  # was ~1,200x for (6144, 14089] before the r-bins


def test_the_region_is_computed_once_per_band_and_changes_no_draw(fleet, monkeypatch):
    """The replications of one pool (other seeds) share its ``_u1_region`` (``_REGION_CACHE``), and the
    streams are the very arrays drawn with the region computed afresh for every stream."""
    wl = load_workload("lmsys")
    steady._STREAM_CACHE.clear()
    steady._REGION_CACHE.clear()
    cached = [pool_stream(fleet, 1, wl, 50.0, 2_000, seed=s) for s in (1, 2, 3)]
    assert len(steady._REGION_CACHE) == 1
    calls = []

    def fresh(workload, fingerprint, a, b):
        calls.append((a, b))
        return steady._u1_region(workload, a, b)

    monkeypatch.setattr(steady, "_region", fresh)
    steady._STREAM_CACHE.clear()
    again = [pool_stream(fleet, 1, wl, 50.0, 2_000, seed=s) for s in (1, 2, 3)]
    assert len(calls) == 3
    for (x, qx), (y, qy) in zip(cached, again, strict=True):
        assert qx == qy
        for name in ("arrival_s", "prompt_tokens", "output_tokens", "route_u"):
            np.testing.assert_array_equal(getattr(x, name), getattr(y, name))


@pytest.mark.parametrize("kind", ["equal", "skewed", "ties", "one", "region"])
def test_sorted_search_is_searchsorted(kind):
    """``SortedSearch``: the very indices of ``np.searchsorted(cum, u, side="right")``, for keys drawn as the
    sub-stream draws them, at the bins' ends and at the range's ends."""
    rng = np.random.default_rng(17)
    if kind == "equal":
        widths = np.full(5_000, 1.0 / 65_536)
    elif kind == "skewed":
        widths = rng.pareto(0.7, 3_000) + 1e-9  # a few bins hold most of the mass
    elif kind == "ties":
        widths = np.where(rng.random(2_000) < 0.3, 0.0, rng.random(2_000))
    elif kind == "one":
        widths = np.array([0.25])
    else:
        widths = steady._u1_region(load_workload("lmsys"), 0.0, 2048.0)[1]
    cum = np.cumsum(widths)
    u = np.concatenate([rng.random(1 << 16) * cum[-1], cum, [0.0, cum[-1]], np.nextafter(cum, 0.0)])
    np.testing.assert_array_equal(steady.SortedSearch(cum)(u), np.searchsorted(cum, u, side="right"))
