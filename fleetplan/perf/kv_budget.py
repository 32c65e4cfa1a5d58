"""KV-cache budget of one GPU: what is left for PagedAttention blocks after everything else.

vLLM's start-up accounting (``gpu_worker.determine_available_memory``; Frontier §3.4
"Memory capacity" does the same with a profiled run) per GPU:

    usable_bytes       = hbm_bytes * gpu_memory_utilization
    kv_available_bytes = usable_bytes - weight_bytes - activation_peak_bytes
                         - cudagraph_pool_bytes - comm_workspace_bytes
                         - max_num_seqs * state_bytes_per_seq
    kv_blocks_per_gpu  = floor(kv_available_bytes / (kv_bytes_per_token * block_size_tokens))

SGLang accounts the other way round (``fleetplan.perf.sglang_memory``): its ``mem_fraction_static`` is the
weights' and the KV pool's share and the activations and CUDA graphs live outside it, so with ``engine="sglang"``
``usable_bytes = hbm_bytes * mem_fraction_static`` and neither ``activation_peak_bytes`` nor
``cudagraph_pool_bytes`` is subtracted (both are 0 in its ``KvBudget``); ``mem_fraction_static`` defaults to the
value SGLang derives.

Frontier (§2.2) measured that "total minus weights" overestimates the KV budget by 8.1 %
(Llama-3.1-8B) to 27.2 % (Qwen3-30B MoE), hence the explicit overhead terms.  They are
analytical estimates here, not a profile; pass measured values when you have them.

* ``weight_bytes``: this GPU's shard (``fleetplan.perf.parallelism``): attention, dense
  FFN layers and shared experts split over ``attn_tp`` (GQA KV heads replicated when
  ``attn_tp`` > KV heads; MLA's down-projections ``q_a``/``kv_a`` replicated), each routed
  expert split over ``ffn_tp`` with ``n_experts / ffn_ep`` experts per GPU, router and
  norms replicated, embedding and LM head vocab-split over ``attn_tp`` on the first and
  last pipeline stage.  Quantisation scales are ignored.  A stage's MoE layers are the
  ``model.moe_layer_indices()`` in its layer range (Llama-4 Maverick alternates dense and MoE
  layers, so a stage holds the experts of its own MoE layers only); Gated DeltaNet layers
  (Qwen3-Next) count ``LayerMix.linear_params_per_layer / attn_tp``, at their share of every
  stage; DeepSeek-V3.2's indexer is replicated (vLLM builds it of ``ReplicatedLinear``).  A
  checkpoint with ``quantized_experts_only`` (gpt-oss: MXFP4 experts) served in its own type
  keeps everything but the routed experts in BF16.
* MXFP4 experts as the engine loads them (``Mxfp4Layout``, ``mxfp4_layout``): not the checkpoint's
  bytes.  vLLM's ``Mxfp4MoEMethod.create_weights`` allocates each expert's ``w13`` (``2 I_p x H_p``)
  and ``w2`` (``H_p x I_p``) at padded sizes, 4 bits a weight plus one E8M0 byte per 32 and a bias
  per output row, and ``process_weights_after_loading`` repacks them per backend
  (vllm-project/vllm ``vllm/model_executor/layers/quantization/mxfp4.py``@007d5005 and
  ``utils/marlin_utils_fp4.py``, ``utils/mxfp4_utils.py``), so per expert on one GPU

      loaded_bytes = 3 I_p H_p (1/2 + c/32) + (2 I_p + H_p) b,   I_p = roundup(I / ffn_tp, a_I),
                                                                  H_p = roundup(h, a_H)

  with the backend vLLM picks by the GPU's compute capability (``get_mxfp4_backend``):
  Marlin below SM 9.0 (A100, A10G, L4, L40S: triton_kernels is only enabled on SM 9.0-10.x):
  ``a_I`` 128, ``a_H`` 256 (the Marlin MoE kernel needs n % 256 and k % 128), ``c`` 1, BF16
  bias ``b`` 2; Marlin too on SM 9.0 up to vLLM 0.11.0, which did not ship ``triton_kernels``
  (vllm-project/vllm issue #26582: v0.11.0 users install it by hand; PR #27523: commit a9f55dc5
  added the dependency "which caused SM90 to default to Triton instead of Marlin"; first in
  v0.11.1); Triton on SM 9.0 from v0.11.1 (H100, H200, H20, H800; FlashInfer's SM90 path is
  opt-in by ``VLLM_USE_FLASHINFER_MOE_MXFP4_BF16``): ``a_I`` 64, no hidden padding, the biases cast to
  fp32 (``b`` 4) and ``c`` 2 because ``_swizzle_mxfp4`` returns new scale tensors while the
  loaded ``w13_weight_scale``/``w2_weight_scale`` parameters stay registered (only the weights
  are deleted); FlashInfer MXFP4-BF16 on SM 10.0 (B200): ``a_I`` = ``a_H`` 256, ``b`` 4, ``c``
  1; ROCm (MI300X, gfx942): the Triton path with ``get_padding_alignment()`` 128 on both, ``b``
  4, ``c`` 2.  SGLang's ``Mxfp4MoEMethod`` (sgl-project/sglang
  ``python/sglang/srt/layers/quantization/mxfp4.py``@0043c43a) runs the same Triton path on
  every GPU by default: ``I`` padded to 64, fp32 biases, the swizzled scales beside the
  loaded ones (``a_I`` 64, ``b`` 4, ``c`` 2); other engines load the checkpoint's bytes.
  gpt-oss-120b (h = I = 2880, 128 experts, 36 layers) on one GPU:
  65.90 GiB under Marlin against the 65.97 GiB vLLM v0.10.1 logs ("Model loading took",
  vllm-project/vllm issue #23278, Marlin MXFP4) and 64.18 GiB under Triton against v0.14.1's
  64.38 GiB (issue #33155); the checkpoint's 60.69 GiB was 5.3 and 3.7 GiB short.  The
  0.07-0.2 GiB left are the attention biases and sinks the model config leaves out.
* ``state_bytes_per_seq`` (``state_bytes_per_seq_per_gpu``): what a sequence holds whatever its
  length: the Gated DeltaNet recurrent and convolution state (BF16, vLLM's
  ``mamba_cache_dtype`` "auto" = the model dtype: vllm-project/vllm
  ``vllm/model_executor/layers/mamba/mamba_utils.py``
  ``MambaStateDtypeCalculator.gated_delta_net_state_dtype``; heads split over ``attn_tp``),
  reserved for ``max_num_seqs`` sequences (an upper bound when fewer run).
* ``window_tokens_per_seq``: the KV of narrow-window layers (gpt-oss's 128-token sliding window)
  is *not* reserved.  vLLM's hybrid KV-cache manager backs every KV-cache group (one of full
  layers, one of sliding layers for gpt-oss) by the one shared block pool, a block id costing one
  page in each layer of a group (``vllm/v1/core/kv_cache_utils.py``
  ``_get_kv_cache_config_uniform_page_size``), and ``SlidingWindowManager`` keeps only the blocks
  inside the window of a *running* request (``remove_skipped_blocks``; at most
  ``ceil(W / block) + 1`` blocks, ``get_num_blocks_to_allocate``).  So the pool is sized by the
  full layers alone and each running request holds, besides its context, a fixed

      window_tokens_per_seq = ceil((ceil(W / block) + 1) * block * n_window / n_full)

  tokens of full-layer capacity: 144 for gpt-oss (W 128, block 16, 18 sliding and 18 full
  layers).  Not yet charged: the simulator's kernels and the analytic engine model size a
  request's blocks by its context alone, so they overstate the cache by
  ``window_tokens_per_seq`` per running request (1,152 tokens, < 1 %, at 8 running 32k
  requests of gpt-oss-120b on A100; 36,864 tokens at 256 running requests, 147,456 at 1,024),
  as do the transient blocks a prefill chunk takes in the sliding group before they leave
  the window.  Charging it needs a per-pool field next to ``pool_kv_blocks`` in every kernel
  and twin (``fleetplan.sim._kernels``) and in ``EngineLimits``.
* ``activation_peak_bytes`` (the profiling run's torch peak), with ``T`` =
  ``max_num_batched_tokens``, ``S`` = ``max_num_seqs`` and 2-byte activations:

      T * 2 * (2*h + w_peak) + S * (V / attn_tp) * 4

  ``2*h`` is the residual stream and its normed copy; ``w_peak`` the widest per-GPU
  intermediate: ``(H/attn_tp + 2*K_gpu) * d`` (QKV), ``3*I/attn_tp`` (dense FFN
  gate-up plus activation output) or ``top_k * (3*I_moe/ffn_tp + h)`` (fused-MoE
  caches, one row per routed token copy); the last term is fp32 logits for ``S``
  sampled rows.
* ``cudagraph_pool_bytes``: memory of captured decode graphs; 0 with vLLM's ``enforce_eager``.
* ``comm_workspace_bytes``: NCCL / custom all-reduce buffers; 0 on a single GPU.

MTP draft layers (``n_mtp_layers``, DeepSeek-V3's ``num_nextn_predict_layers`` when MTP speculative
decoding is on) sit on the last stage: each one decoder layer of the model's MoE (or dense) kind plus
its ``eh_proj`` (2h x h) and two norms, with a KV cache of its own (vLLM allocates one per draft layer).

KV bytes per token per GPU = (layers on the stage) x (one layer's KV bytes) x
``kv_heads_per_gpu / n_kv_heads`` (GQA), or the full latent (MLA, replicated).  Under
pipeline parallelism every stage is budgeted and the stage with the fewest blocks is
reported (Frontier's "worst-case slice across PP stages").  A replica holds
``kv_blocks_per_gpu * attn_dp`` blocks: each data-parallel rank has its own cache.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.hardware import GpuProfile
from fleetplan.models import AttentionKind, Dtype, ModelConfig, dtype
from fleetplan.perf.engine_version import release_of
from fleetplan.perf.parallelism import Parallelism, pp_stage_layers, valid_tensor_parallel_sizes
from fleetplan.perf.sglang_memory import sglang_mem_fraction_static
from fleetplan.units import BYTES_PER_GIB

__all__ = [
    "CUDA_CAPABILITY",
    "DEFAULT_COMM_WORKSPACE_BYTES",
    "DEFAULT_GPU_MEMORY_UTILIZATION",
    "DEFAULT_CUDAGRAPH_POOL_BYTES",
    "DEFAULT_MAX_NUM_BATCHED_TOKENS",
    "DEFAULT_MAX_NUM_SEQS",
    "KvBudget",
    "LARGE_GPU_GIB",
    "Mxfp4Layout",
    "VLLM_TRITON_MXFP4_SINCE",
    "kv_budget",
    "mxfp4_layout",
    "resolved_memory_fraction",
    "state_bytes_per_seq_per_gpu",
    "vllm_batch_defaults",
    "weight_bytes_per_gpu",
    "window_tokens_per_seq",
]

#: Chunked-prefill token budget of the profiling run (vLLM ``max_num_batched_tokens``).
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
#: Sequences per step (vLLM ``max_num_seqs``; 256 is vLLM's long-standing default).
DEFAULT_MAX_NUM_SEQS = 256
#: vLLM's threshold for its larger batch defaults (``vllm_batch_defaults``).
LARGE_GPU_GIB = 70.0
#: vLLM's ``gpu_memory_utilization`` default (``kv_budget``'s for every engine but SGLang).
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
#: Decode CUDA-graph pool: vLLM logs 0.3-1.5 GiB ("Graph capturing finished ... took X GiB")
#: for 8B-70B models at its default capture sizes; 1 GiB is a mid value, not a measurement.
DEFAULT_CUDAGRAPH_POOL_BYTES = int(1.0 * BYTES_PER_GIB)
#: NCCL channel buffers plus vLLM's custom all-reduce buffers on a multi-GPU replica:
#: order-of-magnitude estimate (NCCL_BUFFSIZE 4 MiB x channels x peers), not a measurement.
DEFAULT_COMM_WORKSPACE_BYTES = int(0.5 * BYTES_PER_GIB)
ACTIVATION_BYTES = 2  # bf16 activations whatever the weight dtype
LOGIT_BYTES = 4  # fp32 logits
#: CUDA compute capability x 10 of the catalog's NVIDIA GPUs (NVIDIA, "CUDA GPUs - Compute Capability",
#: developer.nvidia.com/cuda-gpus: A100 8.0, A10G 8.6, L4 / L40S 8.9, H100 / H200 / H20 / H800 9.0, B200 10.0;
#: H20-3e is the H20 with 141 GB);
#: ``None`` marks a ROCm GPU (MI300X, gfx942).  Read only to pick vLLM's MXFP4 MoE backend.
CUDA_CAPABILITY: dict[str, int | None] = {
    "A100-40GB": 80, "A100-80GB": 80, "A10G": 86, "L4": 89, "L40S": 89, "H100-PCIe": 90, "H100-SXM": 90,
    "H20": 90, "H20-3e": 90, "H200": 90, "H800": 90, "B200": 100, "MI300X": None,
}
MXFP4_BLOCK = 32  # elements per E8M0 scale (OCP MX v1.0)


@dataclass(frozen=True)
class Mxfp4Layout:
    """How an engine holds MXFP4 MoE experts after loading (module docstring): the backend's name, the
    alignment of the per-GPU intermediate size and of the hidden size, copies of the E8M0 scales kept, and
    bytes per bias element."""

    backend: str
    intermediate_align: int
    hidden_align: int
    scale_copies: int
    bias_bytes: int

    def expert_bytes(self, hidden: int, intermediate_per_gpu: float) -> float:
        """Loaded bytes of one expert on one GPU: ``3 I_p H_p (1/2 + c/32) + (2 I_p + H_p) b``."""
        i_p = _round_up(math.ceil(intermediate_per_gpu), self.intermediate_align)
        h_p = _round_up(hidden, self.hidden_align)
        return 3 * i_p * h_p * (0.5 + self.scale_copies / MXFP4_BLOCK) + (2 * i_p + h_p) * self.bias_bytes


def _round_up(n: int, align: int) -> int:
    return -(-n // align) * align


#: The checkpoint's own bytes (4.25 bits a weight), for engines whose loader is not modelled.
CHECKPOINT_MXFP4 = Mxfp4Layout("checkpoint", 1, 1, 1, 0)
_VLLM_MXFP4 = {
    "marlin": Mxfp4Layout("vllm-marlin", 128, 256, 1, 2),
    "triton": Mxfp4Layout("vllm-triton", 64, 1, 2, 4),
    "flashinfer-sm100": Mxfp4Layout("vllm-flashinfer-sm100", 256, 256, 1, 4),
    "rocm-triton": Mxfp4Layout("vllm-rocm-triton", 128, 128, 2, 4),
}
_SGLANG_MXFP4 = Mxfp4Layout("sglang-triton", 64, 1, 2, 4)
#: Engines whose MXFP4 loading is not modelled: the checkpoint's bytes.
CHECKPOINT_LOADERS = ("lmdeploy", "trtllm")


#: First vLLM release shipping ``triton_kernels`` (so defaulting to Triton on SM 9.0; module docstring).
VLLM_TRITON_MXFP4_SINCE = (0, 11, 1)


def mxfp4_layout(gpu: GpuProfile, engine: str = "vllm", engine_version: str | None = None) -> Mxfp4Layout:
    """The MXFP4 MoE layout ``engine`` (at ``engine_version``; None = a current release) loads on ``gpu``
    (module docstring): vLLM by compute capability (``CUDA_CAPABILITY``) and release, SGLang's padding,
    the checkpoint's bytes for other engines.

    Raises
    ------
    ConfigError
        vLLM on a GPU missing from ``CUDA_CAPABILITY`` (its backend, hence its padding, is unknown), or an
        engine version that is not a release number.
    """
    if engine not in CHECKPOINT_LOADERS + ("vllm", "sglang"):
        raise UnknownNameError("engine", str(engine), sorted(CHECKPOINT_LOADERS + ("vllm", "sglang")))
    if engine == "sglang":
        return _SGLANG_MXFP4
    if engine in CHECKPOINT_LOADERS:
        return CHECKPOINT_MXFP4
    if gpu.name not in CUDA_CAPABILITY:
        raise ConfigError(f"GPU {gpu.name!r} has no compute capability in fleetplan.perf.kv_budget.CUDA_CAPABILITY, "
                          f"which picks vLLM's MXFP4 MoE backend and its weight padding; known: "
                          f"{', '.join(sorted(CUDA_CAPABILITY))}: add it there", param="gpu", value=gpu.name)
    cc = CUDA_CAPABILITY[gpu.name]
    if cc is None:
        return _VLLM_MXFP4["rocm-triton"]
    old_release = engine_version is not None and release_of(engine_version) < VLLM_TRITON_MXFP4_SINCE
    if cc < 90 or (cc < 100 and old_release):
        return _VLLM_MXFP4["marlin"]
    return _VLLM_MXFP4["triton"] if cc < 100 else _VLLM_MXFP4["flashinfer-sm100"]


@dataclass(frozen=True)
class KvBudget:
    """Per-GPU memory split and KV capacity of one replica (bytes; see module docstring).

    The per-GPU numbers are those of the binding pipeline stage (fewest KV blocks).
    """

    model_name: str
    gpu_name: str
    parallelism: Parallelism
    weight_dtype: Dtype
    kv_dtype: Dtype
    gpu_memory_utilization: float
    stage_layers: int
    hbm_bytes: int
    usable_bytes: int
    weight_bytes: int
    activation_peak_bytes: int
    cudagraph_pool_bytes: int
    comm_workspace_bytes: int
    kv_available_bytes: int
    kv_bytes_per_token: int
    block_size_tokens: int
    kv_blocks_per_gpu: int
    kv_blocks_per_replica: int
    state_bytes_per_seq: int = 0
    state_reserved_bytes: int = 0
    window_tokens_per_seq: int = 0
    mxfp4_backend: str = ""

    def __post_init__(self) -> None:
        if self.kv_blocks_per_gpu < 1 or self.kv_available_bytes < 0:
            raise ConfigError(f"KvBudget for {self.model_name} has no KV blocks; build it with kv_budget()")
        if self.kv_blocks_per_replica != self.kv_blocks_per_gpu * self.parallelism.attn_dp:
            raise ConfigError("kv_blocks_per_replica must equal kv_blocks_per_gpu * attention dp ranks")

    @property
    def max_tokens_per_rank(self) -> int:
        """Tokens one data-parallel rank can hold (the longest possible context)."""
        return self.kv_blocks_per_gpu * self.block_size_tokens

    @property
    def max_tokens(self) -> int:
        """Tokens the whole replica can hold across its data-parallel ranks."""
        return self.kv_blocks_per_replica * self.block_size_tokens


def _check_knobs(utilization: float, ints: dict[str, int]) -> None:
    if isinstance(utilization, bool) or not isinstance(utilization, (int, float)) or not 0 < utilization <= 1:
        raise ConfigError(f"`gpu_memory_utilization` {utilization!r} must be in (0, 1] (SGLang's mem_fraction_static "
                          "likewise); vLLM's default is 0.9", param="gpu_memory_utilization", value=utilization)
    for name, value in ints.items():
        low = 1 if name in ("block_size_tokens", "max_num_batched_tokens", "max_num_seqs") else 0
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"{name}={value!r} must be an integer >= {low}")


def _attention_split(model: ModelConfig, par: Parallelism) -> float:
    """One full-attention layer's attention parameters on one GPU (output gate and DSA indexer included)."""
    h, n_h, d, tp = model.hidden_size, model.n_heads, model.head_dim, par.attn_tp
    if model.attention is AttentionKind.GQA:
        gate = h * n_h * d if model.layers.output_gate else 0
        return (2 * h * n_h * d + gate) / tp + 2 * h * par.kv_heads_per_gpu(model) * d
    r_q, r_kv, d_r, d_v = model.q_lora_rank, model.kv_lora_rank, model.qk_rope_head_dim, model.v_head_dim
    replicated = h * (r_kv + d_r) + r_kv + (h * r_q + r_q if r_q else 0) + model.indexer_params_per_layer()
    sharded = (r_q if r_q else h) * n_h * d + r_kv * n_h * (d - d_r + d_v) + n_h * d_v * h
    return replicated + sharded / tp


