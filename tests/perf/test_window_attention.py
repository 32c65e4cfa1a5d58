"""Narrow-window attention layers in the step model (``fleetplan.perf.attention``; gpt-oss's 128-token
sliding window on half its layers) and the prefill kernel's head-dim factor.

Invariants: the context-growing attention terms count only the other layers (gpt-oss: exactly half of an
all-full copy of the model); the window layers cost ``n_window * W`` keys per scheduled token (compute) and
per scheduled sequence (KV read), whatever the context; models without narrow windows (dense Llama, Llama-4's
8,192-token chunks sized as full) are unchanged; the full predictor and the simulator's coefficients agree;
the head-dim factor is AIConfigurator's FlashAttention-3 read-back and leaves head-dim-128 models unchanged.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.models import Dtype, LayerMix, load_model
from fleetplan.perf.attention import attention_cost, flash_head_dim_factor, n_context_layers, narrow_window_layers
from fleetplan.perf.batch import BatchComposition
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor


@pytest.fixture(scope="module")
def oss():
    return load_model("gpt-oss-20b")


def _predictor(catalog, model) -> StepTimePredictor:
    return StepTimePredictor(model, catalog.get("H100-SXM"), Parallelism.vllm(tensor_parallel_size=1), Dtype.BF16)


def test_gpt_oss_window_layers_are_read(oss) -> None:
    assert narrow_window_layers(oss) == (12, 128)
    assert n_context_layers(oss) == 12 == oss.n_layers - 12


def test_context_terms_count_only_full_layers(catalog, oss) -> None:
    full = dataclasses.replace(oss, layers=LayerMix())  # the same model with every layer full attention
    rates = _predictor(catalog, oss).rates
    a = attention_cost(oss, Parallelism.vllm(1), Dtype.BF16, rates)
    f = attention_cost(full, Parallelism.vllm(1), Dtype.BF16, rates)
    assert a.prefill_s_per_work == pytest.approx(f.prefill_s_per_work / 2, rel=1e-12)
    assert a.decode_s_per_context_token == pytest.approx(f.decode_s_per_context_token / 2, rel=1e-12)
    assert f.window_s_per_token == f.window_s_per_seq == 0.0
    # window layers: W keys per token (compute) and per sequence (KV read: 2 K/V x 8 heads x 64 x 2 bytes)
    flop_per_key = 2.0 * (oss.head_dim + oss.head_dim) * oss.n_heads
    prefill_rate = rates.attention_flop_per_s * flash_head_dim_factor(oss.head_dim)  # 64-wide heads: 0.78
    assert a.window_s_per_token == pytest.approx(12 * 128 * flop_per_key / prefill_rate, rel=1e-12)
    assert a.window_s_per_seq == pytest.approx(12 * 128 * 2 * 8 * 64 * 2 / rates.kv_bytes_per_s, rel=1e-12)


def test_window_cost_does_not_grow_with_context(catalog, oss) -> None:
    p = _predictor(catalog, oss)
    short, long = (p.predict(BatchComposition.uniform(64, ctx)).seconds["attention_window"] for ctx in (512, 32768))
    assert short == long > 0.0


@pytest.mark.parametrize("name", ["llama-3.1-8b", "llama-4-scout", "qwen3-30b-a3b"])
def test_models_without_narrow_windows_are_unchanged(catalog, name) -> None:
    model = load_model(name)
    assert n_context_layers(model) == model.n_layers
    p = _predictor(catalog, model)
    assert p.attention.window_s_per_token == p.attention.window_s_per_seq == 0.0
    assert p.predict(BatchComposition.uniform(8, 1024, 1, 512)).seconds["attention_window"] == 0.0


@settings(max_examples=25, deadline=None)
@given(n_decode=st.integers(0, 256), context=st.integers(1, 32768), n_prefill=st.integers(0, 2),
       chunk=st.integers(1, 8192))
def test_kernel_coefficients_equal_the_predictor(catalog, oss, n_decode, context, n_prefill, chunk) -> None:
    if n_decode + n_prefill == 0:
        n_decode = 1
    p = _predictor(catalog, oss)
    batch = BatchComposition.uniform(n_decode, context, n_prefill, chunk)
    args = (n_decode + n_prefill, n_decode, n_prefill * chunk, n_decode * context, int(batch.attention_work * 2))
    assert p.step_s(*args) == pytest.approx(p.predict(batch).total_s, rel=1e-9)


def test_flash_head_dim_factor_is_the_aiconfigurator_read_back() -> None:
    """FA3 prefill efficiency on H100 by head dim over head dim 128 (0.453 / 0.579 / 0.657 / 0.677 of the
    peak at 64 / 128 / 192 / 256; ``aiconfigurator_compare.py --attention-tables``), linear between, clamped."""
    assert flash_head_dim_factor(128) == 1.0
    assert flash_head_dim_factor(64) == flash_head_dim_factor(32) == pytest.approx(0.453 / 0.579)
    assert flash_head_dim_factor(192) == pytest.approx(0.657 / 0.579)
    assert flash_head_dim_factor(512) == flash_head_dim_factor(256) == pytest.approx(0.677 / 0.579)
    assert flash_head_dim_factor(96) == pytest.approx((0.453 / 0.579 + 1.0) / 2)


def test_head_dim_128_prefill_is_unchanged(catalog) -> None:
    model = load_model("llama-3.1-8b")
    p = _predictor(catalog, model)
    expected = 2.0 * (128 + 128) * model.n_heads * model.n_layers / p.rates.attention_flop_per_s
    assert p.attention.prefill_s_per_work == pytest.approx(expected, rel=1e-12)
