"""Map a function over items in forked copies of this process (the analytic sweep's pool sizing).

The analytic sweep sizes a few hundred pools in Python and small numpy operations: the GIL keeps
threads from helping, and a process pool's workers would first import the planner (about 1 s on
two cores, as long as the sweep itself).  A fork starts with everything this process has imported
and built, in milliseconds: ``fork_map`` forks ``workers - 1`` children, each maps ``fn`` over its
share of the items (every ``workers``-th one) and sends the results back pickled through a pipe,
while this process maps its own share.  Results come back in input order and are the very values
a serial map gives (same code, same inputs).

Only the command line uses it, where the process is known: nothing but the main thread (and rich's
progress refresh thread, which a child never touches) runs, and the children only compute (no I/O,
no imports, no printing).  Elsewhere, on a platform without a safe ``fork`` (only Linux is used), with
one worker, or for a few items the map runs here, one item after another.  A child that fails or
dies has its share mapped here (an error then surfaces exactly as in a serial map).
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any

from fleetplan.exec.local import default_workers

__all__ = ["MIN_ITEMS_PER_WORKER", "fork_map"]

#: Below this many items per worker a fork costs more than it saves.
MIN_ITEMS_PER_WORKER = 16


def _serial(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
    return [fn(x) for x in items]


def fork_map(fn: Callable[[Any], Any], items: Sequence[Any], workers: int | None = None) -> list[Any]:
    """``[fn(x) for x in items]``, computed by this process and forked children (module docstring)."""
    items = list(items)
    n = min(workers or default_workers(), len(items) // MIN_ITEMS_PER_WORKER)
    if n <= 1 or not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return _serial(fn, items)
    children: list[tuple[int, int, int]] = []  # (share, pid, read end)
    try:
        for j in range(1, n):
            read_fd, write_fd = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: compute, send, leave without running any of the parent's exit code
                os.close(read_fd)
                try:
                    data = pickle.dumps((True, _serial(fn, items[j::n])), protocol=pickle.HIGHEST_PROTOCOL)
                except BaseException:  # noqa: BLE001 - the parent redoes this share and meets the error itself
                    data = pickle.dumps((False, None))
                try:
                    with os.fdopen(write_fd, "wb") as fh:
                        fh.write(data)
                finally:
                    os._exit(0)
            os.close(write_fd)
            children.append((j, pid, read_fd))
        out: list[Any] = [None] * len(items)
        out[0::n] = _serial(fn, items[0::n])
        while children:
            j, pid, read_fd = children.pop(0)
            with os.fdopen(read_fd, "rb") as fh:
                data = fh.read()
            os.waitpid(pid, 0)
            try:
                ok, values = pickle.loads(data)
            except Exception:  # noqa: BLE001 - a child that died mid-write: redo its share
                ok, values = False, None
            out[j::n] = values if ok else _serial(fn, items[j::n])
        return out
    finally:
        for _, pid, read_fd in children:  # an error or Ctrl-C here: stop and reap the rest
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
            try:
                os.close(read_fd)
            except OSError:
                pass
