"""A window-attention query is charged the keys it has (``fleetplan.perf.attention``, "Keys a query has";
``fleetplan.perf.step_terms.roofline_window_s``).

Theorem checked: a prefill query at position ``p`` of a window of ``W`` keys (DeepSeek-V3.2's sparse MLA, ``W`` =
``index_topk``; gpt-oss's sliding windows) costs ``min(p, W) / W`` of a full-window query, so a chunk of ``c`` tokens
at offset ``o`` costs ``sum_{p=o+1}^{o+c} min(p, W)`` keys: exactly when it ends within the window or starts past it,
an upper bound (never above ``c`` full windows) when it straddles it; a decode query is charged the full window; the
term is of degree one in the batch aggregates, so the attention-DP split (divide its cost by D) is exact; a
calibrated profile saved with 18 coefficients reads with no window term.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.models import Dtype, load_model
from fleetplan.perf.batch import BatchComposition
from fleetplan.perf.calibrate import CalibratedStepModel
from fleetplan.perf.dp_instance import split_step_coefficients
from fleetplan.perf.linear import N_STEP_COEFS, STEP_MODEL_ROOFLINE, roofline_step_s, step_time_array_s
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor


@pytest.fixture(scope="module")
def dsa(catalog) -> StepTimePredictor:
    return StepTimePredictor(load_model("deepseek-v3.2"), catalog.get("H200"), Parallelism(tp=8, ep=8), Dtype.FP8,
                             fp8_scaling="block")


def _keys(offset: int, chunk: int, window: int) -> int:
    return int(np.minimum(np.arange(offset + 1, offset + chunk + 1), window).sum())


def _window_queries_s(p: StepTimePredictor, batch: BatchComposition) -> float:
    """The window term of ``batch`` without the per-sequence window read."""
    return p.predict(batch).seconds["attention_window"] - p.attention.window_s_per_seq * batch.n_seqs


@pytest.mark.parametrize(("offset", "chunk"), [(0, 1), (0, 1000), (0, 2048), (500, 1000), (1000, 1048), (2048, 512),
                                                (30000, 8192)])
def test_a_chunk_inside_or_past_the_window_is_charged_its_keys(dsa, offset, chunk) -> None:
    a = dsa.attention
    assert a.window_tokens == 2048
    got = _window_queries_s(dsa, BatchComposition.uniform(n_prefill=1, chunk_tokens=chunk, offset_tokens=offset))
    assert got == pytest.approx(a.window_s_per_token * _keys(offset, chunk, 2048) / 2048, rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(chunks=st.lists(st.tuples(st.integers(0, 6000), st.integers(1, 6000)), min_size=1, max_size=6),
       n_decode=st.integers(0, 64))
def test_any_batch_is_charged_between_its_keys_and_full_windows(dsa, chunks, n_decode) -> None:
    a = dsa.attention
    batch = BatchComposition(np.array([c for _, c in chunks]), np.array([o for o, _ in chunks]),
                             np.full(n_decode, 3000))
    got = _window_queries_s(dsa, batch)
    exact = a.window_s_per_token * (n_decode + sum(_keys(o, c, 2048) for o, c in chunks) / 2048)
    full = a.window_s_per_token * batch.n_tokens
    assert exact * (1 - 1e-12) <= got <= full * (1 + 1e-12)


def test_decode_queries_keep_the_full_window(dsa) -> None:
    a = dsa.attention
    got = _window_queries_s(dsa, BatchComposition.uniform(n_decode=16, context_tokens=100))
    assert got == pytest.approx(16 * a.window_s_per_token, rel=1e-12)


@settings(max_examples=100, deadline=None)
@given(ranks=st.integers(1, 16), n=st.integers(1, 64), p=st.integers(0, 4000), o=st.integers(0, 4000))
def test_the_attention_dp_split_is_exact(dsa, ranks, n, p, o) -> None:
    """Instance aggregates D x the rank's give the rank's step from the split coefficients."""
    code, coef = dsa.kernel_coefficients()
    rank = dict(n_seqs=n, n_decode=n, prefill=p, ctx=n * 1000, attn2=p * (2 * o + p))
    split = split_step_coefficients(code, coef, ranks)
    whole = step_time_array_s(code, split, *(ranks * v for v in rank.values()))
    assert float(whole) == pytest.approx(float(step_time_array_s(code, coef, *rank.values())), rel=1e-9)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 300), p=st.integers(0, 9000), o=st.integers(0, 9000), ctx=st.integers(0, 10**6))
def test_the_kernel_form_and_the_array_form_agree(dsa, n, p, o, ctx) -> None:
    code, coef = dsa.kernel_coefficients()
    attn2 = p * (2 * o + p)
    assert code == STEP_MODEL_ROOFLINE
    assert roofline_step_s(coef, n + 1, n, p, ctx, attn2) == pytest.approx(
        float(step_time_array_s(code, coef, n + 1, n, p, ctx, attn2)), rel=1e-12)


def test_a_profile_saved_before_the_window_term_reads_without_it() -> None:
    old = CalibratedStepModel(coefficients=tuple([1e-3] + [0.0] * 4 + [64.0] + [0.0] * 12), scales={}, model="m",
                              gpu="g", parallelism="-tp 1", weight_dtype="bf16", kv_dtype="bf16", holdout_mape=0.0,
                              n_rows=10, source="test")
    assert len(old.coefficients) == N_STEP_COEFS and old.coefficients[18:] == (0.0,) * (N_STEP_COEFS - 18)
    assert old.step_s(4, 2, 100, 50, 100 * 100) == pytest.approx(1e-3)
