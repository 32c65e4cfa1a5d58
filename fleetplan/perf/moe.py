"""Routed-expert (MoE) grouped GEMM with sampled routing; the layer waits for the slowest EP rank.

Routing.  Each of the step's ``T`` tokens picks ``k`` experts.  Expert popularity is
``p_e ~ 1 / (e + 1) ** s`` (Zipf skew ``s``; 0 = uniform) and the ``T k`` token-expert
assignments are drawn as ``Multinomial(T k, p)`` from the caller's ``np.random.Generator``
(the top-k "distinct experts per token" constraint is dropped: it changes counts by
O(k / E)).  Experts are placed contiguously, ``E / ep`` per rank (vLLM's default expert
map), so under skew rank 0 holds the hottest experts.

Per rank ``r`` with ``n_r`` routed rows and ``a_r`` experts hit (grouped GEMM, one weight
read per hit expert):

    compute_r = n_r * 2 * 3 h I_moe / tp_ffn / gemm FLOP/s
    memory_r  = (a_r * 3 h I_moe / tp_ffn * weight_bytes + n_r * (h + I_moe / tp_ffn) * 2 * 2) / bandwidth
    layer_s   = max over r of max(compute_r, memory_r)

summed over the ``n_moe_layers`` (each layer draws its own routing).  With attention data
parallelism the experts see the tokens of all ``dp`` attention ranks (``T * dp``).

Expectation used by the simulator kernel (``predictor.kernel_coefficients``), Gaussian
approximations of the maximum over ``ep`` ranks with ``z_ep`` the expected maximum of
``ep`` standard normals: the slowest rank's rows ``T k P + z_ep sqrt(T k P (1 - P))``
(``P`` the hottest rank's share), its hit experts ``n q + z_ep sqrt(n q (1 - q))`` with
``n = E / ep`` and ``q = 1 - (1 - 1/E) ** (T k)`` (uniform-routing hit probability) and
its activation bytes at the mean ``T k / ep`` rows:

    moe_s(T) = max(a T + b sqrt(T),  c q + e sqrt(q (1 - q)) + f T),   q = 1 - exp(d T)

Under skew the byte term keeps the uniform hit probability (an approximation; the test
bound is 10 % of the sampled mean at Zipf exponent 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fleetplan.models import Dtype, ModelConfig
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.roofline import ACTIVATION_BYTES, DeviceRates

__all__ = ["MoeShape", "moe_shape", "expert_probabilities", "rank_shares", "expected_max_normal",
           "sample_moe_s", "expected_moe_terms"]

N_NORMAL_GRID = 4001  # quadrature points for the expected maximum of normals
NORMAL_GRID_HALF_WIDTH = 10.0  # integrate over [-10, 10] standard deviations


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


def moe_shape(model: ModelConfig, par: Parallelism, weight_dtype: Dtype) -> MoeShape:
    """The routed-expert shard of ``model`` under ``par``."""
    width = model.moe_intermediate_size // par.ffn_tp
    params = 3 * model.hidden_size * width
    return MoeShape(
        n_experts=model.n_experts, top_k=model.n_experts_per_token, ep=par.ffn_ep, n_layers=model.n_moe_layers,
        flop_per_row=2.0 * params, expert_weight_bytes=params * weight_dtype.bytes_per_param,
        activation_bytes_per_row=2.0 * (model.hidden_size + width) * ACTIVATION_BYTES,
        tokens_per_step_token=par.attn_dp,
    )


def expert_probabilities(n_experts: int, zipf_s: float) -> np.ndarray:
    """Routing probability of each expert in placement order (Zipf exponent ``zipf_s``)."""
    weights = 1.0 / np.arange(1, n_experts + 1, dtype=np.float64) ** zipf_s
    return weights / weights.sum()


def rank_shares(p: np.ndarray, ep: int) -> np.ndarray:
    """Routing share of each EP rank under contiguous placement."""
    return p.reshape(ep, -1).sum(axis=1)


def expected_max_normal(n: int) -> float:
    """E[max of ``n`` iid standard normals] = integral of x d(Phi(x)^n) (trapezoid rule)."""
    if n <= 1:
        return 0.0
    x = np.linspace(-NORMAL_GRID_HALF_WIDTH, NORMAL_GRID_HALF_WIDTH, N_NORMAL_GRID)
    cdf = 0.5 * (1.0 + np.array([math.erf(v / math.sqrt(2.0)) for v in x]))
    pdf = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    return float(np.trapezoid(x * n * cdf ** (n - 1) * pdf, x))


def sample_moe_s(shape: MoeShape, rates: DeviceRates, n_tokens: int, zipf_s: float,
                 rng: np.random.Generator) -> float:
    """Seconds of all MoE layers for one step of ``n_tokens``, routing drawn from ``rng``."""
    rows = n_tokens * shape.tokens_per_step_token * shape.top_k
    if rows == 0 or shape.n_layers == 0:
        return 0.0
    p = expert_probabilities(shape.n_experts, zipf_s)
    counts = rng.multinomial(rows, p, size=shape.n_layers).reshape(shape.n_layers, shape.ep, -1)
    loads = counts.sum(axis=2)
    hit = (counts > 0).sum(axis=2)
    compute = loads * shape.flop_per_row / rates.gemm_flop_per_s
    memory = (hit * shape.expert_weight_bytes + loads * shape.activation_bytes_per_row) / rates.weight_bytes_per_s
    return float(np.maximum(compute, memory).max(axis=1).sum())


def expected_moe_terms(shape: MoeShape, rates: DeviceRates, zipf_s: float) -> tuple[float, ...]:
    """Kernel coefficients ``(a, b, c, d, e, f)`` of the expected slowest-rank form (module docstring)."""
    p = expert_probabilities(shape.n_experts, zipf_s)
    share = float(rank_shares(p, shape.ep).max())
    k_eff = shape.top_k * shape.tokens_per_step_token
    per_row = shape.flop_per_row / rates.gemm_flop_per_s
    a = shape.n_layers * per_row * k_eff * share
    b = shape.n_layers * per_row * expected_max_normal(shape.ep) * math.sqrt(k_eff * share * (1.0 - share))
    experts_per_rank = shape.n_experts // shape.ep
    per_expert = shape.n_layers * shape.expert_weight_bytes / rates.weight_bytes_per_s
    c = experts_per_rank * per_expert
    d = k_eff * math.log1p(-1.0 / shape.n_experts) if shape.n_experts > 1 else -math.inf
    e = expected_max_normal(shape.ep) * math.sqrt(experts_per_rank) * per_expert
    f = shape.n_layers * k_eff / shape.ep * shape.activation_bytes_per_row / rates.weight_bytes_per_s
    return a, b, c, d, e, f
