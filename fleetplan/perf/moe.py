"""Routed-expert (MoE) grouped GEMM with sampled routing; the layer waits for the slowest EP rank.

Routing.  Each of the step's ``T`` tokens picks ``k`` experts.  Expert popularity is
``p_e ~ 1 / (e + 1) ** s`` (Zipf skew ``s``; 0 = uniform) and the ``T k`` token-expert
assignments are drawn as ``Multinomial(T k, p)`` from the caller's ``np.random.Generator``
(the top-k "distinct experts per token" constraint is dropped: it changes counts by
O(k / E)).  Experts are placed contiguously, ``E / ep`` per rank (vLLM's default expert
map), so under skew rank 0 holds the hottest experts.

Per rank ``r`` with ``n_r`` routed rows and ``a_r`` experts hit (grouped GEMM, one weight
read per hit expert):

    compute_r = g n_r * 2 * 3 h I_moe / tp_ffn / gemm FLOP/s
    memory_r  = (a_r * w_e + g n_r * (h + I_moe / tp_ffn) * 2 * 2) / bandwidth
    w_e       = max(3 h I_moe / tp_ffn * weight_bytes,  m_tile * 2 * 3 h I_moe / tp_ffn * bandwidth / FLOP/s)
    layer_s   = max over r of max(compute_r, memory_r)

``bandwidth`` is the routed experts' weight stream (``predictor.moe_rates``): the engine profile's
``moe_weight_bandwidth_efficiency`` of the HBM peak where it gives one (AIConfigurator 0.12.0's fused-MoE tables at
weight-bound decode sizes: 0.85 vLLM, 0.76 SGLang; ``moe_decode_bandwidth_fit`` of
``benchmarks/aiconfigurator_compare.py``), else ``weight_bandwidth_efficiency``.

Grouped-GEMM small-batch inefficiency.  With ``T k / E`` rows per expert below a tile, the
expert GEMM is weight-bandwidth bound: every hit expert's weights are read once per step (the
``a_r`` term), and its GEMM still computes a whole tile of ``m_tile`` rows
(``MoeShape.min_rows_per_expert``; vLLM's fused-MoE Triton kernel pads each expert's rows to
its ``BLOCK_SIZE_M``: 16 for small batches, 64 for block-scaled FP8 in
vllm-project/vllm ``model_executor/layers/fused_moe/fused_moe.py`` ``get_default_config`` before
PR #34846), so ``w_e`` is the larger of the weight read and one tile's compute, in seconds
expressed as bytes at the weight bandwidth.  Expected hit experts under uniform routing with
``k`` distinct experts per token: ``E[active] = E (1 - (1 - k / E) ** T)`` (each expert is
missed by a token with probability ``1 - k / E``).

Expert width.  With the experts split over ``tp_ffn`` GPUs each expert GEMM is ``I_moe / tp_ffn`` wide (N of
gate/up, K of down) on a GPU, and the fused-MoE kernels reach a smaller share of the peak the narrower it is
(fewer output tiles per expert to fill the SMs, the same per-expert gather, scatter and tile tails).  The
routed rows' compute (``MoeShape.row_compute_scale``, set by ``predictor.moe``) is divided by

    expert_width_factor(w) = min(1, (w / MOE_REFERENCE_WIDTH) ** x),   w = I_moe / tp_ffn

with ``x`` the engine profile's ``moe_width_exponent``, ``moe_fp8_width_exponent`` for W8A8 FP8 experts (0: no
effect): AIConfigurator 0.12.0's measured fused-MoE
tables (vLLM 0.24.0 and SGLang 0.5.14, H100 and H200, BF16 and block-FP8 experts, expert-TP rows at 4,096-16,384
tokens; ``moe_width_efficiency`` of ``benchmarks/aiconfigurator_compare.py``) fall from the TP-1 median, the profiles'
``moe_gemm_efficiency`` read-back, to about 0.75 of it at width 384-512, 0.5-0.65 at 256 and 0.35-0.45 at 128; the
exponent is their least-squares fit below ``MOE_REFERENCE_WIDTH`` (1,024: the width at which the tables' ratio
reaches 1), per dtype, as block-FP8 experts fall faster than BF16 ones (the mean over H100 and H200: vLLM 0.44 BF16,
0.56 block FP8; SGLang 0.19 and 0.48; one median of the four, 0.5 / 0.33, had timed both until issue 26: with the
split the held-out serving table went 20.7 % -> 20.0 % mean absolute, SGLang's DeepSeek-V3/V3.2 rows 15.5 / 16.9 %
-> 12.4 / 11.7 %, vLLM's GLM-4.6 BF16 rows 12.2 -> 16.7 %; ``benchmarks/bench_validation.py``).
Wider experts keep the read-back (the factor is capped at 1), and expert parallelism keeps whole
experts (``w = I_moe``).  DeepSeek-V3 (I 2,048) at TP 8 runs its experts 256 wide on each GPU.  Only the
compute-bound term is divided: the hit experts' tile floor ``w_e`` (decode) keeps the read-back rate, as the same
tables' weight-bound rows lose far less (DeepSeek-V3's block-FP8 experts on H200: TP-8 latency 0.15-0.20 of TP-1's
at 8-1,024 tokens, 1/8 ideal, against 0.23-0.24 at 4,096-16,384).

Rows per expert (the grouped GEMM's ramp).  A hit expert costs its routed rows plus a fixed ``r0`` rows of
compute (loading its weights into the tiles, the per-expert prologue, tail and scatter that do not overlap the
next expert's math), so the routed rows' compute on a rank is

    compute_r = (g n_r s_w + r0 a_r) * per_row / (1 + r0 / (s_w R_ref)),      per_row = flop_per_row / gemm FLOP/s

and the grouped GEMM's efficiency ramps as ``eff (1 + r0 / R_ref) R / (R + r0)`` with the rows per hit expert
``R = n_r / a_r``: the read-back efficiency ``eff`` (``moe_gemm_efficiency`` and friends, medians at 4,096-16,384
tokens) holds at ``R = R_ref`` (``MOE_REFERENCE_ROWS_PER_EXPERT``, 288), about the read-back rows' rows per expert,
so those steps keep their time (``s_w`` >= 1 the expert-width scale below, which like the tile floor leaves the hit
experts' offset alone, it being weight reads; the normalisation keeps ``R = R_ref`` at the read-back times the
width factor).  ``r0`` is ``rho`` weight reads of a hit expert expressed in rows,
``r0 = rho * expert_weight_bytes / HBM peak * gemm FLOP/s / flop_per_row`` (``MoeShape.hit_expert_rows``, set by
``predictor.moe``; ``rho`` the engine profile's ``moe_hit_expert_weight_reads``): the per-expert cost scales with
the GPU's FLOP/byte ratio and the weight bytes, so one ``rho`` serves every GPU and dtype.  Read back from
AIConfigurator 0.12.0's measured fused-MoE tables (``moe_ramp_fit`` of ``benchmarks/aiconfigurator_compare.py``:
H100, H200, B200, A100, L40S; vLLM and SGLang; one GPU, power-law 1.01 routing, 1,024-16,384 tokens,
every model shape): BF16 and block-FP8 experts fit ``rho`` 1.5 and ``R_ref`` 288 for both engines (vLLM 2,032
rows: the flat read-back is 1.77x too fast at 1,024-3,072 tokens, median log ratio +0.57, the ramp -0.01; at the
read-back's 4,096-16,384 tokens the median stays, the mean |log ratio| falls 0.21 -> 0.11; SGLang 1,656 rows: +0.59
-> -0.00, 0.23 -> 0.17).  4-bit weight-only experts fit ``rho`` 2-3, per-tensor FP8 2.0.  Decode, where the hit
experts' weight reads bound the step (``memory_r``), changes little: the offset is about ``rho / (1 + r0 / R_ref)``
weight reads at the HBM peak, against ``memory_r``'s one read at the weight-streaming efficiency (with it, the same
tables' 1-16-token rows stay at a median log ratio of -0.04, vLLM).

Expert load imbalance ``g`` (``MoeShape.load_imbalance``, >= 1): the max-loaded EP rank's rows
over the mean rank's beyond the multinomial spread and the Zipf skew modelled here (a measured
figure of a deployment; 1 = routing statistics only, the default).

summed over the ``n_moe_layers`` (each layer draws its own routing).  With attention data
parallelism the experts see the tokens of all ``dp`` attention ranks (``T * dp``).

Expectation used by the simulator kernel (``predictor.kernel_coefficients``).  Each rank's
rows and hit experts are taken as Gaussian (mean and variance of the multinomial counts);
the expected maximum over ranks, ``E[max_r N(m_r, s_r^2)]``, is estimated on a log grid of
T = 1..16384 tokens (2,000 common normal draws, fixed seed) and the kernel's form is fitted
to it by relative least squares:

* rows of the slowest rank ``a T + b sqrt(T)``: ``a = k P`` per token with ``P`` the
  hottest rank's share (``1/ep`` when uniform), ``b`` fitted;
* hit experts ``n q + e' sqrt(q (1 - q))`` with ``n = E / ep``, ``q = 1 - exp(d T)``:
  ``d = k ln(1 - 1/E)`` under uniform routing (the exact mean) and, under skew, fitted to
  the hottest rank's exact mean ``sum_e 1 - (1 - p_e) ** (T k)``; ``e'`` fitted;
* activation bytes of ``T k P`` rows;
* the hit experts' compute offset ``h q`` (``r0`` rows per hit expert, the hottest rank's mean hits); so that

    moe_s(T) = max(a T + b sqrt(T) + h q,  c q + e sqrt(q (1 - q)) + f T),   q = 1 - exp(d T)

Measured against the mean of sampled routings over whole steps (docs/step_time_validation.md):
within 2 % under uniform routing; under Zipf skew 1 within 5 % (Qwen3-30B-A3B, EP 4/8) and
11 % (DeepSeek-V3, EP 8, 8-token decode steps), the single-exponential hit curve and the
max-of-expectations being the approximations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.models import Dtype, ModelConfig
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.roofline import ACTIVATION_BYTES, DeviceRates

__all__ = ["MoeShape", "moe_shape", "expert_probabilities", "rank_shares",
           "sample_moe_s", "expected_moe_terms", "MOE_REFERENCE_WIDTH", "expert_width_factor",
           "MOE_REFERENCE_ROWS_PER_EXPERT"]

FIT_MAX_TOKENS = 16384.0  # step tokens over which the expectation is fitted (log grid from 1)
FIT_POINTS = 32
MAX_DRAWS = 2000  # normal draws per grid point for E[max over ranks] (common random numbers)
MAX_DRAWS_SEED = 0
#: per-GPU expert width (I_moe / tp_ffn) at and above which the fused MoE keeps its read-back efficiency (docstring)
MOE_REFERENCE_WIDTH = 1024
#: rows per hit expert at which the grouped GEMM runs at its read-back efficiency (module docstring, 'Rows per
#: expert'): fitted with ``rho`` on AIConfigurator 0.12.0's fused-MoE tables (``moe_ramp_fit``)
MOE_REFERENCE_ROWS_PER_EXPERT = 288.0


def expert_width_factor(width: int, exponent: float) -> float:
    """``min(1, (width / MOE_REFERENCE_WIDTH) ** exponent)``: the routed experts' share of their read-back efficiency
    at a per-GPU expert width of ``width`` (module docstring, 'Expert width')."""
    if width < 1:
        raise ConfigError(f"expert width {width} must be >= 1 column per GPU (moe_intermediate_size / expert TP)")
    return min(1.0, (width / MOE_REFERENCE_WIDTH) ** exponent)


@dataclass(frozen=True)
class MoeShape:
    """Per-GPU shard of one MoE layer's routed experts."""

    n_experts: int
    top_k: int
    ep: int
    n_layers: int
    flop_per_row: float  # per token-expert row
    expert_weight_bytes: float
    activation_bytes_per_row: float
    tokens_per_step_token: int  # attention dp ranks feeding the experts
    min_rows_per_expert: int = 0  # grouped-GEMM tile rows each hit expert computes at least (module docstring)
    load_imbalance: float = 1.0  # max-loaded EP rank / mean beyond routing statistics (>= 1)
    #: seconds of the routed rows' compute over ``flop_per_row / FLOP/s`` (1 / ``expert_width_factor``; module
    #: docstring, 'Expert width'): the compute-bound term only, not the hit experts' tile floor
    row_compute_scale: float = 1.0
    #: ``r0``: rows of compute each hit expert costs beyond its routed rows (module docstring, 'Rows per expert')
    hit_expert_rows: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.hit_expert_rows) and self.hit_expert_rows >= 0.0):
            raise ConfigError(f"hit_expert_rows={self.hit_expert_rows!r} must be a finite number of rows >= 0 "
                              f"(the grouped GEMM's per-expert offset; 0 = no ramp)")
        if isinstance(self.min_rows_per_expert, bool) or not isinstance(self.min_rows_per_expert, int) \
                or self.min_rows_per_expert < 0:
            raise ConfigError(f"min_rows_per_expert={self.min_rows_per_expert!r} must be an integer >= 0 "
                              f"(the grouped GEMM's tile rows, e.g. 16)")
        if not (math.isfinite(self.row_compute_scale) and self.row_compute_scale >= 1.0):
            raise ConfigError(f"row_compute_scale={self.row_compute_scale!r} must be a finite factor >= 1 "
                              f"(1 / the expert-width factor)")
        if not (math.isfinite(self.load_imbalance) and self.load_imbalance >= 1.0):
            raise ConfigError(f"moe_load_imbalance={self.load_imbalance!r} must be a finite factor >= 1 "
                              f"(max-loaded EP rank over the mean; 1 = routing statistics only)",
                              param="moe_load_imbalance", value=self.load_imbalance)

    @property
    def ramp_scale(self) -> float:
        """``1 / (1 + r0 / (s_w R_ref))``: the routed rows' compute per row at the read-back efficiency's reference
        rows per expert (module docstring, 'Rows per expert'); 1 without a ramp."""
        return 1.0 / (1.0 + self.hit_expert_rows / (self.row_compute_scale * MOE_REFERENCE_ROWS_PER_EXPERT))

    def hit_expert_bytes(self, rates: DeviceRates) -> float:
        """``w_e`` (module docstring): one hit expert's weight read, or one tile of compute if longer, in
        bytes at ``rates.weight_bytes_per_s``."""
        tile_bytes = (self.min_rows_per_expert * self.flop_per_row / rates.gemm_flop_per_s
                      * rates.weight_bytes_per_s)
        return max(self.expert_weight_bytes, tile_bytes)


