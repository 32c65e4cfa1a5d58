"""The PDD kernel equals its pure-Python twin (``tests/reference/pdd_sim.py``) exactly."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.sim.pdd.compile import compile_pdd
from fleetplan.sim.pdd.engine import run_compiled_pdd
from tests.pdd.helpers import random_case
from tests.reference.pdd_sim import run_pdd as twin_run_pdd


def _both(spec, arrival, prompt, output, horizon_s=None):
    run = compile_pdd(spec, arrival, prompt, output, horizon_s)
    got = run_compiled_pdd(run)
    want = twin_run_pdd(run.arrival_s, run.prompt_tokens, run.output_tokens, run.est_handoff_s, run.xfer_overlap_s,
                        run.xfer_tail_s, run.cfg_i, run.cfg_f, run.pf_coef, run.dec_coef)
    return got, want


@pytest.mark.parametrize("seed", range(40))
def test_kernel_matches_twin_on_random_small_cases(seed):
    spec, arrival, prompt, output = random_case(np.random.default_rng(seed))
    horizon = None if seed % 4 else float(arrival[-1]) * 0.7
    (out_t, out_i, pf_busy, dec_busy, n_events), want = _both(spec, arrival, prompt, output, horizon)
    np.testing.assert_array_equal(out_t, np.array(want[0]))
    np.testing.assert_array_equal(out_i, np.array(want[1]))
    np.testing.assert_array_equal(pf_busy, np.array(want[2]))
    np.testing.assert_array_equal(dec_busy, np.array(want[3]))
    assert n_events == want[4]
