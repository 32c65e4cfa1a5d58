"""Slow, readable twin of ``fleetplan.sim._kernels.prefix_cache``.

Same semantics and the same return values, entry ids included (ids are global: instance k
owns ``[sum(entries[:k]), +entries[k])``; a free id is reused last-freed-first, lowest id first
at the start, as the kernel's free list does).  State per instance: ``key -> id`` dict, entry
records ``id -> [key, len, ref]`` and an ``OrderedDict`` of unpinned ids, least recent first.
Block counts are not stored: ``cached`` and ``evictable`` are sums over the entries, which is
what the tests compare the kernel's running counters against.
"""

from __future__ import annotations

from collections import OrderedDict

from fleetplan.sim._kernels.prefix_cache import (
    E_KEY,
    E_LEN,
    E_NEXT,
    E_REF,
    I_CACHED,
    I_ENT_LO,
    I_ENT_N,
    I_EVICTABLE,
    I_HEAD,
)


def kernel_snapshot(pc, k: int) -> tuple[dict[int, tuple[int, int]], list[int], int, int]:
    """Observable state of instance k of the kernel's ``pc``: ``({key: (len, ref)}, LRU keys least
    recent first, cached blocks, evictable blocks)`` (the kernel's running counters)."""
    inst, ent = pc.inst, pc.ent
    lo, n = int(inst[k, I_ENT_LO]), int(inst[k, I_ENT_N])
    entries = {int(ent[e, E_KEY]): (int(ent[e, E_LEN]), int(ent[e, E_REF]))
               for e in range(lo, lo + n) if ent[e, E_KEY] >= 0}
    lru = []
    e = int(inst[k, I_HEAD])
    while e >= 0:
        lru.append(int(ent[e, E_KEY]))
        e = int(ent[e, E_NEXT])
    return entries, lru, int(inst[k, I_CACHED]), int(inst[k, I_EVICTABLE])


