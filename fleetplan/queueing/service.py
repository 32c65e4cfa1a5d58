"""Service-time moments and zero-wait TTFT of one pool under continuous batching.

Legend: W = iteration base time (s), H = per-sequence iteration cost (s),
n_max = KV slots per GPU at the pool's maximum context, C_chunk = prefill chunk
(tokens), L_in / L_out = prompt / output tokens, L = L_in + L_out,
L_ref = context at which H was calibrated (8192 for the paper's constants).

Servers are KV slots (core paper §2.2, "KV-slot servers"): a pool of G GPUs is
an M/G/c queue with c = G · n_max, and a request holds one slot for

    S = (ceil(L_in / C_chunk) + L_out) · t_iter(n_max)          (per-slot time)
    t_iter(n) = W + h · n,                                      (eq. 3)

so E[S]/n_max is the paper's GPU-level E[S] (eq. 4) and μ = 1/E[S] per slot.
We return E[S] and Cs² = Var[S]/E[S]² over the pool's request points
(weights renormalised to 1).

The per-sequence cost h (``SeqCostScaling``):

* ``REQUEST_LENGTH`` (default): h = H · L / L_ref.  KV reads per iteration grow
  with the sequence's context, so H (calibrated at L_ref) is scaled by the
  request's own total length, as if its batch-mates were of similar length.
  This is what the reference simulator computes (vllm-project/semantic-router
  ``src/fleet-sim/fleet_sim/gpu_profiles/manual.py``: ``service_time`` calls
  ``iter_latency(n_slots, mean_seq_len=l_in + l_out)`` with
  ``H_eff = H · mean_seq_len / calibration_ctx``) and what reproduces the
  paper's Table 1 (``tests/queueing/test_table1_fleet_sim.py``).
* ``FIXED``: h = H, eq. (3) read literally (every sequence costs as much as one
  at L_ref); it over-states short-pool service times 5-20x and does not
  reproduce Table 1.

Zero-wait TTFT (eq. 5 without W_queue), per request point::

    T_prefill = ceil(L_in / C_chunk) · t_iter(n_prefill),    ttft0 = T_prefill + t_iter(n_prefill)

``n_prefill`` is the batch concurrency while the request's chunks are being
prefilled.  Default ``None`` means n_max (the paper's eq. 5: each chunk costs
one full-batch iteration, matching ``LinearStepModel``'s default chunk cost).
The reference simulator instead uses one sequence (``iter_latency(1)``, unscaled
H) and omits the trailing t_iter; pass ``n_prefill_seqs=1`` to get close to it.
How the wait and this distribution are combined into a percentile is
``fleetplan.queueing.ttft``.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.names import exact, lookup
from fleetplan.perf.linear import LinearStepModel
from fleetplan.queueing.ttft import ZeroWaitTtft

__all__ = ["SeqCostScaling", "seq_cost_scaling", "ServiceModel", "ServiceMoments", "pool_service_moments"]

DEFAULT_REF_CONTEXT_TOKENS = 8192.0
_WEIGHT_SUM_ATOL = 1e-9


class SeqCostScaling(enum.Enum):
    """How the per-sequence iteration cost H depends on a request's length."""

    REQUEST_LENGTH = "request-length"
    FIXED = "fixed"


def seq_cost_scaling(name: str | SeqCostScaling) -> SeqCostScaling:
    """Look up a ``SeqCostScaling`` by name (``"request-length"``, ``"fixed"``)."""
    return lookup(SeqCostScaling, "sequence-cost scaling", name, exact)


