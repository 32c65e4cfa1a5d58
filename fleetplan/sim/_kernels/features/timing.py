"""Step durations of the feature kernel (CUDA graphs, speculative drafts) and step statistics.

One step of instance k in pool p with batch aggregates (``n_seqs``, ``n_decode``,
``prefill_tokens`` (chunks), ``spec_tokens`` (Σ k_r), ``decode_ctx``, ``attn2``):

* graph size: ``GRAPH_FULL_DECODE_ONLY`` with every scheduled request decoding and no chunk
  tokens: ``T = n_decode + spec_tokens``; ``GRAPH_PIECEWISE``: ``T`` = all scheduled tokens.
  If ``T <= graph_sizes[p, graph_n[p] - 1]``, ``S`` = the smallest size >= T, ``pad = S - T``;
* verify / target pass: ``x = step_time_s(code, coef, n_seqs + pad, n_decode + pad,
  prefill_tokens + spec_tokens, decode_ctx, attn2)``; graphed: ``x = x - launch_s + replay_s``
  (``+ piecewise_eager_s`` for piecewise);
* drafts: ``dt = x + k_max * step_time_s(draft_code, draft_coef, n_d, n_d, 0, ctx_d, 0)`` when
  ``k_max > 0``, else ``dt = x``.

A run of ``m`` identical pure-decode steps (cruise, no drafts) has step j (>= 1) last
``graph_adjust(base + per_ctx * (ctx + n_seqs * j))`` with ``(base, per_ctx) =
decode_step_parts(code, coef, S or n_seqs)``: bit for bit the step-by-step value.  A
speculative run (every request drafting ``k``; ``K_RSPEC = k``) keeps its step durations in
``kf[k, F_D0 + j]``: its context grows by the accepted drafts (``schedule.spec_run``).
"""

from __future__ import annotations

from fleetplan.sim._kernels.codes import GRAPH_FULL_DECODE_ONLY, GRAPH_PIECEWISE
from fleetplan.sim._kernels.features.state import (
    F_D0,
    F_DT,
    F_START,
    K_CTX,
    K_GSIZE,
    K_GT,
    K_M,
    K_RSPEC,
    K_SEQS,
    K_TOK,
)
from fleetplan.sim._kernels.jit import njit_borrowed, njit_inline
from fleetplan.sim._kernels.step_model import decode_step_parts, step_time_s


@njit_inline
def graph_adjust_s(x, gmode, gtime):
    x = x - gtime[0] + gtime[1]
    if gmode == GRAPH_PIECEWISE:
        x = x + gtime[2]
    return x


@njit_inline
def graph_size(p, n_seqs, n_decode, prefill_tokens, spec_tokens, gmode, graph_sizes, graph_n):
    """``(S, T)`` of the step's graph (``gmode`` = ``graph_mode[p]``), ``S = 0`` when it runs eager."""
    t_tokens = 0
    if gmode == GRAPH_FULL_DECODE_ONLY:
        if n_seqs == n_decode and prefill_tokens == 0:
            t_tokens = n_decode + spec_tokens
    elif gmode == GRAPH_PIECEWISE:
        t_tokens = n_decode + prefill_tokens + spec_tokens
    n = graph_n[p]
    if t_tokens == 0 or n == 0 or t_tokens > graph_sizes[p, n - 1]:
        return 0, t_tokens
    j = 0
    while graph_sizes[p, j] < t_tokens:
        j += 1
    return graph_sizes[p, j], t_tokens


@njit_inline
def batch_time_s(n_seqs, n_decode, prefill_tokens, spec_tokens, decode_ctx, attn2, k_max, n_d, ctx_d,
                 size, t_tokens, code, coef, gmode, gtime, dcode, dcoef):
    """Duration of one step (see the module doc); ``size, t_tokens`` from ``graph_size``; the pool's
    step model ``code, coef``, graph mode and times ``gmode, gtime``, draft model ``dcode, dcoef``."""
    if size > 0:
        pad = size - t_tokens
        x = step_time_s(code, coef, n_seqs + pad, n_decode + pad, prefill_tokens + spec_tokens, decode_ctx,
                        attn2)
        x = graph_adjust_s(x, gmode, gtime)
    else:
        x = step_time_s(code, coef, n_seqs, n_decode, prefill_tokens + spec_tokens, decode_ctx, attn2)
    if k_max > 0:
        x = x + k_max * step_time_s(dcode, dcoef, n_d, n_d, 0, ctx_d, 0)
    return x


