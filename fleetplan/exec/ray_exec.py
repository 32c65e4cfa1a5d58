"""``ray`` executor: tasks as Ray remote calls on a cluster (optional extra ``fleetplan[ray]``).

Ray is imported only when this executor is built.  ``address``: ``"auto"`` connects to the cluster
this machine belongs to (``ray start --head`` or a running ``ray.init``); ``HOST:PORT`` connects to
a remote head node.  If the calling process has already called ``ray.init`` (a test, a notebook),
that session is used as is and left running on ``close()``; a session this executor opened is shut
down on ``close()``.  Workers must be able to import ``fleetplan`` (same environment, or a Ray
``runtime_env``).

``fn`` is put in the object store once per ``map``; each task is one remote call of
``fleetplan.parallel.call_task`` (at most one per cluster CPU in flight) with Ray's own retries
off (``max_retries=0``), so the retry rule is ours and the same as the local executor's: a task
that raises or whose worker dies is retried once, then yielded as failed.  Ray reports deaths per
task, so no suspect round is needed.  A task running longer than ``task_timeout_s`` is
force-cancelled (its worker is killed) and charged an attempt; unlike the local executor, the
clock starts at submission, so it includes Ray's scheduling and any worker start-up (seconds;
irrelevant next to the default of an hour).  Ctrl-C force-cancels every outstanding task and
re-raises.  Ray runs its workers at niceness 15, so on a machine busy with other work they get
less CPU than a local pool's workers.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from fleetplan.errors import ConfigError
from fleetplan.exec.base import DEFAULT_POLL_S, DEFAULT_TASK_TIMEOUT_S, AttemptLedger, Executor
from fleetplan.parallel import ProgressFn, TaskOutcome, TaskRaised, call_task

__all__ = ["RayExecutor", "import_ray"]

INSTALL_HINT = "pip install 'fleetplan[ray]'"


def import_ray():
    """The ``ray`` module, or a one-line ``ConfigError`` saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(f"`executor` ray needs Ray, which is not installed ({exc}); run: {INSTALL_HINT}",
                          param="executor", value="ray") from None
    return ray


class RayExecutor(Executor):
    """Ray executor; see the module docstring."""

    name = "ray"

    def __init__(
        self,
        address: str = "auto",
        task_timeout_s: float | None = DEFAULT_TASK_TIMEOUT_S,
        poll_s: float = DEFAULT_POLL_S,
    ) -> None:
        super().__init__(task_timeout_s, poll_s)
        ray = import_ray()
        self._ray = ray
        self._owns_session = not ray.is_initialized()
        if self._owns_session:
            try:
                ray.init(address=address, include_dashboard=False, log_to_driver=False)
            except Exception as exc:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, ValueError
                raise ConfigError(
                    f"`ray_address` {address!r}: cannot connect to a Ray cluster ({' '.join(str(exc).split())[:200]}); "
                    "start one with `ray start --head` or give the head node as HOST:PORT",
                    param="ray_address", value=address,
                ) from None
        self._remote = ray.remote(max_retries=0, num_cpus=1)(call_task)

    @property
    def n_workers(self) -> int:
        return max(1, int(self._ray.cluster_resources().get("CPU", 1)))

    def close(self) -> None:
        if self._owns_session and self._ray.is_initialized():
            self._ray.shutdown()
        self._owns_session = False

    def map(
        self, fn: Callable[[Any], Any], tasks: Sequence[Any], progress: ProgressFn | None = None
    ) -> Iterator[TaskOutcome]:
        ray = self._ray
        tasks = list(tasks)
        ledger = AttemptLedger(len(tasks), progress)
        fn_ref = ray.put(fn)
        running: dict[Any, tuple[int, float]] = {}

        def submit(index: int) -> None:
            ledger.start(index)
            running[self._remote.remote(fn_ref, tasks[index])] = (index, time.monotonic())

        queue = deque(range(len(tasks)))
        slots = self.n_workers  # at most one task per CPU in flight, so a task's clock starts when it runs
        try:
            while queue or running:
                while queue and len(running) < slots:
                    submit(queue.popleft())
                ready, _ = ray.wait(list(running), num_returns=1, timeout=self.poll_s)
                for ref in ready:
                    index, _ = running.pop(ref)
                    try:
                        ok, payload = ray.get(ref)
                    except ray.exceptions.RayError as exc:  # worker died, task cancelled, object lost
                        text = " ".join(str(exc).split())[:300]
                        ok, payload = False, TaskRaised(f"Ray task failed: {type(exc).__name__}: {text}")
                    outcome = ledger.settle(index, ok, payload, queue)
                    if outcome is not None:
                        yield outcome
                yield from self._after_timeouts(running, ledger, queue)
        except BaseException:
            for ref in running:
                ray.cancel(ref, force=True)
            raise

    def _after_timeouts(self, running, ledger, queue) -> Iterator[TaskOutcome]:
        if self.task_timeout_s is None:
            return
        now = time.monotonic()
        for ref, (index, started) in list(running.items()):
            if now - started <= self.task_timeout_s:
                continue
            del running[ref]
            self._ray.cancel(ref, force=True)
            outcome = ledger.failure(index, f"task timed out after {self.task_timeout_s:g} s")
            if outcome is None:
                queue.appendleft(index)
            else:
                yield outcome
