"""The numba prefix cache equals its pure-Python twin, conserves blocks and evicts LRU-tail-first.

Random operation sequences drive both implementations the way the feature kernel does
(admission = match + allocate, shortage = evict, completion = insert then unpin,
preemption = unpin + free) with a per-instance KV budget, and compare every return value
and the observable state (entry lens and refcounts by key, LRU order, counters) after every
operation.  Hand-built cases pin tail-first eviction, extension, duplicates, gaps, the
entry-capacity eviction and a 4-round session hitting exactly its previous context.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.sim._kernels.prefix_cache import (
    pc_evict,
    pc_evictable,
    pc_insert,
    pc_match,
    pc_new,
    pc_probe,
    pc_unpin,
)
from tests.reference.prefix_cache import PrefixCache
from tests.reference.prefix_cache import kernel_snapshot as pc_snapshot


class Both:
    """The kernel cache and its twin side by side; every call must agree."""

    def __init__(self, entries) -> None:
        entries = np.asarray(entries, np.int32)
        self.pc = pc_new(len(entries), entries)
        self.twin = PrefixCache(entries)
        self.n_inst = len(entries)

    def check(self) -> None:
        for k in range(self.n_inst):
            snap = pc_snapshot(self.pc, k)
            assert snap == self.twin.snapshot(k)
            entries, lru, cached, evictable = snap
            assert cached == sum(n for n, _ in entries.values())  # running counters = sums
            assert evictable == sum(n for n, ref in entries.values() if ref == 0) == pc_evictable(self.pc, k)
            assert set(lru) == {key for key, (_, ref) in entries.items() if ref == 0}
            assert all(n >= 1 and ref >= 0 for n, ref in entries.values())

    def match(self, k, key0, nb0, key1, nb1, cap):
        probe = tuple(int(x) for x in pc_probe(self.pc, k, key0, nb0, key1, nb1, cap))
        assert probe == self.twin.probe(k, key0, nb0, key1, nb1, cap)
        before = pc_snapshot(self.pc, k)
        assert before == self.twin.snapshot(k)  # probing changed nothing
        got = tuple(int(x) for x in pc_match(self.pc, k, key0, nb0, key1, nb1, cap))
        assert got == self.twin.match(k, key0, nb0, key1, nb1, cap)
        assert (got[0], before[3] - pc_evictable(self.pc, k)) == probe
        return got

    def unpin(self, k, e):
        pc_unpin(self.pc, k, e)
        self.twin.unpin(k, e)

    def evict(self, k, need):
        got = int(pc_evict(self.pc, k, need))
        assert got == self.twin.evict(k, need)
        return got

    def insert(self, k, key0, nb0, key1, matched, own_end):
        got = tuple(int(x) for x in pc_insert(self.pc, k, key0, nb0, key1, matched, own_end))
        assert got == self.twin.insert(k, key0, nb0, key1, matched, own_end)
        return got


def drive(seed: int, n_ops: int = 400, max_entries: int = 6, stride: int = 1) -> None:
    """Random admissions / completions / preemptions / evictions under a KV budget, checked each op.

    Keys are ``index * stride`` (segment 1: ``+ 100 * stride``); a stride equal to the hash table
    size sends every key to the same home slot (long probe runs, wrap-around deletions)."""
    rng = np.random.default_rng(seed)
    n_inst = int(rng.integers(1, 4))
    entries = rng.integers(0, max_entries, n_inst)
    kv = rng.integers(8, 60 * max(max_entries // 6, 1), n_inst)
    both = Both(entries)
    free = kv.copy()
    running: list[tuple] = []  # (k, key0, nb0, key1, matched, own_end, e0, e1, held)
    n_keys = int(rng.integers(2, 9 + 2 * max_entries))
    for _ in range(n_ops):
        op = rng.random()
        k = int(rng.integers(n_inst))
        if op < 0.45:  # admission
            key0, key1 = (int(rng.integers(-1, n_keys)) for _ in range(2))
            key0 = key0 * stride if key0 >= 0 else -1
            key1 = (key1 + 100) * stride if key1 >= 0 else -1
            nb0 = int(rng.integers(0, 6))
            nb1 = nb0 + int(rng.integers(0, 8))
            prompt_blocks = nb1 + int(rng.integers(0, 4))
            cap = prompt_blocks - int(rng.integers(0, 2))
            matched, e0, e1 = both.match(k, key0, nb0, key1, nb1, cap)
            own_end = max(prompt_blocks + int(rng.integers(0, 4)), matched)
            held = own_end - matched + int(rng.integers(0, 2))  # + a partial last block
            if free[k] < held:
                free[k] += both.evict(k, held - free[k])
            if free[k] < held:  # does not fit: give the pins back
                both.unpin(k, e0)
                both.unpin(k, e1)
                continue
            free[k] -= held
            running.append((k, key0, nb0, key1, matched, own_end, e0, e1, held))
        elif op < 0.8 and running:  # completion
            k, key0, nb0, key1, matched, own_end, e0, e1, held = running.pop(int(rng.integers(len(running))))
            kept, freed = both.insert(k, key0, nb0, key1, matched, own_end)
            assert 0 <= kept <= own_end - matched and freed >= 0
            free[k] += held - kept + freed
            both.unpin(k, e0)
            both.unpin(k, e1)
        elif op < 0.9 and running:  # preemption
            k, *_, e0, e1, held = running.pop(int(rng.integers(len(running))))
            both.unpin(k, e0)
            both.unpin(k, e1)
            free[k] += held
        else:
            free[k] += both.evict(k, int(rng.integers(0, 10)))
        both.check()
        for j in range(n_inst):  # block conservation as the kernel sees it
            held_j = sum(r[-1] for r in running if r[0] == j)
            assert free[j] >= 0
            assert free[j] + held_j + both.twin.cached(j) == kv[j]


@pytest.mark.parametrize("seed", range(40))
def test_kernel_equals_twin_random_sequences(seed):
    drive(seed)


@pytest.mark.parametrize("stride", [32, 64, 2**16, 2**40 + 1])
def test_hash_table_under_colliding_keys(stride):
    for seed in range(5):
        drive(1000 + seed, n_ops=600, max_entries=20, stride=stride)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_kernel_equals_twin_hypothesis(seed):
    drive(seed, n_ops=150)


def test_eviction_trims_lru_tail_first():
    both = Both([4])
    assert both.insert(0, 1, 3, -1, 0, 3) == (3, 0)  # entry 1: 3 blocks (LRU)
    assert both.insert(0, 2, 2, -1, 0, 2) == (2, 0)  # entry 2: 2 blocks (MRU)
    matched, e0, e1 = both.match(0, 2, 2, -1, 2, 10)  # pin entry 2
    assert (matched, e1) == (2, -1)
    assert pc_evictable(both.pc, 0) == 3
    assert both.evict(0, 2) == 2
    assert pc_snapshot(both.pc, 0) == ({1: (1, 0), 2: (2, 1)}, [1], 3, 1)
    assert both.evict(0, 5) == 1  # pinned entry 2 is never evicted
    assert pc_snapshot(both.pc, 0) == ({2: (2, 1)}, [], 2, 0)
    both.unpin(0, e0)
    assert both.evict(0, 1) == 1
    assert pc_snapshot(both.pc, 0) == ({2: (1, 0)}, [2], 1, 1)
    both.check()


def test_use_moves_entry_to_mru_on_unpin():
    both = Both([3])
    for key in (1, 2, 3):
        both.insert(0, key, 2, -1, 0, 2)
    _, e0, _ = both.match(0, 1, 2, -1, 2, 1)  # matched 1 block of entry 1: pinned
    assert pc_snapshot(both.pc, 0)[1] == [2, 3]
    both.unpin(0, e0)
    assert pc_snapshot(both.pc, 0)[1] == [2, 3, 1]
    assert both.match(0, 2, 2, -1, 2, 0) == (0, -1, -1)  # capped to 0 blocks: no pin, no touch
    assert pc_snapshot(both.pc, 0)[1] == [2, 3, 1]
    both.check()


def test_insert_extends_skips_duplicates_and_gaps():
    both = Both([4])
    # cold request: system prompt (key 7, 4 blocks) + session context (key 9) up to block 10
    assert both.insert(0, 7, 4, 9, 0, 10) == (10, 0)
    assert pc_snapshot(both.pc, 0)[0] == {7: (4, 0), 9: (6, 0)}
    # warm request matches 4 + 6 blocks, owns [10, 13): key 9 grows to 9 blocks
    assert both.match(0, 7, 4, 9, 10, 12) == (10, 0, 1)
    assert both.insert(0, 7, 4, 9, 10, 13) == (3, 0)
    assert pc_snapshot(both.pc, 0)[0] == {7: (4, 1), 9: (9, 1)}
    both.unpin(0, 0)
    both.unpin(0, 1)
    # a request that missed (matched 0) and now holds copies of [0, 12): all duplicates
    assert both.insert(0, 7, 4, 9, 0, 12) == (0, 0)
    # the request owns [0, 15): key 9 is extended from 9 to 11, its first 13 blocks are duplicates
    assert both.insert(0, 7, 4, 9, 0, 15) == (2, 0)
    # a gap: request owns [3, 6) of an absent key -> nothing is created
    assert both.insert(0, 5, 6, -1, 3, 6) == (0, 0)
    # segment 1 is skipped while segment 0 is not fully cached
    assert both.insert(0, 5, 6, 11, 0, 4) == (4, 0)
    assert pc_snapshot(both.pc, 0)[0] == {7: (4, 0), 9: (11, 0), 5: (4, 0)}
    # no key0 and nb0 = 0: the whole context belongs to segment 1
    assert both.insert(0, -1, 0, 12, 0, 3) == (3, 0)
    assert pc_snapshot(both.pc, 0)[1] == [7, 9, 5, 12]
    both.check()


def test_entry_capacity_evicts_lru_whole_or_skips():
    both = Both([2])
    assert both.insert(0, 1, 3, -1, 0, 3) == (3, 0)
    assert both.insert(0, 2, 2, -1, 0, 2) == (2, 0)
    assert both.insert(0, 3, 4, -1, 0, 4) == (4, 3)  # entry 1 (LRU, 3 blocks) evicted whole
    assert pc_snapshot(both.pc, 0)[:2] == ({2: (2, 0), 3: (4, 0)}, [2, 3])
    _, a, _ = both.match(0, 2, 2, -1, 2, 9)
    _, b, _ = both.match(0, 3, 4, -1, 4, 9)
    assert both.insert(0, 4, 1, -1, 0, 1) == (0, 0)  # all pinned: creation skipped
    both.unpin(0, a)
    both.unpin(0, b)
    # one slot: the key0 entry created by this very call is not the victim for key1
    one = Both([1])
    assert one.insert(0, 1, 2, 8, 0, 5) == (2, 0)
    assert pc_snapshot(one.pc, 0)[0] == {1: (2, 0)}
    assert one.insert(0, -1, 0, 8, 0, 5) == (5, 2)  # a segment-1-only request evicts it
    both.check()
    one.check()


def test_caching_off_instance_is_a_no_op():
    both = Both([0, 2])
    assert both.insert(0, 1, 2, 3, 0, 6) == (0, 0)
    assert both.match(0, 1, 2, 3, 6, 9) == (0, -1, -1)
    assert both.evict(0, 4) == 0
    assert pc_evictable(both.pc, 0) == 0
    assert both.insert(1, 1, 2, 3, 0, 6) == (6, 0)
    assert pc_snapshot(both.pc, 1)[0] == {1: (2, 0), 3: (4, 0)}
    both.check()


def test_four_round_session_hits_previous_context_exactly():
    """Round i's prompt = previous context + new tokens; with affinity (same instance) and no
    eviction, round i > 0 matches the previous context's full blocks: system prompt + session."""
    block = 16
    system_tokens, new_tokens, output_tokens = 100, (50, 70, 33, 90), (40, 25, 61, 17)
    both = Both([8])
    prev_ctx = 0
    hits = []
    for rnd in range(4):
        prompt = (prev_ctx if rnd else system_tokens) + new_tokens[rnd]
        t0, t1 = system_tokens, max(prev_ctx, system_tokens)
        nb0, nb1 = t0 // block, t1 // block
        matched, e0, e1 = both.match(0, 7, nb0, 42, nb1, (prompt - 1) // block)
        hits.append(matched)
        ctx = prompt + output_tokens[rnd]
        kept, freed = both.insert(0, 7, nb0, 42, matched, ctx // block)
        assert (kept, freed) == (ctx // block - matched, 0)  # no duplicates, nothing evicted
        both.unpin(0, e0)
        both.unpin(0, e1)
        prev_ctx = ctx
    assert hits == [0, (100 + 50 + 40) // 16, (190 + 70 + 25) // 16, (285 + 33 + 61) // 16]
    assert pc_snapshot(both.pc, 0)[0] == {7: (6, 0), 42: ((379 + 90 + 17) // 16 - 6, 0)}
    # another session sharing the system prompt hits it on its first round
    assert both.match(0, 7, nb0, 43, nb0, 20) == (6, 0, -1)
    both.check()