@njit_inline
def run_parts(k, ki, code, coef):
    """``(base_s, per_ctx_s)`` of the cruise steps in flight on instance k (step model ``code, coef``)."""
    n_eff = ki[k, K_GSIZE] if ki[k, K_GSIZE] > 0 else ki[k, K_SEQS]
    return decode_step_parts(code, coef, n_eff)


@njit_inline
def run_step_s(k, j, base_s, per_ctx_s, ki, kf, gmode, gtime):
    """Duration of step j >= 1 of the cruise in flight on instance k (graph mode and times ``gmode, gtime``)."""
    if ki[k, K_RSPEC] > 0:
        return kf[k, F_D0 + j]
    x = base_s + per_ctx_s * (ki[k, K_CTX] + ki[k, K_SEQS] * j)
    if ki[k, K_GSIZE] > 0:
        x = graph_adjust_s(x, gmode, gtime)
    return x


@njit_inline
def add_step_stats(k, p, n_done, ki, kf, code, coef, gmode, gtime, stats):
    """Account the first ``n_done`` steps of the run in flight on instance k (pool p's step model
    ``code, coef``, graph mode and times ``gmode, gtime``; ``stats``: ``groups.FeatureStatistics``)."""
    inst_busy_s, inst_seq_s = stats.inst_busy_s, stats.inst_seq_s
    inst_steps, inst_tokens = stats.inst_steps, stats.inst_tokens
    pool_graph_tokens, pool_step_kind = stats.pool_graph_tokens, stats.pool_step_kind
    n_seqs = ki[k, K_SEQS]
    n_eff = ki[k, K_GSIZE] if ki[k, K_GSIZE] > 0 else n_seqs
    base_s, per_ctx_s = decode_step_parts(code, coef, n_eff)
    for j in range(n_done):
        dt = kf[k, F_DT] if j == 0 else run_step_s(k, j, base_s, per_ctx_s, ki, kf, gmode, gtime)
        inst_busy_s[k] += dt
        inst_seq_s[k] += n_seqs * dt
    inst_steps[k] += n_done
    inst_tokens[k] += ki[k, K_TOK] * n_done
    if ki[k, K_GSIZE] > 0:
        pool_graph_tokens[p, 0] += ki[k, K_GT] * n_done
        pool_graph_tokens[p, 1] += (ki[k, K_GSIZE] - ki[k, K_GT]) * n_done
        pool_step_kind[p, 1] += n_done
    else:
        pool_step_kind[p, 0] += n_done


@njit_borrowed
def cut_run(k, p, t_s, ins, pools, fts):
    """A request joins instance k at ``t_s``: end its cruise after the step in progress."""
    ki, kf, step_end_s = ins.ki, ins.kf, ins.step_end_s
    m = ki[k, K_M]
    if m <= 1:
        return
    base_s, per_ctx_s = run_parts(k, ki, pools.pool_step_code[p], pools.pool_step_coef[p])
    gmode, gtime = fts.graph_mode[p], fts.graph_time_s[p]
    t_end = kf[k, F_START] + kf[k, F_DT]
    j = 1
    while t_end <= t_s and j < m:
        t_end += run_step_s(k, j, base_s, per_ctx_s, ki, kf, gmode, gtime)
        j += 1
    ki[k, K_M] = j
    step_end_s[k] = t_end


@njit_borrowed
def steps_by_horizon(k, p, horizon_s, ins, pools, fts):
    """How many steps of the run in flight on instance k end by ``horizon_s``."""
    ki, kf = ins.ki, ins.kf
    base_s, per_ctx_s = run_parts(k, ki, pools.pool_step_code[p], pools.pool_step_coef[p])
    gmode, gtime = fts.graph_mode[p], fts.graph_time_s[p]
    t_end = kf[k, F_START] + kf[k, F_DT]
    j = 0
    while j < ki[k, K_M] and t_end <= horizon_s:
        j += 1
        t_end += run_step_s(k, j, base_s, per_ctx_s, ki, kf, gmode, gtime)
    return j
