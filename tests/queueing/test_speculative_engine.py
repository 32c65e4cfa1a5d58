"""The analytic engine with speculative decoding reads the simulator's speculative step: its decode step
times E[tokens per step] is the feature kernel's MTP step (verify + k draft passes), a step with a prefill
chunk is the kernel's whole step, and a lone request's TPOT is the speculative step over E."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.models import load_model
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.perf.speculative import expected_tokens_per_step
from fleetplan.queueing.engine import EngineLimits, EngineModel, EngineProfile, size_engine_pool
from fleetplan.queueing.speculative import mtp_engine, speculative_engine
from fleetplan.sim._kernels.codes import GRAPH_NONE
from fleetplan.sim._kernels.features.timing import batch_time_s
from fleetplan.sim._kernels.jit import njit

LIMITS = EngineLimits(max_num_seqs=256, max_num_batched_tokens=8192, kv_blocks=20000, block_size_tokens=16)


@njit
def _kernel_step_s(n_seqs, n, chunk, offset, k, ctx_each, code, coef, dcode, dcoef):
    """The feature kernel's step: ``n`` decodes at ``ctx_each`` drafting ``k`` each, plus one prompt chunk."""
    gtime = np.zeros(3)
    attn2 = chunk * (2 * offset + chunk) + n * k * (2 * ctx_each + k)
    return batch_time_s(n_seqs, n, chunk, n * k, n * ctx_each, attn2, k, n, n * ctx_each, 0, 0, code, coef,
                        GRAPH_NONE, gtime, dcode, dcoef)


@pytest.fixture(scope="module")
def predictor() -> StepTimePredictor:
    return StepTimePredictor(load_model("llama-3.1-8b"), load_catalog().get("H100-SXM"), Parallelism(tp=1))


@pytest.mark.parametrize("acceptance", [(0.85,), (0.8, 0.6, 0.4)])
def test_decode_step_and_chunks_are_the_kernels_speculative_step(predictor, acceptance) -> None:
    base = EngineModel.of(predictor, LIMITS)
    spec = mtp_engine(base, predictor, acceptance)
    k, e = len(acceptance), expected_tokens_per_step(acceptance)
    code, coef = predictor.kernel_coefficients()
    dcode, dcoef = predictor.mtp_draft_coefficients()
    for n, ctx in ((1, 500), (32, 2048), (200, 6000)):
        t_d = float(spec.step_s(n, n, 0.0, n * ctx, 0.0))
        kernel_decode = _kernel_step_s(n, n, 0, 0, k, ctx, code, coef, dcode, dcoef)
        assert t_d * e == pytest.approx(kernel_decode, rel=1e-9)
        chunk, offset = 1000, 3000
        delta = float(spec.step_s(n + 1, n, chunk, n * ctx, chunk * (2 * offset + chunk))) - t_d
        kernel_chunk = _kernel_step_s(n + 1, n, chunk, offset, k, ctx, code, coef, dcode, dcoef)
        # a step with a prompt chunk is a whole speculative step (the prompt's prefill steps, the prefill
        # server's full-budget steps): the chunk adds its step less the decode's per-token share
        assert delta == pytest.approx(kernel_chunk - kernel_decode / e, rel=1e-9)
    assert spec.limits is LIMITS and spec.step_code == base.step_code


def test_lone_request_tpot_is_the_speculative_step_over_e(predictor) -> None:
    """E = 1.85 with DeepSeek-V3's reported 0.85 on one draft: TPOT = (verify + draft) / 1.85, below the
    plain decode step; with acceptance 0 every step pays the draft and verify for one token."""
    base = EngineModel.of(predictor, LIMITS)
    prompt, output, weight = np.array([500.0, 2000.0]), np.array([200.0, 400.0]), np.array([0.5, 0.5])
    plain = EngineProfile(base, prompt, output, weight)
    good = EngineProfile(mtp_engine(base, predictor, (0.85,)), prompt, output, weight)
    none = EngineProfile(mtp_engine(base, predictor, (0.0,)), prompt, output, weight)
    spec = mtp_engine(base, predictor, (0.85,))
    assert good.zero_load_tpot_s() == pytest.approx(
        float(spec.speculative_step_s(1.0, 1.0, 0.0, plain.mean_ctx, 0.0)) / 1.85, rel=1e-12)
    assert good.zero_load_tpot_s() < plain.zero_load_tpot_s() < none.zero_load_tpot_s()
    with pytest.raises(ConfigError, match="acceptance"):
        speculative_engine(base, (), *predictor.mtp_draft_coefficients())


def test_sizing_with_mtp_orders_by_acceptance(predictor) -> None:
    """60 req/s under a 30 ms P99 TPOT: MTP at 0.85 needs no more instances than the plain engine, which
    needs no more than MTP whose drafts are never accepted (the whole profile runs on the hook)."""
    base = EngineModel.of(predictor, LIMITS)
    prompt, output, weight = np.array([500.0, 2000.0]), np.array([200.0, 400.0]), np.array([0.5, 0.5])
    counts = [size_engine_pool(EngineProfile(e, prompt, output, weight), 60.0, 2.0, 0.99, slo_tpot_s=0.03)[0]
              .n_instances for e in (mtp_engine(base, predictor, (0.85,)), base, mtp_engine(base, predictor, (0.0,)))]
    assert counts[0] <= counts[1] <= counts[2] and counts[0] < counts[2]
