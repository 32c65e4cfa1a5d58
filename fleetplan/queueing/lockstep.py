"""The engine model's pool load (``EngineProfile.load``) for many pools in one pass: lockstep sizing.

A sweep sizes hundreds of pools (393 in the README command), and each pool's count search asks
``EngineProfile.load`` for one to four counts per round: about 90 µs of fixed per-call cost on a few
numbers each (the README sweep: 624 calls, 1,035 rows, 21 % of the pool-sizing CPU).  Every profile
tabulates its per-batch quantities on a grid of ``N_BATCH_GRID + 1`` points (n = 0 and a geometric grid
from 1 to the concurrency cap n_cap; fewer only when n_cap = 1), so the tables of the pools stack into
(row, grid) arrays and one round's rows — any profile, rate λ and count G each — evaluate together:
the fixed point n*, the decode batch's elasticity and Gauss-Hermite levels, the prefill server's
two-moment wait, the slot holding time at the cap and the utilisation ρ = max(ρ_s, ρ_p, ρ_api).  The
equations are ``fleetplan.queueing.engine``'s (its module docstring), evaluated in the same order with
the same operations, so a row is the profile's own evaluation bit for bit where numpy rounds alike:
np.interp's form per row, the elasticity's logs with ``math.log`` as the profile takes them, and the
level sums in the order ``_evaluate`` sums them (``_level_mean``).  ``tests/queueing/test_lockstep.py``
holds them within 1e-12 relative (other BLAS builds may sum in another order).

``run_lockstep`` drives the count searches (``engine.sizing_steps``) of many pools: each round, the load
requests of all pools still searching go through ``load_requests`` at once; the latency part (the slot
chain, the TTFT tables) stays per pool (``EngineProfile._finish`` on the request's own rows).  A request
whose slot chain decides stability (k₁ = c / h(n_cap) - λ rounds to <= 0 with ρ_s < 1, see
``EngineProfile._slot_chain_passes``) is evaluated by ``EngineProfile.load`` itself.

Legend: R rows (profile q_r, λ_r, G_r, Ca²_r); tables (R, N) with N the grid size; L = 5 levels.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Generator, Sequence

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.queueing.engine import (
    _HERMITE,
    MAX_ELASTICITY,
    MIN_STEP_HEADROOM,
    RHO_TRANSIENT,
    ROUTER_MIXING_BATCH,
    EngineProfile,
    LoadRequest,
    PoolLoad,
    _LoadParts,
)

__all__ = ["load_requests", "run_lockstep"]

#: ``EngineProfile`` tables by batch (grid,) that the load reads, and its per-profile scalars.
_TABLES = ("grid", "t_d", "t_full", "budget_tokens", "phi", "phi_full", "attn_mean", "_prefill_alone_mean",
           "_prefill_full_mean")
_SCALARS = ("_mean_prompt", "mean_decode_steps", "n_cap", "_ctx2", "mean_ctx", "_s_per_ctx", "_prompt_cs2")


class _Tables:
    """The tables of profiles with one grid size, stacked (Q, N), and their scalars (Q,)."""

    def __init__(self, profiles: Sequence[EngineProfile]) -> None:
        for name in _TABLES:
            setattr(self, name.lstrip("_"), np.stack([getattr(p, name) for p in profiles]))
        for name in _SCALARS:
            setattr(self, name.lstrip("_"), np.array([float(getattr(p, name)) for p in profiles]))
        # ρ_api per unit of λ_i: E[t_api] / n (``ApiServerLoad.utilisation``)
        self.api_s = np.array([p.api.mean_busy_s / p.api.cost.n_servers for p in profiles])


def _interp(x: np.ndarray, grid: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``np.interp(x[r], grid[r], table[r])`` for every row r at once: x (R,) or (R, L), grid and table (R, N).
    The cell's slope times the offset plus its left value (np.interp's form), the ends held outside."""
    x2 = x if x.ndim == 2 else x[:, None]
    cell = (grid[:, None, :] <= x2[:, :, None]).sum(axis=2) - 1
    cell = np.minimum(np.maximum(cell, 0), grid.shape[1] - 2)
    lo, hi = np.take_along_axis(grid, cell, axis=1), np.take_along_axis(grid, cell + 1, axis=1)
    f_lo, f_hi = np.take_along_axis(table, cell, axis=1), np.take_along_axis(table, cell + 1, axis=1)
    out = (f_hi - f_lo) / (hi - lo) * (x2 - lo) + f_lo
    out = np.where(x2 >= grid[:, -1:], table[:, -1:], np.where(x2 <= grid[:, :1], table[:, :1], out))
    return out if x.ndim == 2 else out[:, 0]