def moe_shape(model: ModelConfig, par: Parallelism, weight_dtype: Dtype, min_rows_per_expert: int = 0,
              load_imbalance: float = 1.0, weight_bytes_per_param: float | None = None) -> MoeShape:
    """The routed-expert shard of ``model`` under ``par`` (weights streamed as ``weight_bytes_per_param``
    bytes each when given, else the dtype's)."""
    wb = weight_dtype.bytes_per_param if weight_bytes_per_param is None else weight_bytes_per_param
    width = model.moe_intermediate_size // par.ffn_tp
    params = 3 * model.hidden_size * width
    return MoeShape(
        n_experts=model.n_experts, top_k=model.n_experts_per_token, ep=par.ffn_ep, n_layers=model.n_moe_layers,
        flop_per_row=2.0 * params, expert_weight_bytes=params * wb,
        activation_bytes_per_row=2.0 * (model.hidden_size + width) * ACTIVATION_BYTES,
        tokens_per_step_token=par.attn_dp, min_rows_per_expert=min_rows_per_expert, load_imbalance=load_imbalance,
    )


def expert_probabilities(n_experts: int, zipf_s: float) -> np.ndarray:
    """Routing probability of each expert in placement order (Zipf exponent ``zipf_s``)."""
    weights = 1.0 / np.arange(1, n_experts + 1, dtype=np.float64) ** zipf_s
    return weights / weights.sum()


