"""The one place that sets numba options, for every compiled kernel of the project.

A base-layer module (it imports no other fleetplan module), so that both the simulator's kernels
(``fleetplan.sim._kernels``, which re-exports it as ``fleetplan.sim._kernels.jit``) and the analytic
engine model's (``fleetplan.queueing._kernels``; ``queueing`` may not import ``sim``) compile with the
same options.

``cache=True`` so a fresh process loads compiled kernels from disk; ``nogil=True`` so
executors may run kernels in threads; ``error_model="numpy"`` so integer and float
division carry no Python exception checks (the kernels never divide by zero by
construction).  Helpers on the hot path use ``njit_inline`` (allocation-free, compiled
without reference counting, called out of line).  No fastmath: the event loop uses ``inf``
as "no next event", and
fastmath's ``ninf`` flag would let the compiler assume it never occurs.

Three kinds of function:

* ``njit``: a kernel that Python calls (an engine's entry point), cached on disk with the code of
  every helper it calls;
* ``njit_helper``: a function that only kernels call (``HelperDispatcher``): typed and lowered on
  its own, but without numba's CPython and cfunc wrappers (they unbox every array of the tuples the
  helpers take and were a fifth of the feature kernel's cold compile) and without module
  optimisation or machine code of its own (``DeferredCodeLibrary``: its LLVM IR is optimised and
  compiled once, inside the calling kernel, instead of once per level of the call tree);
* ``njit_inline`` / ``njit_borrowed``: helpers (as ``njit_helper``) that allocate nothing, compiled
  without reference counting.

Cold compile of the feature kernel on two cores: 33.5 s with ordinary dispatchers, 25.4 s without
the wrappers, 17.6 s deferred (same load); the kernels run as fast or faster (``bench_des.py``,
``bench_features.py``).  A helper called from Python (tests, the twins' checks, a few planners)
still works: that call compiles an ordinary version of it, cached under its own name.

Set ``NUMBA_DISABLE_JIT=1`` to run every kernel as plain Python (used once per release
to check that kernel code is valid Python and for coverage).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import numba
from numba.core import compiler, types
from numba.core.codegen import JITCodeLibrary
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


class DeferredCodeLibrary(JITCodeLibrary):
    """A helper's code kept as LLVM IR for the kernels that call it: neither module-optimised nor
    compiled to machine code on its own.

    numba finalises every library before linking it into a caller: O3 over the library and all it
    links, then machine code.  A helper's code was therefore optimised and compiled once for itself
    and again inside every caller up the tree to the kernel (the feature kernel's event loop, four
    levels deep, four times); deferred, it is optimised and compiled once, inside the kernel that
    Python calls, whose O3 run inlines and optimises it as before (the function passes numba runs
    on each function as it is lowered still run here)."""

    def finalize(self):
        self._codegen._check_llvm_bugs()
        self._raise_if_finalized()
        seen = set()
        for library in self._linking_libraries:  # as numba's finalize, without optimise + compile
            if library not in seen:
                self._reload_init.update(library._reload_init)
                seen.add(library)
                self._final_module.link_in(library._get_module_for_linking(), preserve=True)
        self._final_module.verify()
        self._finalize_dynamic_globals()
        self._finalized = True

    def get_pointer_to_function(self, name):
        return 0  # no machine code (a helper's entry point is never called: HelperDispatcher)

    @property
    def codegen(self):
        return _NoEnvCodegen(self._codegen)


class _NoEnvCodegen:
    """The codegen, except that ``set_env`` (writing a compiled function's environment pointer into
    its machine code) does nothing: deferred code has none.  nopython helpers never read their
    environment; numba's own subroutines (``compile_subroutine``, no machine code) leave it unset too."""

    def __init__(self, codegen) -> None:
        self._codegen = codegen

    def set_env(self, env_name, env) -> None:
        pass

    def __getattr__(self, name):
        return getattr(self._codegen, name)


