"""A pool's request points are built once per process (``queueing.engine.request_points``): a profile built
from the shared points holds the very figures a profile built from scratch holds, bit for bit, the shared
arrays cannot be changed through a profile, and bad points are refused whether or not good ones are cached."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.errors import ConfigError
from fleetplan.perf.linear import LinearStepModel
from fleetplan.queueing import engine as engine_mod
from fleetplan.queueing.engine import EngineLimits, EngineModel, EngineProfile, RequestPoints, request_points

ENGINES = [EngineModel.of(LinearStepModel(0.006, 6e-5, 1.2e-4, 8192.0), EngineLimits(256, 8192, 20000, 16)),
           EngineModel.of(LinearStepModel(0.012, 1e-4, 3e-4), EngineLimits(64, 2048, 4000, 16))]


def _points(seed: int, n: int = 300) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (np.round(rng.lognormal(6.0, 1.0, n)) + 1.0, np.round(rng.lognormal(5.0, 0.8, n)) + 1.0,
            rng.random(n))


def _figures(prof: EngineProfile) -> list:
    st = prof.state(10.0, [1, 4, 16])
    assert st.stable[2]
    mix = prof._tpot_mixture(st, 2)
    return [prof.n_cap, prof.mean_ctx, prof.mean_decode_steps, prof._ctx2, prof._prompt_cs2, prof._cs2_decode,
            prof._mean_prompt, prof.prefill_s, prof.prefill_binned, prof.phi, prof.phi_full, prof.bin_weight,
            prof.prefill_fluid_binned, st.rho, st.wait_mass, st.wait_decay_per_s, st.prefill_levels, *mix,
            prof.ttft_survival(st, 2, np.linspace(0.0, 2.0, 40)), prof.tpot_survival(st, 2, np.linspace(0, 0.1, 40))]


def _fresh(engine: EngineModel, p, o, w) -> EngineProfile:
    engine_mod._REQUEST_POINTS.clear()
    return EngineProfile(engine, p, o, w)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shared_points_give_the_figures_of_fresh_ones(seed: int) -> None:
    p, o, w = _points(seed)
    for engine in ENGINES:
        want = _figures(_fresh(engine, p, o, w))
        shared = [EngineProfile(e, p.copy(), o.copy(), w.copy()) for e in ENGINES]  # the first builds them
        got = _figures(shared[ENGINES.index(engine)])
        assert shared[0].points is shared[1].points
        for a, b in zip(got, want, strict=True):
            assert np.array_equal(a, b, equal_nan=True), (a, b)


def test_points_are_their_definitions() -> None:
    p, o, w = _points(7)
    pts = request_points(p, o, w)
    order = np.argsort(p, kind="stable")
    wn = w[order] / w[order].sum()
    d = np.round(o[order]) - 1.0
    pr = np.round(p[order])
    assert np.array_equal(pts.prompt, pr) and np.array_equal(pts.weight, wn)
    ctx = d * pr + d * (d - 1.0) / 2.0
    assert pts.mean_decode_steps == float(wn @ d)
    assert pts.mean_ctx == float(wn @ ctx) / float(wn @ d)
    assert pts.kv_ctx == float(wn @ (ctx + pr)) / (float(wn @ d) + 1.0)
    assert np.isclose(pts.bin_weight.sum(), 1.0) and pts.bin_starts[0] == 0
    dd, bw = pts.tpot_bins
    assert np.isclose(bw.sum(), 1.0) and np.all(dd >= 1.0)
    assert request_points(p.copy(), o.copy(), w.copy()) is pts  # equal arrays: the same points


def test_shared_arrays_are_read_only() -> None:
    prof = EngineProfile(ENGINES[0], *_points(3))
    for a in (prof.prompt, prof.output, prof.weight, prof.decode_steps, prof.bin_weight):
        with pytest.raises(ValueError):
            a[0] = 1.0


def test_bad_points_are_refused_with_good_ones_cached() -> None:
    p, o, w = _points(4, 10)
    request_points(p, o, w)
    bad_p = p.copy()
    bad_p[0] = 0.0
    with pytest.raises(ConfigError):
        request_points(bad_p, o, w)
    with pytest.raises(ConfigError):
        request_points(p, o, np.zeros_like(w))
    with pytest.raises(ConfigError):
        request_points(p[:5], o, w)
    assert isinstance(request_points(p, o, w), RequestPoints)


def test_the_cache_is_bounded() -> None:
    engine_mod._REQUEST_POINTS.clear()
    for seed in range(engine_mod.REQUEST_POINTS_CACHE + 5):
        request_points(*_points(seed, 4))
    assert len(engine_mod._REQUEST_POINTS) == engine_mod.REQUEST_POINTS_CACHE


def test_threads_share_the_cache_safely() -> None:
    """Executors' threads may size pools at once: building and evicting point sets from several threads
    raises nothing and leaves the cache bounded."""
    from concurrent.futures import ThreadPoolExecutor

    sets = [_points(seed, 6) for seed in range(3 * engine_mod.REQUEST_POINTS_CACHE)]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda s: request_points(*s), sets * 2))
    assert all(isinstance(g, RequestPoints) for g in got)
    assert len(engine_mod._REQUEST_POINTS) <= engine_mod.REQUEST_POINTS_CACHE
