"""The one place that sets numba options for the simulator kernels.

``cache=True`` so a fresh process loads compiled kernels from disk; ``nogil=True`` so
executors may run kernels in threads; ``error_model="numpy"`` so integer and float
division carry no Python exception checks (the kernels never divide by zero by
construction).  Helpers on the hot path use
``njit_inline``.  No fastmath: the event loop uses ``inf`` as "no next event", and
fastmath's ``ninf`` flag would let the compiler assume it never occurs.

Set ``NUMBA_DISABLE_JIT=1`` to run every kernel as plain Python (used once per release
to check that kernel code is valid Python and for coverage).
"""

from __future__ import annotations

import numba

JIT_OPTIONS = {"cache": True, "nogil": True, "error_model": "numpy"}
BORROWED_OPTIONS = {**JIT_OPTIONS, "_nrt": False}  # see njit_borrowed


def njit(fn):
    """Compile ``fn`` with the project's kernel options."""
    return numba.njit(**JIT_OPTIONS)(fn)


def njit_inline(fn):
    """Kernel helper inlined into its callers at numba-IR level.

    Helpers take dozens of array arguments; an out-of-line call costs a reference-count
    increment and decrement per array, which dominated the event loop before inlining."""
    return numba.njit(inline="always", **JIT_OPTIONS)(fn)


def njit_borrowed(fn):
    """Kernel function that allocates nothing, compiled without numba's reference counting (NRT).

    Its array arguments are borrowed from a caller that keeps them alive for the whole call, so
    neither its calls nor the tuple arguments of the helpers inlined into it pay an atomic
    increment / decrement per array (in the feature kernel's event loop these pairs were about
    half of the run time: the reference-count pruning pass gives up on functions that large).
    Allocating (``np.empty``, array-returning expressions) inside it fails to compile.

    ``_nrt`` is an underscore-prefixed (semi-private) numba flag, used by numba's own
    tests (checked here on numba 0.68); if a numba release drops it, set ``BORROWED_OPTIONS = JIT_OPTIONS``:
    the same results, only slower."""
    return numba.njit(**BORROWED_OPTIONS)(fn)
