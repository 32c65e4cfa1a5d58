"""The FFN side of AFD: EP barrier on the slowest rank, its growth with routing skew, and the
predictor-derived per-layer inputs."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.models import load_model
from fleetplan.perf import BatchComposition, StepTimePredictor
from fleetplan.perf.afd import AfdLink, afd_step, fused_step_s
from fleetplan.perf.afd_inputs import afd_inputs
from fleetplan.perf.afd_moe import ep_ffn_times, sample_rank_s
from fleetplan.perf.moe import MoeShape, sample_moe_s
from fleetplan.perf.operators import gemm_block, gemm_block_s, step_gemms
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.roofline import DeviceRates
from fleetplan.rng import stream

SHAPE = MoeShape(n_experts=64, top_k=8, ep=8, n_layers=24, flop_per_row=2 * 3 * 2048 * 768,
                 expert_weight_bytes=3 * 2048 * 768 * 2.0, activation_bytes_per_row=2.0 * (2048 + 768) * 2,
                 tokens_per_step_token=1)
RATES = DeviceRates(gemm_flop_per_s=600e12, attention_flop_per_s=400e12, weight_bytes_per_s=2.6e12,
                    kv_bytes_per_s=2.6e12, n_sms=0)


def test_barrier_waits_for_the_slowest_rank_plus_collectives():
    t = ep_ffn_times(np.array([[1.0, 2.0, 3.0], [2.0, 2.0, 2.0]]), dispatch_s=0.5, combine_s=0.25, dense_s=0.1)
    np.testing.assert_allclose(t.ffn_s, [3.85, 2.85])
    np.testing.assert_allclose(t.straggler_wait_s, [1.0, 0.0])
    with pytest.raises(ConfigError, match="ep ranks"):
        ep_ffn_times(np.ones(3))


def test_rank_times_reuse_the_moe_model_draw_for_draw():
    ours = sample_rank_s(SHAPE, RATES, 96, 1.0, np.random.default_rng(7)).max(axis=1).sum()
    assert ours == sample_moe_s(SHAPE, RATES, 96, 1.0, np.random.default_rng(7))


def test_slowest_rank_wait_grows_with_routing_skew():
    """Zipf skew s in {0, 0.5, 1, 1.5}: 20 replications each (named streams); successive means of
    the wait must differ by more than a 99 % t-interval of the paired difference."""
    skews = (0.0, 0.5, 1.0, 1.5)
    waits = np.array([[ep_ffn_times(sample_rank_s(SHAPE, RATES, 64, s, stream(rep, "afd", "routing"))).
                       mean_straggler_wait_s for rep in range(20)] for s in skews])
    for lo, hi in zip(waits[:-1], waits[1:], strict=True):
        diff = hi - lo
        half = stats.t.ppf(0.995, diff.size - 1) * diff.std(ddof=1) / np.sqrt(diff.size)
        assert diff.mean() - half > 0
    assert waits[0].mean() > 0  # multinomial noise makes a straggler even under uniform routing


@pytest.fixture(scope="module")
def h100():
    return load_catalog().get("h100")


@pytest.mark.parametrize(("name", "tp"), [("llama-3.1-70b", 8), ("llama-3.1-8b", 1)])
def test_predictor_inputs_reassemble_the_fused_decode_step(h100, name, tp):
    """Memory-bound decode (8 x 1K, 64 x 2K): attention + FFN per layer from the split operators sum
    to the predictor's GEMMs (minus the per-step LM head), decode attention and TP all-reduces."""
    model = load_model(name)
    p = StepTimePredictor(model, h100, Parallelism(tp=tp))
    for n, ctx in ((8, 1024), (64, 2048)):
        x = afd_inputs(p, n, ctx)
        sec = p.predict(BatchComposition.uniform(n_decode=n, context_tokens=ctx)).seconds
        lm_head = tuple(g for g in step_gemms(model, p.parallelism, p.weight_dtype) if g.name == "lm_head")
        lm_s = max(gemm_block_s(gemm_block(lm_head, p.rates), n, n, p.options.tile_m_tokens))
        fused = sec["gemm"] - lm_s + sec["attention_decode"] + sec["tp_all_reduce"]
        assert fused_step_s(x.attention_s, x.ffn_s, model.n_layers) == pytest.approx(fused, rel=1e-9)
        one = afd_step(x.attention_s, x.ffn_s, 0.0, AfdLink(1e30), model.n_layers, 1).step_s
        assert one == pytest.approx(fused, rel=1e-9)
        assert x.transfer_bytes == n * model.hidden_size * 2.0


def test_moe_inputs_need_routing_and_carry_the_straggler(h100):
    model = load_model("qwen3-30b-a3b")
    p = StepTimePredictor(model, h100, Parallelism(tp=1, dp=8, ep=8))
    with pytest.raises(ConfigError, match="rng"):
        afd_inputs(p, 64, 2048)
    x = afd_inputs(p, 64, 2048, rng=stream(0, "routing"))
    assert x.ffn_s.shape == (model.n_layers,) and np.all(x.straggler_wait_s > 0)
    assert np.all(x.ffn_s > x.straggler_wait_s)
