"""Executors: run independent tasks (verifications, replications, pools, what-if points) in parallel.

``make_executor("local" | "ray", ...)`` builds one; an executor is a ``fleetplan.parallel.MapFn``,
passed to the library as ``map_fn=executor``.  ``local`` (default) is a process pool on this machine
(``fleetplan.exec.local``); ``ray`` runs on a Ray cluster (``fleetplan.exec.ray_exec``, optional
extra ``fleetplan[ray]``, imported only when chosen).  Unknown names are an ``UnknownNameError``
listing the valid ones; there is no fallback from one executor to another.
"""

from __future__ import annotations

from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.exec.base import DEFAULT_TASK_TIMEOUT_S, Executor
from fleetplan.exec.local import LocalExecutor, default_workers

__all__ = ["EXECUTOR_NAMES", "DEFAULT_EXECUTOR", "Executor", "LocalExecutor", "default_workers", "make_executor"]

EXECUTOR_NAMES = ("local", "ray")
DEFAULT_EXECUTOR = "local"


def make_executor(
    name: str = DEFAULT_EXECUTOR,
    workers: int | None = None,
    ray_address: str | None = None,
    task_timeout_s: float | None = DEFAULT_TASK_TIMEOUT_S,
) -> Executor:
    """The executor called ``name``.

    ``workers`` (local only; default: the number of cores, 1 = in-process) and ``ray_address``
    (ray only; default ``"auto"``) are rejected with the other executor rather than ignored.
    """
    key = str(name).strip().lower()
    if key not in EXECUTOR_NAMES:
        raise UnknownNameError("executor", str(name), EXECUTOR_NAMES)
    if key == "local":
        if ray_address is not None:
            raise ConfigError(f"`ray_address` {ray_address!r} applies to `executor` ray only", param="ray_address",
                              value=ray_address, fix="drop it or choose `executor` ray")
        return LocalExecutor(workers, task_timeout_s=task_timeout_s)
    if workers is not None:
        raise ConfigError(f"`workers` {workers} applies to `executor` local only; Ray uses the cluster's CPUs "
                          "(drop `workers`)", param="workers", value=workers)
    from fleetplan.exec.ray_exec import RayExecutor

    return RayExecutor(ray_address or "auto", task_timeout_s=task_timeout_s)