class PrefixCache:
    """Prefix caches of all instances; ``entries[k]`` entry slots on instance k (0 = off)."""

    def __init__(self, entries) -> None:
        self.n_entries = [max(int(m), 0) for m in entries]
        self.by_key: list[dict[int, int]] = [{} for _ in self.n_entries]
        self.rec: dict[int, list[int]] = {}  # id -> [key, len, ref]
        self.lru: list[OrderedDict[int, None]] = [OrderedDict() for _ in self.n_entries]
        self.free: list[list[int]] = []
        lo = 0
        for m in self.n_entries:
            self.free.append(list(range(lo + m - 1, lo - 1, -1)))
            lo += m

    # --- observable state -------------------------------------------------------------
    def snapshot(self, k: int) -> tuple[dict[int, tuple[int, int]], list[int], int, int]:
        """``({key: (len, ref)}, LRU keys least recent first, cached, evictable)``, as ``kernel_snapshot``."""
        entries = {self.rec[e][0]: (self.rec[e][1], self.rec[e][2]) for e in self.by_key[k].values()}
        lru = [self.rec[e][0] for e in self.lru[k]]
        return entries, lru, self.cached(k), self.evictable(k)

    def cached(self, k: int) -> int:
        return sum(self.rec[e][1] for e in self.by_key[k].values())

    def evictable(self, k: int) -> int:
        return sum(self.rec[e][1] for e in self.lru[k])

    # --- helpers -----------------------------------------------------------------------
    def _len(self, k: int, key: int) -> int:
        e = self.by_key[k].get(key) if key >= 0 else None
        return 0 if e is None else self.rec[e][1]

    def _remove(self, k: int, e: int) -> None:
        key = self.rec.pop(e)[0]
        del self.by_key[k][key]
        self.lru[k].pop(e, None)
        self.free[k].append(e)

    def _pin(self, k: int, e: int) -> None:
        if self.rec[e][2] == 0:
            del self.lru[k][e]
        self.rec[e][2] += 1

    # --- API ---------------------------------------------------------------------------
    def match(self, k: int, key0: int, nb0: int, key1: int, nb1: int, cap_blocks: int) -> tuple[int, int, int]:
        if self.n_entries[k] == 0:
            return 0, -1, -1
        f0 = self.by_key[k].get(key0, -1) if key0 >= 0 else -1
        m0 = min(self.rec[f0][1], nb0) if f0 >= 0 else 0
        f1, m1 = -1, 0
        if m0 == nb0:
            f1 = self.by_key[k].get(key1, -1) if key1 >= 0 else -1
            m1 = max(min(self.rec[f1][1], nb1 - nb0), 0) if f1 >= 0 else 0
        matched = max(min(m0 + m1, cap_blocks), 0)
        e0 = f0 if f0 >= 0 and min(m0, matched) >= 1 else -1
        e1 = f1 if f1 >= 0 and matched - m0 >= 1 else -1
        for e in (e0, e1):
            if e >= 0:
                self._pin(k, e)
        return matched, e0, e1

    def probe(self, k: int, key0: int, nb0: int, key1: int, nb1: int, cap_blocks: int) -> tuple[int, int]:
        """``match`` without side effects: (matched, evictable blocks the pins would take)."""
        if self.n_entries[k] == 0:
            return 0, 0
        saved = ({e: list(r) for e, r in self.rec.items()}, OrderedDict(self.lru[k]))
        before = self.evictable(k)
        matched, _, _ = self.match(k, key0, nb0, key1, nb1, cap_blocks)
        pinned = before - self.evictable(k)
        self.rec, self.lru[k] = saved
        return matched, pinned

    def unpin(self, k: int, e: int) -> None:
        if e < 0:
            return
        self.rec[e][2] -= 1
        if self.rec[e][2] == 0:
            self.lru[k][e] = None  # new key -> MRU end

    def evict(self, k: int, need: int) -> int:
        freed = 0
        while freed < need and self.lru[k]:
            e = next(iter(self.lru[k]))  # least recently used
            take = min(self.rec[e][1], need - freed)
            self.rec[e][1] -= take  # tail blocks go first: the entry keeps its first len blocks
            freed += take
            if self.rec[e][1] == 0:
                self._remove(k, e)
        return freed

    def _extend(self, k: int, key: int, target: int, own_lo: int, keep: int) -> tuple[int, int, int]:
        """Entry ``key`` covers ``target`` blocks, taking the request's blocks from ``own_lo`` on."""
        e = self.by_key[k].get(key, -1)
        cur = self.rec[e][1] if e >= 0 else 0
        if target <= cur or cur < own_lo:
            return e, 0, 0  # nothing new, or a gap between the entry's end and the request's blocks
        freed = 0
        if e < 0:
            if not self.free[k]:
                victims = [v for v in self.lru[k] if v != keep]
                if not victims:
                    return -1, 0, 0
                freed = self.rec[victims[0]][1]
                self._remove(k, victims[0])
            e = self.free[k].pop()
            self.rec[e] = [key, 0, 0]
            self.by_key[k][key] = e
        self.rec[e][1] = target
        if self.rec[e][2] == 0:
            self.lru[k].pop(e, None)
            self.lru[k][e] = None
        return e, target - cur, freed

    def insert(self, k: int, key0: int, nb0: int, key1: int, matched_blocks: int,
               own_end_blocks: int) -> tuple[int, int]:
        if self.n_entries[k] == 0:
            return 0, 0
        kept = freed = 0
        e0 = -1
        if key0 >= 0 and nb0 > 0:
            e0, a, f = self._extend(k, key0, min(nb0, own_end_blocks), matched_blocks, -1)
            kept, freed = kept + a, freed + f
        covered = nb0 == 0 or (e0 >= 0 and self.rec[e0][1] >= nb0)
        if key1 >= 0 and covered and own_end_blocks > nb0:
            _, a, f = self._extend(k, key1, own_end_blocks - nb0, max(matched_blocks - nb0, 0), e0)
            kept, freed = kept + a, freed + f
        return kept, freed
