"""Engine steps of the iteration-level kernel: scheduling, commit, cruise cut, horizon.

See ``iteration_level.py`` for the model.  State layout (struct of arrays):

* per request: ``generated`` (output tokens emitted; read at (re-)admission) and
  ``next_waiting`` (link of the per-instance waiting queue);
* per instance ``k``: running slots ``run_lo[k] : run_lo[k] + run_len[k]`` in admission
  order; slot ``s`` holds request ``run_req[s]`` with its state kept slot-local for cache
  locality in the row ``run_state[s]``: ``SCHED`` (tokens scheduled this step), ``COMP``
  (tokens with KV held), ``TARGET`` (prompt + generated: tokens needed before the next
  emission), ``GEN``, ``OUT`` (output tokens), ``HELD`` (KV blocks); waiting queue
  ``wait_ends[k] = (head, tail)``; ``free_blocks[k]``; the steps in flight
  ``step_f[k] = (start_s, first_step_s)``, ``step_i[k] = (n_seqs, tokens_per_step, m,
  decode_context_tokens)`` ending at ``step_end_s[k]`` (``inf`` when idle).

Cruise.  When a scheduled batch is pure decode (every running request gets its one
token, nobody admitted or preempted), the next ``m - 1`` steps are identical in
composition until the first completion (``m = min(output - generated)``), as long as the
KV blocks they may need are free (``n * ceil((m - 1) / block) <= free``) and no arrival
joins the instance's queue (and at most ``CRUISE_MAX_STEPS``).  Such a run of ``m`` steps is one event: step ``j`` lasts
``step_time(n, n, 0, ctx + n (j - 1), 0)`` (evaluated as ``base + per_ctx * context`` with
``step_model.decode_step_parts``, bit for bit the same) and the end times are re-summed step by step, so
every float equals the one-step-at-a-time result.  An arrival routed to a cruising
instance cuts the run after the step in progress (``cut_cruise``).  Nothing else can
observe a cruising instance: routing reads outstanding counts and pool tokens, which
change only at completions.

Arrays travel in the named tuples of ``groups.py`` (fields and units listed there), built once by
``iteration_level`` and read by name in the helpers: ``reqs`` (``Requests``), ``slots``
(``Slots``), ``inst`` (``Instances``), ``pools`` (``Pools``), ``outs`` (``Outputs``), ``stats``
(``Statistics``), ``load`` (``Load``); with failures also ``route`` (``Routing``) and ``health``
(``Health``).

Step log (``log_dt_s`` non-empty; ``run_iteration_level_logged``): every committed step that emits
tokens to requests past their first token appends its duration ``log_dt_s[j]`` and that token
count ``log_n[j]`` (a run of ``m`` decode steps appends ``m`` entries); ``log_len[0]`` counts the
entries, ``log_len[1]`` is set to 1 when the arrays were too short (the rest is dropped).  Each
such token's inter-token latency is the duration of the step that produced it (a preempted
request's wait is not in it).
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim._kernels.codes import STATUS_DONE
from fleetplan.sim._kernels.jit import njit_helper, njit_inline
from fleetplan.sim._kernels.routing import add_outstanding
from fleetplan.sim._kernels.step_model import decode_step_parts, step_time_s

# A cruise is cut into runs of at most this many steps: a cut (arrival) re-sums the step
# ends from the run's start, so this bounds that work; ending a run early is exact.
CRUISE_MAX_STEPS = 512

# columns of run_state
SCHED, COMP, TARGET, GEN, OUT, HELD = 0, 1, 2, 3, 4, 5
N_SLOT_FIELDS = 6


@njit_inline
def schedule_step(k, p, t_s, reqs, slots, inst, pools, outs):
    """Form the batch of instance ``k`` at ``t_s``; sets ``step_end_s[k]`` (inf if empty)."""
    prompt_tokens, output_tokens = reqs.prompt_tokens, reqs.output_tokens
    generated, next_waiting = reqs.generated, reqs.next_waiting
    run_lo, run_len, run_req, st = slots.run_lo, slots.run_len, slots.run_req, slots.run_state
    wait_ends, free_blocks, step_f = inst.wait_ends, inst.free_blocks, inst.step_f
    step_i, step_end_s = inst.step_i, inst.step_end_s
    pool_max_num_seqs, pool_max_batched_tokens = pools.pool_max_num_seqs, pools.pool_max_batched_tokens
    pool_block_tokens = pools.pool_block_tokens
    pool_step_code, pool_step_coef = pools.pool_step_code, pools.pool_step_coef
    out_first_sched_s, out_preemptions = outs.first_sched_s, outs.preemptions
    block = pool_block_tokens[p]
    budget = np.int64(pool_max_batched_tokens[p])
    lo = run_lo[k]
    n_seqs = 0
    n_decode = 0
    prefill_tokens = 0
    decode_context = 0
    attn2 = 0
    preempted = False
    min_remaining = np.int64(1 << 62)
    s = lo
    while s < lo + run_len[k]:
        if budget == 0:
            st[s, SCHED] = 0
            s += 1
            continue
        c = st[s, COMP]
        target = st[s, TARGET]
        num = target - c
        if num > budget:
            num = budget
        new_blocks = 0
        if c + num > st[s, HELD] * block:
            new_blocks = (c + num + block - 1) // block - st[s, HELD]
        while new_blocks > free_blocks[k]:  # preempt the most recently admitted (recompute)
            last = lo + run_len[k] - 1
            victim = run_req[last]
            run_len[k] -= 1
            free_blocks[k] += st[last, HELD]
            generated[victim] = st[last, GEN]
            out_preemptions[victim] += 1
            next_waiting[victim] = wait_ends[k, 0]
            wait_ends[k, 0] = victim
            if wait_ends[k, 1] < 0:
                wait_ends[k, 1] = victim
            preempted = True
            if last == s:
                break
        if s >= lo + run_len[k]:
            break
        free_blocks[k] -= new_blocks
        st[s, HELD] += new_blocks
        st[s, SCHED] = num
        budget -= num
        n_seqs += 1
        if num == 1 and c == target - 1 and st[s, GEN] > 0:
            n_decode += 1
            decode_context += c
            rem = st[s, OUT] - st[s, GEN]
            if rem < min_remaining:
                min_remaining = rem
        else:
            prefill_tokens += num
            attn2 += num * (2 * c + num)
        s += 1
    if not preempted:  # vLLM v1 admits nobody in a step that preempted
        max_seqs = pool_max_num_seqs[p]
        while wait_ends[k, 0] >= 0 and run_len[k] < max_seqs and budget > 0:
            r = wait_ends[k, 0]
            target = prompt_tokens[r] + generated[r]
            num = target if target < budget else budget
            new_blocks = (num + block - 1) // block
            if new_blocks > free_blocks[k]:
                break
            head = next_waiting[r]
            wait_ends[k, 0] = head
            if head < 0:
                wait_ends[k, 1] = -1
            next_waiting[r] = -1
            free_blocks[k] -= new_blocks
            s = lo + run_len[k]
            run_len[k] += 1
            run_req[s] = r
            st[s, SCHED] = num
            st[s, COMP] = 0
            st[s, TARGET] = target
            st[s, GEN] = generated[r]
            st[s, OUT] = output_tokens[r]
            st[s, HELD] = new_blocks
            budget -= num
            n_seqs += 1
            prefill_tokens += num
            attn2 += num * num
            if out_first_sched_s[r] == np.inf:
                out_first_sched_s[r] = t_s
    if n_seqs == 0:
        step_end_s[k] = np.inf
        return
    code = pool_step_code[p]
    coef = pool_step_coef[p]
    dt = step_time_s(code, coef, n_seqs, n_decode, prefill_tokens, decode_context, attn2)
    m = 1
    if not preempted and prefill_tokens == 0 and n_seqs == run_len[k] and min_remaining > 1:
        m_blocks = (free_blocks[k] // n_seqs) * block
        m = min_remaining if min_remaining < m_blocks else m_blocks
        if m > CRUISE_MAX_STEPS:
            m = CRUISE_MAX_STEPS
        if m < 1:
            m = 1
    step_f[k, 0] = t_s
    step_f[k, 1] = dt
    step_i[k, 0] = n_seqs
    step_i[k, 1] = pool_max_batched_tokens[p] - budget
    step_i[k, 2] = m
    step_i[k, 3] = decode_context
    t_end = t_s + dt
    base_s, per_ctx_s = decode_step_parts(code, coef, n_seqs)
    for j in range(1, m):
        t_end += base_s + per_ctx_s * (decode_context + n_seqs * j)
    step_end_s[k] = t_end


@njit_inline
def cut_cruise(k, p, t_s, inst, pools):
    """An arrival joins instance ``k`` at ``t_s``: end its cruise after the step in progress."""
    step_f, step_i, step_end_s = inst.step_f, inst.step_i, inst.step_end_s
    pool_step_code, pool_step_coef = pools.pool_step_code, pools.pool_step_coef
    m = step_i[k, 2]
    if m <= 1:
        return
    n_seqs = step_i[k, 0]
    ctx = step_i[k, 3]
    t_end = step_f[k, 0] + step_f[k, 1]
    base_s, per_ctx_s = decode_step_parts(pool_step_code[p], pool_step_coef[p], n_seqs)
    j = 1
    while t_end <= t_s and j < m:
        t_end += base_s + per_ctx_s * (ctx + n_seqs * j)
        j += 1
    step_i[k, 2] = j
    step_end_s[k] = t_end


@njit_inline
def add_step_stats(k, p, n_done, inst, pools, stats):
    """Account the first ``n_done`` steps of the run in flight on instance ``k``."""
    step_f, step_i = inst.step_f, inst.step_i
    pool_step_code, pool_step_coef = pools.pool_step_code, pools.pool_step_coef
    inst_busy_s, inst_seq_s = stats.inst_busy_s, stats.inst_seq_s
    inst_steps, inst_tokens = stats.inst_steps, stats.inst_tokens
    n_seqs = step_i[k, 0]
    ctx = step_i[k, 3]
    base_s, per_ctx_s = decode_step_parts(pool_step_code[p], pool_step_coef[p], n_seqs)
    for j in range(n_done):
        dt = step_f[k, 1] if j == 0 else base_s + per_ctx_s * (ctx + n_seqs * j)
        inst_busy_s[k] += dt
        inst_seq_s[k] += n_seqs * dt
    inst_steps[k] += n_done
    inst_tokens[k] += step_i[k, 1] * n_done


@njit_inline
def log_steps(k, p, n_emit, inst, pools, stats):
    """Append the steps just committed on instance ``k`` to the step log (module docstring)."""
    log_dt_s, log_n, log_len = stats.log_dt_s, stats.log_n, stats.log_len
    if log_dt_s.shape[0] == 0:
        return
    step_f, step_i = inst.step_f, inst.step_i
    m = step_i[k, 2]
    n_seqs = step_i[k, 0]
    if m <= 1:
        if n_emit > 0:
            j = log_len[0]
            if j < log_dt_s.shape[0]:
                log_dt_s[j] = step_f[k, 1]
                log_n[j] = n_emit
                log_len[0] = j + 1
            else:
                log_len[1] = 1
        return
    ctx = step_i[k, 3]
    base_s, per_ctx_s = decode_step_parts(pools.pool_step_code[p], pools.pool_step_coef[p], n_seqs)
    for i in range(m):
        j = log_len[0]
        if j >= log_dt_s.shape[0]:
            log_len[1] = 1
            return
        log_dt_s[j] = step_f[k, 1] if i == 0 else base_s + per_ctx_s * (ctx + n_seqs * i)
        log_n[j] = n_seqs
        log_len[0] = j + 1


@njit_helper
def steps_by_horizon(k, p, horizon_s, inst, pools):
    """How many steps of the run in flight on instance ``k`` end by ``horizon_s``."""
    step_f, step_i = inst.step_f, inst.step_i
    pool_step_code, pool_step_coef = pools.pool_step_code, pools.pool_step_coef
    n_seqs = step_i[k, 0]
    ctx = step_i[k, 3]
    t_end = step_f[k, 0] + step_f[k, 1]
    base_s, per_ctx_s = decode_step_parts(pool_step_code[p], pool_step_coef[p], n_seqs)
    j = 0
    while j < step_i[k, 2] and t_end <= horizon_s:
        j += 1
        t_end += base_s + per_ctx_s * (ctx + n_seqs * j)
    return j


@njit_inline
def commit_step(k, p, t_s, reqs, slots, inst, pools, outs, stats, load):
    """Commit the ``m`` steps of instance ``k`` ending at ``t_s``, schedule the next one.

    Returns the number of steps committed."""
    prompt_tokens = reqs.prompt_tokens
    run_lo, run_len, run_req, st = slots.run_lo, slots.run_len, slots.run_req, slots.run_state
    wait_ends, free_blocks, step_i, step_end_s = inst.wait_ends, inst.free_blocks, inst.step_i, inst.step_end_s
    pool_inst_start, pool_block_tokens = pools.pool_inst_start, pools.pool_block_tokens
    out_first_token_s, out_done_s, out_status = outs.first_token_s, outs.done_s, outs.status
    inst_outstanding, tree, tree_lo = load.inst_outstanding, load.tree, load.tree_lo
    tree_leaves, pool_tokens = load.tree_leaves, load.pool_tokens
    m = step_i[k, 2]
    add_step_stats(k, p, m, inst, pools, stats)
    n_emit = 0  # tokens emitted to requests past their first (step log)
    block = pool_block_tokens[p]
    lo = run_lo[k]
    kept = lo
    for s in range(lo, lo + run_len[k]):
        num = st[s, SCHED]
        c = st[s, COMP]
        target = st[s, TARGET]
        gen = st[s, GEN]
        held = st[s, HELD]
        if num > 0:
            if m > 1:  # cruise: one decode token per step, blocks allocated lazily
                c += m
                gen += m - 1
                target += m - 1
                if c > held * block:
                    need = (c + block - 1) // block
                    free_blocks[k] -= need - held
                    held = need
            else:
                c += num
            if c == target:  # all tokens in: emit the next one
                r = run_req[s]
                if gen == 0:
                    out_first_token_s[r] = t_s
                else:
                    n_emit += 1
                gen += 1
                target += 1
                if gen == st[s, OUT]:
                    out_done_s[r] = t_s
                    out_status[r] = STATUS_DONE
                    free_blocks[k] += held
                    add_outstanding(k, p, -1, inst_outstanding, pool_inst_start, tree, tree_lo, tree_leaves)
                    pool_tokens[p] -= prompt_tokens[r] + st[s, OUT]
                    continue
        run_req[kept] = run_req[s]
        st[kept, SCHED] = 0
        st[kept, COMP] = c
        st[kept, TARGET] = target
        st[kept, GEN] = gen
        st[kept, OUT] = st[s, OUT]
        st[kept, HELD] = held
        kept += 1
    run_len[k] = kept - lo
    log_steps(k, p, n_emit, inst, pools, stats)
    if kept > lo or wait_ends[k, 0] >= 0:
        schedule_step(k, p, t_s, reqs, slots, inst, pools, outs)
    else:
        step_end_s[k] = np.inf
    return m
