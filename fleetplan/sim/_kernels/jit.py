"""The simulator kernels' numba options: ``fleetplan.jit`` (the project's one jit options module, in the
base layer so that ``queueing``'s kernels share it), re-exported for the kernels of ``sim/_kernels``,
whose folder is registered here as a helper tree (a change to any file in it makes every simulator
kernel's cache index stale: ``fleetplan.jit.drop_stale_cache_index``)."""

from __future__ import annotations

from pathlib import Path

from fleetplan.jit import (
    BORROWED_OPTIONS,
    DEFER_HELPER_CODE,
    HELPER_OPTIONS,
    JIT_OPTIONS,
    DeferredCodeLibrary,
    HelperCompiler,
    HelperDispatcher,
    KernelDispatcher,
    drop_stale_cache_index,
    njit,
    njit_borrowed,
    njit_helper,
    njit_inline,
    register_helper_tree,
)

__all__ = ["BORROWED_OPTIONS", "DEFER_HELPER_CODE", "HELPER_OPTIONS", "JIT_OPTIONS", "DeferredCodeLibrary",
           "HelperCompiler", "HelperDispatcher", "KernelDispatcher", "drop_stale_cache_index", "njit",
           "njit_borrowed", "njit_helper", "njit_inline"]

register_helper_tree(Path(__file__).parent)
