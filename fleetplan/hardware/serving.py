"""Calibrated serving constants of the core paper (inference-fleet-sim, §2.1 and §3.2).

Each calibrated GPU carries the paper's Llama-3-70B constants for continuous batching:

    t_iter(n) = W + H * n                                        (paper eq. 3)

with ``W = iter_base_s`` (per-iteration base cost) and ``H = iter_per_seq_s`` (cost per
sequence in the batch).  The KV cache is paged in blocks of ``block_size_tokens``
tokens (vLLM PagedAttention); a sequence of ``L`` tokens holds ``ceil(L / block)``
blocks, so the number of sequences that fit at once is

    n_max(L) = floor(kv_blocks / ceil(L / block_size_tokens))

The paper quotes ``n_max`` at an 8K-token reference context (``ref_context_tokens``):
A10G 64, A100-80GB 128, H100 256, i.e. 32,768 / 65,536 / 131,072 blocks of 16 tokens.
``chunk_tokens`` is the chunked-prefill size (paper §4.6: A100 512, H100 1024).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError

__all__ = ["ServingConstants", "DEFAULT_BLOCK_SIZE_TOKENS", "DEFAULT_REF_CONTEXT_TOKENS"]

DEFAULT_BLOCK_SIZE_TOKENS = 16  # vLLM's default KV block size; the paper's profiles use it
DEFAULT_REF_CONTEXT_TOKENS = 8192  # the paper's n_max column is "n_max at 8K ctx"


def _positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ConfigError(f"serving {name}={value!r} must be a positive integer; fix the [serving] table")


def _positive_float(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value <= 0:
        raise ConfigError(f"serving {name}={value!r} must be a finite number > 0; fix the [serving] table")


@dataclass(frozen=True)
class ServingConstants:
    """Linear step-time and KV-capacity constants of one GPU serving one model.

    Attributes
    ----------
    iter_base_s : float
        W, seconds per decode iteration regardless of batch size.
    iter_per_seq_s : float
        H, extra seconds per iteration for each sequence in the batch.
    kv_blocks : int
        KV-cache blocks available for sequences (per serving instance).
    block_size_tokens : int
        Tokens per KV block.
    chunk_tokens : int
        Chunked-prefill size: prompt tokens processed per iteration.
    ref_context_tokens : int
        Context length at which the paper quotes ``n_max`` (8192).
    model : str
        The served model these constants were calibrated for.
    """

    iter_base_s: float
    iter_per_seq_s: float
    kv_blocks: int
    block_size_tokens: int
    chunk_tokens: int
    ref_context_tokens: int
    model: str

    def __post_init__(self) -> None:
        _positive_float("iter_base_s", self.iter_base_s)
        _positive_float("iter_per_seq_s", self.iter_per_seq_s)
        for name in ("kv_blocks", "block_size_tokens", "chunk_tokens", "ref_context_tokens"):
            _positive_int(name, getattr(self, name))
        if not isinstance(self.model, str) or not self.model.strip():
            raise ConfigError("serving model must be a non-empty name such as 'Llama-3-70B'")
        if self.n_max(self.ref_context_tokens) < 1:
            raise ConfigError(
                f"serving kv_blocks={self.kv_blocks} cannot hold one {self.ref_context_tokens}-token "
                f"sequence; raise kv_blocks or lower ref_context_tokens"
            )

    def n_max(self, context_tokens: int | float | np.ndarray) -> int | np.ndarray:
        """Concurrent sequences that fit when each holds ``context_tokens`` tokens.

        ``floor(kv_blocks / ceil(context_tokens / block_size_tokens))``.

        Parameters
        ----------
        context_tokens : int, float or array
            Tokens held per sequence (prompt + generated), > 0.

        Returns
        -------
        int or numpy.ndarray of int64
            An ``int`` for scalar input, an array of the input's shape otherwise.
        """
        if type(context_tokens) is int and context_tokens > 0:  # a plain count (a pool's bound): integer math
            return int(self.kv_blocks) // -(-context_tokens // int(self.block_size_tokens))
        ctx = np.asarray(context_tokens)
        if ctx.dtype.kind not in "iuf":
            raise ConfigError(f"context_tokens={context_tokens!r} must be numeric token counts")
        if ctx.size and (not np.all(np.isfinite(ctx)) or np.any(ctx <= 0)):
            raise ConfigError("context_tokens must be finite and > 0; give token counts of at least 1")
        if ctx.dtype.kind == "f":
            blocks = np.ceil(ctx / self.block_size_tokens).astype(np.int64)
        else:
            blocks = -(-ctx.astype(np.int64) // self.block_size_tokens)
        n = np.int64(self.kv_blocks) // blocks
        return int(n) if n.ndim == 0 else n
