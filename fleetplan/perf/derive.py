"""Linear serving constants (W, H, n_max, chunk) for the analytical phase from the predictor.

The analytical sweep (``fleetplan.queueing``) uses the core paper's eq. 3,
``t_iter(n) = W + H n`` with H the cost of one sequence at a reference context L_ref.
From ``StepTimePredictor`` (pure-decode steps, ``t(n, L)`` = n sequences of L tokens):

    W = 2 t(1, 0) - t(2, 0)                  intercept at zero KV reads: the step of one
                                             sequence minus its own per-sequence part
    H = (t(n_ref, L_ref) - W) / n_ref         secant per sequence up to the operating batch

with ``n_ref = min(n_max(L_ref), max_num_seqs)``, so eq. 3 is exact at the two points the
sweep relies on: an idle engine and a full batch (where eqs. 4-5 evaluate ``t_iter``).
``n_max`` and ``kv_blocks`` come from ``kv_budget`` (vLLM's start-up memory accounting).

Chunk size (a documented choice): ``chunk_tokens`` = 4 x the GEMM ridge point, rounded to
the nearest power of two and clamped to [``MIN_CHUNK_TOKENS``, ``MAX_CHUNK_TOKENS``].  The
ridge ``T*`` (tokens at which the step's GEMMs turn from weight-bandwidth- to
compute-bound, ``c[2] / c[1]``) is where a prefill chunk starts to cost more than a decode
step; at 4 T* weight streaming is <= 25 % of the chunk's GEMM time, while the chunk stays
short enough not to stall decodes for long.  It reproduces the core paper's choices for
Llama-3-70B (A100 512, H100 1024; paper §4.6) at the parallelism of
``docs/step_time_validation.md``.
"""

from __future__ import annotations

import math

from fleetplan.errors import InfeasibleError
from fleetplan.hardware import GpuProfile, ServingConstants
from fleetplan.hardware.serving import DEFAULT_BLOCK_SIZE_TOKENS, DEFAULT_REF_CONTEXT_TOKENS
from fleetplan.models import Dtype, ModelConfig
from fleetplan.perf.kv_budget import DEFAULT_MAX_NUM_SEQS, kv_budget
from fleetplan.perf.overheads import PredictorOptions
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.perf.quant import fp8_scaling_of

__all__ = ["derive_serving_constants", "linear_constants", "chunk_tokens_for", "MIN_CHUNK_TOKENS", "MAX_CHUNK_TOKENS",
           "CHUNK_RIDGE_MULTIPLE"]

CHUNK_RIDGE_MULTIPLE = 4.0
MIN_CHUNK_TOKENS = 256
MAX_CHUNK_TOKENS = 8192


def chunk_tokens_for(predictor: StepTimePredictor) -> int:
    """Chunked-prefill size: 4 x the GEMM ridge point as a power of two (module docstring)."""
    coef = predictor.kernel_coefficients()[1]
    ridge_tokens = coef[2] / coef[1]
    chunk = 2 ** round(math.log2(max(CHUNK_RIDGE_MULTIPLE * ridge_tokens, 1.0)))
    return int(min(max(chunk, MIN_CHUNK_TOKENS), MAX_CHUNK_TOKENS))


def linear_constants(step_model, n_ref: int, context_tokens: int) -> tuple[float, float]:
    """(W, H) of eq. 3 from any step model's pure-decode steps ``t_iter_s`` (module docstring):
    W = 2 t(1, 0) - t(2, 0), H = (t(n_ref, context_tokens) - W) / n_ref, seconds."""
    t1 = float(step_model.t_iter_s(1, 0.0))
    w_s = 2.0 * t1 - float(step_model.t_iter_s(2, 0.0))
    return w_s, (float(step_model.t_iter_s(n_ref, float(context_tokens))) - w_s) / n_ref


def derive_serving_constants(
    model: ModelConfig,
    gpu: GpuProfile,
    par: Parallelism,
    *,
    context_tokens: int = DEFAULT_REF_CONTEXT_TOKENS,
    weight_dtype: Dtype = Dtype.BF16,
    kv_dtype: Dtype = Dtype.BF16,
    options: PredictorOptions | None = None,
    gpu_memory_utilization: float | None = 0.9,
    block_size_tokens: int = DEFAULT_BLOCK_SIZE_TOKENS,
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS,
    chunk_tokens: int | None = None,
    engine: str = "vllm",
    engine_version: str | None = None,
) -> ServingConstants:
    """``ServingConstants`` (W, H at ``context_tokens``, KV blocks, chunk) of one replica.

    Parameters
    ----------
    model, gpu, par : ModelConfig, GpuProfile, Parallelism
        What is served, on which GPU, sharded how (one replica = ``par.gpus_per_replica`` GPUs).
    context_tokens : int
        Reference context L_ref of H (8192, the paper's).
    weight_dtype, kv_dtype : Dtype
        Storage types of weights and KV cache.
    options : PredictorOptions or None
        Efficiencies and overheads of the step-time predictor (None: the defaults).
    gpu_memory_utilization, block_size_tokens : float or None, int
        The memory fraction in ``engine``'s meaning (None: its default) and KV block size (for ``kv_budget``).
    engine, engine_version : str, str or None
        The engine whose memory accounting and loaders ``kv_budget`` applies, at that release (None: a current one).
    max_num_seqs : int
        Cap on the operating batch ``n_ref`` (vLLM ``max_num_seqs``).
    chunk_tokens : int or None
        Chunked-prefill size; None picks ``chunk_tokens_for`` (module docstring).

    Raises
    ------
    InfeasibleError
        The KV cache cannot hold one sequence of ``context_tokens``.
    """
    predictor = StepTimePredictor(model, gpu, par, weight_dtype, kv_dtype, options or PredictorOptions(),
                                  fp8_scaling_of(model.weight_block_size))
    budget = kv_budget(model, gpu, par, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                       gpu_memory_utilization=gpu_memory_utilization, block_size_tokens=block_size_tokens,
                       engine=engine, engine_version=engine_version)
    blocks_per_seq = -(-context_tokens // block_size_tokens)
    n_max = budget.kv_blocks_per_replica // blocks_per_seq
    if n_max < 1:
        raise InfeasibleError(
            f"{model.name} on {par.gpus_per_replica}x {gpu.name} ({par.flags()}): {budget.kv_blocks_per_replica} "
            f"KV blocks cannot hold one {context_tokens}-token sequence; raise the tensor-parallel size, "
            f"quantise the KV cache (`kv_dtype` fp8) or lower the reference context"
        )
    n_ref = min(n_max, max_num_seqs)
    w_s, h_s = linear_constants(predictor, n_ref, context_tokens)
    return ServingConstants(
        iter_base_s=w_s, iter_per_seq_s=h_s, kv_blocks=int(budget.kv_blocks_per_replica),
        block_size_tokens=block_size_tokens,
        chunk_tokens=chunk_tokens if chunk_tokens is not None else chunk_tokens_for(predictor),
        ref_context_tokens=int(context_tokens), model=model.name,
    )