@dataclass(frozen=True)
class ServiceModel:
    """How one pool serves requests: step model, slots, chunking, prefill concurrency.

    ``n_slots`` is n_max at the pool's maximum context (the caller's
    ``ServingConstants.n_max(context)``); ``chunk_tokens`` the prefill chunk;
    ``n_prefill_seqs`` the concurrency during prefill (None = ``n_slots``).
    Only ``step.iter_base_s`` and ``step.iter_per_seq_s`` are used.
    """

    step: LinearStepModel
    n_slots: int
    chunk_tokens: int
    n_prefill_seqs: float | None = None
    seq_cost: SeqCostScaling = SeqCostScaling.REQUEST_LENGTH
    ref_context_tokens: float = DEFAULT_REF_CONTEXT_TOKENS

    def __post_init__(self) -> None:
        if not isinstance(self.step, LinearStepModel):
            raise ConfigError(f"step={self.step!r} must be a LinearStepModel; build one from W and H")
        if int(self.n_slots) != self.n_slots or self.n_slots < 1:
            raise ConfigError(
                f"n_slots={self.n_slots!r} is invalid: KV slots per GPU must be a whole number >= 1; "
                "the pool's context may be too long for the GPU's KV cache"
            )
        if int(self.chunk_tokens) != self.chunk_tokens or self.chunk_tokens < 1:
            raise ConfigError(
                f"chunk_tokens={self.chunk_tokens!r} is invalid: it must be a whole number >= 1"
            )
        if self.n_prefill_seqs is not None and not (1 <= self.n_prefill_seqs <= self.n_slots):
            raise ConfigError(
                f"n_prefill_seqs={self.n_prefill_seqs!r} is invalid: it must lie in "
                f"[1, n_slots={self.n_slots}]; use None for the paper's n_max"
            )
        object.__setattr__(self, "seq_cost", seq_cost_scaling(self.seq_cost))
        if not (np.isfinite(self.ref_context_tokens) and self.ref_context_tokens > 0):
            raise ConfigError(f"ref_context_tokens={self.ref_context_tokens!r} is invalid: it must be > 0")

    @property
    def prefill_concurrency(self) -> float:
        """Sequences in the batch during prefill (n_prefill_seqs, or n_slots when None)."""
        return float(self.n_slots if self.n_prefill_seqs is None else self.n_prefill_seqs)

    def per_seq_cost_s(self, total_tokens: np.ndarray) -> np.ndarray:
        """h per request (s per sequence per iteration) for requests of ``total_tokens``."""
        per_seq = self.step.iter_per_seq_s
        if self.seq_cost is SeqCostScaling.REQUEST_LENGTH:
            return per_seq * np.asarray(total_tokens, dtype=np.float64) / self.ref_context_tokens
        return np.full(np.shape(total_tokens), per_seq)


def _frozen(values: np.ndarray) -> np.ndarray:
    out = np.array(values, dtype=np.float64)
    out.flags.writeable = False
    return out


@dataclass(frozen=True, eq=False)
class ServiceMoments:
    """Per-slot service-time moments and the zero-wait TTFT distribution of a pool.

    Attributes
    ----------
    mean_s : E[S], seconds a request holds one KV slot (μ = 1/E[S] per slot).
    cs2 : Cs² = Var[S]/E[S]².
    n_slots : KV slots (servers) per GPU.
    prefill_s : T_prefill per request point, seconds (sorted by zero-wait TTFT).
    first_token_iter_s : the t_iter(n_prefill) that eq. (5) adds after prefill, seconds.
    weight : probability of each point (sums to 1).
    """

    mean_s: float
    cs2: float
    n_slots: int
    prefill_s: np.ndarray
    first_token_iter_s: np.ndarray
    weight: np.ndarray

    def __post_init__(self) -> None:
        if not (np.isfinite(self.mean_s) and self.mean_s > 0):
            raise ConfigError(f"mean service time {self.mean_s!r} s is invalid: it must be finite and > 0")
        if not (np.isfinite(self.cs2) and self.cs2 >= 0):
            raise ConfigError(f"service-time Cs²={self.cs2!r} is invalid: it must be finite and >= 0")
        if int(self.n_slots) != self.n_slots or self.n_slots < 1:
            raise ConfigError(f"n_slots={self.n_slots!r} is invalid: it must be a whole number >= 1")
        arrays = [_frozen(a) for a in (self.prefill_s, self.first_token_iter_s, self.weight)]
        if len({a.shape for a in arrays}) != 1 or arrays[0].ndim != 1 or arrays[0].size == 0:
            raise ConfigError(
                "prefill_s, first_token_iter_s and weight must be 1-D arrays of one non-zero length"
            )
        times = arrays[0] + arrays[1]
        if not (np.isfinite(times).all() and min(arrays[0].min(), arrays[1].min()) >= 0):
            raise ConfigError("prefill and first-token times must be finite and >= 0 seconds")
        if arrays[2].min() < 0 or abs(arrays[2].sum() - 1.0) > _WEIGHT_SUM_ATOL:
            raise ConfigError(f"weights must be >= 0 and sum to 1, got sum {arrays[2].sum()!r}")
        if times.size > 1 and (times[1:] < times[:-1]).any():
            raise ConfigError("request points must be sorted by zero-wait TTFT (prefill + first iteration)")
        for name, arr in zip(("prefill_s", "first_token_iter_s", "weight"), arrays, strict=True):
            object.__setattr__(self, name, arr)

    @property
    def mean_gpu_s(self) -> float:
        """Eq. (4): GPU-level mean service time E[S]/n_max, seconds."""
        return self.mean_s / self.n_slots

    @property
    def zero_wait_ttft_s(self) -> np.ndarray:
        """TTFT of each point with no queueing delay, seconds (ascending)."""
        return self.prefill_s + self.first_token_iter_s

    @functools.cached_property
    def zero_wait(self) -> ZeroWaitTtft:
        """The zero-wait TTFT distribution (computed once) used by ``ttft``/``sizing``."""
        return ZeroWaitTtft(self.zero_wait_ttft_s, self.weight)

    @property
    def mean_prefill_s(self) -> float:
        """E[T_prefill], seconds."""
        return float(self.weight @ self.prefill_s)


