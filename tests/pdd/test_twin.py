"""The PDD kernel equals its pure-Python twin (``tests/reference/pdd_sim.py``) exactly.

The twin advances decode steps one at a time; the kernel's cruise (runs of pure-decode steps
as one event) must give the same outputs bit for bit and only fewer events.  With a fabric,
the per-flow outputs match too."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fleetplan.sim.pdd.compile import compile_pdd
from fleetplan.sim.pdd.engine import run_compiled_pdd_net
from fleetplan.sim.pdd.spec import SibylParams
from tests.pdd.helpers import random_case
from tests.reference.pdd_sim import run_pdd as twin_run_pdd


def _check(spec, arrival, prompt, output, horizon_s=None):
    flows: list = []
    run = compile_pdd(spec, arrival, prompt, output, horizon_s, seed=3)
    want = twin_run_pdd(run.kernel_requests(), run.kernel_config(), run.net_in, flows)
    for cruise in (True, False):
        run = compile_pdd(spec, arrival, prompt, output, horizon_s, seed=3, cruise=cruise)
        out_t, out_i, pf_busy, dec_busy, n_events, fl_t, fl_i, stats = run_compiled_pdd_net(run)
        np.testing.assert_array_equal(out_t, np.array(want[0]))
        np.testing.assert_array_equal(out_i, np.array(want[1]))
        np.testing.assert_array_equal(pf_busy, np.array(want[2]))
        np.testing.assert_array_equal(dec_busy, np.array(want[3]))
        if cruise:
            assert n_events <= want[4]
        else:
            assert n_events == want[4]
        if spec.network is not None:
            peak = flows[-1]
            assert stats[0] == len(flows) - 1 and stats[1] == peak
            np.testing.assert_array_equal(fl_i, np.array([f[:3] for f in flows[:-1]], dtype=np.int64))
            np.testing.assert_array_equal(fl_t, np.array([f[3:] for f in flows[:-1]], dtype=np.float64))
    return want


@pytest.mark.parametrize("seed", range(40))
def test_kernel_matches_twin_on_random_small_cases(seed):
    spec, arrival, prompt, output = random_case(np.random.default_rng(seed))
    horizon = None if seed % 4 else float(arrival[-1]) * 0.7
    _check(spec, arrival, prompt, output, horizon)


@pytest.mark.parametrize("seed", range(30))
def test_kernel_matches_twin_with_a_fabric(seed):
    spec, arrival, prompt, output = random_case(np.random.default_rng(500 + seed), network=True)
    horizon = None if seed % 4 else float(arrival[-1]) * 0.7
    _check(spec, arrival, prompt, output, horizon)


@pytest.mark.parametrize("seed", range(12))
def test_kernel_matches_twin_with_sibyl_of_either_pressure(seed):
    spec, arrival, prompt, output = random_case(np.random.default_rng(900 + seed), policy="sibyl",
                                                network=bool(seed % 3 == 0))
    spec = dataclasses.replace(spec, sibyl=SibylParams(pressure=["tokens", "tasks"][seed % 2]))
    _check(spec, arrival, prompt, output)


@pytest.mark.parametrize("seed", range(16))
def test_kernel_matches_twin_with_sibyl_ablations_and_req_level(seed):
    """SIBYL's sensitivity variants (a random non-empty set of terms off) and REQ LEVEL."""
    rng = np.random.default_rng(1300 + seed)
    if seed % 4 == 0:
        _check(*random_case(rng, policy="req_level", network=seed % 8 == 0))
        return
    spec, arrival, prompt, output = random_case(rng, policy="sibyl", network=seed % 5 == 0)
    terms = ("type1", "type2", "type3", "prob")
    ablate = tuple(t for t, on in zip(terms, rng.integers(0, 2, 4), strict=True) if on) or (terms[seed % 4],)
    spec = dataclasses.replace(spec, sibyl=SibylParams(pressure=["tokens", "tasks"][seed % 2], ablate=ablate))
    _check(spec, arrival, prompt, output)
