"""``local`` executor: a process pool on this machine (the default).

``concurrent.futures.ProcessPoolExecutor`` with the ``forkserver`` start method (default: workers
are forked from a single-threaded server process that imported ``fleetplan.exec.preload``, never from
the caller, whose numba/OpenMP threads could deadlock a forked child; ``spawn`` is also accepted).
``workers`` defaults to the number of cores; ``workers=1`` runs tasks in the calling process (no
pickling, no start-up; a task's timeout cannot be enforced there).  The pool is created on the
first ``map`` and kept until ``close()``, so each worker loads the numba kernels once.

Failures (see ``fleetplan.parallel``):

* a task that raises is retried once, then yielded as failed with the error text;
* a worker that dies (segfault, ``os._exit``, OOM kill) breaks the whole pool, so the culprit is
  unknown when several tasks were in flight: those tasks become *suspects*, are not charged an
  attempt, and are re-run one at a time in a fresh pool, where a death is attributable (charged;
  retried once; then reported failed) and the innocent ones simply succeed;
* a task running longer than ``task_timeout_s`` is charged an attempt, its pool's workers are
  killed (a running future cannot be cancelled) and the other in-flight tasks re-run uncharged.
  The clock starts when the task starts in its worker (each worker writes the start time to a
  shared array, one slot per task in flight), so worker start-up and imports never count;
* Ctrl-C (``KeyboardInterrupt``) or any error in the caller: queued futures are cancelled, the
  workers are killed and the pool shut down, and the exception propagates.  Workers ignore SIGINT
  so only the parent handles it.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from fleetplan.errors import ConfigError
from fleetplan.exec.base import DEFAULT_POLL_S, DEFAULT_TASK_TIMEOUT_S, AttemptLedger, Executor
from fleetplan.parallel import ProgressFn, TaskOutcome, call_task, serial_map

__all__ = ["LocalExecutor", "default_workers"]

START_METHODS = ("spawn", "forkserver")
#: Modules the fork server imports before forking workers (forkserver start method only): the task
#: functions' modules and the iteration kernel loaded from numba's cache (``fleetplan.exec.preload``).
FORKSERVER_PRELOAD = ("fleetplan.exec.preload",)
_KILL_JOIN_S = 5.0  # wait for killed workers to be reaped


def default_workers() -> int:
    """Cores available to this process (``os.sched_getaffinity`` where supported)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


_started_at_s = None  # in a worker: the pool's shared start-time board (time.monotonic, system-wide)


def _worker_init(board) -> None:
    global _started_at_s
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and kills us
    _started_at_s = board


def _run_in_worker(slot: int, fn: Callable[[Any], Any], task: Any) -> tuple[bool, Any]:
    _started_at_s[slot] = time.monotonic()
    return call_task(fn, task)


