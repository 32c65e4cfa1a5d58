"""Per-step overheads and the predictor's tunable parameters (``PredictorOptions``).

Per-kernel launch overhead.  Eager PyTorch launches every kernel from Python; a step of
``n_layers`` layers launches about ``KERNELS_PER_LAYER * n_layers + KERNELS_PER_STEP``
kernels, each costing ``launch_overhead_s`` of host time that the GPU waits for when
kernels are short.  CUDA-graph replay (vLLM's default, ``enforce_eager=False``) issues the
captured kernels with no per-kernel host cost: the kernel-only variant.  Frontier
(Feng et al. 2026, arXiv:2605.21312, §2.2, Fig. 1) measured CUDA graphs cutting vLLM decode TPOT by
32-46 % on 8xA800, which is the size of effect this term produces for 70B-class models.
Capture-bin padding of decode batches (Frontier Table 2) is not modelled.

CPU scheduling/sampling overhead per iteration (``cpu_overhead_s``).  Every step pays
the engine's scheduler, input preparation, sampling and output processing on the host.
Default 1.7 ms (fitted, see below; was 1 ms): Frontier (§5, citing Agrawal et al. 2026) attributes ~10 % of end-to-end
latency to the CPU side, i.e. ~1 ms of a typical 8-15 ms decode step; vLLM's v0.6.0
performance post (2024-09-05) profiled Llama-3-8B on one H100 with the API server taking
33 % and scheduling 29 % of the time before asynchronous output processing.  Setting it
to zero is a known cause of large TTFT and short-request latency errors: short prompts'
steps are dominated by it.

Defaults of ``gemm_efficiency``, ``weight_bandwidth_efficiency`` and ``cpu_overhead_s``
(0.66, 0.78, 1.7 ms) are fitted by bounded least squares (relative error) on the 14 published
measurements of ``docs/step_time_validation.md`` (LMDeploy, TensorRT-LLM and vLLM; A100, H100,
H200; 7B to 70B; TP 1 and 4), bounds = the literature ranges below (GEMM 0.5-0.85, weight
streaming 0.6-0.92, host 0.5-3 ms).  The earlier defaults (0.75, 0.85, 1 ms) were the
optimistic ends of those ranges and every row came out fast (mean signed error -14 %); the fit
brings it to -1.9 %, leave-one-out -2.0 % (mean absolute 11.5 %), no per-row term.  The basis of
each range:

* ``gemm_efficiency`` 0.66 (fitted; was 0.75) -- large BF16/FP8 cuBLAS GEMMs reach 70-85 % of
  dense peak (e.g. a 8192^3 BF16 GEMM is expected at > 82 % of peak on L40S, ai-hpc "L40S x12
  benchmarks"); the smaller per-shard shapes of inference, the norms/activations between GEMMs
  and early FP8 kernels reach less.
* ``attention_efficiency`` 0.6 -- FlashAttention-2 reaches 50-73 % of A100 peak (Dao 2023,
  arXiv:2307.08691); FlashAttention-3 75 % on H100 (Shah et al. 2024, arXiv:2407.08608).
* ``weight_bandwidth_efficiency`` 0.78 (fitted; was 0.85) -- Azure measured 7.35 TB/s of 8 TB/s
  HBM (92 %) on GB200 with a streaming kernel (Azure HPC blog, ND GB200 v6, 2025), the upper
  bound; GEMV-like weight streaming of a whole decode step (many layers of small GEMVs with
  launch gaps) reaches less.
* ``kv_bandwidth_efficiency`` 0.7 -- paged attention reads 16-token blocks scattered over
  HBM; estimate.
* ``link_efficiency`` 0.8 -- NCCL bus bandwidth is typically ~80 % of the link's.
* ``fp8_gemm_efficiency`` (None = ``gemm_efficiency``) -- achieved / FP8 dense peak of W8A8 GEMMs
  when weights are FP8 on a GPU with FP8 tensor cores.  Not a free 2x: vLLM's block-scaled FP8
  GEMMs reach far less of the FP8 peak than BF16 GEMMs reach of theirs; engine profiles set it
  (``engine_profiles/vllm.toml``, with its source).  Only the compute roofline uses it; weight
  streaming of FP8 weights keeps ``weight_bandwidth_efficiency``.
* ``fp8_block_gemm_efficiency``, ``fp8_block_bandwidth_efficiency`` (None = the per-tensor values) --
  the same for 128x128 block-scaled FP8 weights (``fleetplan.perf.quant``), read back from an
  engine's measured block-FP8 steps where its profile gives them.
* ``fp8_block_gemm_floor_s`` (0 = none) -- the least time of one block-FP8 dense GEMM call (s): an
  engine whose block-scaled linear layer takes a fixed time per call whatever its shape (vLLM 0.24.0's
  DeepGEMM path in AIConfigurator's measured GEMM tables: 0.09 ms on H100/H200, 0.19 ms on B200 for
  64-1,024 rows, N, K <= 8,192; SGLang's DeepGEMM tables 0.01 ms) has each such GEMM's weight stream
  raised to it (``fleetplan.perf.operators.floored_memory_s``), so the floor shows where compute is
  below it (short prefills, decode of small layers) and hides behind compute above it.  Engine profiles
  may set it per GPU from those tables (``block_gemm_floor`` of ``benchmarks/aiconfigurator_compare.py``;
  none does: charged on every step it makes the held-out vLLM serving rows worse,
  docs/serving_validation.md).
* ``moe_gemm_efficiency``, ``moe_fp8_gemm_efficiency`` (None = the dense GEMMs' efficiencies above) --
  achieved / peak of the routed experts' grouped GEMM (fused MoE), BF16 and weight-only (MXFP4, INT4, FP8
  without FP8 tensor cores) experts against the BF16 peak, W8A8 FP8 experts against the FP8 peak.  The
  fused-MoE kernels run many small per-expert GEMMs with a token gather/scatter and reach far less of the
  peak than a dense GEMM of the same FLOPs (vLLM's Triton fused MoE: 0.28-0.44 of the BF16 peak at
  4,096-16,384 tokens in AIConfigurator's measured tables, against 0.66 for the dense GEMMs); engine
  profiles set them per GPU, read back from those tables (``engine_profiles/*.toml``, each with its source;
  ``moe_table_efficiency`` of ``benchmarks/aiconfigurator_compare.py``).  Only the experts' compute roofline uses them;
  their weight stream has ``moe_weight_bandwidth_efficiency``.
* ``moe_weight_bandwidth_efficiency`` (None = ``weight_bandwidth_efficiency``) -- achieved / HBM peak of the routed
  experts' weight stream (``fleetplan.perf.moe``: ``memory_r``, the hit experts' weight reads that bound decode-sized
  MoE steps).  The fused-MoE kernels stream each hit expert's whole weight matrices, long contiguous reads that reach
  more of the peak than the dense small-M GEMMs the engine-wide value was fitted on (AIConfigurator's measured fused-MoE
  tables: 0.85 of the HBM peak for vLLM 0.24.0, 0.76 for SGLang 0.5.14, beside 20-50 us per layer that
  ``moe_layer_overhead_s`` covers); engine profiles give it, read back from those tables
  (``moe_decode_bandwidth_fit`` of ``benchmarks/aiconfigurator_compare.py``).
* ``moe_int4_gemm_efficiency`` (None = ``moe_gemm_efficiency``) -- the same for INT4 weight-only (W4A16) experts
  against the BF16 peak: vLLM runs them with the Marlin MoE kernel, which dequantises every weight tile in the
  GEMM's inner loop and reaches about half the BF16 fused MoE's share (AIConfigurator's vLLM 0.24.0 ``int4_wo``
  tables, Kimi-K2's expert shape: 0.23 of the BF16 peak on H100 and H200, 0.11 on B200, against 0.38-0.44 / 0.31
  for BF16 experts); engine profiles set it per GPU, each value with its source.
* ``moe_mxfp4_gemm_efficiency`` (None = ``moe_gemm_efficiency``) -- the same for MXFP4 weight-only experts
  (gpt-oss) against the BF16 peak.  The kernel depends on the GPU and the vLLM build (``get_mxfp4_backend`` of
  ``model_executor/layers/quantization/mxfp4.py``, vLLM 0.10.2 / 0.11.0 / 0.13.0): below SM90 always Marlin
  (W4A16, as INT4); on Hopper the OpenAI Triton ``matmul_ogs`` kernels when the ``triton_kernels`` package imports,
  Marlin otherwise (vLLM 0.10.2-0.12 wheels do not ship it, 0.13.0 vendors it as ``vllm.third_party``); on SM100
  with FlashInfer its TRT-LLM MXFP4 x BF16 MoE.  Engine profiles set it per GPU, each value with its source.
* ``sink_attention_prefill_efficiency`` (None = the FlashAttention rate, ``attention_efficiency`` with its head-dim
  factor) -- achieved / BF16 peak of prefill attention for a model with attention sinks (gpt-oss) on a GPU where the
  engine runs it with Triton attention kernels, FlashAttention 2 taking no sinks (``fleetplan.perf.attention``,
  'Attention sinks'); engine profiles set it per GPU below Hopper, read back from AIConfigurator's measured tables.
* ``moe_width_exponent`` 0 -- the routed rows' compute-bound efficiency falls as ``(w / 1024) ** x`` below a
  per-GPU expert width ``w = moe_intermediate_size / ffn_tp`` of 1,024 (``fleetplan.perf.moe.expert_width_factor``:
  expert TP splits each expert into narrower GEMMs; the weight-bound tile floor of decode keeps the read-back);
  engine profiles give ``x``, read back from AIConfigurator's fused-MoE tables (``moe_width_efficiency`` of
  ``benchmarks/aiconfigurator_compare.py``); 0 keeps the read-back at any TP.
* ``moe_fp8_width_exponent`` (None = ``moe_width_exponent``) -- the same exponent for W8A8 FP8 experts (block or
  per-tensor scaled, the experts ``moe_fp8_gemm_efficiency`` times): the same tables fall faster with the width for
  block-FP8 experts than for BF16 ones, so the profiles give each dtype its own read-back.
* ``moe_hit_expert_weight_reads`` 0 -- ``rho``: each hit expert's grouped GEMM costs ``rho`` reads of its weights
  at the HBM peak, expressed as rows of compute at the routed experts' rate, beyond its routed rows, and the
  read-back efficiency holds at 288 rows per hit expert (``fleetplan.perf.moe``, 'Rows per expert'): the fused
  MoE's ramp with rows per expert; engine profiles give ``rho``, read back from AIConfigurator's fused-MoE tables
  (``moe_ramp_fit`` of ``benchmarks/aiconfigurator_compare.py``); 0 keeps the flat read-back at any rows.
* ``moe_tile_m_tokens`` 16 -- rows each hit expert's grouped GEMM computes at least (vLLM fused-MoE
  Triton ``BLOCK_SIZE_M`` for M <= E, ``get_default_config``; ``fleetplan.perf.moe``).
* ``moe_load_imbalance`` 1 -- max-loaded EP rank over the mean beyond routing statistics.
* ``ep_dispatch_fp8`` False -- EP dispatch sends FP8 activations (1 byte + one FP32 scale per 128
  values) when the weights are FP8, as DeepEP's dispatch does (deepseek-ai/DeepEP README: "low-latency
  kernels support FP8 dispatching and BF16 combining"; vLLM's DeepEP backends quantise dispatch inputs
  in 128-element blocks); the combine stays BF16.  Engine profiles that use DeepEP set it.
* ``moe_layer_overhead_s`` 0 -- time of one MoE layer per step that the roofline does not see: the
  layer's chain of small dependent kernels (router GEMM, top-k softmax, token sort / block alignment,
  the grouped-GEMM launches, activation, combine and the shared expert) each has a fixed latency
  (launch, ramp-up, tail) of microseconds that CUDA-graph replay does not remove, and at decode sizes
  that chain, not the weight stream, sets the layer's time.  Paid once per MoE layer per step whatever the
  batch (``n_moe_layers * moe_layer_overhead_s``).  Engine profiles give it, fitted on published
  serving runs of MoE models (each value's source says which); 0 keeps the roofline alone.
* ``dsa_prefill_s_per_token`` 0 -- seconds per prefill token and layer of a DeepSeek Sparse Attention model's
  attention module beyond the terms ``fleetplan.perf.attention`` times (its GEMMs, the indexer's query-key pairs,
  the sparse MLA's keys): the engine's per-query prefill work around them (``fleetplan.perf.attention``, "Per-query
  prefill cost").  Engine profiles give it per GPU, read back from AIConfigurator's measured DSA attention modules;
  0 for a model without an indexer and for engines whose tables show none.
* ``mla_prefill_s_per_token`` 0 -- the same for a dense MLA model's attention module (DeepSeek-V3/R1, Kimi-K2: no
  indexer), beyond its GEMMs and the MHA-form prefill attention: the latent norms, RoPE, the projections' activation
  quantisation and the KV write around them.  Engine profiles give it per GPU, read back from AIConfigurator's
  measured MLA attention modules; 0 for a GQA or DSA model and for engines without module tables.
* ``dsa_prefill_fp8_kv_s_per_token`` None -- the same with an FP8 KV cache (vLLM's ``fp8_ds_mla`` record, whose
  latents the prefill path dequantises); None uses ``dsa_prefill_s_per_token``.
* ``api_server_s_per_request``, ``api_server_s_per_token``, ``api_server_s_per_output_chunk`` 0 -- host
  time of the engine's API server per request (HTTP, request setup), per prompt or output token
  (tokenise, detokenise) and per streamed output chunk (serialisation, IO): a throughput ceiling off the
  step's critical path (``fleetplan.perf.api_server``); engine profiles give them.
  ``api_server_stream_interval_tokens`` 1 -- output tokens per streamed chunk (vLLM's
  ``stream_interval`` engine argument): a request of ``o`` output tokens streams ``ceil(o / interval)`` chunks.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from fleetplan.errors import ConfigError
from fleetplan.names import fold_dashes, lookup
from fleetplan.perf.comm import NETWORK_ALPHA_S, NVLINK_ALPHA_S
from fleetplan.perf.roofline import TILE_M_TOKENS

__all__ = ["ExecutionMode", "execution_mode", "PredictorOptions", "KERNELS_PER_LAYER", "KERNELS_PER_STEP",
           "DEFAULT_CPU_OVERHEAD_S", "DEFAULT_LAUNCH_OVERHEAD_S", "launch_overhead_s"]

KERNELS_PER_LAYER = 14  # vLLM Llama layer: 2 norms, qkv, rope, KV write, attention, o, 2 all-reduce, gate_up,
#                        act-and-mul, down, 2 residual adds (nsys trace count; MoE layers add the router/experts)
KERNELS_PER_STEP = 6  # embedding, final norm, lm_head, logits processing, sampling, output copy
DEFAULT_CPU_OVERHEAD_S = 1.7e-3  # fitted, see module docstring
DEFAULT_LAUNCH_OVERHEAD_S = 5.0e-6  # host cost per eager kernel launch (NVIDIA "Getting Started with CUDA
#                                     Graphs" blog, 2019: a few us per launch that graphs remove)


class ExecutionMode(enum.Enum):
    """How kernels are issued: ``eager`` (per-kernel launch) or ``cuda_graph`` (kernel-only)."""

    EAGER = "eager"
    CUDA_GRAPH = "cuda_graph"


def execution_mode(name: str | ExecutionMode) -> ExecutionMode:
    """The ``ExecutionMode`` called ``name``; unknown -> ``UnknownNameError``."""
    return lookup(ExecutionMode, "execution mode", name, fold_dashes)


def _fraction(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (0 < value <= 1):
        raise ConfigError(f"{name}={value!r} must be in (0, 1] (achieved / peak); fix the predictor options")


def _non_negative(name: str, value: float, what: str = "seconds") -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"{name}={value!r} must be a finite number >= 0 ({what}); fix the predictor options")


@dataclass(frozen=True)
class PredictorOptions:
    """Tunable parameters of ``StepTimePredictor`` (defaults and sources: module docstring).

    ``moe_zipf_s`` is the routing skew: expert ``e`` (in placement order) is chosen with
    probability proportional to ``1 / (e + 1) ** s``; 0 is uniform routing.
    """

    execution: ExecutionMode = ExecutionMode.CUDA_GRAPH
    cpu_overhead_s: float = DEFAULT_CPU_OVERHEAD_S
    launch_overhead_s: float = DEFAULT_LAUNCH_OVERHEAD_S
    gemm_efficiency: float = 0.66
    attention_efficiency: float = 0.6
    weight_bandwidth_efficiency: float = 0.78
    kv_bandwidth_efficiency: float = 0.7
    link_efficiency: float = 0.8
    nvlink_alpha_s: float = NVLINK_ALPHA_S
    network_alpha_s: float = NETWORK_ALPHA_S
    wave_quantisation: bool = True
    tile_m_tokens: int = TILE_M_TOKENS
    moe_zipf_s: float = 0.0
    fp8_gemm_efficiency: float | None = None
    fp8_block_gemm_efficiency: float | None = None
    fp8_block_bandwidth_efficiency: float | None = None
    fp8_block_gemm_floor_s: float = 0.0
    moe_gemm_efficiency: float | None = None
    moe_fp8_gemm_efficiency: float | None = None
    moe_int4_gemm_efficiency: float | None = None
    moe_mxfp4_gemm_efficiency: float | None = None
    moe_weight_bandwidth_efficiency: float | None = None
    moe_width_exponent: float = 0.0
    moe_fp8_width_exponent: float | None = None
    moe_hit_expert_weight_reads: float = 0.0
    moe_tile_m_tokens: int = 16
    moe_load_imbalance: float = 1.0
    ep_dispatch_fp8: bool = False
    api_server_s_per_request: float = 0.0
    api_server_s_per_token: float = 0.0
    api_server_s_per_output_chunk: float = 0.0
    api_server_stream_interval_tokens: int = 1
    moe_layer_overhead_s: float = 0.0
    sink_attention_prefill_efficiency: float | None = None
    dsa_prefill_s_per_token: float = 0.0
    dsa_prefill_fp8_kv_s_per_token: float | None = None
    mla_prefill_s_per_token: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "execution", execution_mode(self.execution))
        for name in ("fp8_gemm_efficiency", "fp8_block_gemm_efficiency", "fp8_block_bandwidth_efficiency",
                     "moe_gemm_efficiency", "moe_fp8_gemm_efficiency", "moe_int4_gemm_efficiency",
                     "moe_mxfp4_gemm_efficiency", "moe_weight_bandwidth_efficiency",
                     "sink_attention_prefill_efficiency"):
            if getattr(self, name) is not None:
                _fraction(name, getattr(self, name))
        if self.dsa_prefill_fp8_kv_s_per_token is not None:
            _non_negative("dsa_prefill_fp8_kv_s_per_token", self.dsa_prefill_fp8_kv_s_per_token)
        if self.moe_fp8_width_exponent is not None:
            _non_negative("moe_fp8_width_exponent", self.moe_fp8_width_exponent, "an exponent")
        for name in ("api_server_s_per_request", "api_server_s_per_token", "api_server_s_per_output_chunk",
                     "moe_layer_overhead_s", "fp8_block_gemm_floor_s", "dsa_prefill_s_per_token",
                     "mla_prefill_s_per_token"):
            _non_negative(name, getattr(self, name))
        interval = self.api_server_stream_interval_tokens
        if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
            raise ConfigError(f"api_server_stream_interval_tokens={interval!r} must be an integer >= 1 (vLLM's "
                              f"stream_interval engine argument: output tokens per streamed chunk); "
                              f"fix the predictor options",
                              param="api_server_stream_interval_tokens", value=interval)
        imbalance = self.moe_load_imbalance
        if isinstance(imbalance, bool) or not isinstance(imbalance, int | float) or not (
                math.isfinite(imbalance) and imbalance >= 1):
            raise ConfigError(f"moe_load_imbalance={imbalance!r} must be a finite factor >= 1 (max-loaded EP rank "
                              f"over the mean; 1 = routing statistics only); fix the predictor options")
        if not isinstance(self.ep_dispatch_fp8, bool):
            raise ConfigError(f"ep_dispatch_fp8={self.ep_dispatch_fp8!r} must be True or False")
        moe_tile = self.moe_tile_m_tokens
        if isinstance(moe_tile, bool) or not isinstance(moe_tile, int) or moe_tile < 0:
            raise ConfigError(f"moe_tile_m_tokens={moe_tile!r} must be an integer >= 0 (16 for vLLM's fused MoE)")
        for name in ("gemm_efficiency", "attention_efficiency", "weight_bandwidth_efficiency",
                     "kv_bandwidth_efficiency", "link_efficiency"):
            _fraction(name, getattr(self, name))
        for name in ("cpu_overhead_s", "launch_overhead_s", "nvlink_alpha_s", "network_alpha_s"):
            _non_negative(name, getattr(self, name))
        for name, what in (("moe_zipf_s", "a Zipf exponent"), ("moe_width_exponent", "an exponent"),
                           ("moe_hit_expert_weight_reads", "weight reads per hit expert")):
            _non_negative(name, getattr(self, name), what)
        if not isinstance(self.wave_quantisation, bool):
            raise ConfigError(f"wave_quantisation={self.wave_quantisation!r} must be True or False")
        tile = self.tile_m_tokens
        if isinstance(tile, bool) or not isinstance(tile, int) or tile < 1:
            raise ConfigError(f"tile_m_tokens={tile!r} must be an integer >= 1 (128 for cuBLAS BF16 tiles)")


def launch_overhead_s(options: PredictorOptions, n_layers: int) -> float:
    """Host launch cost of one step: 0 under CUDA-graph replay."""
    if options.execution is ExecutionMode.CUDA_GRAPH:
        return 0.0
    return options.launch_overhead_s * (KERNELS_PER_LAYER * n_layers + KERNELS_PER_STEP)
