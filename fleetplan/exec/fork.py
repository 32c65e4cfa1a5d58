"""Map a function over items in forked copies of this process (the analytic sweep's pool sizing).

The analytic sweep sizes a few hundred pools in Python and small numpy operations: the GIL keeps
threads from helping, and a process pool's workers would first import the planner (about 1 s on
two cores, as long as the sweep itself).  A fork starts with everything this process has imported
and built, in milliseconds.  ``fork_map`` forks children that, with this process, take the items a
few at a time from a shared counter (so a process slowed by other work on the machine simply takes
fewer; one at a time at the end, so that all finish together) and send their results back pickled
through a pipe (each chunk pickled as soon as it is done, the pickles one after another).  Given
``meanwhile``, this process first runs it and then joins in (the command line loads the simulator
kernel that verification needs next while the children size pools).  Results come back in input order
and are the very values a serial map gives (same code, same inputs).

Only the command line uses it, where the process is known: nothing but the main thread (and rich's
progress refresh thread, which a child never touches) runs, and the children only compute (no I/O,
no imports, no printing).  Elsewhere, on a platform without a safe ``fork`` (only Linux is used), with
one worker, or for a few items the map runs here, one item after another.  If any item fails, in a
child or here, or a child dies, the whole map is redone here in order, so an error surfaces exactly
as in a serial map.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import pickle
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any

from fleetplan.exec.local import default_workers

__all__ = ["CHUNK_ITEMS", "MIN_ITEMS_PER_WORKER", "fork_map"]

#: Below this many items per worker a fork costs more than it saves.
MIN_ITEMS_PER_WORKER = 16
#: Items a process takes from the shared counter at a time.
CHUNK_ITEMS = 4


def _serial(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
    return [fn(x) for x in items]


def _take(counter, n_items: int, n_procs: int) -> tuple[int, int]:
    """The next chunk [lo, hi) of ``n_items`` from the shared ``counter``: ``CHUNK_ITEMS`` items, fewer
    once fewer than two chunks a process are left (one at the end), so that the processes finish
    within about one item of each other (guided self-scheduling)."""
    with counter.get_lock():
        lo = counter.value
        size = max(1, min(CHUNK_ITEMS, (n_items - lo) // (2 * n_procs)))
        counter.value = lo + size
    return lo, min(lo + size, n_items)


def _chunks(fn: Callable[[Any], Any], items: Sequence[Any], counter, n_procs: int):
    """(lo, ``[fn(x) for x in items[lo:hi]]``) of each chunk this process takes until none is left."""
    while True:
        lo, hi = _take(counter, len(items), n_procs)
        if lo >= len(items):
            return
        yield lo, [fn(items[i]) for i in range(lo, hi)]


#: First byte of a child's message: its chunks follow (pickles one after another), or it failed.
_OK, _FAILED = b"\x01", b"\x00"


def _read_chunks(data: bytes) -> tuple[bool, list[tuple[int, list[Any]]]]:
    """A child's message: (True, its (lo, values) chunks in the order it did them), or (False, []) when it failed.
    A message cut short (a child that died mid-write) raises from ``pickle.load``."""
    if data[:1] != _OK:
        return False, []
    stream = io.BytesIO(data)
    stream.seek(1)
    chunks = []
    while stream.tell() < len(data):
        chunks.append(pickle.load(stream))
    return True, chunks


def _work(fn: Callable[[Any], Any], items: Sequence[Any], counter, n_procs: int) -> dict[int, Any]:
    """Map ``fn`` over the chunks of ``items`` this process takes from ``counter`` until none is left."""
    done: dict[int, Any] = {}
    for lo, values in _chunks(fn, items, counter, n_procs):
        done.update(zip(range(lo, lo + len(values)), values, strict=True))
    return done


def fork_map(fn: Callable[[Any], Any], items: Sequence[Any], workers: int | None = None,
             meanwhile: Callable[[], Any] | None = None) -> list[Any]:
    """``[fn(x) for x in items]``, computed by this process and forked children (module docstring).

    ``workers``: processes mapping at once (default: one per core); with ``meanwhile`` that many
    children are forked and this process runs ``meanwhile()`` before it joins in (a head start on
    work that comes next: its errors are ignored here and surface when that work is done for real).
    """
    items = list(items)
    n = min(workers or default_workers(), len(items) // MIN_ITEMS_PER_WORKER)
    if n <= 1 or not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return _serial(fn, items)
    counter = multiprocessing.get_context("fork").Value("q", 0)
    n_procs = n + 1 if meanwhile is not None else n  # children and this process
    children: list[tuple[int, int]] = []  # (pid, read end)
    results: dict[int, Any] = {}
    failed = False
    try:
        for _ in range(n if meanwhile is not None else n - 1):
            read_fd, write_fd = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: compute, send, leave without running any of the parent's exit code
                os.close(read_fd)
                try:  # each chunk pickled as it is done (not all at the end, when the parent waits)
                    data = _OK + b"".join(pickle.dumps(chunk, protocol=pickle.HIGHEST_PROTOCOL)
                                          for chunk in _chunks(fn, items, counter, n_procs))
                except BaseException:  # noqa: BLE001 - the parent redoes the map and meets the error itself
                    data = _FAILED
                try:
                    with os.fdopen(write_fd, "wb") as fh:
                        fh.write(data)
                finally:
                    os._exit(0)
            os.close(write_fd)
            children.append((pid, read_fd))
        if meanwhile is not None:
            try:
                meanwhile()
            except Exception:  # noqa: BLE001 - a head start only (docstring)
                pass
        try:
            results.update(_work(fn, items, counter, n_procs))
        except Exception:  # noqa: BLE001 - redone in order below, where the error surfaces
            failed = True
        while children:
            pid, read_fd = children.pop(0)
            with os.fdopen(read_fd, "rb") as fh:
                data = fh.read()
            os.waitpid(pid, 0)
            try:
                ok, chunks = _read_chunks(data)
            except Exception:  # noqa: BLE001 - a child that died mid-write
                ok, chunks = False, []
            if ok:
                for lo, values in chunks:
                    results.update(zip(range(lo, lo + len(values)), values, strict=True))
            else:
                failed = True
    finally:
        for pid, read_fd in children:  # an error or Ctrl-C here: stop and reap the rest
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
            try:
                os.close(read_fd)
            except OSError:
                pass
    if failed or len(results) != len(items):
        return _serial(fn, items)
    return [results[i] for i in range(len(items))]
