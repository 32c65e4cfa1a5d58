"""Imported once by the local executor's fork server (``LocalExecutor``, ``forkserver`` start method).

Every worker is forked from the fork server, so whatever this module loads is in every worker
before its first task: the planning modules whose functions are the tasks
(``plan.disagg.verify.verify_any`` for ``optimize``, ``plan.whatif``; unpickling a task imports
its function's module), and the featureless iteration kernel, loaded from numba's on-disk cache
(about 0.3 s per process) by one tiny simulation.  Without this each worker paid both after its
fork, on the critical path of the first task.  Nothing here is needed for correctness: if the warm-up
fails, the workers load the kernel on their first task, which reports any error.
"""

from __future__ import annotations

from fleetplan.plan import verify, whatif  # noqa: F401 - imported for the workers
from fleetplan.plan.disagg import verify as disagg_verify  # noqa: F401 - imported for the workers
from fleetplan.sim.kernel_cache import load_iteration_kernel

__all__ = ["load_kernels"]


def load_kernels() -> None:
    """Call the featureless iteration kernel once (numba loads it from its cache, or compiles it)."""
    load_iteration_kernel()


try:
    load_kernels()
except Exception:  # noqa: BLE001 - only a head start: a worker's first task loads the kernel itself and reports
    pass  # any error with its own context, whereas an exception here would stop the fork server and the pool
