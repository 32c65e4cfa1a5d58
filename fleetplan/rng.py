"""Reproducible random streams.

One integer seed enters at the edge (the caller's ``seed``).  It becomes a
``np.random.SeedSequence``; each consumer asks for a *named* child stream
(``"arrivals"``, ``"lengths"``, ``"routing"``, ...), so adding a new consumer never
shifts the numbers another consumer sees, and a task's stream depends only on
the run seed and the task's identity, not on which worker runs it.
"""

from __future__ import annotations

import hashlib

import numpy as np

DEFAULT_SEED = 0


def _name_key(name: str) -> int:
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "little")


def seed_sequence(seed: int, *path: str | int) -> np.random.SeedSequence:
    """SeedSequence for ``seed`` refined by a path of names or integers.

    ``seed_sequence(7, "candidate-3", "replication", 2)`` is stable across runs,
    processes and machines.
    """
    if seed < 0:
        raise ValueError("seed must be >= 0")
    keys = [_name_key(p) if isinstance(p, str) else int(p) for p in path]
    return np.random.SeedSequence(entropy=int(seed), spawn_key=tuple(keys))


def stream(seed: int, *path: str | int) -> np.random.Generator:
    """A ``np.random.Generator`` (PCG64) for the named stream."""
    return np.random.Generator(np.random.PCG64(seed_sequence(seed, *path)))


def task_seed(seed: int, *path: str | int) -> int:
    """A derived 63-bit integer seed for a task identified by ``path``."""
    state = seed_sequence(seed, *path).generate_state(2, dtype=np.uint32)
    return int((int(state[0]) << 31) ^ int(state[1])) & ((1 << 63) - 1)
