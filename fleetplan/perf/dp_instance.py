"""A data-parallel-attention instance seen as one engine: its batch split evenly over its ranks.

With attention data parallelism (``Parallelism.attn_dp`` = D > 1: vLLM ``data_parallel_size`` with
expert parallelism, SGLang ``enable_dp_attention``) each of the D ranks schedules its own batch
from its own KV cache, and the ranks step together (the expert all-to-all joins them).  The
predictor times one rank's batch (``fleetplan.perf.predictor``: "the batch is one DP rank's; the
experts see dp times its tokens").  The planner and the simulator see an instance as one engine
whose batch holds every rank's requests (``ServingConstants.kv_blocks`` counts all D caches), so
a batch of aggregates ``x`` (sequences, tokens, context, prefill attention work) is timed as D
ranks of ``x / D`` each (a balanced split, as vLLM's DP load balancer aims for):

    step_instance(x) = step_rank(x / D)

Both step codes (``fleetplan.perf.linear``) are exact under that substitution by changing their
coefficients, so the simulator kernel and the analytic engine model evaluate it unchanged:

* every cost per unit of an aggregate is divided by D (``c[1..4]`` of ``STEP_MODEL_LINEAR``;
  ``c[1], c[3], c[4], c[7..12], c[17], c[18], c[20]`` and the miss exponent ``c[15]`` of ``STEP_MODEL_ROOFLINE``; the
  window term is of degree one in its aggregates, so its keys ``c[19]`` stay);
  ``c[0]``, the weight-streaming ``c[2]`` and the MoE hit costs ``c[14], c[16], c[21]`` stay;
* the routed-expert sampling noise ``c[13] sqrt(T)`` becomes ``c[13] / sqrt(D)``;
* tile padding: ``ceil(T / (D t)) t = ceil(T / (D t)) (D t) / D``, so the tile ``c[5]`` is
  multiplied by D (and the wave ratio ``c[6]``, per tile, stays).

The instance's chunked-prefill budget is ONE rank's chunk (``plan.placement``), not the ranks' together.
A prompt is prefilled by one rank, in ``p / chunk_rank`` steps; the instance view takes as many steps, each
of the split cost ``step_rank((n + chunk_rank) / D)`` -- short of the engine's ``step_rank(n / D +
chunk_rank)`` while one rank prefills (the others wait for it at the all-to-all), but with the right step
count.  The ranks' budgets together (``D x`` a rank's chunk, as built first) took ``p / (D chunk_rank)`` steps
of ``step_rank(chunk_rank)``: a long prompt's prefill came out up to D times short, and the analytic engine
model (a queued prompt waits for a full-budget step, ``queueing.engine``) and the simulator (whose steps never
filled a budget D times a prompt) disagreed on the DP pools of the agreement grid: P99 TTFT simulated /
analytic 0.33-0.84 on DeepSeek-V3 ``dp8`` (H200, B200) and Qwen3-235B ``dp16`` (two H100 nodes), 0.87-1.32
with one rank's chunk (the MoE scenarios of ``benchmarks/bench_agreement.py``).  Sizing the pool in ranks
(one engine per rank at ``lambda / D``, ``ceil(ranks / D)`` instances) would be exact; that is the pool
sizer's.

Without the split the sweep timed an instance batch of n sequences as n per rank: DeepSeek-V3
or Qwen3-235B at ``tp1 dp16`` on H100 ran 4.2x too few sequences per second at 256 sequences.
The balanced split is optimistic where ranks are unevenly loaded (the slowest rank sets the step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.perf.linear import STEP_MODEL_LINEAR, STEP_MODEL_ROOFLINE, step_time_array_s
from fleetplan.perf.seam import StepModel

__all__ = ["DataParallelInstance", "attention_dp_ranks", "per_rank_limit", "per_rank_token_budget",
           "split_step_coefficients", "sglang_chunked_prefill_total"]

#: ``STEP_MODEL_ROOFLINE`` coefficients per unit of a batch aggregate (divided by D).
_ROOFLINE_PER_UNIT = (1, 3, 4, 7, 8, 9, 10, 11, 12, 15, 17, 18, 20)
_ROOFLINE_TILE, _ROOFLINE_MOE_NOISE = 5, 13


def split_step_coefficients(code: int, coef: np.ndarray, ranks: int) -> np.ndarray:
    """``coef`` of step code ``code`` evaluated on batch aggregates ``x`` giving the step of ``x / ranks``
    (module docstring)."""
    if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
        raise ConfigError(f"data-parallel ranks {ranks!r} must be a whole number >= 1", param="data_parallel_size",
                          value=ranks)
    out = np.array(coef, dtype=np.float64)
    if code == STEP_MODEL_LINEAR:
        out[1:5] /= ranks
    elif code == STEP_MODEL_ROOFLINE:
        for i in _ROOFLINE_PER_UNIT:
            out[i] /= ranks
        out[_ROOFLINE_MOE_NOISE] /= math.sqrt(ranks)
        out[_ROOFLINE_TILE] *= ranks
    else:
        raise ConfigError(f"step-model code {code} is unknown: cannot split its batch over data-parallel ranks")
    return out


@dataclass(frozen=True)
class DataParallelInstance:
    """``base`` (one rank's step model) for an instance of ``ranks`` attention-DP ranks (module docstring)."""

    base: StepModel
    ranks: int

    def __post_init__(self) -> None:
        if not isinstance(self.base, StepModel):
            raise ConfigError(f"DataParallelInstance needs a StepModel, got {type(self.base).__name__}")
        split_step_coefficients(STEP_MODEL_LINEAR, np.zeros(5), self.ranks)  # validates ranks

    def kernel_coefficients(self) -> tuple[int, np.ndarray]:
        return self.instance_coefficients(*self.base.kernel_coefficients())

    def instance_coefficients(self, code: int, coef: np.ndarray) -> tuple[int, np.ndarray]:
        """A rank's step ``(code, coef)`` (the base's step, or a pass every rank runs over its own batch,
        e.g. an MTP draft) as the instance's: the batch split over the ranks."""
        return code, split_step_coefficients(code, coef, self.ranks)

    def t_iter_s(self, n_seqs: float | np.ndarray, context_tokens: float | np.ndarray | None = None):
        """A pure-decode step of ``n_seqs`` sequences over the whole instance, ``context_tokens`` each
        (None: zero context), i.e. the base's step of ``n_seqs / ranks`` per rank."""
        code, coef = self.kernel_coefficients()
        n = np.asarray(n_seqs, dtype=np.float64)
        ctx = n * (0.0 if context_tokens is None else np.asarray(context_tokens, dtype=np.float64))
        out = step_time_array_s(code, coef, n, n, 0.0, ctx, 0.0)
        return float(out) if np.ndim(out) == 0 else out


def attention_dp_ranks(step: object) -> int:
    """Attention data-parallel ranks of the instance ``step`` times (1: one engine), read through any
    wrapper with a ``base`` (``perf.scaled.ScaledStepModel``)."""
    ranks = 1
    while step is not None:
        if isinstance(step, DataParallelInstance):
            ranks *= step.ranks
        step = getattr(step, "base", None)
    return ranks


def per_rank_limit(instance_limit: int, ranks: int) -> int:
    """vLLM's per-rank value of an instance-wide engine limit (vLLM reads ``max_num_seqs`` and
    ``max_num_batched_tokens`` per DP rank): ``floor(instance_limit / ranks)``.

    The instance's sequence limit is its KV cache's ``n_max = floor(ranks b / c)`` (``b`` blocks per rank,
    ``c`` per sequence), and ``floor(floor(ranks b / c) / ranks) = floor(b / c)``: one rank's own ``n_max``;
    its token budget ``n_max + chunk`` (one rank's chunk per instance step, module docstring) gives
    ``floor((n_max + chunk) / ranks)``."""
    if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
        raise ConfigError(f"data-parallel ranks {ranks!r} must be a whole number >= 1", param="data_parallel_size",
                          value=ranks)
    return int(instance_limit) // ranks


def per_rank_token_budget(instance_budget: int, instance_max_seqs: int, ranks: int) -> int:
    """vLLM's per-rank ``max_num_batched_tokens`` of a DP-attention instance whose budget is
    ``n_max + chunk`` (one rank's chunk per instance step, module docstring): each rank runs its own
    scheduler, so a rank's budget is its own decodes plus a whole chunk,
    ``floor(n_max / ranks) + (instance_budget - n_max)`` (not ``floor(budget / ranks)``, which would
    leave a rank less than one chunk)."""
    chunk = max(int(instance_budget) - int(instance_max_seqs), 1)
    return per_rank_limit(instance_max_seqs, ranks) + chunk


def sglang_chunked_prefill_total(instance_budget: int, instance_max_seqs: int, ranks: int) -> int:
    """SGLang's server-wide ``chunked_prefill_size`` of a DP-attention instance: SGLang divides it over
    its ``dp_size`` ranks (``server_args.py``), so each rank's chunk ``instance_budget - n_max`` times
    ``ranks``."""
    per_rank_limit(instance_max_seqs, ranks)  # validates ranks
    return max(int(instance_budget) - int(instance_max_seqs), 1) * ranks
