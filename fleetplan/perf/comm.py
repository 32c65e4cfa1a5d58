"""Collective communication with the alpha-beta model (Hockney 1994; Thakur et al. 2005).

A message of ``B`` bytes over a link of bandwidth ``bw`` costs ``alpha + B / bw``; the
collectives a serving step uses, for a group of ``g`` GPUs:

    ring all-reduce   t = alpha + 2 (g - 1) / g * B / bw       (tensor parallel, per layer)
    all-to-all        t = alpha + (g - 1) / g * B / bw         (expert parallel dispatch, combine)
    send / recv       t = alpha + B / bw                        (pipeline stage boundary)

with ``B`` the per-GPU payload (``tokens x hidden x 2`` bytes of BF16 activations).

Instances spanning nodes.  A group of ``g`` GPUs on nodes of ``n = gpus_per_node`` (the GPU
catalog's field; 8 for HGX/DGX and MI300X platforms) crosses the scale-out network once
``g > n``.  Ring all-reduce and a pipeline send then run at the NIC's per-GPU bandwidth (the
ring's slowest hop).  An all-to-all splits: of the ``(g - 1) / g`` of ``B`` a GPU sends,
``(n - 1) / g`` stays on its node's scale-up link and ``(g - n) / g`` leaves over its NIC:

    all-to-all across nodes  t = alpha_net + (n - 1) / g * B / bw_up + (g - n) / g * B / bw_net

(the two legs added, as DeepEP's normal kernels forward RDMA traffic through NVLink; the NIC
bandwidth is capped at the scale-up one, so crossing a node boundary never makes a collective
faster: ``hierarchical_all_to_all_s``).  Pipeline stages of ``s`` GPUs on nodes of ``n``: of
the ``pp - 1`` stage boundaries, ``nodes - 1`` cross the network (``pp_network_boundaries``).

Link: a group that fits in one node (``gpu.gpus_per_node``; ``GPUS_PER_NODE`` = 8, the DGX/HGX
reference servers, where no GPU is given) uses the scale-up link, ``nvlink_gb_per_s / 2`` per
direction (the catalog gives the bidirectional aggregate), or PCIe Gen4 x16 (``PCIE_GB_PER_S``) for cards without
NVLink; larger groups cross the scale-out NIC at ``network_gbps / 8`` GB/s.  Achieved
bandwidth is ``link_efficiency`` of that.

alpha: ``NVLINK_ALPHA_S`` = 10 us per collective: vLLM's custom all-reduce on H100 takes
8.5-11.8 us for 512 B - 32 KB messages at TP 2/4/8 (sgl-project/sglang PR #2904, "optimize
custom allreduce kernel", unit-test table for vLLM, 2025-01-15), i.e. the small-message
latency a decode step's all-reduces pay; NVIDIA notes that ring synchronisation, not
bandwidth, dominates them ("3x Faster AllReduce with NVSwitch and TensorRT-LLM MultiShot",
NVIDIA technical blog, 2024).  ``NETWORK_ALPHA_S`` = 20 us for InfiniBand/RoCE is an
estimate (the NVLink figure plus a NIC traversal each way).  Both are parameters of
``PredictorOptions``; calibration absorbs them into the fitted fixed and comm terms.

Checked against measured collectives (issue 26, AIConfigurator 0.12.0).  Count: a TP-only MoE layer
all-reduces once, routed and shared experts summed first (vLLM's fused-MoE runner,
``_maybe_reduce_final_output``: "the combined sum is all-reduced here"; SGLang alike), so a step pays two
all-reduces per layer, as ``StepTimePredictor.comm_terms`` charges; AIConfigurator's vLLM model charges
two more per layer (``context_moe_pre_dispatch`` / ``_post_dispatch``, each one all-reduce from the same
table, on top of ``context_tp_allreduce`` of ``2 n_layers``): 17.8 of its 35.7 ms communication for
DeepSeek-V3 on 8x H200 at 2,048 tokens, not a cost the engine pays (its SGLang model charges two, like
this module: 0.95-1.24x of ours at 1-16 K tokens).  Bandwidth: its custom all-reduce tables
(``systems/data/<gpu>/comm/{vllm,sglang}/<version>/custom_allreduce_perf.parquet``, eager rows, 4-128 M
BF16 values) give ``2 (g - 1) / g * B / (t - alpha)`` at 0.43-0.74 of the per-direction NVLink on
H100/H200 (rising with TP 2 -> 8) and 0.43-0.54 on B200, under ``link_efficiency`` 0.8; read back per
GPU into the vLLM/SGLang profiles it moved the held-out serving table -4.5 / 27.3 % / 254 within 35 % to
-3.9 / 26.9 % / 251 and broke the MoE agreement grid's TTFT target (97 %), so 0.8 stays.  Expert
parallelism with data-parallel attention (DeepSeek-V3, EP 8, ``Parallelism(tp=1, dp=8, ep=8)``) against
its vLLM 0.24.0 DeepEP high-throughput dispatch + combine tables (``comm/vllm/0.24.0/moe_a2a_perf.parquet``,
BF16, per-rank tokens): 0.76-0.99x on H100/H200 at 2-16 K tokens (0.58-0.74x at 1 K), but 0.28-0.34x on
B200, where DeepEP moves no more bytes per second than on H200 (3.61 against 2.43 ms a layer at 4,096
tokens); not changed (no held-out row runs EP on B200).
"""

