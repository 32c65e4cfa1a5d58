"""AFD step timing: the fused limit, hand-computed ping-pong pipelines and the steady-state period."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.errors import ConfigError
from fleetplan.perf.afd import AfdLink, afd_period_s, afd_step, fused_step_s

FREE = AfdLink(bandwidth_bytes_per_s=1e30, latency_s=0.0)


@pytest.mark.parametrize("seed", range(5))
def test_one_micro_batch_and_free_transfers_is_the_fused_step(seed):
    rng = np.random.default_rng(seed)
    attn, ffn = rng.uniform(1e-5, 1e-3, 61), rng.uniform(1e-5, 2e-3, 61)
    step = afd_step(attn, ffn, 0.0, FREE, n_layers=61, n_micro_batches=1).step_s
    assert step == pytest.approx(fused_step_s(attn, ffn, 61), rel=1e-12)
    assert step == pytest.approx(attn.sum() + ffn.sum(), rel=1e-12)


# L = 4 layers, 4 ms of attention and 4 ms of FFN per layer split evenly over m micro-batches,
# 1 ms latency each way, no serialisation.  By hand (times in ms):
#   m = 1: each layer 4 + 1 + 4 + 1 = 10                                     -> 40
#   m = 2: layer 0: mb0 A 0-2, F 3-5, back 6; mb1 A 2-4, F 5-7, back 8; each further layer
#          waits for its round trip (2 + 1 + 2 + 1 = 6 > A's 4)             -> 8 + 3 x 6 = 26
#   m = 4: layer 0 ends at 7 (mb3: A 3-4, F 5-6, back 7); A is the bottleneck, 4 per layer
#                                                                           -> 7 + 3 x 4 = 19
#   m = 8: layer 0 ends at 6.5 (mb7: A 3.5-4, F 5.5-6 behind mb6, back 6.5) -> 6.5 + 3 x 4 = 18.5
HAND = {1: (40.0, 10.0), 2: (26.0, 6.0), 4: (19.0, 4.0), 8: (18.5, 4.0)}


@pytest.mark.parametrize("m", sorted(HAND))
def test_hand_computed_ping_pong(m):
    link = AfdLink(bandwidth_bytes_per_s=1.0, latency_s=1.0)
    step = afd_step(4.0 / m, 4.0 / m, 0.0, link, n_layers=4, n_micro_batches=m).step_s
    assert step == pytest.approx(HAND[m][0], rel=1e-12)
    assert afd_period_s(4.0 / m, 4.0 / m, 0.0, link, m) == pytest.approx(HAND[m][1], rel=1e-12)


def test_more_micro_batches_hide_the_transfer_then_flat_at_the_compute_bound():
    """A = 4, F = 3 per layer; 2 s of serialisation per layer's activations, split like the work.
    Period max(4, 3, 2, (7 + 4)/m): 11, 5.5, 4, 4, ... -- flat at A's 4 from m = 3 on."""
    link = AfdLink(bandwidth_bytes_per_s=1.0, latency_s=0.0)
    periods, slopes, steps = [], [], []
    for m in range(1, 9):
        periods.append(afd_period_s(4.0 / m, 3.0 / m, 2.0 / m, link, m))
        long, short = (afd_step(4.0 / m, 3.0 / m, 2.0 / m, link, n, m).step_s for n in (60, 20))
        slopes.append((long - short) / 40)
        steps.append(short)
    np.testing.assert_allclose(periods, [11.0, 5.5, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0], rtol=1e-12)
    np.testing.assert_allclose(slopes, periods, rtol=1e-9)
    assert all(b <= a * (1 + 1e-12) for a, b in zip(steps[:-1], steps[1:], strict=True))
    # once hidden, only the pipeline drain still shrinks: step = 20 x 4 + (x + f + x) of the last micro-batch
    for m, step in enumerate(steps[2:], start=3):
        assert step == pytest.approx(80.0 + (2.0 + 3.0 + 2.0) / m, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(a=st.floats(0.1, 10.0), f=st.floats(0.1, 10.0), x=st.floats(0.0, 5.0), lat=st.floats(0.0, 5.0),
       m=st.integers(1, 8))
def test_recurrence_slope_is_the_closed_form_period(a, f, x, lat, m):
    link = AfdLink(bandwidth_bytes_per_s=1.0, latency_s=lat)
    long, short = (afd_step(a, f, x, link, n, m).step_s for n in (80, 40))
    assert (long - short) / 40 == pytest.approx(afd_period_s(a, f, x, link, m), rel=1e-9)
    assert short >= 40 * max(m * a, m * f) * (1 - 1e-12)  # never beats the compute bound


def test_per_micro_batch_inputs_and_validation():
    link = AfdLink(bandwidth_bytes_per_s=2.0, latency_s=0.5)
    grid = np.array([[1.0, 2.0], [1.0, 2.0]])
    t = afd_step(grid, 1.0, np.array([[2.0, 4.0]]), link, n_layers=2, n_micro_batches=2)
    assert t.attention_end_s.shape == (2, 2) and t.step_s >= t.ffn_end_s.max()
    with pytest.raises(ConfigError, match="does not fit"):
        afd_step(np.ones(3), 1.0, 0.0, link, n_layers=2, n_micro_batches=2)
    with pytest.raises(ConfigError, match=">= 0"):
        afd_step(-1.0, 1.0, 0.0, link, n_layers=2, n_micro_batches=1)
    with pytest.raises(ConfigError, match="integer >= 1"):
        afd_step(1.0, 1.0, 0.0, link, n_layers=0, n_micro_batches=1)
    with pytest.raises(ConfigError, match="bytes/s"):
        AfdLink(bandwidth_bytes_per_s=0.0)
