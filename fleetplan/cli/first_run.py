"""The one-line notice a first run prints while numba compiles the simulator kernels."""

from __future__ import annotations

import click

from fleetplan.sim.kernel_cache import Kernel, compile_estimate_s, uncached_kernels

__all__ = ["announce_compile", "Kernel"]


def announce_compile(kernels: list[Kernel]) -> None:
    """Say on stderr that the kernels of ``kernels`` missing from numba's cache are about to compile."""
    cold = uncached_kernels(kernels)
    if cold:
        names = ", ".join(k.value for k in cold)
        click.echo(f"compiling simulator kernels ({names}), first run only, about "
                   f"{compile_estimate_s(cold):.0f} s on 2 cores", err=True)
