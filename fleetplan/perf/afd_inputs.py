"""Per-layer AFD inputs of one decode micro-batch from the operator predictor.

``StepTimePredictor`` costs a whole co-located step; AFD needs the attention pool's and the FFN
pool's share of each layer for a micro-batch of ``T`` decode tokens.  The predictor's own pieces
are split by operator (``fleetplan.perf.operators.step_gemms`` names):

* attention pool, per layer: the roofline of the attention projections (``qkv_proj``, ``o_proj``;
  MLA ``q*_proj``, ``kv_*_proj``) for ``T`` tokens, the decode attention kernel
  (``decode_s_per_context_token`` x the micro-batch's context tokens) and the TP all-reduce
  after ``o_proj``, each averaged over the ``L`` layers;
* FFN pool, per layer: dense layers (``gate_up_proj``, ``down_proj``, TP all-reduce) first, then MoE layers
  with the shared experts and router (roofline) plus the routed experts gated on the slowest EP
  rank (``afd_moe``, routing drawn from ``rng``) and the EP dispatch and combine all-to-alls
  (``comm.all_to_all_s`` of ``T x attn_dp x hidden x 2`` bytes x top-k / ep each way);
* transfer bytes each way: ``T x hidden x 2`` (BF16 activations) per attention DP rank.

Not included (they are per step, not per layer): the LM head, kernel launch and CPU overhead.
Both pools are assumed to be the predictor's GPU and parallelism (the same domains, Frontier
eq. 1, now on separate device sets).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.perf import comm
from fleetplan.perf.afd_moe import ep_ffn_times, sample_rank_s
from fleetplan.perf.operators import gemm_block, gemm_block_s, step_gemms
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.perf.roofline import ACTIVATION_BYTES

__all__ = ["AfdInputs", "afd_inputs", "ATTENTION_GEMMS"]

ATTENTION_GEMMS = frozenset({"qkv_proj", "o_proj", "q_proj", "q_a_proj", "q_b_proj", "kv_a_proj", "kv_b_proj"})
DENSE_FFN_GEMMS = frozenset({"gate_up_proj", "down_proj"})
MOE_LAYER_GEMMS = frozenset({"shared_gate_up", "shared_down", "router"})


@dataclass(frozen=True)
class AfdInputs:
    """One micro-batch's per-layer seconds and activation bytes (``afd.afd_step`` arguments)."""

    attention_s: np.ndarray  # (L,)
    ffn_s: np.ndarray  # (L,)
    straggler_wait_s: np.ndarray  # (L,): slowest EP rank minus the mean rank (0 on dense layers)
    transfer_bytes: float


def _roofline_s(predictor: StepTimePredictor, names: frozenset, n_tokens: int) -> float:
    gemms = tuple(g for g in step_gemms(predictor.model, predictor.parallelism, predictor.weight_dtype)
                  if g.name in names)
    if not gemms or n_tokens == 0:
        return 0.0
    compute, memory = gemm_block_s(gemm_block(gemms, predictor.rates), n_tokens, 0, predictor.options.tile_m_tokens)
    return max(compute, memory)


def afd_inputs(predictor: StepTimePredictor, n_tokens: int, context_tokens: int,
               rng: np.random.Generator | None = None) -> AfdInputs:
    """Per-layer AFD times of a micro-batch of ``n_tokens`` decode sequences of ``context_tokens``.

    ``rng`` draws the MoE routing (required for MoE models)."""
    if not isinstance(predictor, StepTimePredictor):
        raise ConfigError(f"afd_inputs needs a StepTimePredictor, got {type(predictor).__name__}")
    for name, v in (("n_tokens", n_tokens), ("context_tokens", context_tokens)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"{name}={v!r} must be an integer >= 1")
    m, par, o, gpu = predictor.model, predictor.parallelism, predictor.options, predictor.gpu
    n_layers = m.n_layers
    row_bytes = m.hidden_size * ACTIVATION_BYTES
    tp = par.attn_tp
    all_reduce = comm.all_reduce_s(n_tokens * row_bytes, tp, comm.link_bytes_per_s(gpu, tp, o.link_efficiency),
                                   comm.alpha_s(tp, o.nvlink_alpha_s, o.network_alpha_s))
    attention = (_roofline_s(predictor, ATTENTION_GEMMS, n_tokens)
                 + predictor.attention.decode_s_per_context_token * n_tokens * context_tokens) / n_layers + all_reduce
    ffn = np.zeros(n_layers)
    wait = np.zeros(n_layers)
    n_dense = m.n_dense_layers if m.is_moe else n_layers
    if n_dense:  # dense FFN sharded like attention: a TP all-reduce after down_proj too
        ffn[:n_dense] = _roofline_s(predictor, DENSE_FFN_GEMMS, n_tokens) / n_dense + all_reduce
    if m.is_moe:
        if rng is None:
            raise ConfigError(f"{m.name} is MoE: pass rng=stream(seed, 'routing') to draw its expert routing")
        ep = par.ffn_ep
        payload = n_tokens * par.attn_dp * row_bytes * m.n_experts_per_token / ep
        group = par.tp * par.dp
        a2a = comm.all_to_all_s(payload, ep, comm.link_bytes_per_s(gpu, group, o.link_efficiency),
                                comm.alpha_s(group, o.nvlink_alpha_s, o.network_alpha_s))
        dense = _roofline_s(predictor, MOE_LAYER_GEMMS, n_tokens) / m.n_moe_layers
        times = ep_ffn_times(sample_rank_s(predictor.moe, predictor.rates, n_tokens, o.moe_zipf_s, rng),
                             dispatch_s=a2a, combine_s=a2a, dense_s=dense)
        ffn[n_dense:] = times.ffn_s
        wait[n_dense:] = times.straggler_wait_s
    attn = np.full(n_layers, attention)
    for arr in (attn, ffn, wait):
        arr.setflags(write=False)
    return AfdInputs(attn, ffn, wait, float(n_tokens * row_bytes))