def rank_shares(p: np.ndarray, ep: int) -> np.ndarray:
    """Routing share of each EP rank under contiguous placement."""
    return p.reshape(ep, -1).sum(axis=1)


def sample_moe_s(shape: MoeShape, rates: DeviceRates, n_tokens: int, zipf_s: float,
                 rng: np.random.Generator) -> float:
    """Seconds of all MoE layers for one step of ``n_tokens``, routing drawn from ``rng``."""
    rows = n_tokens * shape.tokens_per_step_token * shape.top_k
    if rows == 0 or shape.n_layers == 0:
        return 0.0
    p = expert_probabilities(shape.n_experts, zipf_s)
    counts = rng.multinomial(rows, p, size=shape.n_layers).reshape(shape.n_layers, shape.ep, -1)
    loads = counts.sum(axis=2) * shape.load_imbalance
    hit = (counts > 0).sum(axis=2)
    compute = ((loads * shape.flop_per_row * shape.row_compute_scale + shape.hit_expert_rows * hit * shape.flop_per_row)
               * shape.ramp_scale / rates.gemm_flop_per_s)
    memory = (hit * shape.hit_expert_bytes(rates) + loads * shape.activation_bytes_per_row) / rates.weight_bytes_per_s
    return float(np.maximum(compute, memory).max(axis=1).sum())


