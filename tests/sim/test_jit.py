"""The kernel/helper split of ``fleetplan.sim._kernels.jit``: helpers compile without wrappers into
deferred (IR-only) libraries, kernels hold their code, and a helper still works from Python."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest

from fleetplan.sim._kernels import jit

pytestmark = pytest.mark.skipif(numba.config.DISABLE_JIT, reason="compiles kernels")

MODULE = '''
import numpy as np
from fleetplan.sim._kernels.jit import njit, njit_borrowed, njit_helper

@njit_borrowed
def twice(a, i):
    return a[i] * 2.0

@njit_helper
def ones(n):
    return np.ones(n)

@njit_borrowed
def total(a):  # a helper calling a helper: both deferred, compiled once inside the kernel
    s = 0.0
    for i in range(a.size):
        s += twice(a, i)
    return s

@njit
def kernel(a):
    return total(a) + ones(3).sum()
'''


def _run(tmp_path, body: str) -> str:
    module = tmp_path / "jitmod.py"
    if not module.exists():  # rewriting it would make the source newer than its cache (a stale entry, recompiled)
        module.write_text(MODULE)
    code = f"import sys; sys.path.insert(0, {str(tmp_path)!r})\nimport numpy as np, jitmod\n" + textwrap.dedent(body)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("NUMBA_DISABLE_JIT", None)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout


def test_a_kernel_runs_deferred_helpers_and_its_cache_entry_holds_them(tmp_path):
    body = """
    stats = jitmod.kernel.stats
    print(jitmod.kernel(np.arange(4.0)), stats.cache_hits.total(), stats.cache_misses.total())
    """
    assert _run(tmp_path, body).split() == ["15.0", "0", "1"]
    assert _run(tmp_path, body).split() == ["15.0", "1", "0"]  # a fresh process loads it; nothing compiles
    names = {p.name.split(".")[1].split("-")[0] for p in (tmp_path / "cache").rglob("*.nbi")}  # jitmod.<fn>-<line>
    assert "kernel" in names and not {"twice", "ones", "total"} & names  # helpers have no entry of their own


def test_helpers_have_no_machine_code_or_python_entry_but_answer_python_calls(tmp_path):
    body = """
    from fleetplan.sim._kernels.jit import DEFER_HELPER_CODE, DeferredCodeLibrary
    jitmod.kernel(np.arange(4.0))
    cres = next(iter(jitmod.total.overloads.values()))
    print(DEFER_HELPER_CODE, isinstance(cres.library, DeferredCodeLibrary) == DEFER_HELPER_CODE)
    print(jitmod.twice(np.arange(4.0), 3), jitmod.total(np.arange(4.0)), jitmod.ones(2).sum())
    print(jitmod.twice.python_dispatcher().py_func.__qualname__)
    """
    lines = _run(tmp_path, body).splitlines()
    assert lines[0].split()[1] == "True"
    assert lines[1].split() == ["6.0", "12.0", "2.0"]
    assert lines[2] == "twice.<python>"


def test_the_jit_options_keep_wrappers_off_helpers_only():
    assert jit.HELPER_OPTIONS["no_cpython_wrapper"] and jit.HELPER_OPTIONS["no_cfunc_wrapper"]
    assert "no_cpython_wrapper" not in jit.JIT_OPTIONS
    assert jit.BORROWED_OPTIONS["_nrt"] is False and jit.BORROWED_OPTIONS["no_cpython_wrapper"]


def test_in_process_helper_called_from_python_matches_the_kernel_path():
    from fleetplan.sim._kernels.heaps import tree_build, tree_leaves

    vals = np.array([3.0, 1.0, 2.0, np.inf])
    n = int(tree_leaves(4))
    tree = np.empty(2 * n, dtype=np.int64)
    tree_build(vals, tree, n)
    assert tree[1] == 1  # the index of the minimum
