"""The analytic sweep's shortcuts give the values of the expressions they replace, bit for bit: the compiled
``np.interp``, the zero-load quantile without ``ZeroWaitTtft``, step times without their zero terms, the
fleet mixture summed in place and a one-count state as its own row (their slow forms written out here, as
the code had them)."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.perf.linear import (
    N_STEP_COEFS,
    STEP_MODEL_LINEAR,
    STEP_MODEL_ROOFLINE,
    LinearStepModel,
    step_time_array_s,
)
from fleetplan.queueing import engine as engine_mod
from fleetplan.queueing.engine import (
    EngineLimits,
    EngineModel,
    EngineProfile,
    SurvivalTable,
    mixture_quantile_s,
)
from fleetplan.queueing.ttft import ZeroWaitTtft, sorted_quantile


def _same(a, b) -> bool:
    return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)


@pytest.mark.parametrize("seed", range(5))
def test_compiled_interp_is_np_interp(seed: int) -> None:
    rng = np.random.default_rng(seed)
    xp = np.sort(rng.random(40)) * 100.0
    fp = rng.random(40)
    x = rng.random(300) * 120.0 - 10.0
    assert _same(engine_mod._interp(x, xp, fp), np.interp(x, xp, fp))
    assert _same(engine_mod._interp(x, xp, fp, left=1.0, right=0.0), np.interp(x, xp, fp, left=1.0, right=0.0))
    assert engine_mod._interp(5.5, xp, fp) == np.interp(5.5, xp, fp)


@pytest.mark.parametrize("seed", range(5))
def test_sorted_quantile_is_zero_wait_ttft_quantile(seed: int) -> None:
    rng = np.random.default_rng(seed)
    t = np.sort(rng.lognormal(-2.0, 1.0, 200))
    w = rng.random(200)
    w /= w.sum()
    dist = ZeroWaitTtft(t, w)
    for p in (0.5, 0.9, 0.99, 0.999, 1.0 - 1e-9):
        assert sorted_quantile(t, w, p) == dist.quantile_s(p)


def _old_step_time(code: int, coef: np.ndarray, n_seqs, n_decode, prefill, ctx, attn2) -> np.ndarray:
    """``step_time_array_s`` as it was written before its zero terms were left out."""
    n_seqs, n_decode, prefill, ctx, attn2 = (np.asarray(a, dtype=np.float64)
                                             for a in (n_seqs, n_decode, prefill, ctx, attn2))
    if code == STEP_MODEL_LINEAR:
        return coef[0] + coef[1] * n_seqs + coef[2] * prefill + coef[3] * ctx + coef[4] * (attn2 * 0.5)
    n_tokens = prefill + n_decode
    tile = float(coef[5])
    m_tiles = np.ceil(n_tokens / tile)
    pad = np.where(n_tokens >= tile, m_tiles * tile, n_tokens)
    if coef[6] > 0.0:
        work = m_tiles * coef[6]
        wf = np.where(work > 0, np.ceil(work) / np.where(work > 0, work, 1.0), 1.0)
    else:
        wf = 1.0
    gemm = np.maximum(coef[1] * pad * wf + coef[8] * n_seqs, coef[2] + coef[7] * n_tokens + coef[9] * n_seqs)
    moe = 0.0
    if coef[12] > 0.0 or coef[14] > 0.0:
        q = 1.0 - np.exp(coef[15] * n_tokens)
        mc = coef[12] * n_tokens + coef[13] * np.sqrt(n_tokens) + coef[21] * q
        mm = coef[14] * q + coef[16] * np.sqrt(q * (1.0 - q)) + coef[17] * n_tokens
        moe = np.maximum(mc, mm)
    if coef[19] > 0.0:
        window = coef[18] * (n_decode + np.minimum((attn2 * 0.5 + prefill * 0.5) / coef[19], prefill))
    else:
        window = coef[18] * (n_decode + prefill)
    if coef[20] > 0.0:
        window = window + coef[20] * prefill
    return (coef[0] + gemm + coef[3] * (attn2 * 0.5) + coef[10] * n_tokens + coef[11] * n_seqs + moe + window
            + coef[4] * ctx)


@pytest.mark.parametrize("code", [STEP_MODEL_LINEAR, STEP_MODEL_ROOFLINE])
@pytest.mark.parametrize("seed", range(4))
def test_step_times_without_zero_terms_are_the_full_expression(code: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    coef = rng.random(N_STEP_COEFS) * np.array([1e-2, 1e-5, 1e-3, 1e-7, 1e-9, 1, 1, 1e-6, 1e-6, 1e-6,
                                                  1e-7, 1e-6, 1e-7, 1e-6, 1e-3, 1, 1e-3, 1e-7, 1e-8, 2048.0, 1e-5,
                                                  1e-3])
    coef[5] = 64.0  # tile tokens
    coef[6] = (0.0, 0.7)[seed % 2]  # wave ratio: none, or some
    coef[15] = -0.01  # MoE miss exponent
    if seed < 2:
        coef[12] = coef[14] = 0.0  # a dense model: no MoE term
    if seed % 2 == 0:
        coef[18] = coef[19] = coef[20] = 0.0  # no window / sparse attention: no window term
    elif seed == 3:
        coef[19] = 0.0  # a window term charged per token without its key bound
    n = np.geomspace(1.0, 256.0, 49)[:, None]
    prefill = np.round(rng.lognormal(6.0, 1.0, 300))[None, :]
    ctx = n * 700.0
    for attn2 in (0.0, prefill**2):
        got = step_time_array_s(code, coef, n + 1.0, n, prefill, ctx, attn2)
        assert _same(got, _old_step_time(code, coef, n + 1.0, n, prefill, ctx, attn2))
    assert _same(step_time_array_s(code, coef, 3.0, 3.0, 0.0, 2100.0, 0.0),
                 _old_step_time(code, coef, 3.0, 3.0, 0.0, 2100.0, 0.0))


def _old_mixture_quantile_s(tables, shares, p: float) -> float:
    """``mixture_quantile_s`` of several tables as it was written (its sum from 0, the finiteness of the
    merged points)."""
    tables = [t for t, s in zip(tables, shares, strict=True) if s > 0]
    w = np.array([s for s in shares if s > 0], dtype=np.float64)
    w = w / w.sum()
    xs = np.sort(np.concatenate([t.x_s for t in tables]))
    if not np.isfinite(xs).all():
        return float("inf")
    surv = sum(wi * t.at(xs) for wi, t in zip(w, tables, strict=True))
    q = 1.0 - p
    j = int(np.argmax(surv <= q))
    if surv[j] > q:
        return float("inf")
    if j == 0:
        return float(xs[0])
    x0, x1, s0, s1 = xs[j - 1], xs[j], surv[j - 1], surv[j]
    if s0 <= s1:
        return float(x1)
    if s1 > 0:
        return float(x0 + (x1 - x0) * np.log(s0 / q) / np.log(s0 / s1))
    return float(x0 + (x1 - x0) * (s0 - q) / (s0 - s1))


def _table(rng, scale: float, finite: bool = True) -> SurvivalTable:
    x = np.concatenate([[0.0], np.geomspace(scale * 1e-2, scale * (1.0 + rng.random()), 80)])
    surv = np.concatenate([[1.0], np.minimum.accumulate(np.exp(-x[1:] / scale * (1 + rng.random())))])
    if not finite:
        x[-1] = np.inf
    return SurvivalTable(x, surv)


@pytest.mark.parametrize("seed", range(6))
def test_fleet_mixture_is_the_old_sum(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for k in (2, 3, 5, 7, 8, 12):  # the shares summed in order, and (8 on) by numpy
        tables = [_table(rng, 0.05 * (i + 1)) for i in range(k)]
        shares = list(rng.random(k))
        for p in (0.9, 0.99):
            assert mixture_quantile_s(tables, shares, p) == _old_mixture_quantile_s(tables, shares, p)
    tables = [_table(rng, 0.1), _table(rng, 0.2, finite=False)]
    assert mixture_quantile_s(tables, [0.5, 0.5], 0.99) == _old_mixture_quantile_s(tables, [0.5, 0.5], 0.99)


def test_numpy_sums_fewer_than_eight_terms_in_order() -> None:
    """``mixture_quantile_s`` sums a fleet's shares in a Python loop below ``_SEQUENTIAL_SUM_TERMS``: numpy's
    sum of so few float64 terms, bit for bit (shares spanning six orders of magnitude, where the order
    shows in the last bit)."""
    rng = np.random.default_rng(11)
    for _ in range(20000):
        n = int(rng.integers(1, engine_mod._SEQUENTIAL_SUM_TERMS))
        a = rng.random(n) * 10.0 ** rng.uniform(-3.0, 3.0, n)
        total = 0.0
        for v in a.tolist():
            total += v
        assert total == a.sum()


def test_a_one_count_state_is_its_own_row() -> None:
    engine = EngineModel.of(LinearStepModel(0.006, 6e-5, 1.2e-4, 8192.0), EngineLimits(256, 8192, 20000, 16))
    rng = np.random.default_rng(3)
    prof = EngineProfile(engine, np.round(rng.lognormal(6.0, 1.0, 200)) + 1.0,
                         np.round(rng.lognormal(5.0, 0.8, 200)) + 1.0, rng.random(200))
    one = prof.state(20.0, [4])
    assert engine_mod._state_row(one, 0) is one
    many = prof.state(20.0, [3, 4, 9])
    row = engine_mod._state_row(many, 1)
    for name in ("rho", "wait_mass", "wait_decay_per_s", "prefill_levels", "api_wait_mass"):
        assert _same(getattr(row, name), getattr(many, name)[1:2])