def _fit_tokens() -> np.ndarray:
    return np.geomspace(1.0, FIT_MAX_TOKENS, FIT_POINTS)


def _expected_max(means: np.ndarray, sds: np.ndarray) -> np.ndarray:
    """E[max over ranks of N(mean_r, sd_r^2)] for each grid row (Monte Carlo, fixed seed)."""
    z = np.random.default_rng(MAX_DRAWS_SEED).standard_normal((MAX_DRAWS, means.shape[1]))
    return np.array([(m + sd * z).max(axis=1).mean() for m, sd in zip(means, sds, strict=True)])


def _relative_ls(base: np.ndarray, shape_fn: np.ndarray, target: np.ndarray) -> float:
    """``x >= 0`` minimising ``sum ((base + x g) / target - 1)^2``."""
    g, r = shape_fn / target, (target - base) / target
    return max(0.0, float(g @ r / (g @ g))) if g @ g > 0 else 0.0


def _fit_log_miss(p_rank: np.ndarray, k_eff: float) -> float:
    """``d`` with ``n (1 - exp(d T))`` closest (relative squared error on the fit grid) to the rank's
    exact expected hit experts ``sum_e 1 - (1 - p_e) ** (T k)``; exact when its experts are equally
    popular (uniform routing)."""
    n = p_rank.size
    if np.allclose(p_rank, p_rank[0]):
        return k_eff * math.log1p(-float(p_rank[0])) if p_rank[0] < 1.0 else -math.inf
    return _fit_skewed_log_miss(p_rank, k_eff, n)


