"""Zero network cost + unbounded decode memory: PDD = prefill pool, then decode pool (issue part 6a)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fleetplan.sim.pdd import KvTransferSpec, PddSpec, simulate_pdd_arrays
from tests.pdd.composition import compose
from tests.pdd.helpers import pool

UNBOUNDED_BLOCKS = 10**7
UNBOUNDED_SEQS = 10**4


@pytest.mark.parametrize("seed", range(6))
def test_pdd_equals_composition_of_prefill_and_decode_pools(seed):
    rng = np.random.default_rng(seed)
    n = 400
    n_pf, n_dec = int(rng.integers(1, 4)), int(rng.integers(1, 6))
    arrival = np.cumsum(rng.exponential(0.004, n))
    prompt = rng.integers(1, 900, n)
    output = rng.integers(1, 300, n)
    pf = pool("prefill", n_pf, seqs=int(rng.integers(1, 6)), budget=int(rng.integers(64, 600)), blocks=4096,
              router="round_robin")
    dec = pool("decode", n_dec, seqs=UNBOUNDED_SEQS, budget=UNBOUNDED_SEQS, blocks=UNBOUNDED_BLOCKS)
    free_network = KvTransferSpec(latency_s=0.0, bandwidth_bytes_per_s=math.inf, kv_bytes_per_token=131072.0)
    spec = PddSpec(pf, dec, free_network, "round_robin", "early", "steps")
    df = simulate_pdd_arrays(spec, arrival, prompt, output).requests
    pf_code, pf_coef = pf.step_model.kernel_coefficients()
    dec_code, dec_coef = dec.step_model.kernel_coefficients()
    want = compose(arrival, prompt, output, n_pf, n_dec, pf.limits.max_num_batched_tokens, pf.limits.max_num_seqs,
                   pf_code, list(pf_coef), dec_code, list(dec_coef))
    assert (df["status"] == "done").all()
    np.testing.assert_array_equal(df["prefill_start_s"], want[:, 0])
    np.testing.assert_array_equal(df["prefill_end_s"], want[:, 1])
    np.testing.assert_array_equal(df["handoff_s"], want[:, 1])  # zero transfer, no backpressure
    np.testing.assert_array_equal(df["first_token_s"], want[:, 2])
    np.testing.assert_array_equal(df["done_s"], want[:, 3])
    assert (df["preemptions"] == 0).all()
