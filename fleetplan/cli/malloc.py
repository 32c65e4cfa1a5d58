"""The process's allocator settings for the command line (glibc only).

The analytic sweep builds thousands of numpy temporaries of a few hundred KB (a pool's batch-grid x
request-point tables: 49 x 600 doubles are 235 KB).  glibc serves blocks above its mmap threshold
(128 KB, raised only after such a block is freed) with a fresh ``mmap`` and unmaps them on ``free``, so
every temporary's pages fault in again: one ``perf.linear.step_time_array_s`` call on a 49 x 600 table took
1.55 ms with the defaults and 0.35 ms with the settings below, and the analytic phase of the README
command about 10 % less CPU (1.84-2.01 s against 2.14-2.17 s, load 1.7; a 70B sweep 49.7 s against
53.7 s), its figures unchanged (allocation does not change arithmetic).  The command line therefore keeps
such blocks in the heap (``M_MMAP_THRESHOLD`` 64 MiB) and returns heap memory to the system only above
256 MiB of free top (``M_TRIM_THRESHOLD``), as ``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_`` in
the environment would (glibc's ``mallopt(3)``); either variable set by the user wins, and the library
never changes process-wide state.  The forked sweep children inherit the settings.

The collector too: once a command has imported what it runs, ``freeze_imported`` moves every object
alive (the imported modules' functions, classes and constants: some 8·10^4 objects for ``optimize``)
into the collector's permanent generation, so that the full collections the sweep's allocations trigger
traverse only what the command built since (``gc.freeze``; the README command's analytic phase spent
about 40 ms of 0.8 s of CPU in one such collection, 4 ms after the freeze; figures unchanged: collection
does not change arithmetic).  Python's documentation recommends the same before ``fork`` (the children
then do not write to the frozen objects' pages).
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys

__all__ = ["MMAP_THRESHOLD_BYTES", "TRIM_THRESHOLD_BYTES", "freeze_imported", "tune_malloc"]

#: glibc ``mallopt`` parameters (malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: Blocks below this come from the heap (glibc's ceiling for the threshold on 64-bit is 32 MiB x 2).
MMAP_THRESHOLD_BYTES = 64 << 20
#: Free memory at the heap's top kept before it is returned to the system.
TRIM_THRESHOLD_BYTES = 256 << 20
_ENV = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def tune_malloc() -> bool:
    """Set the two thresholds (module docstring); True when glibc took them, False where it could not
    (not Linux, no glibc ``mallopt``, or the user set either variable)."""
    if not sys.platform.startswith("linux") or any(v in os.environ for v in _ENV):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own C library
    except (OSError, AttributeError):  # musl or another libc without mallopt
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(mallopt(M_TRIM_THRESHOLD,
                                                                                  TRIM_THRESHOLD_BYTES))


def freeze_imported() -> int:
    """``gc.freeze()`` (module docstring): the objects alive now are never traversed by the collector
    again; returns how many the permanent generation holds."""
    gc.freeze()
    return gc.get_freeze_count()