class LocalExecutor(Executor):
    """Process-pool executor; see the module docstring."""

    name = "local"

    def __init__(
        self,
        workers: int | None = None,
        task_timeout_s: float | None = DEFAULT_TASK_TIMEOUT_S,
        poll_s: float = DEFAULT_POLL_S,
        start_method: str = "forkserver",
    ) -> None:
        super().__init__(task_timeout_s, poll_s)
        n = default_workers() if workers is None else workers
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(param="workers", value=workers, rule="give a whole number of processes >= 1")
        if start_method not in START_METHODS:
            raise ConfigError(f"start method {start_method!r} is invalid: use one of {', '.join(START_METHODS)}")
        if task_timeout_s is not None and not task_timeout_s > 0:
            raise ConfigError(f"task_timeout_s = {task_timeout_s!r} is invalid: give seconds > 0, or None")
        self.workers = n
        self.start_method = start_method
        self._pool: ProcessPoolExecutor | None = None
        self._board = None  # shared f8[workers]: start time of the task in each slot, 0 = not started

    @property
    def n_workers(self) -> int:
        return self.workers

    def worker_pids(self) -> tuple[int, ...]:
        """Process ids of the live pool's workers (empty before the first ``map`` or after ``close``)."""
        return tuple(self._pool._processes or ()) if self._pool is not None else ()  # noqa: SLF001

    def close(self) -> None:
        self._discard_pool(kill=False)

    def _ensure_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            ctx = multiprocessing.get_context(self.start_method)
            if self.start_method == "forkserver":
                # The fork server imports the simulator once (numba kernels loaded from the on-disk
                # cache); every worker forked from it starts with them, instead of a fresh interpreter.
                ctx.set_forkserver_preload(list(FORKSERVER_PRELOAD))
            self._board = ctx.Array("d", self.workers, lock=False)
            self._pool = ProcessPoolExecutor(self.workers, mp_context=ctx, initializer=_worker_init,
                                             initargs=(self._board,))
        return self._pool

    def _discard_pool(self, kill: bool) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        procs = list((pool._processes or {}).values())  # noqa: SLF001 - no public way to kill workers
        if kill:
            for proc in procs:
                if proc.is_alive():
                    proc.kill()
        pool.shutdown(wait=not kill, cancel_futures=True)
        for proc in procs:
            proc.join(_KILL_JOIN_S)

    def map(
        self, fn: Callable[[Any], Any], tasks: Sequence[Any], progress: ProgressFn | None = None
    ) -> Iterator[TaskOutcome]:
        if self.workers == 1:
            yield from serial_map(fn, tasks, progress)
            return
        try:
            yield from self._map_pool(fn, list(tasks), progress)
        except BaseException:
            # Ctrl-C, a user error re-raised from a task, or the consumer stopped early (GeneratorExit):
            # nothing may keep running in the background.
            self._discard_pool(kill=True)
            raise

    def _map_pool(
        self, fn: Callable[[Any], Any], tasks: list[Any], progress: ProgressFn | None
    ) -> Iterator[TaskOutcome]:
        ledger = AttemptLedger(len(tasks), progress)
        queue: deque[int] = deque(range(len(tasks)))
        suspects: deque[int] = deque()  # run alone, so a worker death is attributable
        running: dict[Future, tuple[int, int]] = {}  # future -> (task index, board slot)

        def submit(index: int) -> None:
            ledger.start(index)
            pool = self._ensure_pool()
            slot = min(set(range(self.workers)) - {s for _, s in running.values()})
            self._board[slot] = 0.0
            running[pool.submit(_run_in_worker, slot, fn, tasks[index])] = (index, slot)

        while queue or suspects or running:
            if suspects:
                if not running:
                    submit(suspects.popleft())
            else:
                while queue and len(running) < self.workers:
                    submit(queue.popleft())
            finished, _ = wait(list(running), timeout=self.poll_s, return_when=FIRST_COMPLETED)
            broken: list[int] = []
            for fut in finished:
                index, _ = running.pop(fut)
                try:
                    ok, payload = fut.result()
                except BrokenProcessPool:
                    broken.append(index)
                    continue
                except Exception as exc:  # noqa: BLE001 - e.g. an unpicklable task or result
                    ok, payload = call_task(_reraise, exc)
                outcome = ledger.settle(index, ok, payload, queue)
                if outcome is not None:
                    yield outcome
            if broken:
                yield from self._after_break(broken, running, ledger, queue, suspects)
            elif self.task_timeout_s is not None:
                yield from self._after_timeouts(running, ledger, queue)

    def _after_break(self, broken, running, ledger, queue, suspects) -> Iterator[TaskOutcome]:
        """A worker died: every task still in flight was cut short with it."""
        victims = broken + [index for index, _ in running.values()]
        running.clear()
        self._discard_pool(kill=True)
        if len(victims) > 1:
            for index in victims:  # culprit unknown: no charge, re-run one at a time
                ledger.uncharge(index)
                suspects.append(index)
            return
        (index,) = victims
        outcome = ledger.failure(index, "worker process died while running the task")
        if outcome is None:
            suspects.appendleft(index)
        else:
            yield outcome

    def _after_timeouts(self, running, ledger, queue) -> Iterator[TaskOutcome]:
        now = time.monotonic()
        started = {index: self._board[slot] for index, slot in running.values()}
        late = [index for index, at in started.items() if at > 0 and now - at > self.task_timeout_s]
        if not late:
            return
        others = [index for index, _ in running.values() if index not in late]
        running.clear()
        self._discard_pool(kill=True)
        for index in others:
            ledger.uncharge(index)
            queue.appendleft(index)
        for index in late:
            outcome = ledger.failure(index, f"task timed out after {self.task_timeout_s:g} s")
            if outcome is None:
                queue.appendleft(index)
            else:
                yield outcome


def _reraise(exc: BaseException) -> None:
    raise exc
