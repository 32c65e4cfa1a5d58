"""Bounded memos of computed values keyed by the identity of objects (base layer).

A sweep computes the same figures from the very same objects many times: an engine model for one GPU
profile and step models in every pool (``plan.pools``), the API server's load and a prompt's attention
work for one set of request points on every GPU type (``queueing.engine``), the API server's wait for
one load at the same counts (``queueing.api_server``).  Hashing such an object field by field (or its
arrays byte by byte) costs more than a look-up should, so the memo keys an entry by the ``id()`` of the
objects it depends on, plus any plain values (numbers, bytes, tuples of them).

An ``id()`` is only an object's while the object lives: another object may get it afterwards.  An entry
therefore holds the objects whose ids key it (they cannot die, nor their ids move, while it lives) and a
hit is checked against them (``is``): an entry never answers for a different object with the same id.
The memo builds the key itself from the objects it is given, so the ids in a key and the objects
checked are always the same ones.

Bounded: when full the memo evicts before it stores — everything at once (``evict="clear"``: one call,
for large memos whose entries are cheap to rebuild) or its oldest entry (``evict="oldest"``: for small
ones a sweep meets in turn).  Safe beside executors' threads: a look-up is one ``dict.get`` (atomic),
and eviction and storing run under a lock, so two threads filling the memo at once evict once each and
neither sees a half-evicted dict.  A value of None cannot be stored (None is the miss).
"""

from __future__ import annotations

import threading
from collections.abc import Hashable

__all__ = ["IdentityMemo"]

EVICTIONS = ("clear", "oldest")


class IdentityMemo:
    """A bounded dict from (objects by identity, plain key) to a value.

    Parameters
    ----------
    size : int
        Entries kept at most (>= 1).
    evict : {"clear", "oldest"}
        What a full memo drops before it stores: every entry, or the oldest one.
    """

    __slots__ = ("size", "evict", "_data", "_lock")

    def __init__(self, size: int, evict: str = "clear") -> None:
        if int(size) != size or size < 1:
            raise ValueError(f"memo size {size!r} is invalid: it must be a whole number >= 1")
        if evict not in EVICTIONS:
            raise ValueError(f"memo eviction {evict!r} is unknown: use one of {', '.join(EVICTIONS)}")
        self.size = int(size)
        self.evict = evict
        self._data: dict[tuple, tuple[tuple, object]] = {}
        self._lock = threading.Lock()

    def get(self, objects: tuple, key: Hashable = ()):
        """The value stored for these ``objects`` (by identity) and ``key``, or None."""
        hit = self._data.get((*map(id, objects), key))
        if hit is None:
            return None
        for held, given in zip(hit[0], objects, strict=True):
            if held is not given:  # (cannot happen while the entry holds its objects; checked all the same)
                return None
        return hit[1]

    def put(self, objects: tuple, key: Hashable, value):
        """Store ``value`` for these ``objects`` (by identity) and ``key``; returns ``value``.  The entry
        holds ``objects`` until it is evicted."""
        if value is None:
            raise ValueError("a memo cannot store None (it means a miss)")
        full_key = (*map(id, objects), key)
        with self._lock:
            data = self._data
            if len(data) >= self.size and full_key not in data:  # (hashing a key may cost: only when full)
                if self.evict == "clear":
                    data.clear()
                else:
                    while len(data) >= self.size:
                        del data[next(iter(data))]
            data[full_key] = (tuple(objects), value)
        return value

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)