class HelperCompiler(compiler.Compiler):
    """numba's nopython pipeline, writing to a ``DeferredCodeLibrary``."""

    def compile_extra(self, func):
        if self.state.library is None:
            self.state.library = DeferredCodeLibrary(self.state.targetctx.codegen(), func.__qualname__)
        return super().compile_extra(func)


def _deferral_supported() -> bool:
    """The numba internals ``DeferredCodeLibrary`` relies on are there (checked on numba 0.68; an
    older or newer numba without them compiles helpers the ordinary way: slower, same results)."""
    return all(hasattr(JITCodeLibrary, name) for name in (
        "_get_module_for_linking", "_finalize_dynamic_globals", "_raise_if_finalized", "add_linking_library"))


DEFER_HELPER_CODE = _deferral_supported()


class HelperDispatcher(KernelDispatcher):
    """A ``KernelDispatcher`` for functions that only kernels call (``njit_helper``): compiled without
    CPython / cfunc wrappers into a ``DeferredCodeLibrary`` (not cached on its own: the kernel's cache
    entry holds its code), and not registered for calls from Python.

    A call from Python compiles the same function as an ordinary dispatcher (``python_dispatcher``:
    wrappers, machine code, cached under the name ``<function>.<python>`` so the two never share a
    cache entry) and registers that entry point, so later calls of the same types dispatch directly."""

    _python: CPUDispatcher | None = None

    def add_overload(self, cres):
        self.overloads[tuple(cres.signature.args)] = cres  # no C-level entry: see the class docstring

    def python_dispatcher(self) -> CPUDispatcher:
        """The ordinary dispatcher (wrappers, machine code, cached) of the same function."""
        if self._python is None:
            fn = self.py_func
            twin = type(fn)(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
            twin.__qualname__ = f"{fn.__qualname__}.<python>"
            twin.__doc__, twin.__module__ = fn.__doc__, fn.__module__
            options = {k: v for k, v in self.targetoptions.items() if k not in ("no_cpython_wrapper",
                                                                                  "no_cfunc_wrapper")}
            disp = CPUDispatcher(py_func=twin, locals={}, targetoptions=options)
            if JIT_OPTIONS["cache"]:
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


#: Every kernel Python calls (``njit``), in definition order (``kernels_warm``).
_ENTRY_KERNELS: list = []


def kernels_warm() -> bool:
    """Whether this process has loaded (or compiled) a kernel already: numba's compiler machinery is
    then set up (its typing and target registries, about 0.25 s of CPU on two cores the first time),
    and a further kernel loads from the on-disk cache in about 10 ms.  Callers with a compiled and a
    plain path (``fleetplan.plan.sweep.fleet_latencies_p_s``) take the compiled one for smaller
    inputs then.  False under ``NUMBA_DISABLE_JIT=1`` (nothing is compiled)."""
    return any(disp.signatures for disp in _ENTRY_KERNELS)


def _jit(fn, options: dict, helper: bool = False):
    if numba.config.DISABLE_JIT:  # NUMBA_DISABLE_JIT=1: plain Python, as numba.njit does
        return fn
    options = dict(options)
    cache = options.pop("cache")
    targetoptions = {**options, "nopython": True}
    if not helper:
        disp = KernelDispatcher(py_func=fn, locals={}, targetoptions=targetoptions)
        _ENTRY_KERNELS.append(disp)
    elif DEFER_HELPER_CODE:
        disp = HelperDispatcher(py_func=fn, locals={}, targetoptions=targetoptions, pipeline_class=HelperCompiler)
        cache = False  # deferred code has no machine code to cache; the calling kernel's entry holds it
    else:
        disp = HelperDispatcher(py_func=fn, locals={}, targetoptions=targetoptions)
    if cache:
        disp.enable_caching()
        if not helper:
            drop_stale_cache_index(disp)
    return disp


#: Source trees whose helpers kernels may call (``register_helper_tree``): a kernel's cache index is
#: stale when a ``.py`` file under its own folder or under any of these is newer than it.
_HELPER_TREES: list[str] = []


def register_helper_tree(directory: str | Path) -> None:
    """Declare ``directory`` a tree of kernel helpers (``sim/_kernels``, ``queueing/_kernels``): a
    change to any ``.py`` file under it makes every kernel's cache index stale (``drop_stale_cache_index``).
    Called by each kernel package's jit import, before any of its kernels is defined."""
    path = str(Path(directory))
    if path not in _HELPER_TREES:
        _HELPER_TREES.append(path)


def _newest_source_mtime_ns(directory: str) -> int:
    """Newest modification time (ns) of the ``.py`` files under ``directory`` (a kernel's folder) and
    under the helper trees its kernels may call: the registered trees that hold ``directory`` (a
    kernel package's own), or every registered tree for a kernel outside them all (a test's package
    calling the simulator's helpers)."""
    here = Path(directory)
    own = [t for t in _HELPER_TREES if here == Path(t) or Path(t) in here.parents]
    return _newest_mtime_ns(tuple(sorted({directory, *(own or _HELPER_TREES)})))


@functools.cache
def _newest_mtime_ns(roots: tuple[str, ...]) -> int:
    newest = 0
    for root in roots:
        for dirpath, _dirs, files in os.walk(root):
            for name in files:
                if name.endswith(".py"):
                    newest = max(newest, os.stat(os.path.join(dirpath, name)).st_mtime_ns)
    return newest


def drop_stale_cache_index(disp) -> bool:
    """Delete ``disp``'s on-disk cache index when a kernel source file is newer than it.

    numba validates a cached kernel against the source stamp (mtime, size) of the file that
    defines the kernel Python calls, not of the files its helpers live in: after a change to a
    helper only (a ``git pull``, a merge), numba loads the old machine code and runs the old
    helper.  That hid a kernel-vs-twin difference once.  An index older than the newest file of
    the kernels' source trees is therefore removed here, before any call can load it, and the
    kernel compiles afresh on first call (numba's own rule otherwise: ``numba.core.caching``).
    Returns whether an index was removed; a numba without these internals removes nothing.
    """
    try:
        index_path = disp._cache._cache_file._index_path  # numba internals, see kernel_cache.py
        index_mtime_ns = os.stat(index_path).st_mtime_ns
    except (AttributeError, OSError):
        return False
    if index_mtime_ns >= _newest_source_mtime_ns(str(Path(disp.py_func.__code__.co_filename).parent)):
        return False
    try:
        os.remove(index_path)
    except OSError:
        return False
    return True


def njit(fn):
    """Compile ``fn`` with the project's kernel options: a kernel that Python calls."""
    return _jit(fn, JIT_OPTIONS)


def njit_helper(fn):
    """A function that only kernels call (it may allocate): no CPython or cfunc wrapper
    (``HelperDispatcher``; a call from Python compiles an ordinary twin)."""
    return _jit(fn, HELPER_OPTIONS, helper=True)


def njit_inline(fn):
    """Kernel helper on the hot path: an allocation-free function compiled without NRT (as
    ``njit_borrowed``), called out of line; LLVM inlines it where that pays.

    Helpers take dozens of array arguments; a call with reference counting costs an increment
    and decrement per array, which dominated the event loop.  Inlining them at numba-IR level
    (``inline="always"``) avoids that but makes every kernel one huge function: typing and IR
    inlining take 70-80 % of a cold compile.  Borrowed (NRT-free) helpers avoid the reference
    counts without the copies: the iteration kernel compiles about 6x faster than IR-inlined and
    runs 10-15 % faster (``benchmarks/bench_des.py``).  Keep the scalar arguments' types stable at call sites
    (``KernelDispatcher`` folds literals and narrow integers into int64)."""
    return _jit(fn, BORROWED_OPTIONS, helper=True)


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
    return _jit(fn, BORROWED_OPTIONS, helper=True)
