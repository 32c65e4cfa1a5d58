"""A kernel whose helper changed in another file is compiled afresh, not loaded stale from numba's cache.

numba checks a cached kernel against the source stamp of the kernel's own file only; the project's
``jit.drop_stale_cache_index`` removes an index older than the newest kernel source.  The test builds
a two-file kernel package in a temporary directory, runs it in a fresh interpreter (compiles, caches),
changes only the helper's file and runs it again in another fresh interpreter: the new value must come
back (numba alone returns the old one from its cache).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from fleetplan.sim._kernels import jit

pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1", reason="no compiled kernels")

_KERNEL = textwrap.dedent("""
    from fleetplan.sim._kernels.jit import njit
    from kpkg.helper import helper

    @njit
    def kernel(x):
        return helper(x) + 1
""")
_HELPER = ("from fleetplan.sim._kernels.jit import njit_helper\n\n"
           "@njit_helper\ndef helper(x):\n    return x * {factor}\n")


def _run(tmp_path) -> str:
    code = "from kpkg.kernel import kernel; print(kernel(10))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd()])}
    env.pop("NUMBA_CACHE_DIR", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def _package(tmp_path):
    """The two-file kernel package, run once (compiled and cached): returns its folder."""
    pkg = tmp_path / "kpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "kernel.py").write_text(_KERNEL)
    (pkg / "helper.py").write_text(_HELPER.format(factor=2))
    assert _run(tmp_path) == "21"
    return pkg


def test_a_changed_helper_file_recompiles_the_kernel(tmp_path):
    pkg = _package(tmp_path)
    assert list((pkg / "__pycache__").glob("kernel.kernel-*.nbi")), "the kernel was cached on disk"
    (pkg / "helper.py").write_text(_HELPER.format(factor=3))
    later = os.stat(pkg / "kernel.py").st_mtime_ns + 5_000_000_000  # clearly newer than the cache
    os.utime(pkg / "helper.py", ns=(later, later))
    assert _run(tmp_path) == "31"


def test_an_up_to_date_index_is_kept(tmp_path):
    pkg = _package(tmp_path)
    index = next((pkg / "__pycache__").glob("kernel.kernel-*.nbi"))
    stamp = os.stat(index).st_mtime_ns
    assert _run(tmp_path) == "21"
    assert os.stat(index).st_mtime_ns == stamp, "a fresh cache is loaded, not rewritten"


def test_the_helper_reports_nothing_removed_for_a_dispatcher_without_cache():
    assert jit.drop_stale_cache_index(object()) is False