def pool_service_moments(
    prompt_tokens: np.ndarray,
    output_tokens: np.ndarray,
    weight: np.ndarray,
    model: ServiceModel,
) -> ServiceMoments:
    """Service-time moments (eqs. 3-4) and zero-wait TTFT (eq. 5) of one pool.

    Parameters
    ----------
    prompt_tokens, output_tokens : array
        L_in and L_out of the pool's request points (tokens, >= 0, L > 0), e.g. from
        ``Workload.quadrature`` restricted to the pool.
    weight : array
        Relative probability of each point (>= 0, positive sum; renormalised to 1).
    model : ServiceModel
        Step model, slots, chunk, prefill concurrency and H scaling.

    Returns
    -------
    ServiceMoments
        E[S] (s per slot), Cs², and prefill / first-token times per point (s).
    """
    prompt = np.asarray(prompt_tokens, dtype=np.float64)
    output = np.asarray(output_tokens, dtype=np.float64)
    w = np.asarray(weight, dtype=np.float64)
    if prompt.ndim != 1 or prompt.shape != output.shape or prompt.shape != w.shape or prompt.size == 0:
        raise ConfigError(
            f"prompt, output and weight arrays have shapes {prompt.shape}, {output.shape}, {w.shape}: "
            "they must be 1-D, non-empty and of equal length"
        )
    total = prompt + output
    if not np.all(np.isfinite(total) & (prompt >= 0) & (output >= 0) & (total > 0)):
        raise ConfigError("token counts must be finite, >= 0 and prompt + output > 0 for every request point")
    if not np.all(np.isfinite(w) & (w >= 0)) or w.sum() <= 0:
        raise ConfigError("weights must be finite, >= 0 and have a positive sum")
    w = w / w.sum()
    per_seq_s = model.per_seq_cost_s(total)
    iterations = np.ceil(prompt / model.chunk_tokens) + output
    service_s = iterations * (model.step.iter_base_s + per_seq_s * model.n_slots)
    mean_s = float(w @ service_s)
    cs2 = float(w @ (service_s - mean_s) ** 2) / mean_s**2
    prefill_iter_s = model.step.iter_base_s + per_seq_s * model.prefill_concurrency
    prefill_s = np.ceil(prompt / model.chunk_tokens) * prefill_iter_s
    order = np.argsort(prefill_s + prefill_iter_s, kind="stable")
    return ServiceMoments(
        mean_s=mean_s,
        cs2=cs2,
        n_slots=int(model.n_slots),
        prefill_s=prefill_s[order],
        first_token_iter_s=prefill_iter_s[order],
        weight=w[order],
    )
