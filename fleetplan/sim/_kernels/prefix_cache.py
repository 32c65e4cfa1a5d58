"""Per-instance prefix cache (vLLM automatic prefix caching) for the feature kernel (#5).

Instance ``k`` caches KV blocks as ENTRIES: ``key -> len`` blocks contiguous from the start of
the key's segment, a refcount ``ref`` (pins by running requests), an LRU order over unpinned
entries.  Request segments: 0 = blocks ``[0, nb0)`` keyed ``key0`` (a shared system prompt),
1 = ``[nb0, nb1)`` keyed ``key1`` (a session's previous context); key -1 = none.  Eviction trims
the LRU unpinned entry's TAIL first (as vLLM's free-block queue); an entry at 0 blocks is removed.

State ``pc = groups.PrefixCache(inst, ent, tab)`` of int64: ``inst[k, I_*]`` entry range (``I_ENT_N == 0``: caching
off, all calls no-ops returning 0 / -1), hash range, LRU head (least recent) / tail, free-entry
list, cached / evictable block counts; ``ent[e, E_*]`` key, len, ref, LRU prev / next (``E_NEXT``
also links free entries); ``tab`` open addressing, linear probing, backward-shift deletion, slot =
entry id or -1, size = pow2 >= 2 * entries.  Entry ids are global over instances.  The kernel keeps
``free_blocks[k]``, the cache reports the blocks it takes over or frees, so
``free_blocks[k] + sum(held by requests on k) + inst[k, I_CACHED] == kv_blocks[k]``.

Call sequence in the kernel (``B`` = block tokens; ``nb0 = t0 // B``, ``nb1 = t1 // B``)::

    # admission of request r on instance k
    cap = (prompt + generated - 1) // B
    m, pinned = pc_probe(pc, k, key0, nb0, key1, nb1, cap)  # optional side-effect-free fit check:
    # fits iff own blocks needed after m <= free_blocks[k] + pc_evictable(pc, k) - pinned
    matched, e0[r], e1[r] = pc_match(pc, k, key0, nb0, key1, nb1, cap)  # == m
    # ... r holds its own blocks from position `matched` on (matched * B tokens computed)
    # allocation shortage (admission or a running request's growth), before preempting
    if free_blocks[k] < need:
        free_blocks[k] += pc_evict(pc, k, need - free_blocks[k])   # at most pc_evictable(pc, k)
    # completion: insert, THEN unpin
    kept, freed = pc_insert(pc, k, key0, nb0, key1, matched, ctx_tokens // B)
    free_blocks[k] += (held[r] - kept) + freed
    pc_unpin(pc, k, e0[r]); pc_unpin(pc, k, e1[r])
    # preemption (recompute; the feature kernel's preempt_at): offer the computed full blocks
    # under the request's own segment-1 key, as at completion, then release the pins
    pc_unpin(pc, k, e0[r]); pc_unpin(pc, k, e1[r]); free_blocks[k] += held[r]

Slow twin: ``tests.reference.prefix_cache.PrefixCache``; ``kernel_snapshot`` there reads this state.
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim._kernels.groups import PrefixCache
from fleetplan.sim._kernels.jit import njit_borrowed, njit_helper, njit_inline

I_ENT_LO, I_ENT_N, I_TAB_LO, I_TAB_MASK, I_HEAD, I_TAIL, I_FREE, I_CACHED, I_EVICTABLE, N_INST_FIELDS = range(10)
E_KEY, E_LEN, E_REF, E_PREV, E_NEXT, N_ENT_FIELDS = range(6)


@njit_helper
def pc_new(n_inst, entries_per_inst):
    """Empty caches for ``n_inst`` instances; ``entries_per_inst[k]`` entries on instance k (0 = off)."""
    inst = np.zeros((n_inst, N_INST_FIELDS), np.int64)
    n_ent = n_tab = 0
    for k in range(n_inst):
        m = max(int(entries_per_inst[k]), 0)
        cap = 1 if m > 0 else 0
        while cap < 2 * m:
            cap *= 2
        inst[k, I_ENT_LO] = n_ent
        inst[k, I_ENT_N] = m
        inst[k, I_TAB_LO] = n_tab
        inst[k, I_TAB_MASK] = cap - 1
        inst[k, I_HEAD:I_FREE] = -1
        inst[k, I_FREE] = n_ent if m > 0 else -1
        n_ent += m
        n_tab += cap
    ent = np.zeros((n_ent, N_ENT_FIELDS), np.int64)  # free entries: key -1, len 0, ref 0
    for k in range(n_inst):
        end = inst[k, I_ENT_LO] + inst[k, I_ENT_N]
        for e in range(inst[k, I_ENT_LO], end):
            ent[e, E_KEY] = -1
            ent[e, E_NEXT] = e + 1 if e + 1 < end else -1
    return PrefixCache(inst, ent, np.full(n_tab, -1, np.int64))


@njit_inline
def _home(key, mask):
    """Home slot of ``key`` (xor-fold of its 16-bit words; no multiplication, so no overflow)."""
    return (key ^ (key >> 16) ^ (key >> 32) ^ (key >> 48)) & mask


@njit_inline
def _slot(pc, k, key):
    """Table index (relative to ``I_TAB_LO``) holding ``key``, or the empty one where it would go."""
    inst, ent, tab = pc.inst, pc.ent, pc.tab
    lo = inst[k, I_TAB_LO]
    mask = inst[k, I_TAB_MASK]
    i = _home(key, mask)
    while tab[lo + i] >= 0 and ent[tab[lo + i], E_KEY] != key:
        i = (i + 1) & mask
    return i


@njit_inline
def _find(pc, k, key):
    """Global entry id of ``key`` on instance k, or -1."""
    if key < 0 or pc.inst[k, I_ENT_N] == 0:
        return -1
    return pc.tab[pc.inst[k, I_TAB_LO] + _slot(pc, k, key)]


@njit_inline
def _pin(pc, k, e):
    """One more pin of entry ``e``; at the first it leaves the LRU list and stops being evictable."""
    inst, ent = pc.inst, pc.ent
    if ent[e, E_REF] == 0:
        p = ent[e, E_PREV]
        n = ent[e, E_NEXT]
        if p >= 0:
            ent[p, E_NEXT] = n
        else:
            inst[k, I_HEAD] = n
        if n >= 0:
            ent[n, E_PREV] = p
        else:
            inst[k, I_TAIL] = p
        inst[k, I_EVICTABLE] -= ent[e, E_LEN]
    ent[e, E_REF] += 1


@njit_inline
def pc_unpin(pc, k, e):
    """Release one pin of entry ``e`` (-1: no-op); at refcount 0 it becomes the MRU entry."""
    inst, ent = pc.inst, pc.ent
    if e < 0:
        return
    ent[e, E_REF] -= 1
    if ent[e, E_REF] == 0:
        t = inst[k, I_TAIL]
        ent[e, E_PREV] = t
        ent[e, E_NEXT] = -1
        if t >= 0:
            ent[t, E_NEXT] = e
        else:
            inst[k, I_HEAD] = e
        inst[k, I_TAIL] = e
        inst[k, I_EVICTABLE] += ent[e, E_LEN]


@njit_inline
def _remove(pc, k, e):
    """Delete unpinned entry ``e`` (its blocks leave the evictable count, not the cached one)."""
    inst, ent, tab = pc.inst, pc.ent, pc.tab
    _pin(pc, k, e)  # out of the LRU list
    lo = inst[k, I_TAB_LO]
    mask = inst[k, I_TAB_MASK]
    i = _slot(pc, k, ent[e, E_KEY])
    j = i
    while True:  # backward-shift deletion
        j = (j + 1) & mask
        f = tab[lo + j]
        if f < 0:
            break
        h = _home(ent[f, E_KEY], mask)
        if (j > i and (h <= i or h > j)) or (j < i and h <= i and h > j):
            tab[lo + i] = f
            i = j
    tab[lo + i] = -1
    ent[e, E_KEY] = -1
    ent[e, E_LEN] = 0
    ent[e, E_REF] = 0
    ent[e, E_NEXT] = inst[k, I_FREE]
    inst[k, I_FREE] = e


@njit_inline
def pc_evictable(pc, k):
    """Blocks held by unpinned entries of instance k (what ``pc_evict`` can free)."""
    return pc.inst[k, I_EVICTABLE]


@njit_inline
def _lookup(pc, k, key0, nb0, key1, nb1, cap_blocks):
    """``pc_match`` without the pins: ``(matched, e0, e1)``."""
    ent = pc.ent
    f0 = _find(pc, k, key0)
    m0 = min(ent[f0, E_LEN], nb0) if f0 >= 0 else 0
    f1 = _find(pc, k, key1) if m0 == nb0 else -1
    m1 = max(min(ent[f1, E_LEN], nb1 - nb0), 0) if f1 >= 0 else 0
    matched = max(min(m0 + m1, cap_blocks), 0)
    return matched, f0 if f0 >= 0 and min(m0, matched) >= 1 else -1, f1 if f1 >= 0 and matched > m0 else -1


@njit_inline
def pc_match(pc, k, key0, nb0, key1, nb1, cap_blocks):
    """Cached prefix of a request being admitted on instance k; pins the entries it uses.

    ``m0 = min(len(key0), nb0)``; ``m1 = min(len(key1), nb1 - nb0)`` if ``m0 == nb0`` else 0;
    ``matched = min(m0 + m1, cap_blocks)``.  Returns ``(matched, e0, e1)``: the entries pinned
    (those contributing >= 1 block to ``matched``), -1 = none.  Unpin each once when done.
    """
    matched, e0, e1 = _lookup(pc, k, key0, nb0, key1, nb1, cap_blocks)
    for e in (e0, e1):
        if e >= 0:
            _pin(pc, k, e)
    return matched, e0, e1


@njit_inline
def pc_probe(pc, k, key0, nb0, key1, nb1, cap_blocks):
    """``pc_match`` without side effects: ``(matched, blocks pc_match would take out of evictable)``.

    For fit checks before admitting (``own need <= free + evictable - second value``) and the
    SGLang "can a waiting request be admitted" test; a failed admission then leaves the LRU as is."""
    ent = pc.ent
    matched, e0, e1 = _lookup(pc, k, key0, nb0, key1, nb1, cap_blocks)
    pinned = 0
    for e in (e0, e1):
        if e >= 0 and ent[e, E_REF] == 0:
            pinned += ent[e, E_LEN]
    return matched, pinned


@njit_borrowed
def pc_evict(pc, k, need):
    """Free and return ``min(need, evictable)`` cached blocks of instance k: LRU entry first, tail first."""
    inst, ent = pc.inst, pc.ent
    freed = 0
    while freed < need and inst[k, I_HEAD] >= 0:
        e = inst[k, I_HEAD]
        take = min(ent[e, E_LEN], need - freed)
        ent[e, E_LEN] -= take
        freed += take
        if ent[e, E_LEN] == 0:
            _remove(pc, k, e)
    inst[k, I_CACHED] -= freed
    inst[k, I_EVICTABLE] -= freed
    return freed


@njit_inline
def _take_slot(pc, k, key, keep):
    """``(entry, blocks freed)``: a new entry for ``key`` (len 0, ref 1, not in the LRU) or -1; with no
    free slot the LRU unpinned entry other than ``keep`` is evicted whole first."""
    inst, ent, tab = pc.inst, pc.ent, pc.tab
    freed = 0
    if inst[k, I_FREE] < 0:
        v = inst[k, I_HEAD]
        if v == keep and v >= 0:
            v = ent[v, E_NEXT]
        if v < 0:
            return -1, 0
        freed = ent[v, E_LEN]
        inst[k, I_CACHED] -= freed
        _remove(pc, k, v)
    e = inst[k, I_FREE]  # a free entry has len 0 and ref 0
    inst[k, I_FREE] = ent[e, E_NEXT]
    ent[e, E_REF] = 1
    tab[inst[k, I_TAB_LO] + _slot(pc, k, key)] = e
    ent[e, E_KEY] = key
    return e, freed


@njit_inline
def _extend(pc, k, key, target, own_lo, keep):
    """Make entry ``key`` cover ``target`` blocks, taking over the request's blocks from relative
    position ``own_lo`` on.  Returns (entry or -1, own blocks kept, cached blocks freed)."""
    inst, ent = pc.inst, pc.ent
    e = _find(pc, k, key)
    cur = ent[e, E_LEN] if e >= 0 else 0
    if target <= cur or cur < own_lo:
        return e, 0, 0
    freed = 0
    if e < 0:
        e, freed = _take_slot(pc, k, key, keep)  # pinned once: the unpin below makes it MRU
        if e < 0:
            return -1, 0, 0
    else:
        _pin(pc, k, e)  # an unpinned entry leaves the LRU and comes back at the MRU end
    ent[e, E_LEN] = target
    inst[k, I_CACHED] += target - cur
    pc_unpin(pc, k, e)
    return e, target - cur, freed


@njit_borrowed
def pc_insert(pc, k, key0, nb0, key1, matched_blocks, own_end_blocks):
    """A request completing on instance k offers its own full blocks ``[matched_blocks, own_end_blocks)``.

    Call BEFORE unpinning its entries.  Entry ``key0`` is extended over ``[0, min(nb0, own_end))``,
    then (if it now covers all ``nb0`` blocks) entry ``key1`` over ``[nb0, own_end)``.  An entry is
    extended only when the request owns the block right after its end (``len >= own start``);
    positions below ``len`` are duplicates (not kept).  A missing entry is created when the
    request owns its first block; with no free slot the LRU unpinned entry (not the key0 entry
    of this call) is evicted whole, or the creation is skipped.  Created / extended unpinned
    entries become MRU.  Returns ``(kept_own, freed_cached)``; the caller frees
    ``(held - kept_own) + freed_cached`` blocks.
    """
    inst, ent = pc.inst, pc.ent
    if inst[k, I_ENT_N] == 0:
        return 0, 0
    e0, kept, freed = -1, 0, 0
    if key0 >= 0 and nb0 > 0:
        e0, kept, freed = _extend(pc, k, key0, min(nb0, own_end_blocks), matched_blocks, -1)
    if key1 >= 0 and own_end_blocks > nb0 and (nb0 == 0 or (e0 >= 0 and ent[e0, E_LEN] >= nb0)):
        _, a, f = _extend(pc, k, key1, own_end_blocks - nb0, max(matched_blocks - nb0, 0), e0)
        kept += a
        freed += f
    return kept, freed

