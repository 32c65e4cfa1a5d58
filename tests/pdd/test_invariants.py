"""Conservation and ordering invariants of PDD runs (random small cases, every option)."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.sim.pdd import simulate_pdd_arrays
from fleetplan.sim.pdd.compile import compile_pdd
from tests.pdd.helpers import random_case


@pytest.mark.parametrize("seed", range(30))
def test_every_request_is_done_unfinished_or_rejected_and_times_are_ordered(seed):
    spec, arrival, prompt, output = random_case(np.random.default_rng(1000 + seed), n_requests=80)
    horizon = float(arrival[-1]) * 0.6 if seed % 3 == 0 else None
    df = simulate_pdd_arrays(spec, arrival, prompt, output, horizon_s=horizon, warmup_fraction=0.0).requests
    status = df["status"].to_numpy()
    assert set(status) <= {"done", "unfinished", "rejected"}
    if horizon is None:
        assert not (status == "unfinished").any()  # no deadlock: everything accepted finishes
    done = df[status == "done"]
    stages = ["arrival_s", "prefill_start_s", "prefill_end_s", "handoff_s", "first_token_s", "done_s"]
    for a, b in zip(stages, stages[1:], strict=False):
        assert (done[b] >= done[a]).all(), (a, b)
    parts = done["queue_s"] + done["prefill_s"] + done["transfer_s"] + done["first_decode_s"]
    np.testing.assert_allclose(parts, done["ttft_s"], rtol=1e-9, atol=1e-9)
    assert (done["ttft_s"] <= done["e2e_s"]).all()
    assert (done["grant_s"] >= done["bind_s"]).all()
    bind_at = "prefill_start_s" if spec.binding.value == "early" else "prefill_end_s"
    np.testing.assert_array_equal(done["bind_s"], done[bind_at])
    rejected = df[status == "rejected"]
    assert (rejected["prefill_instance"] == -1).all() and np.isinf(rejected["ttft_s"]).all()
    assert set(df.loc[status != "rejected", "optimal"]) <= {-1, 0, 1}


@pytest.mark.parametrize("seed", range(10))
def test_transfer_ends_at_the_layerwise_formula(seed):
    spec, arrival, prompt, output = random_case(np.random.default_rng(2000 + seed), n_requests=60)
    run = compile_pdd(spec, arrival, prompt, output)
    df = simulate_pdd_arrays(spec, arrival, prompt, output, warmup_fraction=0.0).requests
    ok = np.isfinite(df["handoff_s"].to_numpy())
    start = np.maximum(df["prefill_end_s"], df["grant_s"] + run.xfer_overlap_s)
    want = start + spec.transfer.latency_s + run.xfer_tail_s
    np.testing.assert_array_equal(df["handoff_s"].to_numpy()[ok], want.to_numpy()[ok])
    full = prompt * spec.transfer.kv_bytes_per_token / spec.transfer.bandwidth_bytes_per_s
    np.testing.assert_allclose(run.xfer_overlap_s + run.xfer_tail_s, full, rtol=1e-12)
