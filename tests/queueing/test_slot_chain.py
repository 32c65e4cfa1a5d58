"""The engine model's slot queue (``EngineProfile._slot_queue``) and batch dispersion (``_dispersion``).

Exact checks: with a holding time that does not depend on the batch, the birth-death chain is M/M/c,
so A₁ is Erlang C and a waiting request leaves at cμ - λ; the chain's geometric tail beyond c equals
the chain summed level by level far past c; the grid sum used for large pools matches the exact sum;
a dispersion φ widens the chain (more waiting when the mean is below c); with no prefill work the
dispersion is 1 and otherwise it is the branching-process index of the module docstring.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fleetplan.queueing.engine as engine_mod
from fleetplan.perf.linear import LinearStepModel
from fleetplan.queueing.engine import EngineLimits, EngineModel, EngineProfile, _interp_rows
from fleetplan.queueing.erlang import erlang_c

STEP = LinearStepModel.from_serving(type("S", (), {"iter_base_s": 0.004, "iter_per_seq_s": 0.00032,
                                                    "ref_context_tokens": 8192})())


def _profile(max_num_seqs: int = 64) -> EngineProfile:
    rng = np.random.default_rng(0)
    prompt = np.ceil(rng.lognormal(6.0, 1.0, 2000)).clip(1, 6000)
    output = np.ceil(rng.lognormal(5.0, 0.8, 2000)).clip(1, 2000)
    limits = EngineLimits(max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_seqs + 1024, kv_blocks=131072,
                          block_size_tokens=16)
    return EngineProfile(EngineModel.of(STEP, limits), prompt, output, np.full(prompt.size, 1.0 / prompt.size))


def _chain_by_levels(lam: float, g: float, prof: EngineProfile, hold: np.ndarray, phi: float, extra: int):
    """P(L >= c) and E[L - c | L >= c] of the chain summed level by level up to c + ``extra``."""
    c = int(round(g * prof.n_cap))
    levels = np.arange(1, c + extra + 1, dtype=float)
    busy = np.minimum(levels, c)
    mu = busy / np.interp(busy / g, prof.grid, hold)
    logp = np.concatenate([[0.0], np.cumsum(np.log(lam) - np.log(mu))]) / phi
    p = np.exp(logp - logp.max())
    p /= p.sum()
    return p[c:].sum()


@pytest.mark.parametrize("g, load", [(1, 0.5), (2, 0.8), (4, 0.95), (8, 0.7)])
def test_constant_holding_time_is_erlang_c(g, load):
    prof = _profile(max_num_seqs=16)
    c = int(g * prof.n_cap)
    hold_s = 2.0
    lam = load * c / hold_s
    hold = np.full((1, prof.grid.size), hold_s)
    a1, k1 = prof._slot_queue(lam, np.array([float(g)]), hold, np.array([hold_s]), np.array([1.0]))
    assert a1[0] == pytest.approx(float(erlang_c(c, lam * hold_s)), rel=1e-9)
    assert k1[0] == pytest.approx(c / hold_s - lam, rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(g=st.integers(1, 6), load=st.floats(0.2, 0.97), slope=st.floats(0.0, 0.05), phi=st.floats(1.0, 3.0))
def test_geometric_tail_equals_the_chain_summed_past_c(g, load, slope, phi):
    """The closed-form tail p_c / (1 - r^{1/φ}) is the chain's own mass beyond c (summed far enough)."""
    prof = _profile(max_num_seqs=16)
    hold = (1.0 + slope * prof.grid)[None, :]  # slower as the batch grows
    h_full = float(np.interp(prof.n_cap, prof.grid, hold[0]))
    c = int(g * prof.n_cap)
    lam = load * c / h_full
    a1, _ = prof._slot_queue(lam, np.array([float(g)]), hold, np.array([h_full]), np.array([phi]))
    r = load ** (1.0 / phi)
    extra = int(math.ceil(math.log(1e-14) / math.log(r))) + 10
    assert a1[0] == pytest.approx(_chain_by_levels(lam, g, prof, hold[0], phi, extra), rel=1e-6, abs=1e-12)


def test_grid_sum_of_a_large_pool_matches_the_exact_sum(monkeypatch):
    prof = _profile(max_num_seqs=200)
    hold = (3.0 + 0.01 * prof.grid)[None, :]
    h_full = float(np.interp(prof.n_cap, prof.grid, hold[0]))
    g = 12.0  # 2,400 slots
    for load in (0.8, 0.9, 0.97):
        lam = load * g * prof.n_cap / h_full
        args = (lam, np.array([g]), hold, np.array([h_full]), np.array([1.5]))
        monkeypatch.setattr(engine_mod, "SLOT_CHAIN_POINTS", 4096)
        exact = prof._slot_queue(*args)
        monkeypatch.setattr(engine_mod, "SLOT_CHAIN_POINTS", 512)
        grid = prof._slot_queue(*args)
        assert grid[0][0] == pytest.approx(exact[0][0], rel=0.02, abs=1e-6)
        assert grid[1][0] == pytest.approx(exact[1][0], rel=1e-12)


def test_a_slower_engine_at_its_cap_and_a_wider_batch_both_raise_the_wait():
    prof = _profile(max_num_seqs=16)
    flat = np.full((1, prof.grid.size), 2.0)
    rising = (1.5 + 0.5 * prof.grid / prof.n_cap)[None, :]  # 2.0 at the cap, faster below it
    lam = 0.75 * 2 * prof.n_cap / 2.0
    one = np.array([1.0])
    a_flat, _ = prof._slot_queue(lam, np.array([2.0]), flat, np.array([2.0]), one)
    a_rise, _ = prof._slot_queue(lam, np.array([2.0]), rising, np.array([2.0]), one)
    a_wide, _ = prof._slot_queue(lam, np.array([2.0]), flat, np.array([2.0]), np.array([2.0]))
    assert a_rise[0] < a_flat[0]  # same cap throughput, faster below: fewer reach the cap
    assert a_wide[0] > a_flat[0]  # mean below c: a wider batch reaches the cap more often


def test_unstable_slots_wait_forever():
    prof = _profile(max_num_seqs=16)
    hold = np.full((1, prof.grid.size), 2.0)
    a1, k1 = prof._slot_queue(1.01 * prof.n_cap / 2.0, np.array([1.0]), hold, np.array([2.0]), np.array([1.0]))
    assert a1[0] == 1.0 and k1[0] == 0.0


def test_dispersion_is_one_without_prefill_work_and_the_branching_index_with_it():
    prof = _profile()
    n = np.array([5.0, 20.0])
    lam_i = np.array([1e-9, 30.0])
    phi = prof._dispersion(lam_i, n)
    assert phi[0] == pytest.approx(1.0, abs=1e-6)
    work = _interp_rows(n[1:], prof.grid, prof.prefill_s - prof.k_chunks * prof.t_d[:, None])[0]
    m = lam_i[1] * float(prof.weight @ work)
    sigma2 = m + lam_i[1] ** 2 * (float(prof.weight @ work**2) - float(prof.weight @ work) ** 2)
    index = 1 / (1 - m) + sigma2 / (1 - m) ** 2
    d = prof.decode_steps
    cs2 = float(prof.weight @ d**2) / float(prof.weight @ d) ** 2 - 1
    assert phi[1] == pytest.approx(1 + (index - 1) / (1 + cs2), rel=1e-12)
    assert phi[1] > 1.0