def _fit_skewed_log_miss(p_rank: np.ndarray, k_eff: float, n: int) -> float:
    """``_fit_log_miss`` under skew: least squares on the fit grid."""
    from scipy.optimize import minimize_scalar

    tokens = _fit_tokens()
    exact = (1.0 - np.exp(np.outer(tokens * k_eff, np.log1p(-p_rank)))).sum(axis=1)

    def loss(log_rate: float) -> float:
        return float(np.mean((n * -np.expm1(-math.exp(log_rate) * tokens) / exact - 1.0) ** 2))

    guess = math.log(-k_eff * math.log1p(-float(p_rank.mean())))
    best = minimize_scalar(loss, bracket=(guess - 1.0, guess + 1.0))
    return -math.exp(best.x)


def expected_moe_terms(shape: MoeShape, rates: DeviceRates, zipf_s: float) -> tuple[float, ...]:
    """Kernel coefficients ``(a, b, c, d, e, f, h)`` of the expected slowest-rank form (module docstring)."""
    p = expert_probabilities(shape.n_experts, zipf_s)
    shares = rank_shares(p, shape.ep)
    hot = int(np.argmax(shares))
    share = float(shares[hot])
    k_eff = shape.top_k * shape.tokens_per_step_token
    n = shape.n_experts // shape.ep
    per_row = (shape.n_layers * shape.flop_per_row * shape.row_compute_scale * shape.ramp_scale
               / rates.gemm_flop_per_s)
    # the hit experts' offset: not the width factor, not the imbalance (module docstring, 'Rows per expert')
    h = n * shape.hit_expert_rows * (shape.n_layers * shape.flop_per_row * shape.ramp_scale / rates.gemm_flop_per_s)
    if zipf_s == 0.0:  # uniform: k distinct experts per token, E[active] = E (1 - (1 - k/E)^T) exactly
        k, n_e = shape.top_k, shape.n_experts
        d = shape.tokens_per_step_token * math.log1p(-k / n_e) if k < n_e else -math.inf
    else:
        d = _fit_log_miss(p.reshape(shape.ep, -1)[hot], k_eff)
    per_row *= shape.load_imbalance
    per_expert = shape.n_layers * shape.hit_expert_bytes(rates) / rates.weight_bytes_per_s
    a, b, e = per_row * k_eff * share, 0.0, 0.0
    if shape.ep > 1:  # spread of the maximum over ranks, fitted to its Gaussian expectation
        tokens = _fit_tokens()
        rows = np.outer(tokens * k_eff, shares)
        b = per_row * _relative_ls(a / per_row * tokens, np.sqrt(tokens),
                                   _expected_max(rows, np.sqrt(rows * (1.0 - shares))))
        q_e = -np.expm1(np.outer(tokens * k_eff, np.log1p(-p))).reshape(tokens.size, shape.ep, n)
        hits = _expected_max(q_e.sum(axis=2), np.sqrt((q_e * (1.0 - q_e)).sum(axis=2)))
        q = -np.expm1(d * tokens)
        e = per_expert * _relative_ls(n * q, np.sqrt(q * (1.0 - q)), hits)
    f = (shape.n_layers * k_eff * share * shape.load_imbalance * shape.activation_bytes_per_row
         / rates.weight_bytes_per_s)
    return a, b, n * per_expert, d, e, f, h
