"""One engine step's batch: prefill chunks with their context offsets and decode contexts.

Batch syntax (``parse_batch``; the CLI's ``perf explain`` batch), parts separated by ``;``:

    prefill=TOKENS@OFFSET[,TOKENS@OFFSET...]   chunks of TOKENS new prompt tokens whose KV
                                               already holds OFFSET tokens (``@0`` = first chunk)
    decode=COUNTxCONTEXT[,COUNTxCONTEXT...]    COUNT decode requests each holding CONTEXT tokens

Example: ``prefill=2048@0,512@4096;decode=128x1024,2x32000`` is a 2048-token first chunk,
a 512-token chunk continuing a 4096-token prompt, 128 decodes at 1K and 2 at 32K context.
Either part may be omitted; a batch needs at least one request.

Aggregates (what the simulator kernel keeps incrementally): ``n_seqs``, ``n_decode``,
``prefill_tokens``, ``decode_context_tokens`` (sum of decode contexts) and the doubled
prefill attention work ``attn2 = sum c (2 o + c)`` (an exact integer; the work is attn2/2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError

__all__ = ["BatchComposition", "parse_batch", "BATCH_SYNTAX"]

BATCH_SYNTAX = "prefill=TOKENS@OFFSET,...;decode=COUNTxCONTEXT,..."


def _int_array(name: str, values) -> np.ndarray:
    arr = np.asarray(values if values is not None else [], dtype=np.float64).ravel()
    if arr.size and (not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr))):
        raise ConfigError(f"batch {name} must be whole token counts, got {values!r}")
    return arr.astype(np.int64)


@dataclass(frozen=True, eq=False)
class BatchComposition:
    """Prefill chunks ``(prefill_tokens[i], prefill_offsets[i])`` and decode contexts (tokens)."""

    prefill_tokens: np.ndarray
    prefill_offsets: np.ndarray
    decode_context_tokens: np.ndarray

    def __post_init__(self) -> None:
        chunks = _int_array("prefill tokens", self.prefill_tokens)
        offsets = _int_array("prefill offsets", self.prefill_offsets)
        contexts = _int_array("decode contexts", self.decode_context_tokens)
        if chunks.shape != offsets.shape:
            raise ConfigError(f"{chunks.size} prefill chunks but {offsets.size} offsets; give one offset per chunk")
        if np.any(chunks < 1) or np.any(offsets < 0) or np.any(contexts < 1):
            raise ConfigError("prefill chunks need >= 1 token, offsets >= 0 and decode contexts >= 1 token")
        if chunks.size + contexts.size == 0:
            raise ConfigError(f"the batch is empty; give at least one request ({BATCH_SYNTAX})")
        for name, arr in (("prefill_tokens", chunks), ("prefill_offsets", offsets),
                          ("decode_context_tokens", contexts)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    @classmethod
    def uniform(cls, n_decode: int = 0, context_tokens: int = 1, n_prefill: int = 0, chunk_tokens: int = 1,
                offset_tokens: int = 0) -> BatchComposition:
        """``n_decode`` decodes at one context plus ``n_prefill`` equal chunks at one offset."""
        return cls(np.full(n_prefill, chunk_tokens), np.full(n_prefill, offset_tokens),
                   np.full(n_decode, context_tokens))

    @property
    def n_decode(self) -> int:
        return int(self.decode_context_tokens.size)

    @property
    def n_seqs(self) -> int:
        return int(self.prefill_tokens.size) + self.n_decode

    @property
    def n_prefill_tokens(self) -> int:
        return int(self.prefill_tokens.sum())

    @property
    def n_tokens(self) -> int:
        """Tokens through the GEMMs: every prefill token plus one per decode."""
        return self.n_prefill_tokens + self.n_decode

    @property
    def decode_context_sum(self) -> int:
        return int(self.decode_context_tokens.sum())

    @property
    def attn2(self) -> int:
        """Twice the prefill attention work: ``sum c (2 o + c)`` (exact integer)."""
        c, o = self.prefill_tokens, self.prefill_offsets
        return int(np.sum(c * (2 * o + c)))

    def kv_blocks(self, block_size_tokens: int) -> int:
        """PagedAttention blocks the batch's requests hold after this step: each prefill chunk
        ``ceil((OFFSET + TOKENS) / block)``, each decode ``ceil(CONTEXT / block)``."""
        if int(block_size_tokens) != block_size_tokens or block_size_tokens < 1:
            raise ConfigError(f"block size {block_size_tokens!r} must be a whole number of tokens >= 1")
        b = int(block_size_tokens)
        held = np.concatenate((self.prefill_offsets + self.prefill_tokens, self.decode_context_tokens))
        return int(np.sum(-(-held // b)))

    @property
    def attention_work(self) -> float:
        """Prefill attention work ``sum c (o + c / 2)`` in token pairs."""
        return self.attn2 * 0.5


def _parse_pairs(text: str, sep: str, what: str) -> list[tuple[int, int]]:
    pairs = []
    for item in text.split(","):
        left, mark, right = item.strip().partition(sep)
        if not mark or not left.strip().isdigit() or not right.strip().isdigit():
            raise ConfigError(f"batch {what} item {item.strip()!r} must look like N{sep}M with whole numbers; "
                              f"syntax {BATCH_SYNTAX}")
        pairs.append((int(left), int(right)))
    return pairs


def parse_batch(text: str) -> BatchComposition:
    """Parse the batch syntax of the module docstring."""
    chunks: list[tuple[int, int]] = []
    decodes: list[tuple[int, int]] = []
    seen = set()
    for part in str(text).split(";"):
        if not part.strip():
            continue
        key, eq, value = part.partition("=")
        key = key.strip().lower()
        if not eq or key not in ("prefill", "decode") or key in seen:
            raise ConfigError(f"batch part {part.strip()!r} must be prefill=... or decode=... (each once); "
                              f"syntax {BATCH_SYNTAX}")
        seen.add(key)
        if key == "prefill":
            chunks = _parse_pairs(value, "@", "prefill")
        else:
            decodes = _parse_pairs(value.lower(), "x", "decode")
    contexts = [ctx for count, ctx in decodes for _ in range(count)]
    return BatchComposition(np.array([c for c, _ in chunks], dtype=np.int64),
                            np.array([o for _, o in chunks], dtype=np.int64), np.array(contexts, dtype=np.int64))
