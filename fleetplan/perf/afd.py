"""Attention-FFN disaggregation (AFD): the time of one decode step as its critical path.

Frontier (Feng et al. 2026, arXiv:2605.21312, section 3.2 and appendix A.3, Algorithm 1 lines 10-20) splits
decode into an attention cluster A and an FFN cluster F: every layer of a decode iteration sends
activations A -> F, runs the FFN (MoE: EP dispatch, expert sub-batches, combine once the slowest
rank is ready) and sends them back F -> A.  With ``m`` micro-batches ("ping-pong", MegaScale-
Infer / Step-3 style) A computes micro-batch ``j + 1`` while ``j`` is in flight or on F.

Model.  Four FIFO resources -- A, the A -> F link, F, the F -> A link -- each serve the
``L x m`` (layer, micro-batch) operations in lexicographic order (A finishes every micro-batch of
layer ``l`` before any of layer ``l + 1``: round-robin ping-pong).  A transfer of ``B`` bytes holds
its link for ``B / bandwidth`` (serialisation) and arrives ``latency_s`` later (propagation, not
held), so back-to-back transfers pipeline their latencies.  With ``end`` times per resource:

    a[l, j]  = max(A free,  back[l - 1, j]) + attention_s[l, j]          (back[-1, j] = 0)
    go[l, j] = max(A->F free, a[l, j]) + bytes[j] / bandwidth;  at F: go + latency
    f[l, j]  = max(F free,  go[l, j] + latency) + ffn_s[l, j]
    bk[l, j] = max(F->A free, f[l, j]) + bytes[j] / bandwidth;  back[l, j] = bk + latency
    step_s   = back[L - 1, m - 1]

This max-plus recurrence is exact for the event graph above (no simulation error); the final
F -> A carries the last hidden state to A for the LM head, which, like sampling and per-step CPU
overhead, is outside this step time.  With one micro-batch and free transfers it is the fused
decode step ``sum over layers of attention + FFN``.

Steady state.  For identical layers and micro-batches this is a closed cyclic line of
deterministic single servers (A, links, F) and pure delays (latencies) with ``m`` customers, whose
period per layer is ``max(m * max server time, sum of all times)`` (e.g. Baccelli, Cohen, Olsder,
Quadrat, *Synchronization and Linearity*, 1992, section 7.3: cycle time = max circuit mean):

    period_s = max(m a, m f, m x, a + f + 2 (x + latency_s)),   x = bytes / bandwidth

so adding micro-batches hides transfers until the period reaches the compute bound
``m max(a, f)`` (= the per-layer total of the busier pool when per-micro-batch work is 1/m of it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError

__all__ = ["AfdLink", "AfdTimeline", "afd_step", "afd_period_s", "fused_step_s"]


@dataclass(frozen=True)
class AfdLink:
    """One direction of the A <-> F interconnect (both directions alike, full duplex)."""

    bandwidth_bytes_per_s: float
    latency_s: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.bandwidth_bytes_per_s) and self.bandwidth_bytes_per_s > 0):
            raise ConfigError(f"bandwidth_bytes_per_s={self.bandwidth_bytes_per_s!r} must be finite and > 0; "
                              f"give the link rate in bytes/s (100 Gb/s = 12.5e9)")
        if not (math.isfinite(self.latency_s) and self.latency_s >= 0):
            raise ConfigError(f"latency_s={self.latency_s!r} must be finite and >= 0")

    def serialise_s(self, n_bytes: float) -> float:
        """Seconds the link is held by ``n_bytes``."""
        return n_bytes / self.bandwidth_bytes_per_s


@dataclass(frozen=True)
class AfdTimeline:
    """End times (s) of every (layer, micro-batch) operation; ``step_s`` is the critical path."""

    attention_end_s: np.ndarray  # (L, m)
    ffn_end_s: np.ndarray  # (L, m)
    back_at_s: np.ndarray  # (L, m): arrival of the F -> A transfer at A

    @property
    def step_s(self) -> float:
        return float(self.back_at_s[-1, -1])


def _grid(name: str, values, shape: tuple[int, int]) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    try:
        out = np.broadcast_to(arr if arr.ndim != 1 or arr.shape[0] != shape[0] else arr[:, None], shape)
    except ValueError:
        raise ConfigError(f"{name} of shape {arr.shape} does not fit (layers, micro-batches) = {shape}; "
                          f"give a scalar, one value per layer, or a (layers, micro-batches) array") from None
    if not np.all(np.isfinite(out) & (out >= 0)):
        raise ConfigError(f"{name} must be finite and >= 0 seconds or bytes")
    return out


def afd_step(attention_s, ffn_s, transfer_bytes, link: AfdLink, n_layers: int, n_micro_batches: int) -> AfdTimeline:
    """Critical path of one AFD decode step (module docstring).

    Parameters
    ----------
    attention_s, ffn_s : float or array
        Seconds of one micro-batch's attention (FFN, including any EP wait and collective) per
        layer: a scalar, one value per layer (length ``n_layers``) or an ``(n_layers, m)`` array.
    transfer_bytes : float or array
        Activation bytes of a micro-batch each way (tokens x hidden x dtype bytes); scalar,
        per layer, or ``(n_layers, m)``.
    link : AfdLink
        Bandwidth and latency of each direction.
    n_layers, n_micro_batches : int
        ``L`` and ``m``.
    """
    for name, v in (("n_layers", n_layers), ("n_micro_batches", n_micro_batches)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"{name}={v!r} must be an integer >= 1")
    if not isinstance(link, AfdLink):
        raise ConfigError(f"link must be an AfdLink, got {type(link).__name__}")
    shape = (n_layers, n_micro_batches)
    attn, ffn = _grid("attention_s", attention_s, shape), _grid("ffn_s", ffn_s, shape)
    ser = _grid("transfer_bytes", transfer_bytes, shape) / link.bandwidth_bytes_per_s
    lat = link.latency_s
    a_end, f_end, back = (np.zeros(shape) for _ in range(3))
    a_free = go_free = f_free = bk_free = 0.0
    for layer in range(n_layers):
        for j in range(n_micro_batches):
            ready = back[layer - 1, j] if layer else 0.0
            a_free = max(a_free, ready) + attn[layer, j]
            go_free = max(go_free, a_free) + ser[layer, j]
            f_free = max(f_free, go_free + lat) + ffn[layer, j]
            bk_free = max(bk_free, f_free) + ser[layer, j]
            a_end[layer, j], f_end[layer, j], back[layer, j] = a_free, f_free, bk_free + lat
    for arr in (a_end, f_end, back):
        arr.setflags(write=False)
    return AfdTimeline(a_end, f_end, back)


def afd_period_s(attention_s: float, ffn_s: float, transfer_bytes: float, link: AfdLink,
                 n_micro_batches: int) -> float:
    """Steady-state seconds per layer for identical layers and micro-batches (module docstring)."""
    x = link.serialise_s(transfer_bytes)
    m = n_micro_batches
    return max(m * attention_s, m * ffn_s, m * x, attention_s + ffn_s + 2.0 * (x + link.latency_s))


def fused_step_s(attention_s, ffn_s, n_layers: int) -> float:
    """A co-located decode step: every layer's attention then FFN, one batch, no transfers."""
    shape = (n_layers, 1)
    return float(_grid("attention_s", attention_s, shape).sum() + _grid("ffn_s", ffn_s, shape).sum())
