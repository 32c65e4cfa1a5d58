"""Compile the simulator's iteration kernel in a forked child while this process plans (a cold start).

numba compiles a kernel on its first call, about 6-10 s of one core for the featureless iteration
kernel (``sim.kernel_cache.COMPILE_ESTIMATE_S``; almost all of it numba's typing and lowering in
Python, so ``NUMBA_OPT`` does not shorten it), and stores the machine code in its on-disk cache.  A
first ``optimize`` needs the kernel only when phase 2 starts, after the imports, the workload, the
request and the analytic sweep (together several seconds).  ``start_compile_ahead`` forks a child
at the start of the command that compiles the kernel and writes numba's cache; this process goes
on with its work and, before its first simulation, ``CompileAhead.wait`` joins the child, after which
the kernel loads from the cache (about 0.3 s) as on any warm run.  The compile so runs on the
second core from the command's start instead of from the sweep's (``fleetplan.exec.fork``'s
``meanwhile``), and the sweep's children no longer share their cores with it for the whole sweep.

Whether the kernel is cached is the child's question too (answering it imports numba and the kernel
modules, about 0.5 s, which would otherwise sit at the start of every run): it sends one byte back
through a pipe, ``compiling`` reads it, and a child that found the kernel cached leaves at once; a warm
run so costs this process nothing but the fork.

Nothing here changes a result: the child only fills numba's cache (written by numba, atomically),
and every figure is computed by this process as without it.  If the child fails or is killed, the
kernel compiles on its first call here, as before.  Only where it is safe: Linux with ``fork``,
called from a single-threaded process (the command line, before its progress display or any pool
starts).  The child prints nothing (its standard streams go to ``/dev/null``) and leaves with
``os._exit``, running none of this process's exit code.
"""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass, field

__all__ = ["CompileAhead", "start_compile_ahead"]


@dataclass
class CompileAhead:
    """A forked child compiling the iteration kernel into numba's cache; ``wait`` joins it."""

    pid: int
    status_fd: int  # read end of the pipe on which the child says whether it compiles
    done: bool = field(default=False)
    _compiling: bool | None = field(default=None)

    def compiling(self) -> bool:
        """Whether the child compiles the kernel (it was not cached); blocks until the child has
        looked (numba's import, well under a second).  A child that found it cached has left."""
        if self._compiling is None:
            try:
                with os.fdopen(self.status_fd, "rb") as fh:
                    self._compiling = fh.read(1) == b"1"
            except OSError:
                self._compiling = False
            if not self._compiling:
                self.wait()
        return self._compiling

    def wait(self) -> None:
        """Block until the child has written the kernel to numba's cache (or failed: then the first call
        here compiles it).  Idempotent."""
        if self.done:
            return
        self.done = True
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:  # reaped elsewhere: nothing to wait for
            pass

    def cancel(self) -> None:
        """Stop the child if it still runs (the command ended before it needed the kernel)."""
        if self._compiling is None:
            try:
                os.close(self.status_fd)
            except OSError:
                pass
            self._compiling = False
        if self.done:
            return
        self.done = True
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def _compile_in_child(status_fd: int) -> None:
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    from fleetplan.sim.kernel_cache import Kernel, load_iteration_kernel, uncached_kernels

    cold = bool(uncached_kernels([Kernel.ITERATION]))  # the JIT off: nothing to compile
    os.write(status_fd, b"1" if cold else b"0")
    os.close(status_fd)
    if cold:
        load_iteration_kernel()


def start_compile_ahead() -> CompileAhead | None:
    """A child that compiles the featureless iteration kernel into numba's cache when it is not there
    (``CompileAhead.compiling`` says whether), or None where the platform has no safe ``fork``
    (module docstring)."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compile, then leave without this process's exit handlers
        os.close(read_fd)
        code = 0
        try:
            _compile_in_child(write_fd)
        except BaseException:  # noqa: BLE001 - the parent compiles on first use and reports any error itself
            code = 1
        os._exit(code)
    os.close(write_fd)
    return CompileAhead(pid, read_fd)
