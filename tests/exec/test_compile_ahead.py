"""``fleetplan.exec.compile_ahead``: a forked child fills numba's cache with the iteration kernel, so
this process loads it instead of compiling; a child that finds it cached says so and leaves;
``cancel`` stops the child.  Each case runs in a fresh interpreter with its own ``NUMBA_CACHE_DIR`` (an empty cache is
a cold start)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _run(code: str, cache_dir) -> str:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir)}
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env)
    return out.stdout.strip()


@pytest.mark.slow
def test_the_child_compiles_the_kernel_into_the_cache_and_this_process_loads_it(tmp_path):
    code = (
        "from fleetplan.exec.compile_ahead import start_compile_ahead\n"
        "from fleetplan.sim.kernel_cache import Kernel, uncached_kernels\n"
        "ahead = start_compile_ahead()\n"
        "assert ahead.compiling() and ahead.compiling()\n"
        "ahead.wait(); ahead.wait()  # idempotent\n"
        "assert not uncached_kernels([Kernel.ITERATION])\n"
        "from fleetplan.sim._kernels.iteration_level import run_iteration_level\n"
        "from fleetplan.sim.kernel_cache import load_iteration_kernel\n"
        "load_iteration_kernel()\n"
        "print(len(run_iteration_level.stats.cache_hits), len(run_iteration_level.stats.cache_misses))\n"
        "again = start_compile_ahead()\n"
        "print(again.compiling(), again.done)\n"
    )
    hits_misses, again = _run(code, tmp_path).splitlines()
    assert hits_misses == "1 0"  # loaded from the child's cache entry, not compiled here
    assert again == "False True"  # cached now: the child said so and was joined


def test_cancel_stops_the_child_and_leaves_the_kernel_uncompiled(tmp_path):
    code = (
        "import os\n"
        "from fleetplan.exec.compile_ahead import start_compile_ahead\n"
        "from fleetplan.sim.kernel_cache import Kernel, uncached_kernels\n"
        "ahead = start_compile_ahead()\n"
        "ahead.cancel(); ahead.cancel()\n"
        "try:\n"
        "    os.kill(ahead.pid, 0)\n"
        "    print('alive')\n"
        "except ProcessLookupError:\n"
        "    print('gone')\n"
        "print(bool(uncached_kernels([Kernel.ITERATION])))\n"
    )
    assert _run(code, tmp_path).splitlines() == ["gone", "True"]
