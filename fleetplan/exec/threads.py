"""In-process executor on threads: small runs use every core without a process pool's start-up.

The simulator kernels release the GIL (``nogil=True``, ``fleetplan.sim._kernels.jit``), so tasks that
spend their time in a kernel (verification's pool replications, the headroom probes) run in parallel
on threads of this process: no worker start-up (a process pool's workers import the simulator and
load its kernels first, about 1 s on 2 cores), no pickling.  The Python around a kernel (drawing a
pool's stream, summarising its run) holds the GIL and stays serial.

Same contract as the other executors (``fleetplan.parallel``): outcomes as tasks complete, each
task retried once, a ``FleetplanError`` raised at once.  Task functions must be thread-safe; the
simulator's are (its one shared cache, ``fleetplan.sim.steady``'s streams, is locked).  A task's
timeout cannot be enforced on a thread (as with ``workers=1``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from fleetplan.errors import ConfigError
from fleetplan.exec.base import AttemptLedger, Executor
from fleetplan.parallel import ProgressFn, TaskOutcome, call_task

__all__ = ["ThreadExecutor"]


class ThreadExecutor(Executor):
    """``workers`` threads in this process (see the module docstring)."""

    name = "threads"

    def __init__(self, workers: int) -> None:
        super().__init__(task_timeout_s=None)
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ConfigError(f"threads {workers!r} is invalid: give a whole number >= 1")
        self.workers = workers
        self._pool: ThreadPoolExecutor | None = None

    @property
    def n_workers(self) -> int:
        return self.workers

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def map(
        self, fn: Callable[[Any], Any], tasks: Sequence[Any], progress: ProgressFn | None = None
    ) -> Iterator[TaskOutcome]:
        tasks = list(tasks)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="fleetplan-task")
        ledger = AttemptLedger(len(tasks), progress)
        queue: deque[int] = deque(range(len(tasks)))
        running: dict[Future, int] = {}
        try:
            while queue or running:
                while queue and len(running) < self.workers:
                    index = queue.popleft()
                    ledger.start(index)
                    running[self._pool.submit(call_task, fn, tasks[index])] = index
                finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for fut in finished:
                    index = running.pop(fut)
                    ok, payload = fut.result()
                    outcome = ledger.settle(index, ok, payload, queue)
                    if outcome is not None:
                        yield outcome
        finally:
            for fut in running:  # an error or an early stop: let nothing start that was queued
                fut.cancel()
            wait(list(running))
