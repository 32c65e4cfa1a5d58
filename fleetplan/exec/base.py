"""The executor interface shared by ``local`` and ``ray`` (see ``fleetplan.parallel`` for the contract).

An ``Executor`` maps ``fn`` over tasks and yields ``TaskOutcome``s as tasks complete; it is itself a
``MapFn`` (``executor(fn, tasks)``), so it is passed to ``plan``/``sim`` as ``map_fn=executor``.
Executors hold workers (processes, a Ray connection) across ``map`` calls so start-up costs (Python
start, numba kernels loaded from the on-disk cache, ~0.7 s per worker) are paid once; ``close()``
(or leaving a ``with`` block) releases them.

Retry bookkeeping is shared here: ``AttemptLedger`` counts attempts per task and decides between
"retry" and "failed for good" (``fleetplan.parallel.MAX_ATTEMPTS`` = 2).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from fleetplan.parallel import MAX_ATTEMPTS, ProgressFn, TaskOutcome

__all__ = ["DEFAULT_POLL_S", "DEFAULT_TASK_TIMEOUT_S", "AttemptLedger", "Executor"]

#: Longest a single task may run before it counts as hung (its worker is killed, the task retried
#: once, then reported failed).  A verification with its upward search takes minutes at most.
DEFAULT_TASK_TIMEOUT_S = 3600.0
#: How often result waits wake up to check timeouts (and stay responsive to Ctrl-C).
DEFAULT_POLL_S = 0.25


class AttemptLedger:
    """Attempts per task; turns a failure into a retry or a final ``TaskOutcome``.

    ``runs`` counts every start (reported as ``TaskOutcome.attempts``); ``charged`` counts the
    attempts that count against the retry limit (a run cut short by another task's crash is not).
    """

    def __init__(self, n_tasks: int, progress: ProgressFn | None) -> None:
        self.runs = [0] * n_tasks
        self.charged = [0] * n_tasks
        self.n_tasks = n_tasks
        self.n_done = 0
        self._progress = progress

    def start(self, index: int) -> None:
        self.runs[index] += 1
        self.charged[index] += 1

    def uncharge(self, index: int) -> None:
        """The run was cut short through no fault of the task (another task killed the pool)."""
        self.charged[index] -= 1

    def success(self, index: int, value: Any) -> TaskOutcome:
        return self._finish(TaskOutcome(index, value=value, attempts=self.runs[index]))

    def failure(self, index: int, text: str) -> TaskOutcome | None:
        """The final outcome when ``index`` has used every attempt, else None (retry it)."""
        if self.charged[index] < MAX_ATTEMPTS:
            return None
        return self._finish(TaskOutcome(index, error=f"{text} (after {self.charged[index]} attempts)",
                                        attempts=self.runs[index]))

    def settle(self, index: int, ok: bool, payload: Any, queue) -> TaskOutcome | None:
        """Record one finished run (``call_task``'s ``(ok, payload)``): the outcome to yield, or
        None when the task was put back at the front of ``queue`` for its retry.  A user error
        (bad input inside the task) is re-raised at once, never retried."""
        if ok:
            return self.success(index, payload)
        if payload.user_error is not None:
            raise payload.user_error
        outcome = self.failure(index, payload.text)
        if outcome is None:
            queue.appendleft(index)
        return outcome

    def _finish(self, outcome: TaskOutcome) -> TaskOutcome:
        self.n_done += 1
        if self._progress is not None:
            self._progress(self.n_done, self.n_tasks)
        return outcome


class Executor(abc.ABC):
    """Runs independent tasks; see the module docstring."""

    #: registry name (``EXECUTOR_NAMES``)
    name: str = ""

    def __init__(self, task_timeout_s: float | None = DEFAULT_TASK_TIMEOUT_S, poll_s: float = DEFAULT_POLL_S) -> None:
        self.task_timeout_s = task_timeout_s
        self.poll_s = poll_s

    @abc.abstractmethod
    def map(
        self, fn: Callable[[Any], Any], tasks: Sequence[Any], progress: ProgressFn | None = None
    ) -> Iterator[TaskOutcome]:
        """Yield one ``TaskOutcome`` per task as tasks complete (see ``fleetplan.parallel``).

        ``fn`` and the tasks must be picklable (module-level functions, ``functools.partial``,
        frozen dataclasses).  ``progress(done, total)`` is called as tasks finish.
        """

    @property
    @abc.abstractmethod
    def n_workers(self) -> int:
        """How many tasks run at once."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release workers (idempotent)."""

    def __call__(self, fn: Callable[[Any], Any], tasks: Sequence[Any], /) -> Iterator[TaskOutcome]:
        return self.map(fn, tasks)

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def describe(self) -> str:
        """One line for logs and reports, e.g. ``local (2 workers)``."""
        return f"{self.name} ({self.n_workers} workers)"
