"""A data-parallel-attention instance as one engine: its batch split evenly over the ranks, exactly, by the
step codes' coefficients (``fleetplan.perf.dp_instance``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.errors import ConfigError
from fleetplan.models import Dtype, load_model
from fleetplan.perf.dp_instance import DataParallelInstance, split_step_coefficients
from fleetplan.perf.linear import LinearStepModel, step_time_array_s
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor


@pytest.fixture(scope="module")
def dp_predictors(catalog):
    """DeepSeek-V3 (MLA, MoE) with DP attention on 8 H200s, and Qwen3-30B-A3B (GQA) on 4 H100s."""
    return (StepTimePredictor(load_model("deepseek-v3"), catalog.get("h200"), Parallelism(1, dp=8, ep=8), Dtype.FP8),
            StepTimePredictor(load_model("qwen3-30b-a3b"), catalog.get("h100"), Parallelism(1, dp=4, ep=4)))


@settings(max_examples=60, deadline=None)
@given(which=st.integers(0, 1), n_decode=st.integers(0, 300), prefill=st.integers(0, 8192),
       ctx=st.integers(0, 4096), attn2=st.integers(0, 10**8))
def test_instance_step_is_the_rank_step_of_an_even_split(dp_predictors, which, n_decode, prefill, ctx, attn2):
    """D ranks of (n, T, context, attention work) each = one instance of D times every aggregate."""
    base = dp_predictors[which]
    d = base.parallelism.attn_dp
    code, coef = base.kernel_coefficients()
    split = split_step_coefficients(code, coef, d)
    n_seqs = n_decode + (prefill > 0)
    rank = step_time_array_s(code, coef, n_seqs, n_decode, prefill, n_decode * ctx, attn2)
    inst = step_time_array_s(code, split, d * n_seqs, d * n_decode, d * prefill, d * n_decode * ctx, d * attn2)
    assert inst == pytest.approx(rank, rel=1e-9)


def test_linear_code_and_t_iter(dp_predictors):
    lin = LinearStepModel(0.01, 0.0005, 1e-5, 8192.0)
    inst = DataParallelInstance(lin, 4)
    assert inst.t_iter_s(64, 8192.0) == pytest.approx(lin.t_iter_s(16, 8192.0), rel=1e-12)
    assert inst.kernel_coefficients()[0] == lin.kernel_coefficients()[0]
    base = dp_predictors[0]
    inst = DataParallelInstance(base, 8)
    ns = np.array([8, 64, 256])
    assert inst.t_iter_s(ns, 2048.0) == pytest.approx(base.t_iter_s(ns // 8, 2048.0), rel=1e-9)
    # 256 sequences of 8K over the instance (32 per rank) step faster than 256 on one rank (38 vs 101 ms today)
    assert inst.t_iter_s(256, 8192.0) < base.t_iter_s(256, 8192.0) / 2


def test_ranks_are_checked():
    with pytest.raises(ConfigError, match="data-parallel ranks 0 must be a whole number"):
        DataParallelInstance(LinearStepModel(0.01, 0.0005), 0)
    with pytest.raises(ConfigError, match="step-model code 7 is unknown"):
        split_step_coefficients(7, np.zeros(18), 2)
