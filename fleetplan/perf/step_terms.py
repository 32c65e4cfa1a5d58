"""The roofline step model's GEMM and MoE terms: the one implementation of both.

Plain functions of ``math`` only, written so that numba compiles them unchanged:
``fleetplan.perf.linear.roofline_step_s`` (and through it ``perf.calibrate`` and
``perf.predictor``) calls them as Python, and the simulator kernels compile them
(``fleetplan.sim._kernels.step_model``, the one module outside ``sim/_kernels`` that the kernels
may import; ``tests/test_layering.py`` says so).  Same code, same operation order, so Python and
kernel step times agree bit for bit.  Coefficient layout and the full expression:
``fleetplan.perf.linear`` module docstring (``T`` = tokens through the GEMMs).
"""

from __future__ import annotations

import math

__all__ = ["roofline_gemm_s", "roofline_moe_s"]


def roofline_gemm_s(coef, n_seqs, n_tokens):
    """``gemm = max(c[1] pad wf + c[8] n_seqs, c[2] + c[7] T + c[9] n_seqs)`` (s): compute with the
    tile padding ``pad`` and wave factor ``wf``, or memory."""
    tile = int(coef[5])
    m_tiles = (n_tokens + tile - 1) // tile
    pad = m_tiles * tile if n_tokens >= tile else n_tokens
    wf = 1.0
    if coef[6] > 0.0 and n_tokens > 0:
        work = m_tiles * coef[6]
        wf = math.ceil(work) / work
    gc = coef[1] * pad * wf + coef[8] * n_seqs
    gm = coef[2] + coef[7] * n_tokens + coef[9] * n_seqs
    return gc if gc > gm else gm


def roofline_moe_s(coef, n_tokens):
    """``moe = max(c[12] T + c[13] sqrt(T), c[14] q + c[16] sqrt(q (1 - q)) + c[17] T)`` (s) with
    ``q = 1 - exp(c[15] T)``; 0 for a dense model (``c[12] = c[14] = 0``)."""
    moe = 0.0
    if coef[12] > 0.0 or coef[14] > 0.0:
        mc = coef[12] * n_tokens + coef[13] * math.sqrt(n_tokens)
        q = 1.0 - math.exp(coef[15] * n_tokens)
        mm = coef[14] * q + coef[16] * math.sqrt(q * (1.0 - q)) + coef[17] * n_tokens
        moe = mc if mc > mm else mm
    return moe