def _level_mean(m: np.ndarray, zw: np.ndarray, alone: np.ndarray) -> np.ndarray:
    """m @ zw (R,) for m (R, L), each row as ``EngineProfile._evaluate`` sums it: numpy's matrix-vector
    product where it evaluates several counts, and from the left, one product after another, where it
    evaluates one (a product of one row: numpy's dot of two vectors), so that the rows agree to the bit."""
    out = m @ zw
    if alone.any():
        prod = m[alone] * zw
        seq = prod[:, 0].copy()
        for k in range(1, prod.shape[1]):
            seq += prod[:, k]
        out[alone] = seq
    return out


def _cells(x: np.ndarray, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``engine._grid_cells`` of each row's x (R,) on its grid (R, N): the cell (R, 1) and the fraction in it."""
    cell = np.minimum(np.maximum((grid <= x[:, None]).sum(axis=1) - 1, 0), grid.shape[1] - 2)[:, None]
    lo, hi = np.take_along_axis(grid, cell, axis=1)[:, 0], np.take_along_axis(grid, cell + 1, axis=1)[:, 0]
    return cell, np.minimum(np.maximum((x - lo) / (hi - lo), 0.0), 1.0)


def _interp_cells(cell: np.ndarray, frac: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``engine._interp_rows`` of each row's table (R, N) at the cells of ``_cells``."""
    return (np.take_along_axis(table, cell, axis=1)[:, 0] * (1.0 - frac)
            + np.take_along_axis(table, cell + 1, axis=1)[:, 0] * frac)


def _load_rows(s: _Tables, q: np.ndarray, lam: np.ndarray, counts: np.ndarray, ca2_in: np.ndarray,
               balanced: np.ndarray, alone: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The arrays of ``EngineProfile._evaluate`` up to ρ for rows of one table stack, the same expressions
    row-wise: those its latency part reads (``engine._LoadParts``, by name) and ``chain``, the rows whose
    slot chain decides (their ρ and stability are not final).  ``alone``: the rows that an ``_evaluate``
    of one count would give (their level sums in its order, ``_level_mean``)."""
    z, zw = _HERMITE
    alone = np.zeros(q.size, dtype=bool) if alone is None else alone

    def level_mean(m: np.ndarray) -> np.ndarray:
        return _level_mean(m, zw, alone)

    grid, t_d_tab, t_full_tab, budget_tab = s.grid[q], s.t_d[q], s.t_full[q], s.budget_tokens[q]
    mean_prompt, mean_d, n_cap = s.mean_prompt[q], s.mean_decode_steps[q], s.n_cap[q]
    lam_i = lam / counts
    # r(λ_i, n): share of prefill tokens in full-budget steps; Φ(λ_i, n) (``_shared``, ``_phi``)
    r_tab = np.minimum(lam_i[:, None] * (mean_prompt[:, None] * t_full_tab / budget_tab), 1.0)
    phi_tab = (1.0 - r_tab) * s.phi[q] + r_tab * s.phi_full[q]
    # the fixed point n = λ_i E[d] t_d(n) / (1 - λ_i Φ(n)): its smallest root on the grid (``_operating_batch``)
    denom = 1.0 - lam_i[:, None] * phi_tab
    with np.errstate(divide="ignore", invalid="ignore"):
        h = lam_i[:, None] * mean_d[:, None] * np.where(denom > 0, t_d_tab / denom, np.inf) - grid
    first = np.argmax(h <= 0, axis=1)
    rows = np.arange(q.size)
    prev = np.maximum(first - 1, 0)
    hb, ha = h[rows, first], h[rows, prev]
    a, b = grid[rows, prev], grid[rows, first]
    with np.errstate(divide="ignore", invalid="ignore"):
        inner = np.where(np.isfinite(hb) & (ha > hb), a + (b - a) * ha / (ha - hb), a)
    n_star = np.where(~(hb <= 0), n_cap, np.where(first == 0, 0.0, inner))
    t_d = _interp(n_star, grid, t_d_tab)
    shared = _interp(n_star, grid, r_tab)
    phi = _interp(n_star, grid, phi_tab)
    denom = 1.0 - lam_i * phi
    stable = denom > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        t_bar = np.where(stable, t_d / np.where(stable, denom, 1.0), np.inf)
    cell, frac = _cells(n_star, grid)
    prefill = ((1.0 - shared) * _interp_cells(cell, frac, s.prefill_alone_mean[q])
               + shared * _interp_cells(cell, frac, s.prefill_full_mean[q]))
    # ε = d ln t̄ / d ln n over [0.9 n*, 1.1 n*] (``_elasticity``)
    lo, hi = np.maximum(n_star * 0.9, 0.0), np.minimum(n_star * 1.1, n_cap)
    ends = np.stack([lo, hi], axis=1)
    den = 1.0 - lam_i[:, None] * _interp(ends, grid, phi_tab)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_ends = np.where(den > 0, _interp(ends, grid, t_d_tab) / den, np.inf)
    ok = (n_star > 0) & (hi > lo) & (lo > 0) & np.isfinite(t_ends).all(axis=1) & (t_ends[:, 0] > 0)
    slope = np.zeros(q.size)
    for r in np.nonzero(ok)[0].tolist():  # the profile's scalar logs (``math.log``; numpy's may differ by an ulp)
        slope[r] = ((math.log(t_ends[r, 1]) - math.log(t_ends[r, 0]))
                    / (math.log(float(hi[r])) - math.log(float(lo[r]))))
    elastic = np.minimum(np.maximum(slope, 0.0), MAX_ELASTICITY)
    # the decode batch's Gauss-Hermite levels and the mean step over them
    burst = np.maximum(1.0 + (ca2_in - 1.0) / 2.0, 0.0)
    spread = np.sqrt(n_star * burst / (1.0 - elastic) / np.where(balanced, counts, 1.0))
    raw = n_star[:, None] + spread[:, None] * z[None, :]
    levels = np.minimum(np.maximum(raw, 0.0), n_cap[:, None])
    den_l = np.maximum(1.0 - lam_i[:, None] * _interp(levels, grid, phi_tab), MIN_STEP_HEADROOM)
    t_bar = np.where(stable, np.maximum(t_bar, level_mean(_interp(levels, grid, t_d_tab) / den_l)), t_bar)
    mean_s = prefill + mean_d * np.where(stable, t_bar, 0.0)
    relax_s = mean_s / (1.0 - elastic)
    overflow_wait = np.maximum(raw - n_cap[:, None], 0.0) * mean_s[:, None] / n_cap[:, None]
    # (2) the prefill server: quasi-static Kingman over the slow levels, the fast drift as extra variance
    cs2_x = s.prompt_cs2[q]
    mixing = n_star / (n_star + ROUTER_MIXING_BATCH)
    ca2 = np.where(balanced, ca2_in * (1.0 / counts + (1.0 - 1.0 / counts) * mixing), ca2_in)
    over = np.sqrt(n_star * s.ctx2[q]) - np.sqrt(n_star) * s.mean_ctx[q]
    root = np.maximum(np.sqrt(n_star), 1e-12)
    attn_tab, s_per_ctx = s.attn_mean[q], s.s_per_ctx[q]

    def service_s(spr: np.ndarray, lv: np.ndarray | None) -> np.ndarray:
        """E[X] (R, L) at the levels n* + spr z (``EngineProfile._prefill_service_s``)."""
        if lv is None:
            lv = np.minimum(np.maximum(n_star[:, None] + spr[:, None] * z[None, :], 0.0), n_cap[:, None])
        ctx_excess = (over * spr / root)[:, None] * z[None, :]
        t_full = np.maximum(_interp(lv, grid, t_full_tab) + s_per_ctx[:, None] * ctx_excess, 1e-9)
        return mean_prompt[:, None] * t_full / _interp(lv, grid, budget_tab) + _interp(lv, grid, attn_tab)

    ex_full = service_s(spread, levels)
    rho_full = lam_i[:, None] * ex_full
    rho_p = level_mean(rho_full)
    sigma2_rho = level_mean((rho_full - rho_p[:, None]) ** 2)
    head = np.maximum(1.0 - rho_p, 1e-9)
    t_q = 2.0 * rho_p * level_mean(ex_full) * (ca2 + cs2_x) / head**2
    x = np.maximum(t_q / np.maximum(relax_s, 1e-12), 1e-9)
    slow = np.where(x < 1e-4, 1.0, 2.0 * (x - 1.0 + np.exp(-x)) / x**2)
    ex = service_s(spread * np.sqrt(slow), None)
    rho_l = lam_i[:, None] * ex
    rho_c = np.minimum(rho_l, RHO_TRANSIENT)
    wait_l = ((rho_c * ex * (ca2 + cs2_x)[:, None] + 2.0 * (sigma2_rho * (1.0 - slow) * relax_s)[:, None])
              / (2.0 * (1.0 - rho_c)) + np.maximum(rho_l - RHO_TRANSIENT, 0.0) * relax_s[:, None] / 2.0)
    prefill_wait = np.where(rho_p < 1.0, level_mean(wait_l), 0.0)
    # (1) the slot holding time with every slot busy, h(n_cap) + E[W_prefill] (``_hold_table``'s last column)
    r_cap = r_tab[:, -1]
    t_bar_cap = t_d_tab[:, -1] / np.maximum(1.0 - lam_i * phi_tab[:, -1], MIN_STEP_HEADROOM)
    hold_full = ((1.0 - r_cap) * s.prefill_alone_mean[q, -1] + r_cap * s.prefill_full_mean[q, -1]
                 + mean_d * t_bar_cap) + prefill_wait
    # the chain's test where k₁ = c / h(n_cap) - λ decides it (``_slot_chain_passes``)
    c = np.round(counts * n_cap)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        below = lam * hold_full / c < 1.0
        passes = (lam <= 0) | (np.where(below, c / hold_full - lam, 0.0) / ((1.0 + ca2_in) / 2.0) > 0)
    chain = (lam > 0) & below & ~passes
    servers = counts * n_cap
    rho_slot = lam * hold_full / servers
    rho_api = lam_i * s.api_s[q]
    queues_stable = stable & (rho_slot < 1.0) & (rho_p < 1.0) & passes
    stable = queues_stable & (rho_api < 1.0)
    util = np.maximum(np.maximum(lam * mean_s / servers, rho_p), rho_api)
    rho = np.where(stable, np.maximum(np.maximum(rho_slot, rho_p), rho_api), np.maximum(util, 1.0))
    return {"lam_i": lam_i, "phi_tab": phi_tab, "r_tab": r_tab, "n_star": n_star, "t_d": t_d, "phi": phi,
            "shared": shared, "levels": levels, "spread": spread, "relax_s": relax_s, "overflow_wait": overflow_wait,
            "wait_l": wait_l, "a2_l": np.minimum(rho_l, 1.0), "prefill_wait": prefill_wait, "hold_full": hold_full,
            "t_bar": t_bar, "mean_s": mean_s, "rho": rho, "stable": stable, "queues_stable": queues_stable,
            "chain": chain, "cell": cell[:, 0], "frac": frac}


def _check(req: LoadRequest) -> None:
    """``EngineProfile._evaluate``'s checks of a request's counts, rate and Ca² (the same errors)."""
    counts = np.asarray(req.n_instances, dtype=np.float64)
    if not (counts.ndim == 1 and np.isfinite(counts).all() and (counts >= 1.0).all()):
        raise ConfigError("instance counts must be finite and >= 1")
    lam = float(req.lam_per_s)
    if not (math.isfinite(lam) and lam >= 0):
        raise ConfigError(f"pool arrival rate {req.lam_per_s!r}/s is invalid: it must be finite and >= 0")
    if not (math.isfinite(req.arrival_cv2) and req.arrival_cv2 >= 0):
        raise ConfigError(f"arrival Ca²={req.arrival_cv2!r} is invalid: it must be finite and >= 0")


def load_requests(requests: Sequence[LoadRequest]) -> list[PoolLoad]:
    """``[r.serial() for r in requests]`` in one pass per grid size: each request's rows evaluated with every
    other's (``_load_rows``), its ``PoolLoad.state()`` completed from its own rows (``EngineProfile._finish``)."""
    out: list[PoolLoad | None] = [None] * len(requests)
    by_size: dict[int, list[int]] = {}
    for i, req in enumerate(requests):
        _check(req)
        by_size.setdefault(req.profile.grid.size, []).append(i)
    for members in by_size.values():
        reqs = [requests[i] for i in members]
        sizes = [r.n_instances.size for r in reqs]
        q = np.repeat(np.arange(len(reqs)), sizes)
        got = _load_rows(_Tables([r.profile for r in reqs]), q,
                         np.repeat([float(r.lam_per_s) for r in reqs], sizes),
                         np.concatenate([np.asarray(r.n_instances, dtype=np.float64) for r in reqs]),
                         np.repeat([float(r.arrival_cv2) for r in reqs], sizes),
                         np.repeat([bool(r.balanced_split) for r in reqs], sizes),
                         np.repeat(np.array(sizes) == 1, sizes))
        ends = np.cumsum(sizes).tolist()
        for i, req, a, b in zip(members, reqs, [0, *ends[:-1]], ends, strict=True):
            if got["chain"][a:b].any():  # the slot chain decides: the profile's own evaluation
                out[i] = req.serial()
                continue
            row = {name: v[a:b] for name, v in got.items() if name not in ("chain", "cell", "frac")}
            prof = req.profile
            parts = _LoadParts(lam=float(req.lam_per_s), counts=np.asarray(req.n_instances, dtype=np.float64),
                               arrival_cv2=float(req.arrival_cv2), balanced_split=bool(req.balanced_split),
                               at_n=(got["cell"][a:b], got["frac"][a:b]), hold_tab=None,
                               burst=(1.0 + float(req.arrival_cv2)) / 2.0, chain=[], **row)
            out[i] = PoolLoad(row["rho"], row["stable"], functools.partial(prof._finish, parts))
    return out


#: Count searches ``run_lockstep`` keeps going at once: rounds of this many pools take the gain (README replay,
#: pool-sizing CPU: serial 399-405 ms, window 64 352, 128 340-341, all 393 at once 350; 70B sweep, every
#: 8th of its 4,323 pools: serial 2,038-2,143 ms, 128 1,776-1,804, all at once 1,811-1,831), and a bounded
#: window keeps the states alive at once few.
LOCKSTEP_WINDOW = 128


def run_lockstep(steps: Sequence[Generator[LoadRequest, PoolLoad, object]], window: int = LOCKSTEP_WINDOW) -> list:
    """The values the sizing generators ``steps`` return (``engine.run_serial`` of each), advanced together:
    up to ``window`` at a time (the next one started as one ends), every round the load requests of all
    those searching evaluated in one ``load_requests``."""
    out: list = [None] * len(steps)
    pending: dict[int, LoadRequest] = {}
    started = 0

    def advance(i: int, answer: PoolLoad | None) -> None:
        try:
            pending[i] = steps[i].send(answer)
        except StopIteration as done:
            out[i] = done.value

    def start() -> None:
        nonlocal started
        while len(pending) < window and started < len(steps):
            started += 1
            advance(started - 1, None)

    start()
    while pending:
        idx = list(pending)
        answers = load_requests([pending.pop(i) for i in idx])
        for i, answer in zip(idx, answers, strict=True):
            advance(i, answer)
        start()
    return out