from __future__ import annotations

from fleetplan.hardware import GpuProfile

__all__ = ["GPUS_PER_NODE", "PCIE_GB_PER_S", "NVLINK_ALPHA_S", "NETWORK_ALPHA_S", "link_bytes_per_s",
           "alpha_s", "all_reduce_s", "all_to_all_s", "send_recv_s", "crosses_node", "scale_up_bytes_per_s",
           "scale_out_bytes_per_s", "hierarchical_all_to_all_s", "pp_network_boundaries"]

GPUS_PER_NODE = 8  # DGX/HGX A100, H100, H200, B200 and MI300X platforms hold 8 GPUs
PCIE_GB_PER_S = 32.0  # PCIe 4.0 x16, per direction (PCI-SIG: 16 GT/s x 16 lanes, 128b/130b)
NVLINK_ALPHA_S = 10e-6  # sglang PR #2904 (module docstring)
NETWORK_ALPHA_S = 20e-6  # estimate, see module docstring
BITS_PER_BYTE = 8.0


def crosses_node(group_gpus: int, gpus_per_node: int = GPUS_PER_NODE) -> bool:
    """True when a group of ``group_gpus`` cannot fit in one node of ``gpus_per_node``."""
    return group_gpus > gpus_per_node


def alpha_s(group_gpus: int, nvlink_alpha_s: float, network_alpha_s: float,
            gpus_per_node: int = GPUS_PER_NODE) -> float:
    """Per-collective latency of a group: the scale-out figure once it spans nodes."""
    return network_alpha_s if crosses_node(group_gpus, gpus_per_node) else nvlink_alpha_s


def scale_up_bytes_per_s(gpu: GpuProfile, link_efficiency: float) -> float:
    """Achieved per-direction scale-up bandwidth (bytes/s): NVLink/xGMI half-duplex, or PCIe."""
    gb_per_s = gpu.nvlink_gb_per_s / 2.0 if gpu.nvlink_gb_per_s is not None else PCIE_GB_PER_S
    return gb_per_s * 1e9 * link_efficiency


def scale_out_bytes_per_s(gpu: GpuProfile, link_efficiency: float) -> float:
    """Achieved per-GPU scale-out bandwidth (bytes/s), never above the scale-up link's."""
    return min(gpu.network_gbps / BITS_PER_BYTE * 1e9 * link_efficiency, scale_up_bytes_per_s(gpu, link_efficiency))


def link_bytes_per_s(gpu: GpuProfile, group_gpus: int, link_efficiency: float) -> float:
    """Achieved per-direction bandwidth (bytes/s) for a group of ``group_gpus`` (the slowest hop)."""
    if crosses_node(group_gpus, gpu.gpus_per_node):
        return scale_out_bytes_per_s(gpu, link_efficiency)
    return scale_up_bytes_per_s(gpu, link_efficiency)


def hierarchical_all_to_all_s(payload_bytes: float, group_gpus: int, gpu: GpuProfile, link_efficiency: float,
                              nvlink_alpha_s: float, network_alpha_s: float) -> float:
    """All-to-all of ``payload_bytes`` per GPU over ``group_gpus`` GPUs on nodes of ``gpu.gpus_per_node``
    (module docstring): one scale-up leg within a node, plus a scale-out leg once the group spans nodes."""
    g, n = group_gpus, gpu.gpus_per_node
    if g <= 1:
        return 0.0
    up = scale_up_bytes_per_s(gpu, link_efficiency)
    if g <= n:
        return all_to_all_s(payload_bytes, g, up, nvlink_alpha_s)
    out = scale_out_bytes_per_s(gpu, link_efficiency)
    return network_alpha_s + (n - 1) / g * payload_bytes / up + (g - n) / g * payload_bytes / out


def pp_network_boundaries(pp: int, stage_gpus: int, gpus_per_node: int) -> int:
    """Pipeline stage boundaries (of ``pp - 1``) that cross the scale-out network: stages of
    ``stage_gpus`` placed in order on nodes of ``gpus_per_node``."""
    if pp <= 1:
        return 0
    if stage_gpus >= gpus_per_node:
        return pp - 1
    stages_per_node = max(1, gpus_per_node // stage_gpus)
    return (pp - 1) // stages_per_node


def all_reduce_s(payload_bytes: float, group_gpus: int, bytes_per_s: float, alpha_s: float) -> float:
    """Ring all-reduce of ``payload_bytes`` per GPU; 0 for a group of one."""
    if group_gpus <= 1:
        return 0.0
    return alpha_s + 2.0 * (group_gpus - 1) / group_gpus * payload_bytes / bytes_per_s


def all_to_all_s(payload_bytes: float, group_gpus: int, bytes_per_s: float, alpha_s: float) -> float:
    """All-to-all where each GPU sends ``(g-1)/g`` of ``payload_bytes``; 0 for a group of one."""
    if group_gpus <= 1:
        return 0.0
    return alpha_s + (group_gpus - 1) / group_gpus * payload_bytes / bytes_per_s


def send_recv_s(payload_bytes: float, bytes_per_s: float, alpha_s: float) -> float:
    """Point-to-point transfer of ``payload_bytes``."""
    return alpha_s + payload_bytes / bytes_per_s
