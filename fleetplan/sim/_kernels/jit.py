"""The one place that sets numba options for the simulator kernels.

``cache=True`` so a fresh process loads compiled kernels from disk; ``nogil=True`` so
executors may run kernels in threads; ``error_model="numpy"`` so integer and float
division carry no Python exception checks (the kernels never divide by zero by
construction).  Helpers on the hot path use ``njit_inline`` (allocation-free, compiled
without reference counting, called out of line).  No fastmath: the event loop uses ``inf``
as "no next event", and
fastmath's ``ninf`` flag would let the compiler assume it never occurs.

Three kinds of function (cold-start cost in parentheses):

* ``njit``: a kernel that Python calls (an engine's entry point);
* ``njit_helper``: a function that only kernels call, compiled without numba's CPython and cfunc
  wrappers (``HelperDispatcher``): the wrappers, which unbox every array of the tuples the helpers
  take, were a fifth of the feature kernel's cold compile and are never run;
* ``njit_inline`` / ``njit_borrowed``: helpers (as ``njit_helper``) that allocate nothing, compiled
  without reference counting.

A helper called from Python (tests, the twins' checks, a few planners) still works: that call
compiles a separate ordinary version with the wrappers, cached under its own name.

Set ``NUMBA_DISABLE_JIT=1`` to run every kernel as plain Python (used once per release
to check that kernel code is valid Python and for coverage).
"""

from __future__ import annotations

import types as pytypes

import numba
from numba.core import types
from numba.core.registry import CPUDispatcher

JIT_OPTIONS = {"cache": True, "nogil": True, "error_model": "numpy"}
#: Functions only kernels call: no CPython / cfunc entry points (``HelperDispatcher``).
HELPER_OPTIONS = {**JIT_OPTIONS, "no_cpython_wrapper": True, "no_cfunc_wrapper": True}
BORROWED_OPTIONS = {**HELPER_OPTIONS, "_nrt": False}  # see njit_borrowed


def _call_type(t):
    """The type a kernel function is compiled for when another kernel passes it ``t``: literals
    (``f(k, 0)``) as their plain type and signed integers as int64."""
    t = types.unliteral(t)
    if isinstance(t, types.Integer) and t.signed and t.bitwidth < 64:
        return types.int64
    return t


class KernelDispatcher(CPUDispatcher):
    """numba's CPU dispatcher, except that a call from another kernel compiles (and finds) one
    specialisation per call shape: ``f(k, p, 0)`` and ``f(k, p, n)`` with ``k`` int32 or int64 share
    the int64 version (numba casts the arguments at the call).  Without it every literal and every
    integer width at a call site compiled the callee again (a third of a cold compile).  Calls from
    Python dispatch as usual."""

    def get_call_template(self, args, kws):
        return super().get_call_template(tuple(_call_type(a) for a in args),
                                         {k: _call_type(v) for k, v in kws.items()})


class HelperDispatcher(KernelDispatcher):
    """A ``KernelDispatcher`` whose compilations have no CPython entry point (``njit_helper``).

    Its overloads are typed, lowered and cached as usual and linked into the kernels that call them,
    but not registered for calls from Python (their entry points have no wrapper to call).  A call
    from Python compiles the same function as an ordinary dispatcher (``python_dispatcher``, cached
    under the name ``<function>.<python>`` so the two never share a cache entry) and registers that
    entry point, so later Python calls of the same types dispatch directly."""

    _python: CPUDispatcher | None = None

    def add_overload(self, cres):
        self.overloads[tuple(cres.signature.args)] = cres  # no C-level entry: see the class docstring

    def python_dispatcher(self) -> CPUDispatcher:
        """The ordinary dispatcher (with wrappers) of the same function, for calls from Python."""
        if self._python is None:
            fn = self.py_func
            twin = pytypes.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
            twin.__qualname__ = f"{fn.__qualname__}.<python>"
            twin.__doc__, twin.__module__ = fn.__doc__, fn.__module__
            options = {k: v for k, v in self.targetoptions.items() if k not in ("no_cpython_wrapper",
                                                                                  "no_cfunc_wrapper")}
            disp = CPUDispatcher(py_func=twin, locals={}, targetoptions=options)
            if self._cache_enabled:
                disp.enable_caching()
            self._python = disp
        return self._python

    def _compile_for_args(self, *args, **kws):
        disp = self.python_dispatcher()
        entry = disp._compile_for_args(*args, **kws)
        for sig, cres in disp.overloads.items():
            if cres.entry_point is entry:
                self._insert([a._code for a in sig], entry, cres.objectmode)
                break
        return entry

    def enable_caching(self):
        super().enable_caching()
        self._cache_enabled = True

    _cache_enabled = False


def _jit(fn, options: dict, dispatcher: type[CPUDispatcher] = KernelDispatcher):
    if numba.config.DISABLE_JIT:  # NUMBA_DISABLE_JIT=1: plain Python, as numba.njit does
        return fn
    options = dict(options)
    cache = options.pop("cache")
    disp = dispatcher(py_func=fn, locals={}, targetoptions={**options, "nopython": True})
    if cache:
        disp.enable_caching()
    return disp


def njit(fn):
    """Compile ``fn`` with the project's kernel options: a kernel that Python calls."""
    return _jit(fn, JIT_OPTIONS)


def njit_helper(fn):
    """A function that only kernels call (it may allocate): no CPython or cfunc wrapper
    (``HelperDispatcher``; a call from Python compiles an ordinary twin)."""
    return _jit(fn, HELPER_OPTIONS, HelperDispatcher)


def njit_inline(fn):
    """Kernel helper on the hot path: an allocation-free function compiled without NRT (as
    ``njit_borrowed``), called out of line; LLVM inlines it where that pays.

    Helpers take dozens of array arguments; a call with reference counting costs an increment
    and decrement per array, which dominated the event loop.  They used to be inlined at
    numba-IR level (``inline="always"``) to avoid that, which made every kernel one huge function:
    typing and IR inlining took 70-80 % of a cold compile (the iteration kernel: about 100 s of
    the README command's 103 s on two cores).  Borrowed (NRT-free) helpers avoid the reference
    counts without the copies: the iteration kernel compiles about 6x faster and runs 10-15 %
    faster (``benchmarks/bench_des.py``).  Keep the scalar arguments' types stable at call sites
    (``KernelDispatcher`` folds literals and narrow integers into int64)."""
    return _jit(fn, BORROWED_OPTIONS, HelperDispatcher)


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
    return _jit(fn, BORROWED_OPTIONS, HelperDispatcher)
