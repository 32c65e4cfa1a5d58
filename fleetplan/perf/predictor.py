"""Operator-level step-time predictor and its O(1) simulator coefficients.

One engine step (continuous batching, chunked prefill) of batch ``b`` costs

    step_s = cpu_overhead + launch + GEMMs + prefill attention + decode attention + window attention
             + routed experts (MoE) + MoE layer latency + TP all-reduce + EP all-to-all + PP send/recv
             + residual norms

* GEMMs: one roofline over all dense GEMMs of the step (``operators``, ``roofline``), with
  tile and wave quantisation over the token dimension; ``lm_head`` runs on ``n_seqs`` rows.
* attention from the batch's per-request lengths (``attention``; narrow-window layers per scheduled
  token and sequence, in the kernel's ``coef[10]`` with the collectives' slopes and ``coef[11]``); MoE from sampled
  routing, the slowest EP rank deciding (``moe``); collectives alpha-beta (``comm``);
  overheads (``overheads``); the MoE layers' fixed kernel-chain latency
  ``n_moe_layers * moe_layer_overhead_s`` (``overheads``, a per-step constant of the engine profile).
* Residual norms (``norm_s_per_token``): every decoder layer runs two fused add-RMSNorms (before
  attention and before the MLP/MoE) and the model one final norm, each a memory-bound pass over the
  step's tokens that reads the layer output and the residual and writes the new residual and the
  normed activations, ``NORM_VALUES_PER_TOKEN`` = 4 values of ``h`` per token (vLLM's
  ``fused_add_rms_norm``, ``csrc/layernorm_kernels.cu``; SGLang calls the same fused kernel from
  sgl-kernel).  Residual activations are replicated over the attention TP group, so each GPU norms
  all of its rank's tokens:

      norms = (2 n_layers + 1) * 4 h * 2 bytes / (hbm_bandwidth * NORM_BANDWIDTH_EFFICIENCY) per token

  ``NORM_BANDWIDTH_EFFICIENCY`` = 0.8 is AIConfigurator 0.12.0's estimate of the same ops
  (``ElementWise("context_add_norm_1"/"_2", n_layers, 2h, 2h, 0.8)`` in
  ``aiconfigurator_core/sdk/models/deepseek.py``, 0.8 of HBM peak; its DeepSeek-V3 8x H200 prefill of
  2,048 tokens: 4.10 ms for both, this term 3.76 ms).  No GEMM, attention or MoE table the profiles read
  holds them; the norms are a per-token slope in the kernel's ``coef[10]``, beside the collectives'.
  MoE models only: a dense model's GEMM efficiency is fitted on whole measured steps that contain their
  norms (``overheads``: 0.66 of peak covers "the norms/activations between GEMMs"; refitted with this
  term the same 14 steps give 0.684, the same step time), while an MoE model's step is mostly routed
  experts timed at efficiencies read back from kernel-only fused-MoE tables, which hold no norm.
  Measured on the serving table (``benchmarks/bench_validation.py``): held out -5.1 % / 27.9 % / 248
  within 35 % -> -4.5 % / 27.3 % / 254 (MoE prefill-bound TTFT -24.2 % -> -22.7 %), in-sample 14.9 % ->
  14.7 %; charged on dense models too: held out -4.5 % / 27.2 % / 254, in-sample 14.8 %.
* Pipeline parallelism: the step's latency crosses all ``pp`` stages (counts cover every
  layer) plus ``pp - 1`` activation transfers -- the latency of one iteration, not the
  throughput of ``pp`` interleaved micro-batches.  Attention data parallelism: the batch
  is one DP rank's; the experts see ``dp`` times its tokens.

``kernel_coefficients`` packs the same terms for ``STEP_MODEL_ROOFLINE``
(``fleetplan.perf.linear``): every dense term is linear in the kernel's aggregates, so the
kernel equals ``predict`` for any batch composition (up to float rounding); the routed
experts use the expected slowest-rank load (``moe.expected_moe_terms``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.hardware import GpuProfile
from fleetplan.models import Dtype, ModelConfig
from fleetplan.perf import comm
from fleetplan.perf.attention import (
    AttentionCost,
    attention_cost,
    dsa_head_tile,
    dsa_indexer_prefill_efficiency,
    sink_prefill_flop_per_s,
)
from fleetplan.perf.batch import BatchComposition
from fleetplan.perf.linear import N_STEP_COEFS, STEP_MODEL_ROOFLINE, roofline_step_s
from fleetplan.perf.moe import MoeShape, expected_moe_terms, expert_width_factor, moe_shape, sample_moe_s
from fleetplan.perf.operators import GemmBlock, GemmShape, floored_memory_s, gemm_block, gemm_block_s, step_gemms
from fleetplan.perf.overheads import PredictorOptions, launch_overhead_s
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.quant import BLOCK_FP8_MOE_TILE_M_TOKENS, Fp8Scaling, fp8_scaling
from fleetplan.perf.roofline import ACTIVATION_BYTES, DeviceRates, device_rates, gemm_peak_flop_per_s, w8a8
from fleetplan.perf.step_terms import roofline_window_s

NORM_VALUES_PER_TOKEN = 4  # fused add-RMSNorm: reads output and residual, writes residual and normed (docstring)
NORM_BANDWIDTH_EFFICIENCY = 0.8  # AIConfigurator 0.12.0's ElementWise add-norm estimate (module docstring)

__all__ = ["StepBreakdown", "StepTimePredictor", "CommTerms"]

ROOFLINE_SOURCE = "roofline"  # peak rates x efficiencies (engine profile), alpha-beta collectives
ENGINE_PROFILE_SOURCE = "engine profile"  # a per-step constant of the engine profile
SINGLE_EXPERT_LOG_MISS = -50.0  # d for E = 1: every token hits the one expert (exp(-50) ~ 0)


@dataclass(frozen=True)
class StepBreakdown:
    """Seconds per operator group of one step; ``total_s`` is their sum."""

    seconds: MappingProxyType = field(hash=False)
    gemm_bound: str  # "compute" or "memory"
    #: which source timed each operator: "roofline" (peak rates x the engine profile's efficiencies),
    #: "engine profile" (a per-step constant of the profile) or a measured source (e.g. operator tables)
    source: MappingProxyType = field(default_factory=lambda: MappingProxyType({}), hash=False)

    @property
    def total_s(self) -> float:
        return float(sum(self.seconds.values()))


@dataclass(frozen=True)
class CommTerms:
    """Per-step collective time ``fixed_s + s_per_token * T`` split by kind (fixed, per token)."""

    tp_all_reduce: tuple[float, float]
    ep_all_to_all: tuple[float, float]
    pp_send_recv: tuple[float, float]


EP_FP8_DISPATCH_BYTES_PER_VALUE = 1.0 + 4.0 / 128  # FP8 value + one FP32 scale per 128 (DeepEP dispatch)


def _linear(fn, *args) -> tuple[float, float]:
    """(fixed, slope) of a cost ``fn(payload)`` that is affine in the payload (alpha + beta B)."""
    at0 = fn(0.0, *args)
    return at0, fn(1.0, *args) - at0


@dataclass(frozen=True)
class StepTimePredictor:
    """Step time of ``model`` on ``gpu`` sharded by ``parallelism`` (module docstring)."""

    model: ModelConfig
    gpu: GpuProfile
    parallelism: Parallelism
    weight_dtype: Dtype = Dtype.BF16
    kv_dtype: Dtype = Dtype.BF16
    options: PredictorOptions = PredictorOptions()
    fp8_scaling: Fp8Scaling = Fp8Scaling.PER_TENSOR

    def __post_init__(self) -> None:
        object.__setattr__(self, "fp8_scaling", fp8_scaling(self.fp8_scaling))
        checks = ((self.model, ModelConfig), (self.gpu, GpuProfile), (self.parallelism, Parallelism),
                  (self.weight_dtype, Dtype), (self.kv_dtype, Dtype), (self.options, PredictorOptions))
        for value, kind in checks:
            if not isinstance(value, kind):
                raise ConfigError(f"StepTimePredictor needs a {kind.__name__}, got {type(value).__name__}")
        self.parallelism.check_model(self.model)

    # ---- derived pieces (computed once) -----------------------------------------------------
    @functools.cached_property
    def rates(self) -> DeviceRates:
        o = self.options
        return device_rates(self.gpu, self.weight_dtype, gemm_efficiency=o.gemm_efficiency,
                            attention_efficiency=o.attention_efficiency,
                            weight_bandwidth_efficiency=o.weight_bandwidth_efficiency,
                            kv_bandwidth_efficiency=o.kv_bandwidth_efficiency, wave_quantisation=o.wave_quantisation,
                            fp8_gemm_efficiency=o.fp8_gemm_efficiency, fp8_block=self.block_fp8,
                            fp8_block_gemm_efficiency=o.fp8_block_gemm_efficiency)

    @property
    def weight_stream_bytes_per_param(self) -> float:
        """Bytes per weight as the dense GEMMs stream them: the dtype's, times ``weight_bandwidth_efficiency /
        fp8_block_bandwidth_efficiency`` for block-scaled FP8 whose profile gives it (the block kernels'
        slower small-M weight streaming; activations, the KV cache and the routed experts keep theirs)."""
        o, wb = self.options, self.weight_dtype.bytes_per_param
        if self.block_fp8 and o.fp8_block_bandwidth_efficiency is not None:
            return wb * o.weight_bandwidth_efficiency / o.fp8_block_bandwidth_efficiency
        return wb

    @property
    def block_fp8(self) -> bool:
        """True when the weights are 128x128 block-scaled FP8 (``fleetplan.perf.quant``)."""
        return self.weight_dtype is Dtype.FP8 and self.fp8_scaling is Fp8Scaling.BLOCK

    @functools.cached_property
    def gemms(self) -> GemmBlock:
        """The step's dense GEMMs; block-FP8 W8A8 ones take at least ``fp8_block_gemm_floor_s`` a call
        where the profile gives it (``operators.floored_memory_s``)."""
        wb = self.weight_stream_bytes_per_param
        shapes = step_gemms(self.model, self.parallelism, self.weight_dtype, wb)
        block = gemm_block(shapes, self.rates)
        floor_s = self.options.fp8_block_gemm_floor_s
        if floor_s > 0.0 and self.block_fp8 and w8a8(self.gpu, self.weight_dtype):
            block = dataclasses.replace(block, memory_s=floored_memory_s(shapes, self.rates, wb, floor_s))
        return block

    @functools.cached_property
    def attention(self) -> AttentionCost:
        # a DSA indexer scores keys in FP8 where the GPU has FP8 tensor cores, in prefill at its read-back share
        # of that peak (fleetplan.perf.attention, 'DeepSeek Sparse Attention')
        peak_flop_per_s = (self.gpu.fp8_tflops if self.gpu.fp8_tflops is not None else self.gpu.bf16_tflops) * 1e12
        eff = self.options.attention_efficiency
        return attention_cost(self.model, self.parallelism, self.kv_dtype, self.rates,
                              index_flop_per_s=peak_flop_per_s * eff,
                              index_prefill_flop_per_s=peak_flop_per_s * dsa_indexer_prefill_efficiency(
                                  str(self.gpu.name), eff),
                              head_tile=dsa_head_tile(str(self.gpu.name)),
                              prefill_flop_per_s=sink_prefill_flop_per_s(self.model, self.gpu.bf16_tflops * 1e12,
                                                                          self.options.sink_attention_prefill_efficiency),
                              dsa_prefill_s_per_token_layer=self.dsa_prefill_s_per_token,
                              mla_prefill_s_per_token_layer=self.options.mla_prefill_s_per_token)

    @property
    def dsa_prefill_s_per_token(self) -> float:
        """A DSA prefill query's per-layer cost outside the attention terms (``fleetplan.perf.attention``, "Per-query
        prefill cost"): the profile's ``dsa_prefill_fp8_kv_s_per_token`` with an FP8 KV cache where it gives one,
        else its ``dsa_prefill_s_per_token``."""
        o = self.options
        if self.kv_dtype is Dtype.FP8 and o.dsa_prefill_fp8_kv_s_per_token is not None:
            return o.dsa_prefill_fp8_kv_s_per_token
        return o.dsa_prefill_s_per_token

    @functools.cached_property
    def moe(self) -> MoeShape | None:
        if not self.model.is_moe:
            return None
        tile = self.options.moe_tile_m_tokens
        if self.block_fp8:
            tile = max(tile, BLOCK_FP8_MOE_TILE_M_TOKENS)
        # the routed experts keep the dtype's bytes: the block-FP8 streaming read-back is of dense GEMMs, and
        # applied to vLLM's fused-MoE experts it overshoots AIConfigurator's block-FP8 MoE decode steps
        # (Qwen3-30B-A3B, H100/H200: ratio 1.58 with it, 0.66 without; benchmarks/bench_mechanisms.py)
        shape = moe_shape(self.model, self.parallelism, self.weight_dtype, min_rows_per_expert=tile,
                          load_imbalance=self.options.moe_load_imbalance)
        width = max(1, self.model.moe_intermediate_size // self.parallelism.ffn_tp)
        exponent = self.options.moe_width_exponent
        if w8a8(self.gpu, self.weight_dtype) and self.options.moe_fp8_width_exponent is not None:
            exponent = self.options.moe_fp8_width_exponent  # the dtype's own read-back (fleetplan.perf.overheads)
        factor = expert_width_factor(width, exponent)
        if factor < 1.0:
            shape = dataclasses.replace(shape, row_compute_scale=1.0 / factor)
        reads = self.options.moe_hit_expert_weight_reads
        if reads > 0.0:  # r0 = rho weight reads of a hit expert in rows (fleetplan.perf.moe, 'Rows per expert')
            read_s = shape.expert_weight_bytes / (self.gpu.hbm_tb_per_s * 1e12)
            shape = dataclasses.replace(shape, hit_expert_rows=reads * read_s * self.moe_rates.gemm_flop_per_s
                                        / shape.flop_per_row)
        return shape

    @functools.cached_property
    def moe_rates(self) -> DeviceRates:
        """The routed experts' rates: ``rates`` with the grouped GEMM's FLOP/s at ``moe_fp8_gemm_efficiency``
        of the FP8 peak (W8A8 experts), ``moe_int4_gemm_efficiency`` / ``moe_mxfp4_gemm_efficiency`` of the BF16
        peak (INT4 / MXFP4 weight-only experts; ``moe_gemm_efficiency`` where the profile leaves it unset) or
        ``moe_gemm_efficiency`` of the BF16 peak
        (BF16 and other weight-only experts) where the profile gives it (``fleetplan.perf.overheads``), the
        dense GEMMs' rate otherwise; the weight stream at ``moe_weight_bandwidth_efficiency`` of the HBM peak where
        the profile gives it, ``weight_bandwidth_efficiency`` otherwise.  (The expert-width factor divides the
        routed rows' compute in ``moe``.)"""
        o = self.options
        rates = self.rates
        if o.moe_weight_bandwidth_efficiency is not None:
            rates = dataclasses.replace(rates, weight_bytes_per_s=self.gpu.hbm_tb_per_s * 1e12
                                        * o.moe_weight_bandwidth_efficiency)
        if w8a8(self.gpu, self.weight_dtype):
            eff = o.moe_fp8_gemm_efficiency
        elif self.weight_dtype is Dtype.INT4 and o.moe_int4_gemm_efficiency is not None:
            eff = o.moe_int4_gemm_efficiency
        elif self.weight_dtype is Dtype.MXFP4 and o.moe_mxfp4_gemm_efficiency is not None:
            eff = o.moe_mxfp4_gemm_efficiency
        else:
            eff = o.moe_gemm_efficiency
        if eff is None:
            return rates
        return dataclasses.replace(rates, gemm_flop_per_s=gemm_peak_flop_per_s(self.gpu, self.weight_dtype) * eff)

    @functools.cached_property
    def comm_terms(self) -> CommTerms:
        """Collective cost per step as (fixed s, s per scheduled token).

        * TP all-reduce over the ``attn_tp`` GPUs after ``o_proj`` in every layer and after
          ``down_proj`` in dense layers (``comm.all_reduce_s``; the NIC once the group spans nodes).
        * EP (``ffn_ep > 1``): per MoE layer a dispatch and a combine all-to-all
          (``comm.hierarchical_all_to_all_s``) of ``T dp k / ep`` rows per GPU, ``h`` values each:
          BF16 both ways, or FP8 dispatch (1 byte + 4 bytes per 128 values) with ``ep_dispatch_fp8``
          and FP8 weights; the group's GPUs per node are ``gpus_per_node * ep / (tp dp)``.  Without EP
          the experts' tensor split all-reduces ``T dp`` rows.
        * PP: ``pp - 1`` activation sends, ``comm.pp_network_boundaries`` of them over the network.
        """
        m, par, o, gpu = self.model, self.parallelism, self.options, self.gpu
        row_bytes = m.hidden_size * ACTIVATION_BYTES
        node = gpu.gpus_per_node

        def alpha(group: int) -> float:
            return comm.alpha_s(group, o.nvlink_alpha_s, o.network_alpha_s, node)

        tp = par.attn_tp
        bw_tp = comm.link_bytes_per_s(gpu, tp, o.link_efficiency)
        n_ar = m.n_layers + m.n_dense_layers  # after o_proj every layer, after down_proj in dense layers
        fixed, slope = _linear(comm.all_reduce_s, tp, bw_tp, alpha(tp))
        tp_terms = (n_ar * fixed, n_ar * slope * row_bytes)
        a2a = (0.0, 0.0)
        if m.is_moe:
            stage_gpus = par.tp * par.dp
            if par.ffn_ep > 1:
                rows_per_token = par.attn_dp * m.n_experts_per_token / par.ffn_ep
                dispatch_bytes = m.hidden_size * (EP_FP8_DISPATCH_BYTES_PER_VALUE if self._fp8_dispatch
                                                  else ACTIVATION_BYTES)
                ep_node = max(1, min(par.ffn_ep, node * par.ffn_ep // stage_gpus))
                ep_gpu = dataclasses.replace(gpu, gpus_per_node=ep_node)

                def a2a_s(payload: float) -> float:
                    return comm.hierarchical_all_to_all_s(payload, par.ffn_ep, ep_gpu, o.link_efficiency,
                                                          o.nvlink_alpha_s, o.network_alpha_s)

                fd, sd = _linear(a2a_s)
                per_layer = (2.0 * fd, sd * rows_per_token * (dispatch_bytes + row_bytes))
            else:
                bw = comm.link_bytes_per_s(gpu, par.ffn_tp, o.link_efficiency)
                per_layer = _linear(comm.all_reduce_s, par.ffn_tp, bw, alpha(par.ffn_tp))
                per_layer = (per_layer[0], per_layer[1] * par.attn_dp * row_bytes)
            a2a = (m.n_moe_layers * per_layer[0], m.n_moe_layers * per_layer[1])
        pp = (0.0, 0.0)
        if par.pp > 1:
            stage = par.attn_tp * par.attn_dp
            n_net = comm.pp_network_boundaries(par.pp, stage, node)
            f_up, s_up = _linear(comm.send_recv_s, comm.scale_up_bytes_per_s(gpu, o.link_efficiency),
                                 o.nvlink_alpha_s)
            f_net, s_net = _linear(comm.send_recv_s, comm.scale_out_bytes_per_s(gpu, o.link_efficiency),
                                   o.network_alpha_s)
            n_up = par.pp - 1 - n_net
            pp = (n_up * f_up + n_net * f_net, (n_up * s_up + n_net * s_net) * row_bytes)
        return CommTerms(tp_terms, a2a, pp)

    @functools.cached_property
    def norm_s_per_token(self) -> float:
        """Residual norms per scheduled token (s): ``2 n_layers + 1`` fused add-RMSNorm passes of
        ``NORM_VALUES_PER_TOKEN * h`` BF16 values at ``NORM_BANDWIDTH_EFFICIENCY`` of the HBM peak
        (module docstring); 0 for a dense model, whose fitted GEMM efficiency holds its norms."""
        m = self.model
        if not m.is_moe:
            return 0.0
        bytes_per_token = (2 * m.n_layers + 1) * NORM_VALUES_PER_TOKEN * m.hidden_size * ACTIVATION_BYTES
        return bytes_per_token / (self.gpu.hbm_tb_per_s * 1e12 * NORM_BANDWIDTH_EFFICIENCY)

    @property
    def _fp8_dispatch(self) -> bool:
        return self.options.ep_dispatch_fp8 and self.weight_dtype is Dtype.FP8

    @functools.cached_property
    def fixed_overhead_s(self) -> tuple[float, float]:
        """(cpu scheduling/sampling, kernel launch) seconds per step."""
        return self.options.cpu_overhead_s, launch_overhead_s(self.options, self.model.n_layers)

    @property
    def moe_layer_latency_s(self) -> float:
        """Fixed kernel-chain latency of the step's MoE layers: ``n_moe_layers * moe_layer_overhead_s``
        (``fleetplan.perf.overheads``); 0 for a dense model."""
        return self.model.n_moe_layers * self.options.moe_layer_overhead_s if self.model.is_moe else 0.0

    # ---- full predictor -----------------------------------------------------------------------
    def predict(self, batch: BatchComposition, rng: np.random.Generator | None = None) -> StepBreakdown:
        """Per-operator seconds of one step of ``batch``.

        For an MoE model, ``rng`` draws the token-to-expert routing (``moe.sample_moe_s``);
        without it the expected slowest-rank load is used (the simulator kernel's form).
        """
        if not isinstance(batch, BatchComposition):
            raise ConfigError(f"predict needs a BatchComposition, got {type(batch).__name__}")
        n_tok, n_seqs = batch.n_tokens, batch.n_seqs
        compute, memory = gemm_block_s(self.gemms, n_tok, n_seqs, self.options.tile_m_tokens)
        cpu, launch = self.fixed_overhead_s
        c = self.comm_terms
        seconds = {
            "gemm": max(compute, memory),
            "attention_prefill": (self.attention.prefill_s_per_work * batch.attention_work
                                  + self.attention.prefill_s_per_token * batch.n_prefill_tokens),
            "attention_decode": self.attention.decode_s_per_context_token * batch.decode_context_sum,
            "attention_window": self._window_s(batch) + self.attention.window_s_per_seq * n_seqs,
            "moe_experts": self._moe_s(n_tok, rng),
            "moe_layer_latency": self.moe_layer_latency_s,
            "tp_all_reduce": c.tp_all_reduce[0] + c.tp_all_reduce[1] * n_tok,
            "ep_all_to_all": c.ep_all_to_all[0] + c.ep_all_to_all[1] * n_tok,
            "pp_send_recv": c.pp_send_recv[0] + c.pp_send_recv[1] * n_tok,
            "norms": self.norm_s_per_token * n_tok,
            "kernel_launch": launch,
            "cpu_overhead": cpu,
        }
        source = {name: ENGINE_PROFILE_SOURCE if name in ("kernel_launch", "cpu_overhead", "moe_layer_latency")
                  else ROOFLINE_SOURCE
                  for name in seconds}
        return StepBreakdown(MappingProxyType(seconds), "compute" if compute > memory else "memory",
                             MappingProxyType(source))

    def _window_s(self, batch: BatchComposition) -> float:
        """Window attention of ``batch``'s queries, a prefill query charged the keys it has (the kernel's
        ``roofline_window_s`` on the batch's aggregates; ``fleetplan.perf.attention``, "Keys a query has"); the
        kernel's ``c[20]`` term, a sparse-attention prefill query's own cost, is reported with the prefill attention
        (``predict``)."""
        a = self.attention
        coef = np.zeros(N_STEP_COEFS)
        coef[18], coef[19] = a.window_s_per_token, float(a.window_tokens)
        return roofline_window_s(coef, batch.n_decode, batch.n_prefill_tokens, batch.attn2)

    def _moe_s(self, n_tokens: int, rng: np.random.Generator | None) -> float:
        if self.moe is None:
            return 0.0
        if rng is not None:
            return sample_moe_s(self.moe, self.moe_rates, n_tokens, self.options.moe_zipf_s, rng)
        a, b, c, d, e, f, h = self._moe_coefficients
        miss = math.exp(d * n_tokens)
        return max(a * n_tokens + b * math.sqrt(n_tokens) + h * (1.0 - miss),
                   c * (1.0 - miss) + e * math.sqrt((1.0 - miss) * miss) + f * n_tokens)

    @functools.cached_property
    def _moe_coefficients(self) -> tuple[float, ...]:
        """``(a, b, c, d, e, f, h)`` of ``moe.expected_moe_terms``: the kernel's ``c[12..17]`` and ``c[21]``."""
        if self.moe is None:
            return (0.0,) * 7
        a, b, c, d, e, f, h = expected_moe_terms(self.moe, self.moe_rates, self.options.moe_zipf_s)
        return a, b, c, (d if math.isfinite(d) else SINGLE_EXPERT_LOG_MISS), e, f, h

    # ---- the simulator seam ---------------------------------------------------------------------
    def kernel_coefficients(self) -> tuple[int, np.ndarray]:
        """``(STEP_MODEL_ROOFLINE, coef[N_STEP_COEFS])`` (layout in ``fleetplan.perf.linear``)."""
        g, a, c = self.gemms, self.attention, self.comm_terms
        cpu, launch = self.fixed_overhead_s
        coef = np.zeros(N_STEP_COEFS, dtype=np.float64)
        coef[0] = (cpu + launch + self.moe_layer_latency_s + c.tp_all_reduce[0] + c.ep_all_to_all[0]
                   + c.pp_send_recv[0])
        coef[1], coef[2] = g.compute_s_per_padded_token, g.memory_s
        coef[3], coef[4] = a.prefill_s_per_work, a.decode_s_per_context_token
        coef[5], coef[6] = float(self.options.tile_m_tokens), g.wave_ratio
        coef[7], coef[8], coef[9] = g.memory_s_per_token, g.compute_s_per_seq, g.memory_s_per_seq
        coef[10] = c.tp_all_reduce[1] + c.ep_all_to_all[1] + c.pp_send_recv[1] + self.norm_s_per_token
        coef[11] = a.window_s_per_seq
        coef[12:18] = self._moe_coefficients[:6]
        coef[18], coef[19], coef[20] = a.window_s_per_token, float(a.window_tokens), a.prefill_s_per_token
        coef[21] = self._moe_coefficients[6]
        return STEP_MODEL_ROOFLINE, coef

    # ---- MTP speculative decoding -----------------------------------------------------------------
    def mtp_draft_predictor(self) -> StepTimePredictor:
        """The predictor of one MTP draft pass: one decoder layer of the model (MoE layer for an MoE
        model, as DeepSeek-V3's ``num_nextn_predict_layers`` module), the shared LM head, no host
        overhead of its own (the draft runs inside the engine's step), the last pipeline stage only."""
        m = self.model
        if m.is_moe:
            layer = dataclasses.replace(m, n_layers=1, n_dense_layers=0, intermediate_size=0)
        else:
            layer = dataclasses.replace(m, n_layers=1, n_dense_layers=0)
        options = dataclasses.replace(self.options, cpu_overhead_s=0.0)
        return dataclasses.replace(self, model=layer, parallelism=dataclasses.replace(self.parallelism, pp=1),
                                   options=options)

    def mtp_draft_coefficients(self) -> tuple[int, np.ndarray]:
        """``(STEP_MODEL_ROOFLINE, coef)`` of one MTP draft pass: ``mtp_draft_predictor``'s plus the MTP
        module's ``eh_proj`` (K = 2h, N = h, replicated: it joins the embedding and the previous hidden
        state) in the GEMM terms; the wave ratio stays the decoder layer's.  The simulator's
        ``draft_coef`` for a ``speculative_config`` of method ``mtp`` (one pass per draft token)."""
        draft = self.mtp_draft_predictor()
        code, coef = draft.kernel_coefficients()
        h = self.model.hidden_size
        eh = gemm_block((GemmShape("eh_proj", 2 * h, h, 1, False, self.weight_stream_bytes_per_param),), draft.rates)
        coef[1] += eh.compute_s_per_padded_token
        coef[2] += eh.memory_s
        coef[7] += eh.memory_s_per_token
        return code, coef

    def step_s(self, n_seqs: int, n_decode: int, prefill_tokens: int, decode_context_tokens: int,
               attn2: int) -> float:
        """Step time (s) from the kernel's aggregates (``roofline_step_s`` of the coefficients)."""
        return roofline_step_s(self.kernel_coefficients()[1], n_seqs, n_decode, prefill_tokens,
                               decode_context_tokens, attn2)

    def t_iter_s(self, n_seqs: float | np.ndarray,
                 context_tokens: float | np.ndarray | None = None) -> float | np.ndarray:
        """A pure-decode step of ``n_seqs`` sequences of ``context_tokens`` each (``LinearStepModel``'s
        signature, read by ``fleetplan.sim.compile``); ``None`` means zero context."""
        ctx = 0.0 if context_tokens is None else context_tokens
        coef = self.kernel_coefficients()[1]
        f = np.vectorize(lambda n, c: roofline_step_s(coef, int(n), int(n), 0, 0, 0) + coef[4] * n * c)
        out = f(np.asarray(n_seqs, dtype=np.float64), np.asarray(ctx, dtype=np.float64))
        return float(out) if np.ndim(out) == 0 else out
