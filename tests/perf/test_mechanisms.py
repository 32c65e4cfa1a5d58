"""The serving mechanisms of issue #26 item 2, each against a hand computation from its equation
(small numbers), and their invariants with hypothesis: MoE grouped GEMM (distinct top-k hit experts,
tile floor, load imbalance), EP all-to-all within and across nodes (FP8 dispatch), pipeline boundaries
on the network, attention data parallelism, MLA's latent cache and absorbed decode, block-scaled FP8,
the MTP draft pass, the API server ceiling."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.hardware import load_catalog
from fleetplan.models import AttentionKind, Dtype, load_model
from fleetplan.perf import comm
from fleetplan.perf.api_server import api_server_busy_s, api_server_max_request_rate_per_s
from fleetplan.perf.attention import attention_cost, kv_bytes_per_token_per_gpu
from fleetplan.perf.batch import parse_batch
from fleetplan.perf.linear import roofline_step_s
from fleetplan.perf.moe import MoeShape, expected_moe_terms, moe_shape
from fleetplan.perf.operators import GemmShape, floored_memory_s, gemm_block
from fleetplan.perf.overheads import PredictorOptions
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import EP_FP8_DISPATCH_BYTES_PER_VALUE, StepTimePredictor
from fleetplan.perf.quant import BLOCK_FP8_MOE_TILE_M_TOKENS, Fp8Scaling, fp8_scaling, fp8_scaling_of
from fleetplan.perf.roofline import ACTIVATION_BYTES, DeviceRates
from fleetplan.perf.speculative import expected_tokens_per_step, mtp_draft_pass_s, mtp_step, verify_batch

RATES = DeviceRates(gemm_flop_per_s=100e12, attention_flop_per_s=50e12, weight_bytes_per_s=2e12,
                    kv_bytes_per_s=1e12, n_sms=0)
SMALL = MoeShape(n_experts=8, top_k=2, ep=2, n_layers=3, flop_per_row=600.0, expert_weight_bytes=300.0,
                 activation_bytes_per_row=40.0, tokens_per_step_token=1)


# ---- 1. MoE grouped GEMM ---------------------------------------------------------------------------
def test_uniform_hit_experts_are_e_times_one_minus_miss_to_the_t() -> None:
    """E[active] = E (1 - (1 - k/E)^T): 8 experts, top-2, 3 tokens -> 8 (1 - 0.75^3) = 4.625 hit, 2.3125
    per EP rank; the kernel's hit term c q with q = 1 - exp(d T) equals it times one expert's layers."""
    a, b, c, d, e, f, h = expected_moe_terms(SMALL, RATES, 0.0)
    assert h == 0.0  # no rows-per-expert ramp
    assert d == pytest.approx(math.log(0.75))
    q = 1.0 - math.exp(d * 3)
    per_expert_s = 3 * 300.0 / 2e12
    assert c * q == pytest.approx(4 * (1 - 0.75 ** 3) * per_expert_s)
    assert a == pytest.approx(3 * 600.0 / 100e12 * 2 * 0.5)  # layers x flop/row / rate x k x rank share
    assert f == pytest.approx(3 * 2 * 0.5 * 40.0 / 2e12)


def test_attention_dp_feeds_the_experts_dp_times_the_tokens() -> None:
    shape = dataclasses.replace(SMALL, tokens_per_step_token=4)
    d = expected_moe_terms(shape, RATES, 0.0)[3]
    assert d == pytest.approx(4 * math.log(0.75))  # each of the T steps' tokens arrives from 4 ranks
    model = load_model("qwen3-30b-a3b")
    p = StepTimePredictor(model, load_catalog().get("h100"), Parallelism(tp=1, dp=4, ep=4))
    assert p.moe.tokens_per_step_token == 4 and p.moe.ep == 4


def test_tile_floor_charges_one_tile_of_compute_per_hit_expert() -> None:
    """Below a tile an expert GEMM is weight-bound; it still computes min_rows rows: 64 rows x 600 FLOP at
    100 TFLOP/s = 3.84e-10 s = 768 bytes at 2 TB/s, above the 300-byte weight read."""
    floor = dataclasses.replace(SMALL, min_rows_per_expert=64)
    assert floor.hit_expert_bytes(RATES) == pytest.approx(768.0)
    assert dataclasses.replace(SMALL, min_rows_per_expert=16).hit_expert_bytes(RATES) == 300.0  # 192 < 300
    c0, c1 = expected_moe_terms(SMALL, RATES, 0.0)[2], expected_moe_terms(floor, RATES, 0.0)[2]
    assert c1 / c0 == pytest.approx(768.0 / 300.0)


def test_load_imbalance_scales_the_slowest_ranks_rows() -> None:
    base = expected_moe_terms(SMALL, RATES, 0.0)
    skew = expected_moe_terms(dataclasses.replace(SMALL, load_imbalance=1.3), RATES, 0.0)
    for i in (0, 1, 5):  # compute rows, their spread, activation bytes
        assert skew[i] == pytest.approx(1.3 * base[i])
    assert skew[2] == base[2] and skew[3] == base[3]
    with pytest.raises(ConfigError, match="moe_load_imbalance"):
        dataclasses.replace(SMALL, load_imbalance=0.9)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128]), st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128]))
def test_more_ep_ranks_never_increase_expert_weight_bytes_per_gpu(ep_a: int, ep_b: int) -> None:
    model = load_model("qwen3-30b-a3b")
    lo, hi = sorted((ep_a, ep_b))

    def per_gpu_bytes(ep: int) -> float:
        shape = moe_shape(model, Parallelism(tp=128, ep=ep), Dtype.BF16)
        return shape.n_experts // shape.ep * shape.expert_weight_bytes

    assert per_gpu_bytes(hi) <= per_gpu_bytes(lo)


# ---- 2. expert parallelism and 7. instances spanning nodes ---------------------------------------------
def test_all_to_all_across_nodes_by_hand(catalog) -> None:
    """16 GPUs on nodes of 8, 1 MB per GPU: 7/16 MB over NVLink at 360 GB/s (900/2 x 0.8), 8/16 MB over the
    NIC at 40 GB/s (400 Gb/s / 8 x 0.8), plus the network alpha."""
    h100 = catalog.get("h100")
    t = comm.hierarchical_all_to_all_s(1e6, 16, h100, 0.8, 10e-6, 20e-6)
    assert t == pytest.approx(20e-6 + 7 / 16 * 1e6 / 360e9 + 8 / 16 * 1e6 / 40e9)
    within = comm.hierarchical_all_to_all_s(1e6, 8, h100, 0.8, 10e-6, 20e-6)
    assert within == pytest.approx(10e-6 + 7 / 8 * 1e6 / 360e9)


@settings(max_examples=60, deadline=None)
@given(payload=st.floats(0.0, 1e9), group=st.integers(2, 64), node=st.integers(1, 63),
       gpu=st.sampled_from(["h100", "a100", "l4", "a10g", "mi300x", "b200", "h800"]))
def test_crossing_a_node_boundary_never_speeds_up_a_collective(catalog, payload: float, group: int, node: int,
                                                               gpu: str) -> None:
    base = catalog.get(gpu)
    split, whole = dataclasses.replace(base, gpus_per_node=node), dataclasses.replace(base, gpus_per_node=64)
    assert (comm.hierarchical_all_to_all_s(payload, group, split, 0.8, 10e-6, 20e-6)
            >= comm.hierarchical_all_to_all_s(payload, group, whole, 0.8, 10e-6, 20e-6))
    for fn in (lambda g: comm.all_reduce_s(payload, group, comm.link_bytes_per_s(g, group, 0.8),
                                           comm.alpha_s(group, 10e-6, 20e-6, g.gpus_per_node)),):
        assert fn(split) >= fn(whole)


def test_fp8_dispatch_shrinks_the_dispatch_not_the_combine(catalog) -> None:
    model, h200 = load_model("deepseek-v3"), catalog.get("h200")
    par = Parallelism(tp=8, ep=8)
    bf16 = StepTimePredictor(model, h200, par, Dtype.FP8).comm_terms.ep_all_to_all
    fp8 = StepTimePredictor(model, h200, par, Dtype.FP8,
                            options=PredictorOptions(ep_dispatch_fp8=True)).comm_terms.ep_all_to_all
    assert fp8[0] == bf16[0]
    assert fp8[1] / bf16[1] == pytest.approx((EP_FP8_DISPATCH_BYTES_PER_VALUE + ACTIVATION_BYTES)
                                             / (2 * ACTIVATION_BYTES))
    # by hand: 58 MoE layers x (1 token x 8 experts / 8 ranks) x 7168 x (1 + 1/32 + 2) bytes x 7/8 / 360 GB/s
    assert fp8[1] == pytest.approx(58 * 7168 * (1 + 4 / 128 + 2) * 7 / 8 / 360e9)


def test_ep_over_two_nodes_costs_more_than_within_one(catalog) -> None:
    model, h100 = load_model("qwen3-235b-a22b"), catalog.get("h100")
    one = StepTimePredictor(model, h100, Parallelism(tp=8, ep=8)).comm_terms.ep_all_to_all
    two = StepTimePredictor(model, h100, Parallelism(tp=16, ep=16)).comm_terms.ep_all_to_all
    assert two[0] > one[0] and two[1] > one[1]


@pytest.mark.parametrize(("pp", "stage", "node", "crossings"),
                         [(1, 8, 8, 0), (2, 8, 8, 1), (4, 8, 8, 3), (2, 4, 8, 0), (4, 4, 8, 1), (8, 2, 8, 1),
                          (4, 16, 8, 3)])
def test_pipeline_boundaries_on_the_network(pp: int, stage: int, node: int, crossings: int) -> None:
    assert comm.pp_network_boundaries(pp, stage, node) == crossings


def test_pp_send_within_a_node_uses_nvlink(catalog) -> None:
    model, h100 = load_model("llama-3.1-70b"), catalog.get("h100")
    inside = StepTimePredictor(model, h100, Parallelism(tp=4, pp=2)).comm_terms.pp_send_recv
    across = StepTimePredictor(model, h100, Parallelism(tp=8, pp=2)).comm_terms.pp_send_recv
    row = model.hidden_size * ACTIVATION_BYTES
    assert inside == pytest.approx((10e-6, row / 360e9))
    assert across == pytest.approx((20e-6, row / 40e9))


# ---- 4. MLA ------------------------------------------------------------------------------------------
def test_mla_latent_cache_and_absorbed_decode(catalog) -> None:
    """DeepSeek-V3: (512 + 64) latent values per token per layer, replicated on every attention GPU; decode
    reads them with d_qk = 512 + 64, d_v = 512 per head (absorbed), prefill with 192 / 128 (un-absorbed)."""
    model = load_model("deepseek-v3")
    assert model.attention is AttentionKind.MLA
    par = Parallelism(tp=8)
    assert kv_bytes_per_token_per_gpu(model, par, Dtype.BF16) == 61 * 576 * 2
    assert kv_bytes_per_token_per_gpu(model, par, Dtype.FP8) == 61 * 576 * 1
    cost = attention_cost(model, par, Dtype.BF16, RATES)
    decode_flop = 2.0 * (576 + 512) * (128 // 8) * 61
    assert cost.decode_s_per_context_token == pytest.approx(max(decode_flop / 50e12, 61 * 576 * 2 / 1e12))
    # prefill runs FlashAttention at query-key head dim 192: the head-dim factor (fleetplan.perf.attention)
    assert cost.prefill_s_per_work == pytest.approx(2.0 * (192 + 128) * 16 * 61 / (50e12 * 0.657 / 0.579))


# ---- 5. FP8 scaling ------------------------------------------------------------------------------------
def test_block_fp8_streams_dense_weights_at_its_read_back_efficiency(catalog) -> None:
    model, h100 = load_model("llama-3.1-8b"), catalog.get("h100")
    opts = PredictorOptions(fp8_block_bandwidth_efficiency=0.26, fp8_block_gemm_efficiency=0.33)
    tensor = StepTimePredictor(model, h100, Parallelism(tp=1), Dtype.FP8, options=opts)
    block = StepTimePredictor(model, h100, Parallelism(tp=1), Dtype.FP8, options=opts, fp8_scaling="block")
    assert block.fp8_scaling is Fp8Scaling.BLOCK and block.block_fp8
    assert block.gemms.memory_s / tensor.gemms.memory_s == pytest.approx(0.78 / 0.26)
    assert block.gemms.memory_s_per_token == tensor.gemms.memory_s_per_token  # activations keep their bandwidth
    assert block.rates.gemm_flop_per_s == pytest.approx(h100.fp8_tflops * 1e12 * 0.33)
    bf16 = StepTimePredictor(model, h100, Parallelism(tp=1), Dtype.BF16, options=opts, fp8_scaling="block")
    assert not bf16.block_fp8 and bf16.gemms == StepTimePredictor(model, h100, Parallelism(tp=1)).gemms


def test_floored_memory_raises_each_quantised_gemm_call_to_the_floor() -> None:
    # hand computation at 2e12 B/s: qkv 1e6 params x 1 B = 0.5 us x 4 calls; o 4e6 params = 2 us x 4 calls; router
    # (BF16, 2 B) and lm_head (per sequence) keep their stream
    gemms = (GemmShape("qkv_proj", 1000, 1000, 4, False, 1.0), GemmShape("o_proj", 2000, 2000, 4, False, 1.0),
             GemmShape("router", 1000, 8, 4, False, 2.0), GemmShape("lm_head", 1000, 5000, 1, True, 1.0))
    rest_s = (1000 * 8 * 4 * 2.0 + 1000 * 5000 * 1.0) / 2e12
    assert floored_memory_s(gemms, RATES, 1.0, 0.0) == pytest.approx(gemm_block(gemms, RATES).memory_s)
    assert floored_memory_s(gemms, RATES, 1.0, 1e-6) == pytest.approx(4 * 1e-6 + 4 * 2e-6 + rest_s)
    assert floored_memory_s(gemms, RATES, 1.0, 3e-6) == pytest.approx(8 * 3e-6 + rest_s)


def test_block_fp8_gemm_floor_shows_below_compute_and_hides_above_it(catalog) -> None:
    model, h100 = load_model("qwen3-30b-a3b"), catalog.get("h100")
    floor = PredictorOptions(fp8_block_gemm_floor_s=9e-5)
    block = StepTimePredictor(model, h100, Parallelism(tp=1), Dtype.FP8, options=floor, fp8_scaling="block")
    plain = StepTimePredictor(model, h100, Parallelism(tp=1), Dtype.FP8, fp8_scaling="block")
    # every qkv_proj / o_proj call of the 48 layers is below 90 us of stream: the floor is the memory side
    stream_s = plain.gemms.memory_s - 48 * (2048 * 5120 + 4096 * 2048) / plain.rates.weight_bytes_per_s
    assert block.gemms.memory_s == pytest.approx(2 * 48 * 9e-5 + stream_s)
    assert dataclasses.replace(block.gemms, memory_s=0.0) == dataclasses.replace(plain.gemms, memory_s=0.0)
    short, long = parse_batch("prefill=512@0"), parse_batch("prefill=16384@0")
    assert block.predict(short).seconds["gemm"] == pytest.approx(
        2 * 48 * 9e-5 + stream_s + block.gemms.memory_s_per_token * 512 + block.gemms.memory_s_per_seq)
    assert block.predict(long).seconds["gemm"] == plain.predict(long).seconds["gemm"]  # compute-bound
    # the simulator's coefficients carry it (c[2]) and the kernel's step agrees with the predictor
    assert block.kernel_coefficients()[1][2] == block.gemms.memory_s
    assert block.step_s(1, 0, 512, 0, 512 * 512) == pytest.approx(block.predict(short).total_s, rel=1e-12)
    # per-tensor FP8, BF16 and FP8 weights without FP8 tensor cores (weight-only on the A100) have no floor
    for p, q in ((StepTimePredictor(model, h100, Parallelism(tp=1), Dtype.FP8, options=floor),
                  StepTimePredictor(model, h100, Parallelism(tp=1), Dtype.FP8)),
                 (StepTimePredictor(model, h100, Parallelism(tp=1), Dtype.BF16, options=floor, fp8_scaling="block"),
                  StepTimePredictor(model, h100, Parallelism(tp=1), Dtype.BF16)),
                 (StepTimePredictor(model, catalog.get("a100-80gb"), Parallelism(tp=1), Dtype.FP8, options=floor,
                                    fp8_scaling="block"),
                  StepTimePredictor(model, catalog.get("a100-80gb"), Parallelism(tp=1), Dtype.FP8,
                                    fp8_scaling="block"))):
        assert p.gemms == q.gemms
    with pytest.raises(ConfigError, match="fp8_block_gemm_floor_s"):
        PredictorOptions(fp8_block_gemm_floor_s=-1e-6)


def test_block_fp8_moe_tile_is_vllms_block_m(catalog) -> None:
    model = load_model("qwen3-30b-a3b")
    p = StepTimePredictor(model, catalog.get("h100"), Parallelism(tp=1), Dtype.FP8, fp8_scaling="block")
    assert p.moe.min_rows_per_expert == BLOCK_FP8_MOE_TILE_M_TOKENS == 64
    assert StepTimePredictor(model, catalog.get("h100"), Parallelism(tp=1)).moe.min_rows_per_expert == 16


def test_fp8_scaling_names() -> None:
    assert fp8_scaling("per-tensor") is Fp8Scaling.PER_TENSOR
    assert fp8_scaling_of((128, 128)) is Fp8Scaling.BLOCK and fp8_scaling_of(None) is Fp8Scaling.PER_TENSOR
    with pytest.raises(UnknownNameError, match="per_tensor, block"):
        fp8_scaling("channel")


# ---- 6. MTP -----------------------------------------------------------------------------------------
def test_mtp_draft_is_one_layer_plus_eh_proj(catalog) -> None:
    model, h200 = load_model("deepseek-v3"), catalog.get("h200")
    p = StepTimePredictor(model, h200, Parallelism(tp=8, ep=8), Dtype.FP8)
    draft = p.mtp_draft_predictor()
    assert draft.model.n_layers == 1 and draft.model.n_moe_layers == 1 and draft.options.cpu_overhead_s == 0.0
    code, coef = p.mtp_draft_coefficients()
    base = draft.kernel_coefficients()[1]
    eh = gemm_block((GemmShape("eh_proj", 2 * 7168, 7168, 1, False, 1.0),), draft.rates)
    assert coef[2] - base[2] == pytest.approx(eh.memory_s)
    assert coef[1] - base[1] == pytest.approx(eh.compute_s_per_padded_token)
    main = roofline_step_s(p.kernel_coefficients()[1], 16, 16, 0, 16 * 2048, 0)
    one = roofline_step_s(coef, 16, 16, 0, 16 * 2048, 0)
    assert 0.0 < one < main / 10  # one layer of 61, the LM head and eh_proj, no host time


# ---- 8. API server ------------------------------------------------------------------------------------
def test_api_server_ceiling_by_hand() -> None:
    o = PredictorOptions(api_server_s_per_request=2e-3, api_server_s_per_token=1e-6)
    assert api_server_busy_s(o, 1000, 200) == pytest.approx(2e-3 + 1.2e-3)
    assert api_server_max_request_rate_per_s(o, 1000, 200, n_api_servers=4) == pytest.approx(4 / 3.2e-3)
    assert api_server_max_request_rate_per_s(PredictorOptions(), 10, 10) == math.inf
    with pytest.raises(ConfigError, match="api_server_count"):
        api_server_max_request_rate_per_s(o, 1, 1, n_api_servers=0)


# ---- the simulator sees the same steps --------------------------------------------------------------------
@pytest.mark.parametrize("spec", ["deepseek-block-dp", "qwen-two-nodes"])
def test_kernel_coefficients_are_the_predictor(catalog, spec: str) -> None:
    if spec == "deepseek-block-dp":
        p = StepTimePredictor(load_model("deepseek-v3"), catalog.get("h200"), Parallelism(tp=1, dp=8, ep=8),
                              Dtype.FP8, options=PredictorOptions(ep_dispatch_fp8=True, moe_load_imbalance=1.2),
                              fp8_scaling="block")
    else:
        p = StepTimePredictor(load_model("qwen3-235b-a22b"), catalog.get("h100"), Parallelism(tp=16, ep=16), Dtype.FP8)
    rng = np.random.default_rng(3)
    for _ in range(20):
        n = int(rng.integers(1, 200))
        b = parse_batch(f"decode={n}x{int(rng.integers(0, 8192))}")
        assert p.step_s(n, n, 0, b.decode_context_sum, 0) == pytest.approx(p.predict(b).total_s, rel=1e-9)


def test_mtp_tokens_per_step_and_time_per_token_by_hand(catalog) -> None:
    """E[tokens] = 1 + a1 + a1 a2: 1 + 0.8 + 0.8 x 0.5 = 2.2; the verify step holds each decode plus a
    k-token chunk at its context, and time per token = (verify + k draft) / E[tokens]."""
    assert expected_tokens_per_step((0.8, 0.5)) == pytest.approx(2.2)
    assert expected_tokens_per_step(()) == 1.0
    with pytest.raises(ConfigError, match="acceptance"):
        expected_tokens_per_step((1.2,))
    batch = parse_batch("prefill=100@0;decode=3x1000")
    v = verify_batch(batch, 2)
    assert v.n_decode == 3 and v.n_tokens == 100 + 3 * 3 and v.decode_context_sum == 3000
    assert list(v.prefill_offsets) == [0, 1000, 1000, 1000]
    p = StepTimePredictor(load_model("deepseek-v3"), catalog.get("h200"), Parallelism(tp=8, ep=8), Dtype.FP8)
    plain = parse_batch("decode=16x2048")
    step = mtp_step(p, plain, (0.85,))
    assert step.s_per_token == pytest.approx((p.predict(verify_batch(plain, 1)).total_s
                                              + mtp_draft_pass_s(p, 16, 16 * 2048)) / 1.85)
    assert 1.0 < step.speedup < 1.85  # the verify step and the draft cost something


def test_mtp_layer_weights_and_kv_on_the_last_stage(catalog) -> None:
    """One MTP layer of DeepSeek-V3 on 8x H200 (TP 8, EP 8), FP8: its attention shard, 32 of 256 routed
    experts and the shared expert over TP 8, the router, eh_proj 2h x h and two norms; and one more layer of
    latent KV per token."""
    from fleetplan.perf.kv_budget import _attention_split, kv_budget

    model, h200, par = load_model("deepseek-v3"), catalog.get("h200"), Parallelism(tp=8, ep=8)
    h = model.hidden_size
    base = kv_budget(model, h200, par, weight_dtype="fp8", kv_dtype="bf16")
    mtp = kv_budget(model, h200, par, weight_dtype="fp8", kv_dtype="bf16", n_mtp_layers=1)
    layer = (_attention_split(model, par) + 2 * h + 256 / 8 * model.expert_params() + model.expert_params() / 8
             + model.router_params() + 2 * h * h + 2 * h)
    assert mtp.weight_bytes - base.weight_bytes == pytest.approx(layer, abs=2)
    assert mtp.kv_bytes_per_token - base.kv_bytes_per_token == pytest.approx(576 * 2, abs=1)
    assert mtp.kv_blocks_per_replica < base.kv_blocks_per_replica


@settings(max_examples=25, deadline=None)
@given(tp=st.sampled_from([1, 2, 4, 8]), pp=st.integers(2, 8), node=st.sampled_from([1, 2, 4, 8]),
       tokens=st.integers(1, 8192))
def test_smaller_nodes_never_speed_up_pipeline_or_tensor_collectives(catalog, tp: int, pp: int, node: int,
                                                                     tokens: int) -> None:
    model, h100 = load_model("llama-3.1-70b"), catalog.get("h100")
    big = StepTimePredictor(model, dataclasses.replace(h100, gpus_per_node=64), Parallelism(tp=tp, pp=pp))
    small = StepTimePredictor(model, dataclasses.replace(h100, gpus_per_node=node), Parallelism(tp=tp, pp=pp))
    for kind in ("pp_send_recv", "tp_all_reduce"):
        (f_big, s_big), (f_small, s_small) = getattr(big.comm_terms, kind), getattr(small.comm_terms, kind)
        assert f_small + s_small * tokens >= f_big + s_big * tokens
