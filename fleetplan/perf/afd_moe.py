"""The FFN side of an AFD decode step under expert parallelism: per-rank expert time, the wait for
the slowest rank, and per-layer FFN seconds for ``fleetplan.perf.afd.afd_step``.

Routing and the per-rank cost are those of ``fleetplan.perf.moe`` (same draws, same formulas):
the ``T k`` token-expert rows of a micro-batch of ``T`` tokens are ``Multinomial(T k, p)`` over
experts with Zipf popularity ``p_e ~ 1 / (e + 1) ** s``, placed ``E / ep`` per rank, and rank
``r`` with ``n_r`` rows and ``a_r`` experts hit takes

    rank_s[l, r] = max(n_r flop_per_row / gemm FLOP/s,
                       (a_r expert_weight_bytes + n_r activation_bytes_per_row) / weight bytes/s)

Frontier's EP barrier (Feng et al. 2026, arXiv:2605.21312, Algorithm 1 line 16: "combine at
max_i t_ready^i + Delta_EP"): a layer's FFN ends when the slowest rank is done plus the
collective, so

    ffn_s[l] = dense_s + dispatch_s + max_r rank_s[l, r] + combine_s
    straggler wait[l] = max_r rank_s[l, r] - mean_r rank_s[l, r]

``dispatch_s`` and ``combine_s`` are the EP all-to-all costs (``fleetplan.perf.comm.all_to_all_s``
of the micro-batch's activations); ``dense_s`` the layer's shared experts and router.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.perf.moe import MoeShape, expert_probabilities
from fleetplan.perf.roofline import DeviceRates

__all__ = ["EpFfnTimes", "sample_rank_s", "ep_ffn_times"]


def sample_rank_s(shape: MoeShape, rates: DeviceRates, n_tokens: int, zipf_s: float,
                  rng: np.random.Generator) -> np.ndarray:
    """Seconds of each EP rank's experts in each MoE layer, shape ``(n_layers, ep)``.

    Draws exactly as ``fleetplan.perf.moe.sample_moe_s`` (one multinomial per layer), so
    ``sample_rank_s(...).max(axis=1).sum()`` equals it for the same stream state."""
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, (int, np.integer)) or n_tokens < 0:
        raise ConfigError(f"n_tokens={n_tokens!r} must be an integer >= 0")
    if not (np.isfinite(zipf_s) and zipf_s >= 0):
        raise ConfigError(f"zipf_s={zipf_s!r} must be finite and >= 0 (0 = uniform routing)")
    rows = int(n_tokens) * shape.tokens_per_step_token * shape.top_k
    if rows == 0 or shape.n_layers == 0:
        return np.zeros((shape.n_layers, shape.ep))
    p = expert_probabilities(shape.n_experts, zipf_s)
    counts = rng.multinomial(rows, p, size=shape.n_layers).reshape(shape.n_layers, shape.ep, -1)
    loads = counts.sum(axis=2)
    hit = (counts > 0).sum(axis=2)
    compute = loads * shape.flop_per_row / rates.gemm_flop_per_s
    memory = (hit * shape.expert_weight_bytes + loads * shape.activation_bytes_per_row) / rates.weight_bytes_per_s
    return np.maximum(compute, memory)


@dataclass(frozen=True)
class EpFfnTimes:
    """Per-layer FFN seconds of one micro-batch and the slowest-rank wait inside them."""

    rank_s: np.ndarray  # (n_layers, ep)
    ffn_s: np.ndarray  # (n_layers,): dense + dispatch + slowest rank + combine
    straggler_wait_s: np.ndarray  # (n_layers,): slowest rank minus the mean rank

    @property
    def mean_straggler_wait_s(self) -> float:
        return float(self.straggler_wait_s.mean())


def ep_ffn_times(rank_s: np.ndarray, dispatch_s: float = 0.0, combine_s: float = 0.0,
                 dense_s: float = 0.0) -> EpFfnTimes:
    """FFN seconds per layer gated on the slowest EP rank (module docstring).

    Parameters
    ----------
    rank_s : array, shape (n_layers, ep)
        Expert seconds of each rank (``sample_rank_s`` or measured).
    dispatch_s, combine_s : float
        EP all-to-all seconds before and after the experts.
    dense_s : float
        Seconds of the layer's non-routed FFN work (shared experts, router, dense FFN).
    """
    rank = np.array(rank_s, dtype=np.float64)  # a copy: frozen below
    if rank.ndim != 2 or rank.shape[1] < 1 or not np.all(np.isfinite(rank) & (rank >= 0)):
        raise ConfigError(f"rank_s must be a finite, >= 0 (layers, ep ranks) array, got shape {rank.shape}")
    for name, v in (("dispatch_s", dispatch_s), ("combine_s", combine_s), ("dense_s", dense_s)):
        if not (np.isfinite(v) and v >= 0):
            raise ConfigError(f"{name}={v!r} must be finite and >= 0 s")
    slowest = rank.max(axis=1)
    ffn = dense_s + dispatch_s + slowest + combine_s
    wait = slowest - rank.mean(axis=1)
    for arr in (rank, ffn, wait):
        arr.setflags(write=False)
    return EpFfnTimes(rank, ffn, wait)
