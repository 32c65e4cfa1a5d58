"""Role-specific parallelism of disaggregated MoE fleets (issue #27, item 2): wide DP-attention + EP decode
instances (``plan.disagg.placements``), timed by the co-located DP-attention step and simulated with it; a
DP-attention decode role's per-rank batch and KV limits; one request's KV on one DP rank."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fleetplan.hardware import load_catalog
from fleetplan.models import Dtype
from fleetplan.models.catalog import load_model
from fleetplan.models.context import served_context_limit
from fleetplan.perf.dp_instance import DataParallelInstance, attention_dp_ranks
from fleetplan.perf.linear import LinearStepModel
from fleetplan.perf.parallelism import Parallelism
from fleetplan.plan.disagg import DisaggCandidate, DisaggSettings, ModelShape
from fleetplan.plan.disagg.placements import WIDE_EP_NODES, wide_ep_placements
from fleetplan.plan.disagg.verify import pdd_spec
from fleetplan.plan.optimize import OptimizeRequest, analytical_phase
from fleetplan.plan.placement import place_model
from fleetplan.plan.space import Topology
from fleetplan.queueing.disagg import DecodeRole
from fleetplan.queueing.engine import EngineLimits, EngineModel
from fleetplan.workload import load_workload


@pytest.fixture(scope="module")
def deepseek_h200():
    model = load_model("deepseek-v3")
    gpu = load_catalog().get("h200")
    placed = place_model(model, gpu, weight_dtype=Dtype.FP8)
    return model, gpu, placed, wide_ep_placements(model, [gpu], placed, weight_dtype=Dtype.FP8)


def test_wide_ep_instances_span_whole_nodes_and_are_the_colocated_dp_step(deepseek_h200):
    """DeepSeek-V3 on H200: the co-located search offers TP8 and DP8 + EP8; the roles add DP + EP over 2 and 4
    nodes, each exactly the placement ``place_model`` gives that sharding (same step, same KV blocks)."""
    model, gpu, placed, wide = deepseek_h200
    assert [p.gpu.name for p in placed] == ["H200 tp8", "H200 tp1 dp8"]
    assert [p.gpu.name for p in wide] == [f"H200 tp1 dp{8 * k}" for k in WIDE_EP_NODES]
    for p, k in zip(wide, WIDE_EP_NODES, strict=True):
        g = gpu.gpus_per_node * k
        assert p.gpus_per_instance == g and p.nodes_per_instance == k
        assert p.parallelism.attn_dp == g and p.parallelism.ep == g
        assert attention_dp_ranks(p.step_model) == g
        ref = place_model(model, gpu, parallelism=Parallelism(tp=1, dp=g, ep=g), weight_dtype=Dtype.FP8)[0]
        code, coef = p.step_model.kernel_coefficients()
        ref_code, ref_coef = ref.step_model.kernel_coefficients()
        assert code == ref_code and np.array_equal(coef, ref_coef)
        assert p.gpu.require_serving().kv_blocks == ref.gpu.require_serving().kv_blocks
    # experts spread wider leave more of each GPU for KV
    per_gpu = [p.gpu.require_serving().kv_blocks / p.gpus_per_instance for p in (placed[1], *wide)]
    assert per_gpu == sorted(per_gpu)


def test_no_wide_instances_where_the_colocated_search_offers_no_dp_attention(deepseek_h200):
    """Dense models and MoE models that fit part of a node with TP (no DP attention offered) get none; the
    instance-size cap and the already-offered sizes are respected."""
    catalog = load_catalog()
    for name, dtype in (("llama-3.1-70b", Dtype.FP8), ("qwen3-30b-a3b", None)):
        model = load_model(name)
        gpu = catalog.get("h100")
        assert wide_ep_placements(model, [gpu], place_model(model, gpu, weight_dtype=dtype), weight_dtype=dtype) == ()
    model, gpu, placed, _ = deepseek_h200
    capped = wide_ep_placements(model, [gpu], placed, weight_dtype=Dtype.FP8, max_gpus_per_instance=16)
    assert [p.gpu.name for p in capped] == ["H200 tp1 dp16"]
    assert wide_ep_placements(model, [gpu], (), weight_dtype=Dtype.FP8) == ()  # no co-located DP offer given
    h100 = catalog.get("h100")  # DeepSeek-V3 needs two H100 nodes: DP16 is the co-located search's already
    on_h100 = place_model(model, h100, weight_dtype=Dtype.FP8)
    assert "H100-SXM tp1 dp16" in {p.gpu.name for p in on_h100}
    assert [p.gpu.name for p in wide_ep_placements(model, [h100], on_h100, weight_dtype=Dtype.FP8)] == \
        ["H100-SXM tp1 dp32"]


def _dp_role(ranks: int, blocks: int, step=None) -> DecodeRole:
    base = step or LinearStepModel(0.02, 0.0004, 0.0, None)
    model = DataParallelInstance(base, ranks) if ranks > 1 else base
    engine = EngineModel.of(model, EngineLimits(1, 1, blocks, 16))
    p, o, w = np.array([1000.0, 3000.0]), np.array([200.0, 600.0]), np.array([0.6, 0.4])
    return DecodeRole.of(engine, p, o, w)


@pytest.mark.parametrize("ranks", [2, 8, 16])
def test_dp_decode_batch_is_whole_per_rank_batches_within_one_ranks_kv(ranks):
    """b = ranks x floor(b_1 / ranks) where b_1 is the largest batch within the TPOT target, and each rank's
    b / ranks sequences of the mean context fit its own blocks / ranks (a balanced split, ``perf.dp_instance``)."""
    blocks = 400_003  # not a multiple of the ranks
    role = _dp_role(ranks, blocks)
    target = 0.05
    b = role.batch_cap(target, ranks=ranks)
    one = role.batch_cap(target)  # the instance as one engine
    assert b % ranks == 0 and b <= one and one - b < ranks
    per_seq = math.ceil(role.context_tokens / 16)
    assert (b // ranks) * per_seq <= blocks // ranks
    assert float(role.step_s(b)) <= target * (1 + 1e-12)
    # the KV binding: a cache for 3 sequences per rank at the mean context
    tight = _dp_role(ranks, ranks * 3 * per_seq + ranks - 1)
    assert tight.batch_cap(10.0, ranks=ranks) == 3 * ranks
    # one rank's cache holds no mean context: at most ranks - 1 sequences on the instance's blocks
    starved = _dp_role(ranks, per_seq + 1)
    assert starved.batch_cap(10.0, ranks=ranks) == 1
    assert _dp_role(ranks, per_seq - 1).batch_cap(10.0, ranks=ranks) == 0


def test_ranks_one_is_the_engine_cap():
    role = _dp_role(1, 123_457)
    assert role.batch_cap(0.05, ranks=1) == role.batch_cap(0.05)


@pytest.fixture(scope="module")
def deepseek_pdd_request(deepseek_h200):
    model, _, placed, wide = deepseek_h200
    every = (*placed, *wide)
    return OptimizeRequest(workload=load_workload("azure_conv"), gpus=tuple(p.gpu for p in every),
                           gpus_per_instance=tuple((p.gpu.name, p.gpus_per_instance) for p in every),
                           step_models=tuple((p.gpu.name, p.step_model) for p in every), slo_ttft_s=2.0,
                           slo_tpot_s=0.1, rate_per_s=200.0, topologies=(Topology.PDD,), min_ce_gain=0.0,
                           max_model_len_tokens=served_context_limit(model, None),
                           disagg=DisaggSettings(ModelShape.of(model)))


def test_each_role_picks_its_own_shape_and_the_simulator_runs_it(deepseek_pdd_request):
    """Every (prefill, decode) pair of the four shapes is a candidate; a wide decode role's batch is whole per
    rank, its KV goes over one rank pair and the network, and the PDD simulator's decode pool runs the
    placement's own step with that batch."""
    req = deepseek_pdd_request
    cands = [c for c in analytical_phase(req) if isinstance(c, DisaggCandidate)]
    pairs = {(c.pools[0].gpu, c.pools[1].gpu) for c in cands}
    names = [g.name for g in req.gpus]
    assert pairs == {(a, b) for a in names for b in names}
    steps = dict(req.step_models)
    gpus = {g.name: g for g in req.gpus}
    kv = req.disagg.model.kv_bytes_per_token
    for dec in ("H200 tp1 dp16", "H200 tp1 dp32"):
        c = next(c for c in cands if c.feasible and c.pools[0].gpu == "H200 tp8" and c.pools[1].gpu == dec)
        ranks = attention_dp_ranks(steps[dec])
        assert c.decode_batch % ranks == 0 and c.pools[1].gpus_per_instance == ranks
        assert c.kv_link[0] == pytest.approx(kv)  # one DP rank holds the request's KV: one pair sends it
        counts = [p.count for p in c.pools]
        spec = pdd_spec(c, gpus, counts, step_models=steps, max_model_len_tokens=req.max_model_len_tokens)
        assert spec.decode.limits.max_num_seqs == c.decode_batch
        code, coef = spec.decode.step_model.kernel_coefficients()
        ref_code, ref_coef = steps[dec].kernel_coefficients()
        assert code == ref_code and np.array_equal(coef, ref_coef)
        assert spec.transfer.bandwidth_bytes_per_s == pytest.approx(c.kv_bandwidth_at(counts))
    # a TP8 pair splits the KV over its ranks pairs as before
    tp = next(c for c in cands if c.pools[0].gpu == c.pools[1].gpu == "H200 tp8")
    assert tp.kv_link[0] == pytest.approx(kv / 8)


