"""``fleetplan.memo.IdentityMemo``: a hit is the value stored for the very objects (never for another object
that took a dead one's id), the memo stays within its bound under either eviction, and threads storing at
once leave it bounded and consistent."""

from __future__ import annotations

import gc
import random
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

import pytest

from fleetplan.memo import IdentityMemo


class _Thing:
    """An object compared by identity (as the memo's users' engines and point sets are)."""


def test_a_hit_is_the_value_stored_for_the_same_objects_and_key() -> None:
    memo = IdentityMemo(8)
    a, b = _Thing(), _Thing()
    assert memo.put((a,), ("x", 1), "va") == "va"
    memo.put((a, b), ("x", 1), "vab")
    memo.put((), ("x", 1), "plain")
    assert memo.get((a,), ("x", 1)) == "va"
    assert memo.get((a, b), ("x", 1)) == "vab"
    assert memo.get((b, a), ("x", 1)) is None  # the objects' order is part of the key
    assert memo.get((), ("x", 1)) == "plain"
    assert memo.get((a,), ("x", 2)) is None
    assert memo.get((b,), ("x", 1)) is None  # another object: no hit


def test_an_entry_keeps_its_objects_alive() -> None:
    """An entry holds the objects whose ids key it, so their ids cannot pass to another object while it lives."""
    memo = IdentityMemo(4)
    a = _Thing()
    ref = weakref.ref(a)
    memo.put((a,), "k", 1)
    del a
    gc.collect()
    assert ref() is not None
    memo.clear()
    gc.collect()
    assert ref() is None


def test_a_reused_id_never_hits_an_evicted_entry() -> None:
    """After eviction the object dies and CPython may give its id to a new object: the new object misses."""
    memo = IdentityMemo(1)
    reused = 0
    for _ in range(50):
        a = _Thing()
        old_id = id(a)
        memo.put((a,), "k", "for a")
        memo.put((), "other", "evicts a")  # a full memo of one entry: a's entry goes
        del a
        b = _Thing()
        reused += id(b) == old_id
        assert memo.get((b,), "k") is None
    assert reused > 0  # CPython reuses a freed object's memory: the case did occur


def test_the_identity_check_refuses_an_entry_held_for_another_object() -> None:
    """The check behind the key: an entry whose held object is not the one asked about (an id taken over
    by another object) is a miss, whatever its key says."""
    memo = IdentityMemo(4)
    a, b = _Thing(), _Thing()
    memo.put((a,), "k", "for a")
    (full_key,) = memo._data
    memo._data[full_key] = ((b,), "for a")  # as if a had died and b had taken its id
    assert memo.get((a,), "k") is None


@pytest.mark.parametrize("evict", ["clear", "oldest"])
def test_the_memo_is_bounded(evict: str) -> None:
    memo = IdentityMemo(5, evict=evict)
    things = [_Thing() for _ in range(23)]
    for i, t in enumerate(things):
        memo.put((t,), i, i)
        assert 1 <= len(memo) <= 5
        assert memo.get((t,), i) == i  # the latest entry survives its own eviction
    if evict == "oldest":  # the last five remain
        assert [memo.get((t,), i) for i, t in enumerate(things)][-5:] == [18, 19, 20, 21, 22]
        assert all(memo.get((t,), i) is None for i, t in enumerate(things[:-5]))
    else:  # cleared at 5, 10, 15, 20 entries stored: three since
        assert len(memo) == 3


def test_storing_again_does_not_evict() -> None:
    memo = IdentityMemo(2, evict="clear")
    memo.put((), 1, "a")
    memo.put((), 2, "b")
    memo.put((), 2, "b2")  # the key is there: a full memo replaces it
    assert memo.get((), 1) == "a" and memo.get((), 2) == "b2"


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="size"):
        IdentityMemo(0)
    with pytest.raises(ValueError, match="eviction"):
        IdentityMemo(4, evict="lru")
    with pytest.raises(ValueError, match="None"):
        IdentityMemo(4).put((), 1, None)


@pytest.mark.parametrize("evict", ["clear", "oldest"])
def test_threads_storing_at_once_keep_it_bounded_and_right(evict: str) -> None:
    """Executors' threads size pools at once: many threads storing and reading (with evictions all the
    time) raise nothing, every hit is the value stored for its objects and key, and the bound holds."""
    memo = IdentityMemo(16, evict=evict)
    things = [_Thing() for _ in range(24)]  # more than the memo holds: evictions all the time
    start = threading.Barrier(8)
    wrong: list[tuple] = []

    def work(seed: int) -> int:
        rng = random.Random(seed)
        start.wait()
        hits = 0
        for _ in range(3000):
            i = rng.randrange(len(things))
            got = memo.get((things[i],), i % 5)
            if got is None:
                memo.put((things[i],), i % 5, (i, i % 5))
            elif got != (i, i % 5):
                wrong.append(got)
            else:
                hits += 1
            assert len(memo) <= 16
        return hits

    with ThreadPoolExecutor(8) as pool:
        hits = sum(pool.map(work, range(8)))
    assert not wrong
    assert hits > 0 and len(memo) <= 16