def _mean_attention_split(model: ModelConfig, par: Parallelism) -> float:
    """Attention parameters of an average layer on one GPU: full-attention layers (``_attention_split``) and
    Gated DeltaNet layers (``LayerMix.linear_params_per_layer / attn_tp``) weighted by their counts."""
    mix = model.layers
    linear = mix.linear_params_per_layer(model.hidden_size) / par.attn_tp if mix.n_linear_layers else 0.0
    n_full = model.n_layers - mix.n_linear_layers
    return (n_full * _attention_split(model, par) + mix.n_linear_layers * linear) / model.n_layers


def _bytes_per_param(model: ModelConfig, weight_dtype: Dtype) -> tuple[float, float]:
    """(routed experts, everything else) bytes per parameter: a checkpoint quantizing only its experts
    (``ModelConfig.quantized_experts_only``, gpt-oss) keeps the rest in BF16 when served in its own type."""
    rest = Dtype.BF16 if model.quantized_experts_only and weight_dtype is model.default_weight_dtype else weight_dtype
    return weight_dtype.bytes_per_param, rest.bytes_per_param


def weight_bytes_per_gpu(model: ModelConfig, par: Parallelism, weight_dtype: Dtype,
                         n_mtp_layers: int = 0, *, mxfp4: Mxfp4Layout = CHECKPOINT_MXFP4) -> tuple[int, ...]:
    """Weight bytes on one GPU of each pipeline stage (module docstring for the sharding), the last
    stage holding ``n_mtp_layers`` MTP draft layers.  A stage's MoE layers are those of
    ``model.moe_layer_indices()`` in its layer range (Llama-4 interleaves them).  MXFP4 routed experts
    take ``mxfp4.expert_bytes`` each (``mxfp4_layout``; the default is the checkpoint's bytes)."""
    h, attn_tp = model.hidden_size, par.attn_tp
    expert_bytes, rest_bytes = _bytes_per_param(model, weight_dtype)
    attn = _mean_attention_split(model, par) + 2 * h
    dense = model.dense_ffn_params() / attn_tp
    routed = shared = 0.0
    if model.is_moe:
        routed = model.n_experts / par.ffn_ep * model.expert_params() / par.ffn_tp
        shared = model.n_shared_experts * model.expert_params() / attn_tp + model.router_params()
        if weight_dtype is Dtype.MXFP4 and mxfp4 is not CHECKPOINT_MXFP4:
            loaded = mxfp4.expert_bytes(h, model.moe_intermediate_size / par.ffn_tp)
            routed, expert_bytes = model.n_experts / par.ffn_ep * loaded, 1.0
    vocab = model.vocab_size * h / attn_tp
    moe_layers = model.moe_layer_indices()
    out, start = [], 0
    stages = pp_stage_layers(model.n_layers, par.pp)
    for s, n in enumerate(stages):
        n_moe = sum(1 for i in moe_layers if start <= i < start + n)
        rest = n * attn + (n - n_moe) * dense + n_moe * shared
        experts = n_moe * routed
        if s == 0:
            rest += vocab
        if s == len(stages) - 1:
            rest += h + (vocab if not (model.tie_word_embeddings and len(stages) == 1) else 0)
            mtp_attn = _attention_split(model, par) + 2 * h + 2 * h * h + 2 * h
            rest += n_mtp_layers * (mtp_attn + (shared if model.is_moe else dense))
            experts += n_mtp_layers * routed
        out.append(math.ceil(experts * expert_bytes + rest * rest_bytes))
        start += n
    return tuple(out)


