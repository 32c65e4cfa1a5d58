"""Counter-based uniforms of the feature kernel (speculative-decoding acceptance draws).

``uniform01(seed, r, counter)`` is a pure function of its three integers: two rounds of
SplitMix64's finaliser (Steele, Lea & Flood 2014, "Fast splittable pseudorandom number
generators"), first over ``seed + (r + 1) * GOLDEN``, then over that plus
``(counter + 1) * GOLDEN``, all modulo 2**64; the top 53 bits scaled by 2**-53 give a float in
[0, 1).  Request ``r`` draws with its own counter, so a request's draws do not depend on what
other requests drew (or on the batch order).  The Python twin ``tests.reference.features_parts.
uniform01`` computes the same integers with explicit ``& (2**64 - 1)`` masks.  The kernel keeps
each request's first round, ``request_key(seed, r)``, and draws with ``keyed_uniform01``.

Acceptance: with ``reach_j = spec_accept[p, 0] * ... * spec_accept[p, j]`` (multiplied in this
order from 1.0), a draw ``u`` accepts the leading positions j with ``u < reach_j``.  The kernel
compares with ``thr_j = min(reach_0, ..., reach_j)`` instead (a NaN stays NaN): ``u < thr_j``
holds exactly when ``u < reach_i`` for every ``i <= j``, so the positions with ``u < thr_j`` are
that leading run for any ``spec_accept``, and they can be counted without stopping at the first
rejection.  And it compares integers: ``u = b 2**-53`` with ``b`` the draw's 53 bits
(``keyed_bits53``), so ``u < thr`` iff ``b < ceil(thr 2**53)`` (scaling by a power of two is
exact; ``thr`` clamped to [0, 1], NaN as 0, changes no comparison): ``accept_thresholds``.
"""

from __future__ import annotations

import math

import numpy as np

from fleetplan.sim._kernels.jit import njit_helper, njit_inline

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
MIX1 = np.uint64(0xBF58476D1CE4E5B9)
MIX2 = np.uint64(0x94D049BB133111EB)
SHIFT_30 = np.uint64(30)
SHIFT_27 = np.uint64(27)
SHIFT_31 = np.uint64(31)
SHIFT_11 = np.uint64(11)
ONE = np.uint64(1)
TWO_POW_M53 = 1.0 / 9007199254740992.0  # 2**-53
TWO_POW_53 = 9007199254740992.0


@njit_inline
def mix64(z):
    """SplitMix64 finaliser of the uint64 ``z``."""
    z = (z ^ (z >> SHIFT_30)) * MIX1
    z = (z ^ (z >> SHIFT_27)) * MIX2
    return z ^ (z >> SHIFT_31)


@njit_inline
def request_key(seed, r):
    """First round of request r's draws under ``seed``, as int64 bits."""
    return np.int64(mix64(np.uint64(seed) + (np.uint64(r) + ONE) * GOLDEN))


@njit_inline
def keyed_uniform01(key, counter):
    """``uniform01(seed, r, counter)`` given ``key = request_key(seed, r)``."""
    z = mix64(np.uint64(key) + (np.uint64(counter) + ONE) * GOLDEN)
    return np.float64(z >> SHIFT_11) * TWO_POW_M53


@njit_inline
def keyed_bits53(key, counter):
    """The 53 bits ``b`` of ``keyed_uniform01(key, counter) = b * 2**-53``, as int64."""
    z = mix64(np.uint64(key) + (np.uint64(counter) + ONE) * GOLDEN)
    return np.int64(z >> SHIFT_11)


@njit_inline
def uniform01(seed, r, counter):
    """Uniform in [0, 1) for draw ``counter`` of request ``r`` under ``seed`` (all ints >= 0)."""
    return keyed_uniform01(request_key(seed, r), counter)


@njit_helper
def accept_thresholds(spec_accept):
    """``ceil(thr[p, j] 2**53)`` of the module doc for every pool's acceptance row (int64)."""
    bits = np.empty(spec_accept.shape, dtype=np.int64)
    for p in range(spec_accept.shape[0]):
        reach = 1.0
        thr = np.inf
        for j in range(spec_accept.shape[1]):
            reach *= spec_accept[p, j]
            thr = thr if thr < reach else reach
            x = thr * TWO_POW_53 if thr > 0.0 else 0.0
            bits[p, j] = np.int64(math.ceil(x if x < TWO_POW_53 else TWO_POW_53))
    return bits
