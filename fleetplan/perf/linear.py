"""Linear iteration-time model of the core paper (inference-fleet-sim, eq. 3).

    t_iter(n) = W + H * n                                  (eq. 3)

W is the per-iteration base cost (weights streamed once per step), H the cost per
sequence in the batch (KV reads) calibrated at a reference context L_ref (8192
tokens for the paper's constants).  When ``ref_context_tokens`` is set, a
sequence's cost scales with its own context, h = H * context / L_ref, as the
reference fleet simulator does and as ``fleetplan.queueing.service`` integrates
(``SeqCostScaling.REQUEST_LENGTH``): a step of a batch costs
W + (H / L_ref) * sum of the batch's context tokens.  A prefill token in a step
costs ``prefill_s_per_token``; its default with ``from_serving`` is H / L_ref
(one token of KV work), so a request's prefill takes ceil(L_in / chunk) steps of
about the batch's cost, the analytical model's eqs. (4)-(5).  The paper's
constants carry no separate prefill calibration; [Step-time] predictors replace
this with roofline operator costs.

Step-model codes and coefficient layout form the one seam between performance
models and the simulator kernel (see ``fleetplan.sim._kernels``): the kernel gets
``(code, coef[K])`` per pool and evaluates

    step_s = coef[0] + coef[1] * n_seqs + coef[2] * prefill_tokens
             + coef[3] * decode_context_tokens + coef[4] * prefill_attention_work

for ``STEP_MODEL_LINEAR``.  Richer predictors add codes, never arguments.

``STEP_MODEL_ROOFLINE`` (``fleetplan.perf.predictor``) evaluates, with ``T = prefill_tokens
+ n_decode`` (tokens through the GEMMs), ``pad = ceil(T / c[5]) * c[5]`` (``T`` itself below
one tile of ``c[5]`` tokens) and the wave factor
``wf = ceil(m_tiles c[6]) / (m_tiles c[6])`` (1 when ``c[6] = 0``):

    gemm  = max(c[1] pad wf + c[8] n_seqs,  c[2] + c[7] T + c[9] n_seqs)     (roofline)
    q     = 1 - exp(c[15] T)
    moe   = max(c[12] T + c[13] sqrt(T) + c[21] q,  c[14] q + c[16] sqrt(q (1 - q)) + c[17] T)   (0 if c[12]=c[14]=0)
    window = c[18] (n_decode + min(P, (attn2 / 2 + P / 2) / c[19])) + c[20] P   (c[18] (n_decode + P) if c[19] = 0)
    step_s = (c[0] + gemm + c[3] * attn2 / 2 + c[10] T + c[11] n_seqs + moe + window)
             + c[4] * decode_context_tokens

(``c[10]``: per token through the GEMMs, the collectives' slopes and the residual norms,
``fleetplan.perf.predictor``; ``P`` = prefill_tokens; ``window``: attention over at most ``c[19]`` keys
per query, ``c[18]`` seconds per query at the full window, a prefill token charged the keys it has,
``fleetplan.perf.step_terms.roofline_window_s``; ``c[20]``: seconds per prefill token of DeepSeek Sparse Attention's
per-query prefill work outside its keys and pairs, ``fleetplan.perf.attention``)

(the context term last: within a run of identical decode steps everything before it is
loop-invariant, which the compiler hoists out of the kernel's cruise loop)

``roofline_step_s`` is that expression in the kernel's exact order (its GEMM, MoE and window terms are
``fleetplan.perf.step_terms``, which the kernel compiles).  ``N_STEP_COEFS`` was
raised from 8 to 18 for it, to 20 for the window term, to 21 for the sparse-attention prefill query and to 22 for
the MoE hit experts' compute offset ``c[21]`` (``fleetplan.perf.moe``, 'Rows per expert'; mirrored in
``fleetplan.sim._kernels.codes``); a calibrated profile saved with 18, 20 or 21 reads as 22 with zeros for the terms
it lacks (``perf.calibrate``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetplan.perf.step_terms import roofline_gemm_s, roofline_moe_s, roofline_window_s

STEP_MODEL_LINEAR = 0
STEP_MODEL_ROOFLINE = 1
N_STEP_COEFS = 22
#: ``STEP_MODEL_ROOFLINE`` coefficients that are not costs: tile tokens, wave ratio, MoE miss exponent, window keys
#: (every other coefficient of either code is seconds per unit of a batch aggregate).
ROOFLINE_SHAPE_COEFS = (5, 6, 15, 19)


@dataclass(frozen=True)
class LinearStepModel:
    """``t = W + H * n + prefill_s_per_token * prefill_tokens`` (seconds)."""

    iter_base_s: float
    iter_per_seq_s: float
    prefill_s_per_token: float = 0.0
    ref_context_tokens: float | None = None  # None: H per sequence; else H * context / ref

    def __post_init__(self) -> None:
        if self.ref_context_tokens is not None and not (
            np.isfinite(self.ref_context_tokens) and self.ref_context_tokens > 0
        ):
            raise ValueError(f"ref_context_tokens must be > 0 or None, got {self.ref_context_tokens}")
        for name in ("iter_base_s", "iter_per_seq_s", "prefill_s_per_token"):
            value = getattr(self, name)
            if not np.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be finite and >= 0, got {value}")

    @classmethod
    def from_serving(cls, serving, prefill_s_per_token: float | None = None) -> LinearStepModel:
        """Build from ``hardware.ServingConstants`` (W, H at the reference context L_ref):
        per-sequence cost scaled by context; ``prefill_s_per_token`` defaults to H / L_ref."""
        ref = float(serving.ref_context_tokens)
        if prefill_s_per_token is None:
            prefill_s_per_token = serving.iter_per_seq_s / ref
        return cls(serving.iter_base_s, serving.iter_per_seq_s, prefill_s_per_token, ref)

    def t_iter_s(
        self, n_seqs: float | np.ndarray, context_tokens: float | np.ndarray | None = None
    ) -> float | np.ndarray:
        """Eq. (3): a decode iteration of ``n_seqs`` sequences of ``context_tokens`` each.

        With ``ref_context_tokens`` set, the per-sequence cost is H * context / L_ref
        (``context_tokens=None`` means L_ref, i.e. H); otherwise it is H.
        """
        n = np.asarray(n_seqs, dtype=np.float64)
        per_seq = self.iter_per_seq_s
        if self.ref_context_tokens is not None and context_tokens is not None:
            per_seq = per_seq * np.asarray(context_tokens, dtype=np.float64) / self.ref_context_tokens
        return self.iter_base_s + per_seq * n

    def kernel_coefficients(self) -> tuple[int, np.ndarray]:
        """``(STEP_MODEL_LINEAR, coef)`` for the simulator kernel."""
        coef = np.zeros(N_STEP_COEFS, dtype=np.float64)
        coef[0] = self.iter_base_s
        coef[2] = self.prefill_s_per_token
        if self.ref_context_tokens is None:
            coef[1] = self.iter_per_seq_s
        else:
            coef[3] = self.iter_per_seq_s / self.ref_context_tokens
        return STEP_MODEL_LINEAR, coef


def roofline_step_s(coef: np.ndarray, n_seqs: int, n_decode: int, prefill_tokens: int,
                    decode_context_tokens: int, attn2: int) -> float:
    """``STEP_MODEL_ROOFLINE`` step time (s), in the simulator kernel's exact order (module docstring)."""
    n_tokens = prefill_tokens + n_decode
    gemm = roofline_gemm_s(coef, n_seqs, n_tokens)
    moe = roofline_moe_s(coef, n_tokens)
    window = roofline_window_s(coef, n_decode, prefill_tokens, attn2)
    return (coef[0] + gemm + coef[3] * (attn2 * 0.5) + coef[10] * n_tokens + coef[11] * n_seqs + moe + window
            + coef[4] * decode_context_tokens)


