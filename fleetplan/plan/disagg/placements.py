"""Role-specific instance shapes of a disaggregated MoE fleet: wide DP-attention + EP decode instances.

``plan.placement.place_model`` searches the instance shardings of a co-located pool: every tensor-parallel
size within a node (and, for an MoE model of one node or more, data-parallel attention with expert
parallelism over the node), and instances across nodes only when nothing fits within one.  A
disaggregated MoE fleet is deployed otherwise: a prefill role at modest TP / EP (one node) and a decode
role of wide DP attention + EP over several nodes, the KV cache of each rank its own and the experts
spread over every GPU of the instance, so each GPU streams ``E / G`` experts per step and holds a large
share of its memory for KV.  Sources of the shape:

* SGLang's large-scale EP deployment of DeepSeek-V3 on 96 H100s (LMSYS blog, 2025-05-05, "Deploying
  DeepSeek with PD Disaggregation and Large-scale Expert Parallelism on 96 H100 GPUs"): prefill and
  decode instances of several nodes each (server arguments ``enable_dp_attention``, ``ep_size``
  over the role's nodes, ``disaggregation_mode`` prefill|decode), decode over more nodes than prefill;
* vLLM's wide-EP recipe (engine arguments ``data_parallel_size = G``, ``enable_expert_parallel`` over
  several nodes, ``data_parallel_size_local = 8``) and NVIDIA Dynamo / llm-d's "wide EP" decode recipes for
  DeepSeek-R1 (decode DP attention + EP over 2-4 nodes, prefill at one node).

``wide_ep_placements`` adds ``Parallelism(tp=1, dp=G, ep=G)`` instances of ``G = gpus_per_node x k`` GPUs for
each ``k`` of ``WIDE_EP_NODES`` (2 and 4 nodes; at most ``max_gpus_per_instance``) that ``place_model`` did not
already offer, on each GPU type where the co-located search offers DP attention + EP at all (``plan.placement``:
an MoE model with MLA, whose TP replicates the latent KV on every GPU, or one that needs more than a node):
DeepSeek-V3/R1 on H100 (2 nodes already), H200 and B200. A model that fits a fraction of a node with TP
(Qwen3-30B-A3B; Qwen3-235B in FP8) gets none: a multi-node instance of it only adds GPUs. They are timed exactly
as the co-located DP-attention instances are (``ModelPlacement.step_model``: the predictor's rank step at the
instance's batch split over its ranks, ``perf.dp_instance``; the expert all-to-all across nodes by the
predictor's communication model), so the PDD screen and the PDD simulator run the same step for them. The PDD /
AFD search pairs every placement as prefill with every placement as decode, so each role picks its own shape
(the cost decides; a wide instance rarely wins as prefill, where one node's TP already fills the compute). Dense
models get none: their decode role's shapes are the TP sizes of one node.
"""

from __future__ import annotations

from collections.abc import Sequence

from fleetplan.errors import FleetplanError
from fleetplan.hardware import GpuProfile
from fleetplan.models import Dtype, ModelConfig
from fleetplan.perf.parallelism import Parallelism
from fleetplan.plan.placement import DEFAULT_MAX_GPUS_PER_INSTANCE, ModelPlacement, place_model

__all__ = ["WIDE_EP_NODES", "wide_ep_placements"]

#: Nodes per wide DP-attention + EP instance offered to the disaggregated roles (module docstring: 2-4 node
#: decode instances in vLLM's wide-EP, Dynamo's and llm-d's DeepSeek-R1 recipes; 256 routed experts divide
#: over 16 and 32 GPUs).
WIDE_EP_NODES = (2, 4)


def wide_ep_placements(
    model: ModelConfig,
    gpus: Sequence[GpuProfile],
    existing: Sequence[ModelPlacement] = (),
    *,
    nodes: Sequence[int] = WIDE_EP_NODES,
    weight_dtype: Dtype | None = None,
    kv_dtype: Dtype = Dtype.BF16,
    max_gpus_per_instance: int = DEFAULT_MAX_GPUS_PER_INSTANCE,
    engine: str = "vllm",
    timing_source=None,
    engine_version: str | None = None,
) -> tuple[ModelPlacement, ...]:
    """The wide DP-attention + EP placements of ``model`` on each of ``gpus`` where ``existing`` (the
    co-located search's placements) offers DP attention (module docstring), those it does not hold
    already, fewest GPUs first; () for a dense model.  ``engine`` / ``engine_version``: the profile timing them
    (``plan.placement.place_model``).

    A size whose sharding breaks a rule of the model (experts not divisible over G, ``Parallelism.check_model``)
    or that does not fit is skipped: the co-located search already holds the model's smallest fit."""
    if not model.is_moe:
        return ()
    have = {p.gpu.name for p in existing}
    dp_on = {p.predictor.gpu.name for p in existing if p.parallelism.attn_dp > 1}
    out: list[ModelPlacement] = []
    for gpu in {g.name: g for g in gpus}.values():
        if gpu.name not in dp_on:
            continue
        for k in sorted(set(int(n) for n in nodes)):
            g_count = gpu.gpus_per_node * k
            if k < 2 or g_count > max_gpus_per_instance:
                continue
            par = Parallelism(tp=1, dp=g_count, ep=g_count)
            try:
                par.check_model(model)
                placed = place_model(model, gpu, parallelism=par, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                                     max_gpus_per_instance=max_gpus_per_instance, engine=engine,
                                     timing_source=timing_source, engine_version=engine_version)
            except FleetplanError:
                continue
            out.extend(p for p in placed if p.gpu.name not in have)
            have.update(p.gpu.name for p in placed)
    return tuple(out)
