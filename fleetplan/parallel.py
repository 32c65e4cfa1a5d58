"""The seam between independent tasks and whoever runs them (base layer: no fleetplan imports
except ``fleetplan.errors``).

``plan`` and ``sim`` describe *what* to run as ``fn(task)`` over a sequence of tasks and accept an
optional ``map_fn`` (dependency injection); ``fleetplan.exec`` supplies the executors (a local
process pool, Ray), and ``serial_map`` here is the in-process default.  A ``MapFn``:

* yields one ``TaskOutcome`` per task **as tasks complete** (any order), each carrying the task's
  ``index`` in the input sequence so the caller can put results back in input order;
* retries a task that raises (or whose worker dies) once: ``MAX_ATTEMPTS = 2``; a task that fails
  every attempt is yielded with ``error`` set (one line of text) and the other tasks still run;
* re-raises a ``FleetplanError`` (bad user input: retrying cannot help) at once, stopping the run.

Tasks cross process boundaries by pickle.  Frozen specs keep read-only mappings
(``types.MappingProxyType``, e.g. ``GpuProfile.sources``), which pickle cannot handle; importing
this module registers a ``copyreg`` reducer that sends such a mapping as a dict and rebuilds it
read-only (nothing that pickled before changes).

Determinism is the caller's job and is cheap: each task carries its own seed derived from the run
seed and the task's identity (``fleetplan.rng.task_seed``), so results do not depend on which
worker runs a task or in what order tasks finish.
"""

from __future__ import annotations

import copyreg
import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

from fleetplan.errors import FleetplanError

__all__ = [
    "MAX_ATTEMPTS",
    "MapFn",
    "ProgressFn",
    "TaskFailedError",
    "TaskOutcome",
    "TaskRaised",
    "call_task",
    "in_input_order",
    "serial_map",
]

#: Attempts per task: the first run plus one retry.
MAX_ATTEMPTS = 2

#: ``progress(done, total)``, called after each task completes or fails for good.
ProgressFn = Callable[[int, int], None]


def _read_only_mapping(items: dict) -> MappingProxyType:
    return MappingProxyType(items)


def _reduce_read_only_mapping(mapping: MappingProxyType) -> tuple:
    return _read_only_mapping, (dict(mapping),)


copyreg.pickle(MappingProxyType, _reduce_read_only_mapping)


@dataclass(frozen=True)
class TaskOutcome:
    """One task's result (``value``) or, when every attempt failed, its ``error`` (one line)."""

    index: int  # position of the task in the input sequence
    value: Any = None
    error: str | None = None
    attempts: int = 1

    @property
    def ok(self) -> bool:
        return self.error is None


class MapFn(Protocol):
    """``map_fn(fn, tasks)`` -> an iterator of ``TaskOutcome``, one per task, in completion order."""

    def __call__(self, fn: Callable[[Any], Any], tasks: Sequence[Any], /) -> Iterator[TaskOutcome]: ...


class TaskFailedError(FleetplanError):
    """A task failed on every attempt and its caller cannot report it per item."""


@dataclass(frozen=True)
class TaskRaised:
    """What ``call_task`` returns instead of raising: picklable across processes.

    ``user_error`` is set for a ``FleetplanError`` (re-raised by the executor, never retried).
    """

    text: str
    user_error: FleetplanError | None = None


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def _picklable_user_error(exc: FleetplanError) -> FleetplanError:
    """``exc`` if it survives a pickle round trip, else a ``FleetplanError`` with the same line."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - subclasses with custom __init__ signatures do not unpickle
        return FleetplanError(str(exc))


def call_task(fn: Callable[[Any], Any], task: Any) -> tuple[bool, Any]:
    """Run ``fn(task)`` in a worker: ``(True, value)`` or ``(False, TaskRaised)``; never raises an
    ``Exception`` (only ``BaseException`` such as ``KeyboardInterrupt`` passes through)."""
    try:
        return True, fn(task)
    except FleetplanError as exc:
        return False, TaskRaised(str(exc), _picklable_user_error(exc))
    except Exception as exc:  # noqa: BLE001 - a task's failure is reported as data, never lost
        return False, TaskRaised(_one_line(exc))


def serial_map(
    fn: Callable[[Any], Any], tasks: Sequence[Any], progress: ProgressFn | None = None
) -> Iterator[TaskOutcome]:
    """The in-process ``MapFn``: tasks one after another, same retry and failure rules as the
    executors in ``fleetplan.exec`` (a worker death is not possible here)."""
    total = len(tasks)
    for index, task in enumerate(tasks):
        for attempt in range(1, MAX_ATTEMPTS + 1):
            ok, payload = call_task(fn, task)
            if ok:
                outcome = TaskOutcome(index, value=payload, attempts=attempt)
                break
            if payload.user_error is not None:
                raise payload.user_error
            outcome = TaskOutcome(index, error=payload.text, attempts=attempt)
        if progress is not None:
            progress(index + 1, total)
        yield outcome


def in_input_order(outcomes: Iterable[TaskOutcome], n_tasks: int) -> list[TaskOutcome]:
    """All ``n_tasks`` outcomes sorted by task index (raises ``ValueError`` if one is missing)."""
    slots: list[TaskOutcome | None] = [None] * n_tasks
    for outcome in outcomes:
        slots[outcome.index] = outcome
    missing = [i for i, o in enumerate(slots) if o is None]
    if missing:
        raise ValueError(f"executor returned no outcome for tasks {missing}")
    return slots  # type: ignore[return-value]