def step_time_array_s(code: int, coef: np.ndarray, n_seqs, n_decode, prefill_tokens, decode_context_tokens,
                      attn2) -> np.ndarray:
    """The simulator's step time (s) evaluated on broadcast numpy arrays of batch aggregates.

    The same expressions as the kernel's ``step_time_s`` (module docstring) for the analytic side
    (``fleetplan.queueing.engine``), which needs thousands of steps at once; aggregates may be
    fractional (mean batches).  Rounding may differ from the kernel in the last bit; where bit
    equality matters use ``roofline_step_s``.
    """
    n_seqs = np.asarray(n_seqs, dtype=np.float64)
    n_decode = np.asarray(n_decode, dtype=np.float64)
    prefill = np.asarray(prefill_tokens, dtype=np.float64)
    ctx = np.asarray(decode_context_tokens, dtype=np.float64)
    attn2 = np.asarray(attn2, dtype=np.float64)
    # No attention work (a scalar 0, the analytic side's usual call): its term c · 0 = ±0 adds nothing
    # to the sum before it, which is never -0 (costs and aggregates are >= 0), so it is left out (one
    # pass fewer over a (grid, points) table; the same values)
    no_attn = attn2.ndim == 0 and float(attn2) == 0.0
    if code == STEP_MODEL_LINEAR:
        if no_attn and np.isfinite(coef[4]):
            return coef[0] + coef[1] * n_seqs + coef[2] * prefill + coef[3] * ctx
        return coef[0] + coef[1] * n_seqs + coef[2] * prefill + coef[3] * ctx + coef[4] * (attn2 * 0.5)
    if code != STEP_MODEL_ROOFLINE:
        raise ValueError(f"unknown step-model code {code}")
    n_tokens = prefill + n_decode
    tile = float(coef[5])
    m_tiles = np.ceil(n_tokens / tile)
    pad = np.where(n_tokens >= tile, m_tiles * tile, n_tokens)
    tiles = coef[1] * pad
    if coef[6] > 0.0:
        work = m_tiles * coef[6]
        with np.errstate(divide="ignore", invalid="ignore"):
            tiles = tiles * np.where(work > 0, np.ceil(work) / np.where(work > 0, work, 1.0), 1.0)
    # (else the wave factor is 1: x · 1 = x, a pass left out)
    gemm = np.maximum(tiles + coef[8] * n_seqs, coef[2] + coef[7] * n_tokens + coef[9] * n_seqs)
    out = coef[0] + gemm
    if not (no_attn and np.isfinite(coef[3])):
        out = out + coef[3] * (attn2 * 0.5)
    out = out + coef[10] * n_tokens + coef[11] * n_seqs
    if coef[12] > 0.0 or coef[14] > 0.0:
        q = 1.0 - np.exp(coef[15] * n_tokens)
        mc = coef[12] * n_tokens + coef[13] * np.sqrt(n_tokens) + coef[21] * q
        mm = coef[14] * q + coef[16] * np.sqrt(q * (1.0 - q)) + coef[17] * n_tokens
        out = out + np.maximum(mc, mm)  # else the MoE term is 0 and adds nothing (as above)
    if coef[18] != 0.0 or coef[20] > 0.0:  # else the window term is 0 and adds nothing (as above)
        if coef[19] > 0.0:
            window = coef[18] * (n_decode + np.minimum((attn2 * 0.5 + prefill * 0.5) / coef[19], prefill))
        else:
            window = coef[18] * (n_decode + prefill)
        if coef[20] > 0.0:  # inside the window term, as the kernel's step_terms.roofline_window_s adds it
            window = window + coef[20] * prefill
        out = out + window
    return out + coef[4] * ctx
