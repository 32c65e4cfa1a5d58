"""ServingConstants: the core paper's calibrated W, H, n_max (§2.1, §3.2, §4.3, §4.6)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetplan.errors import ConfigError
from fleetplan.hardware import ServingConstants, load_catalog
from fleetplan.perf.linear import LinearStepModel

# The paper's §3.2 table: W (ms), H (ms/slot), n_max at 8K context.
PAPER_TABLE = {
    "A10G": (12.0, 0.90, 64),
    "A100-80GB": (8.0, 0.65, 128),
    "H100-SXM": (4.0, 0.32, 256),
}


def serving(name: str) -> ServingConstants:
    return load_catalog().get(name).require_serving()


def test_a100_n_max_at_three_contexts() -> None:
    a100 = serving("A100-80GB")
    assert a100.kv_blocks == 65_536
    assert a100.n_max(8192) == 128
    assert a100.n_max(65_536) == 16
    assert a100.n_max(4096) == 256


@pytest.mark.parametrize("name", sorted(PAPER_TABLE))
def test_matches_paper_table(name: str) -> None:
    w_ms, h_ms, n_max_8k = PAPER_TABLE[name]
    s = serving(name)
    assert s.model == "Llama-3-70B"
    assert s.iter_base_s == pytest.approx(w_ms / 1000.0)
    assert s.iter_per_seq_s == pytest.approx(h_ms / 1000.0)
    assert s.ref_context_tokens == 8192
    assert s.block_size_tokens == 16
    assert s.n_max(s.ref_context_tokens) == n_max_8k


def test_kv_blocks_derived_from_paper_n_max() -> None:
    # n_max(8192) = floor(blocks / 512)  =>  blocks = n_max * 512
    assert serving("A10G").kv_blocks == 64 * 512 == 32_768
    assert serving("H100-SXM").kv_blocks == 256 * 512 == 131_072


def test_a10g_short_pool_slot_bonus() -> None:
    # §4.3: at B_short = 4096 each A10G gets 128 slots vs 64 at 8K (a 2x bonus).
    a10g = serving("A10G")
    assert a10g.n_max(4096) == 128
    assert a10g.n_max(8192) == 64


def test_chunk_sizes_per_paper() -> None:
    assert serving("A100-80GB").chunk_tokens == 512  # §4.6
    assert serving("H100-SXM").chunk_tokens == 1024  # §4.6


def test_uncalibrated_gpu_has_no_serving_and_says_so() -> None:
    l4 = load_catalog().get("L4")
    assert l4.serving is None and not l4.calibrated
    with pytest.raises(ConfigError, match="no calibrated serving constants"):
        l4.require_serving()


def test_n_max_vectorised_and_ceil_of_partial_block() -> None:
    a100 = serving("A100-80GB")
    out = a100.n_max(np.array([4096, 8192, 65_536, 8193]))
    assert isinstance(out, np.ndarray) and out.dtype == np.int64
    # 8193 tokens need 513 blocks: floor(65536 / 513) = 127
    np.testing.assert_array_equal(out, [256, 128, 16, 127])
    np.testing.assert_array_equal(a100.n_max(np.array([8192.0, 8192.5])), [128, 127])
    assert a100.n_max(1) == 65_536
    assert isinstance(a100.n_max(np.int64(8192)), int)


@pytest.mark.parametrize("bad", [0, -5, float("nan"), np.array([10, 0])])
def test_n_max_rejects_non_positive_context(bad) -> None:
    with pytest.raises(ConfigError):
        serving("A100-80GB").n_max(bad)


@pytest.mark.parametrize(
    "field, value",
    [("kv_blocks", 0), ("kv_blocks", 65536.0), ("chunk_tokens", -1), ("iter_base_s", 0.0),
     ("iter_per_seq_s", float("inf")), ("model", " ")],
)
def test_invalid_constants_raise(field: str, value) -> None:
    kwargs = dict(iter_base_s=0.008, iter_per_seq_s=0.00065, kv_blocks=65_536, block_size_tokens=16,
                  chunk_tokens=512, ref_context_tokens=8192, model="Llama-3-70B")
    kwargs[field] = value
    with pytest.raises(ConfigError):
        ServingConstants(**kwargs)


def test_kv_budget_must_hold_one_reference_sequence() -> None:
    with pytest.raises(ConfigError, match="cannot hold one"):
        ServingConstants(0.008, 0.00065, kv_blocks=100, block_size_tokens=16, chunk_tokens=512,
                         ref_context_tokens=8192, model="m")


@given(st.integers(min_value=1, max_value=400_000))
def test_n_max_is_the_largest_count_that_fits(context_tokens: int) -> None:
    s = serving("H100-SXM")
    blocks_per_seq = math.ceil(context_tokens / s.block_size_tokens)
    n = s.n_max(context_tokens)
    assert n * blocks_per_seq <= s.kv_blocks < (n + 1) * blocks_per_seq
    assert s.n_max(context_tokens + 16) <= n  # never grows with context


def test_linear_step_model_builds_from_serving_constants() -> None:
    a100 = serving("A100-80GB")
    model = LinearStepModel.from_serving(a100)
    assert model.iter_base_s == pytest.approx(0.008)
    # default prefill cost per token = H * n_max(ref) / chunk = 0.65 ms * 128 / 512
    assert model.prefill_s_per_token == pytest.approx(0.00065 / 8192)
    assert model.ref_context_tokens == 8192
    assert model.t_iter_s(128) == pytest.approx(0.008 + 0.00065 * 128)
