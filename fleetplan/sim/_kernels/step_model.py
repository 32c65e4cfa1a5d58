"""Step-time models evaluated by the iteration-level kernel (the perf/sim seam).

``STEP_MODEL_LINEAR`` (``fleetplan.perf.linear``) with coefficients ``c[0..7]``:

    step_s = c[0] + c[1] * n_seqs + c[2] * prefill_tokens
             + c[3] * decode_context_tokens + c[4] * prefill_attention_work

where ``prefill_attention_work = sum over prefill chunks of chunk * (offset + chunk / 2)``.
The kernel keeps the attention work doubled as an exact integer,
``attn2 = sum chunk * (2 * offset + chunk)``, so the sum is order-independent, and the
expression above is evaluated in exactly this order (the Python twin does the same, which
is what makes float results match bit for bit).
"""

from __future__ import annotations

from fleetplan.sim._kernels.codes import STEP_MODEL_LINEAR
from fleetplan.sim._kernels.jit import njit_inline


@njit_inline
def step_time_s(code, coef, n_seqs, prefill_tokens, decode_context_tokens, attn2):
    """Duration (s) of one engine step with the given batch aggregates."""
    if code == STEP_MODEL_LINEAR:
        return (coef[0] + coef[1] * n_seqs + coef[2] * prefill_tokens
                + coef[3] * decode_context_tokens + coef[4] * (attn2 * 0.5))
    return -1.0
