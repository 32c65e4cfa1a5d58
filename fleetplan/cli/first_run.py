"""The one-line notice a first run prints while numba compiles the simulator kernels."""

from __future__ import annotations

import os
import sys

import click

from fleetplan.sim.kernel_cache import Kernel, compile_estimate_s, uncached_kernels

__all__ = ["announce_compile", "Kernel", "NOTICE_ENV"]

#: Set to 1 to print the compile notice when stderr is not a terminal.
NOTICE_ENV = "FLEETPLAN_COMPILE_NOTICE"


def announce_compile(kernels: list[Kernel]) -> None:
    """Say on stderr that the kernels of ``kernels`` missing from numba's cache are about to compile.

    Only to a person: when stderr is a terminal, or ``FLEETPLAN_COMPILE_NOTICE=1`` asks for it (scripts
    and tests that read stderr keep their one-line errors)."""
    if not (sys.stderr.isatty() or os.environ.get(NOTICE_ENV) == "1"):
        return
    cold = uncached_kernels(kernels)
    if cold:
        names = ", ".join(k.value for k in cold)
        click.echo(f"compiling simulator kernels ({names}), first run only, about "
                   f"{compile_estimate_s(cold):.0f} s on 2 cores", err=True)
