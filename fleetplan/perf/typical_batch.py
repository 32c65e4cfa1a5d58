"""A typical engine step of a model on a GPU: the batch ``perf explain`` assumes when given none.

The operating batch is the number of requests a replica keeps running in steady state: vLLM's
``max_num_seqs`` (default ``DEFAULT_MAX_NUM_SEQS``), or fewer when the KV cache cannot hold that many
requests of ``TYPICAL_DECODE_CONTEXT_TOKENS`` each.  The step decodes one token for each of them and
prefills one chunk of a new prompt (``TYPICAL_PREFILL_CHUNK_TOKENS``, within the step's token budget
``DEFAULT_MAX_NUM_BATCHED_TOKENS``), as a chunked-prefill engine does while requests keep arriving.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetplan.perf.kv_budget import DEFAULT_MAX_NUM_BATCHED_TOKENS, DEFAULT_MAX_NUM_SEQS, KvBudget

__all__ = ["TYPICAL_DECODE_CONTEXT_TOKENS", "TYPICAL_PREFILL_CHUNK_TOKENS", "TypicalStep", "typical_step"]

#: Context each running request holds (prompt + tokens generated so far): a chat turn.
TYPICAL_DECODE_CONTEXT_TOKENS = 2048
#: New prompt tokens prefilled in the step (one chunk, from offset 0).
TYPICAL_PREFILL_CHUNK_TOKENS = 2048


@dataclass(frozen=True)
class TypicalStep:
    """The assumed step: ``batch_text`` in ``perf.batch`` syntax and why each number was chosen."""

    n_decode: int
    decode_context_tokens: int
    prefill_chunk_tokens: int
    batch_text: str
    reason: str


def typical_step(budget: KvBudget, max_num_seqs: int = DEFAULT_MAX_NUM_SEQS,
                 max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS,
                 context_tokens: int = TYPICAL_DECODE_CONTEXT_TOKENS,
                 chunk_tokens: int = TYPICAL_PREFILL_CHUNK_TOKENS) -> TypicalStep:
    """The operating batch of ``budget``'s replica decoding at ``context_tokens`` plus one prefill chunk."""
    blocks_per_request = -(-context_tokens // budget.block_size_tokens)
    kv_fit = budget.kv_blocks_per_replica // blocks_per_request
    n = max(1, min(max_num_seqs, kv_fit))
    chunk = max(1, min(chunk_tokens, max_num_batched_tokens - n))
    bound = "max_num_seqs" if n == max_num_seqs else "the KV cache"
    reason = (f"{n} running requests (operating batch, set by {bound}: {kv_fit} fit at {context_tokens} tokens of "
              f"context) decoding one token each, plus one {chunk}-token prefill chunk")
    return TypicalStep(n, context_tokens, chunk, f"prefill={chunk}@0;decode={n}x{context_tokens}", reason)