def state_bytes_per_seq_per_gpu(model: ModelConfig, par: Parallelism) -> float:
    """Fixed memory of one sequence on one GPU over all layers, whatever its length, reserved per
    ``max_num_seqs`` slot: the Gated DeltaNet state (``ModelConfig.linear_state_bytes_per_seq`` in BF16,
    heads split over ``attn_tp``).  A pipeline stage holds its ``layers / n_layers`` share.  Narrow-window
    KV is not reserved: it is ``window_tokens_per_seq`` per running request (module docstring).  The
    state is BF16 whatever the KV type."""
    return model.linear_state_bytes_per_seq(Dtype.BF16) / par.attn_tp


def window_tokens_per_seq(model: ModelConfig, block_size_tokens: int) -> int:
    """Full-layer KV tokens one running request holds for its narrow-window layers under vLLM's hybrid
    allocator: ``ceil((ceil(W / block) + 1) * block * n_window / n_full)`` (module docstring; 144 for
    gpt-oss at 16-token blocks), 0 without narrow-window layers."""
    mix = model.layers
    if not mix.n_window_layers or mix.window_counts_as_full or model.n_kv_layers < 1:
        return 0
    blocks = -(-mix.attention_window_tokens // block_size_tokens) + 1
    return -(-blocks * block_size_tokens * mix.n_window_layers // model.n_kv_layers)


def _activation_peak_bytes(model: ModelConfig, par: Parallelism, tokens: int, seqs: int) -> int:
    h, d = model.hidden_size, model.head_dim
    widths = [(model.n_heads / par.attn_tp + 2 * par.kv_heads_per_gpu(model)) * d]
    if model.n_dense_layers:
        widths.append(3 * model.intermediate_size / par.attn_tp)
    if model.is_moe:
        widths.append(model.n_experts_per_token * (3 * model.moe_intermediate_size / par.ffn_tp + h))
    logits = seqs * model.vocab_size / par.attn_tp * LOGIT_BYTES
    return math.ceil(tokens * ACTIVATION_BYTES * (2 * h + max(widths)) + logits)


def resolved_memory_fraction(gpu: GpuProfile, par: Parallelism, gpu_memory_utilization: float | None, *,
                             engine: str = "vllm", engine_version: str | None = None,
                             server_chunked_prefill_tokens: int | None = None, n_mtp_layers: int = 0) -> float:
    """The memory fraction ``kv_budget`` applies: ``gpu_memory_utilization`` when given, else ``engine``'s default:
    SGLang's derived ``mem_fraction_static`` (``fleetplan.perf.sglang_memory``) for the server's
    ``chunked_prefill_size`` (None: its default by memory; the whole server's, before data-parallel attention
    divides it) and drafts when ``n_mtp_layers`` > 0; vLLM's 0.9 for the other engines."""
    if gpu_memory_utilization is not None:
        return gpu_memory_utilization
    if engine != "sglang":
        return DEFAULT_GPU_MEMORY_UTILIZATION
    return sglang_mem_fraction_static(gpu, par, version=engine_version, speculative=n_mtp_layers > 0,
                                      chunked_prefill_tokens=server_chunked_prefill_tokens)


def kv_budget(
    model: ModelConfig,
    gpu: GpuProfile,
    par: Parallelism,
    *,
    weight_dtype: Dtype | str,
    kv_dtype: Dtype | str,
    gpu_memory_utilization: float | None = 0.9,
    block_size_tokens: int = 16,
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS,
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS,
    cudagraph_pool_bytes: int = DEFAULT_CUDAGRAPH_POOL_BYTES,
    comm_workspace_bytes: int | None = None,
    n_mtp_layers: int = 0,
    engine: str = "vllm",
    engine_version: str | None = None,
) -> KvBudget:
    """KV-cache budget of ``model`` on ``gpu`` sharded as ``par`` (module docstring), with
    ``n_mtp_layers`` MTP draft layers loaded for speculative decoding, MXFP4 experts held as
    ``engine`` at ``engine_version`` (None: a current release) loads them (``mxfp4_layout``).

    ``comm_workspace_bytes=None`` means ``DEFAULT_COMM_WORKSPACE_BYTES`` on a multi-GPU
    replica and 0 on one GPU.  Dtypes may be given by name (``"fp8"``).

    ``gpu_memory_utilization`` is read in ``engine``'s meaning, None for the engine's default: vLLM's fraction
    (0.9 by default) less the activation peak and the graph pool; SGLang's ``mem_fraction_static``, the weights'
    and the KV pool's share with activations and CUDA graphs outside it, by default the value its ``ServerArgs``
    derives for the GPU, its default chunk and the parallel sizes (``fleetplan.perf.sglang_memory``; a server
    started with another chunk resolves its fraction with ``resolved_memory_fraction`` first).

    Raises
    ------
    ConfigError
        ``par`` breaks a model rule, a knob is out of range, or the weights or the
        overheads leave no KV block; the message gives the numbers and the smallest
        ``tensor_parallel_size`` (or ``pipeline_parallel_size``) that fits.
    """
    weight_dtype, kv_dtype = dtype(weight_dtype), dtype(kv_dtype)
    sglang = engine == "sglang"
    gpu_memory_utilization = resolved_memory_fraction(gpu, par, gpu_memory_utilization, engine=engine,
                                                      engine_version=engine_version, n_mtp_layers=n_mtp_layers)
    _check_knobs(gpu_memory_utilization, dict(
        block_size_tokens=block_size_tokens, max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs, cudagraph_pool_bytes=cudagraph_pool_bytes,
        comm_workspace_bytes=0 if comm_workspace_bytes is None else comm_workspace_bytes,
    ))
    if engine not in CHECKPOINT_LOADERS + ("vllm", "sglang"):
        raise UnknownNameError("engine", str(engine), sorted(CHECKPOINT_LOADERS + ("vllm", "sglang")))
    if isinstance(n_mtp_layers, bool) or not isinstance(n_mtp_layers, int) or n_mtp_layers < 0:
        raise ConfigError(f"n_mtp_layers={n_mtp_layers!r} must be an integer >= 0 (DeepSeek-V3 ships 1)",
                          param="n_mtp_layers", value=n_mtp_layers)
    knobs = dict(weight_dtype=weight_dtype, kv_dtype=kv_dtype, gpu_memory_utilization=gpu_memory_utilization,
                 block_size_tokens=block_size_tokens, max_num_batched_tokens=max_num_batched_tokens,
                 max_num_seqs=max_num_seqs, reserve_outside=sglang, cudagraph_pool_bytes=cudagraph_pool_bytes,
                 comm_workspace_bytes=comm_workspace_bytes, n_mtp_layers=n_mtp_layers,
                 mxfp4=mxfp4_layout(gpu, engine, engine_version) if weight_dtype is Dtype.MXFP4 else CHECKPOINT_MXFP4)
    budget = _try_budget(model, gpu, par, **knobs)
    if isinstance(budget, KvBudget):
        return budget
    fits = _smallest_fitting(model, gpu, par, knobs)
    raise _fit_error(model, gpu, par, budget, fits, weight_dtype, gpu_memory_utilization)


def _try_budget(model: ModelConfig, gpu: GpuProfile, par: Parallelism, **knobs) -> KvBudget | dict:
    """The budget, or a dict of the binding stage's numbers when no KV block fits."""
    par.check_model(model)
    comm = knobs["comm_workspace_bytes"]
    if comm is None:
        comm = DEFAULT_COMM_WORKSPACE_BYTES if par.gpus_per_replica > 1 else 0
    hbm = int(gpu.hbm_gib * BYTES_PER_GIB)
    usable = int(hbm * knobs["gpu_memory_utilization"])
    if knobs["reserve_outside"]:  # SGLang: activations and graphs live outside its fraction (module docstring)
        act = graphs = 0
    else:
        act = _activation_peak_bytes(model, par, knobs["max_num_batched_tokens"], knobs["max_num_seqs"])
        graphs = knobs["cudagraph_pool_bytes"]
    block = knobs["block_size_tokens"]
    per_layer = model.kv_bytes_per_token_per_layer(knobs["kv_dtype"])
    if model.attention is AttentionKind.GQA:
        per_layer *= par.kv_heads_per_gpu(model) / model.n_kv_heads
    rows = []
    stages = pp_stage_layers(model.n_layers, par.pp)
    mtp = knobs["n_mtp_layers"]
    state = state_bytes_per_seq_per_gpu(model, par)
    weights_per_stage = weight_bytes_per_gpu(model, par, knobs["weight_dtype"], mtp, mxfp4=knobs["mxfp4"])
    for i, (layers, weights) in enumerate(zip(stages, weights_per_stage, strict=True)):
        per_seq = math.ceil(state * layers / model.n_layers)
        reserved = per_seq * knobs["max_num_seqs"]
        available = usable - weights - act - graphs - comm - reserved
        per_token = math.ceil((layers + (mtp if i == len(stages) - 1 else 0)) * per_layer)
        blocks = available // (per_token * block) if available > 0 else 0
        rows.append(dict(stage_layers=layers, weight_bytes=weights, kv_available_bytes=available,
                         kv_bytes_per_token=per_token, kv_blocks_per_gpu=blocks, state_bytes_per_seq=per_seq,
                         state_reserved_bytes=reserved))
    worst = min(rows, key=lambda r: (r["kv_blocks_per_gpu"], -r["weight_bytes"]))
    common = dict(hbm_bytes=hbm, usable_bytes=usable, activation_peak_bytes=act, cudagraph_pool_bytes=graphs,
                  comm_workspace_bytes=comm, block_size_tokens=block)
    if worst["kv_blocks_per_gpu"] < 1:
        return {**worst, **common}
    return KvBudget(
        model_name=model.name, gpu_name=gpu.name, parallelism=par, weight_dtype=knobs["weight_dtype"],
        kv_dtype=knobs["kv_dtype"], gpu_memory_utilization=knobs["gpu_memory_utilization"],
        kv_blocks_per_replica=worst["kv_blocks_per_gpu"] * par.attn_dp, **worst, **common,
        window_tokens_per_seq=window_tokens_per_seq(model, block),
        mxfp4_backend=knobs["mxfp4"].backend if knobs["weight_dtype"] is Dtype.MXFP4 else "",
    )


def _smallest_fitting(model: ModelConfig, gpu: GpuProfile, par: Parallelism, knobs: dict) -> Parallelism | None:
    """The first larger TP (then PP) that yields a KV block, keeping the other sizes."""
    candidates: list[Parallelism] = []
    if par.tp_attn is None:
        vllm_ep = par.ep > 1 and par.ep == par.tp * par.dp
        for tp in valid_tensor_parallel_sizes(model):
            if tp > par.tp:
                ep = tp * par.dp if vllm_ep else par.ep
                if (tp * par.dp) % ep == 0:
                    candidates.append(replace(par, tp=tp, ep=ep))
    candidates += [replace(par, pp=pp) for pp in range(par.pp + 1, model.n_layers + 1)]
    for candidate in candidates:
        try:
            if isinstance(_try_budget(model, gpu, candidate, **knobs), KvBudget):
                return candidate
        except ConfigError:
            continue
    return None


def _gib(n_bytes: float) -> str:
    return f"{n_bytes / BYTES_PER_GIB:.1f} GiB"


def _fit_error(model: ModelConfig, gpu: GpuProfile, par: Parallelism, numbers: dict, fits: Parallelism | None,
               weight_dtype: Dtype, utilization: float) -> ConfigError:
    """One line: what does not fit, the numbers, and the smallest sharding that does."""
    have = f"{_gib(numbers['usable_bytes'])} usable of {gpu.hbm_gib:g} GiB ({gpu.name} x {utilization:g})"
    if fits is None:
        fix = "quantize the weights (fp8, int4) or use a GPU with more memory"
    elif fits.tp != par.tp:
        fix = f"use `tensor_parallel_size` >= {fits.tp}"
    else:
        fix = f"use `pipeline_parallel_size` >= {fits.pp}"
    at = f"at {par.flags()}"
    if numbers["weight_bytes"] > numbers["usable_bytes"]:
        return ConfigError(f"{model.name} in {weight_dtype.value} needs {_gib(numbers['weight_bytes'])} of weights "
                           f"per GPU {at}, has {have}: {fix}")
    block = numbers["kv_bytes_per_token"] * numbers["block_size_tokens"]
    state = (f" - {_gib(numbers['state_reserved_bytes'])} fixed per-sequence state" if numbers["state_reserved_bytes"]
             else "")
    return ConfigError(
        f"{model.name} in {weight_dtype.value} {at} leaves no KV-cache block per GPU: {have} - "
        f"{_gib(numbers['weight_bytes'])} weights - {_gib(numbers['activation_peak_bytes'])} activations - "
        f"{_gib(numbers['cudagraph_pool_bytes'])} CUDA graphs - {_gib(numbers['comm_workspace_bytes'])} comm "
        f"buffers{state} = {_gib(numbers['kv_available_bytes'])}, one {numbers['block_size_tokens']}-token block needs "
        f"{block / 2**20:.1f} MiB: {fix}"
    )


def vllm_batch_defaults(gpu: GpuProfile) -> tuple[int, int]:
    """vLLM's API-server ``(max_num_seqs, max_num_batched_tokens)`` defaults on ``gpu``: 1024 sequences /
    8192 tokens on GPUs with at least 70 GiB that are not A100s, else 256 / 2048
    (``EngineArgs.get_batch_defaults`` in vllm-project/vllm ``vllm/engine/arg_utils.py``)."""
    if gpu.hbm_gib >= LARGE_GPU_GIB and "a100" not in gpu.name.lower():
        return 1024, 8192
    return 256, 2048
