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

import numpy as np

from fleetplan.perf.linear import LinearStepModel
from fleetplan.plan import verify, whatif  # noqa: F401 - imported for the workers
from fleetplan.plan.disagg import verify as disagg_verify  # noqa: F401 - imported for the workers
from fleetplan.sim.engine import simulate
from fleetplan.sim.spec import FleetSpec, PoolSpec, SchedulerLimits

__all__ = ["load_kernels"]

_WARM_REQUESTS = 2  # enough to call the kernel once


class _TwoRequests:
    """A workload of short requests (the kernel's argument types, not its figures, matter)."""

    name = "preload"

    def sample(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        return np.full(n, 8, dtype=np.int64), np.full(n, 2, dtype=np.int64)


def load_kernels() -> None:
    """Call the featureless iteration kernel once (numba loads it from its cache, or compiles it)."""
    pool = PoolSpec(name="p", gpu="preload", n_instances=1, max_context_tokens=64,
                    step_model=LinearStepModel(1e-3, 1e-4, 0.0, 64.0),
                    limits=SchedulerLimits(max_num_seqs=2, max_num_batched_tokens=64, kv_blocks=16))
    simulate(FleetSpec((pool,)), _TwoRequests(), 1.0, _WARM_REQUESTS, warmup_fraction=0.0)


try:
    load_kernels()
except Exception:  # noqa: BLE001 - only a head start: a worker's first task loads the kernel itself and reports
    pass  # any error with its own context, whereas an exception here would stop the fork server and the pool