def test_mtp_twins_take_no_role_the_pdd_simulator_runs_no_speculation(deepseek_h200):
    """``optimize --topology pdd --mtp``: the "MTP on" twins (``mtp1``) of DeepSeek-V3's placements are left
    out of every role (the PDD simulator runs no speculative decoding); their MTP-off placements are swept."""
    model, gpu, _, _ = deepseek_h200
    placed = place_model(model, gpu, weight_dtype=Dtype.FP8, mtp_acceptance=0.8)
    names = {p.gpu.name for p in placed}
    assert {"H200 tp8 mtp1", "H200 tp8"} <= names
    req = OptimizeRequest(workload=load_workload("azure_conv"), gpus=tuple(p.gpu for p in placed),
                          gpus_per_instance=tuple((p.gpu.name, p.gpus_per_instance) for p in placed),
                          step_models=tuple((p.gpu.name, p.step_model) for p in placed), slo_ttft_s=2.0,
                          slo_tpot_s=0.1, rate_per_s=200.0, topologies=(Topology.PDD,), min_ce_gain=0.0,
                          max_model_len_tokens=served_context_limit(model, None),
                          disagg=DisaggSettings(ModelShape.of(model)))
    cands = [c for c in analytical_phase(req) if isinstance(c, DisaggCandidate)]
    used = {p.gpu for c in cands for p in c.pools}
    assert used == {n for n in names if "mtp" not in n}
