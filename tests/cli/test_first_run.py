"""What a newcomer sees on a first run: the compile notice, and defaults that are stated."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from click.testing import CliRunner

from fleetplan.cli import first_run
from fleetplan.cli.main import cli
from fleetplan.hardware import load_catalog
from fleetplan.plan.gridflex import size_fleet_analytic
from fleetplan.sim.kernel_cache import COMPILE_ESTIMATE_S, Kernel, uncached_kernels
from fleetplan.workload import load_workload


def test_empty_numba_cache_is_detected_without_compiling(tmp_path):
    code = ("import time; t0 = time.perf_counter()\n"
            "from fleetplan.sim.kernel_cache import Kernel, uncached_kernels\n"
            "print([k.value for k in uncached_kernels([Kernel.ITERATION, Kernel.PDD, Kernel.ITERATION])],"
            " round(time.perf_counter() - t0, 1))")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    env.pop("NUMBA_DISABLE_JIT", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.startswith("['iteration', 'pdd']")
    assert not any(tmp_path.rglob("*.nbc"))  # nothing was compiled


def test_a_kernel_that_ran_counts_as_cached():
    from fleetplan.sim import FleetSpec, build_pool, simulate

    spec = FleetSpec((build_pool(load_catalog().get("h100"), "p", 1, 65536),))
    simulate(spec, load_workload("lmsys"), 5.0, 200)
    assert uncached_kernels([Kernel.ITERATION]) == ()


def test_the_head_start_loads_the_kernel_verification_calls():
    from fleetplan.sim import FleetSpec, build_pool, simulate
    from fleetplan.sim._kernels import run_iteration_level
    from fleetplan.sim.kernel_cache import load_iteration_kernel

    load_iteration_kernel()
    assert uncached_kernels([Kernel.ITERATION]) == ()
    loaded = set(run_iteration_level.overloads)
    spec = FleetSpec((build_pool(load_catalog().get("h100"), "p", 2, 65536),))
    simulate(spec, load_workload("lmsys"), 5.0, 200)
    assert set(run_iteration_level.overloads) == loaded  # a real run's call has the warmed-up signature


def test_compile_notice_names_kernels_and_time(monkeypatch, capsys):
    monkeypatch.setattr(first_run, "uncached_kernels", lambda kernels: (Kernel.ITERATION,))
    first_run.announce_compile([Kernel.ITERATION])
    assert capsys.readouterr().err == ""  # not a terminal: no notice unless asked for
    monkeypatch.setenv(first_run.NOTICE_ENV, "1")
    first_run.announce_compile([Kernel.ITERATION])
    err = capsys.readouterr().err
    want = COMPILE_ESTIMATE_S[Kernel.ITERATION]
    assert err == f"compiling simulator kernels (iteration), first run only, about {want:.0f} s on 2 cores\n"
    monkeypatch.setattr(first_run, "uncached_kernels", lambda kernels: ())
    first_run.announce_compile([Kernel.ITERATION])
    assert capsys.readouterr().err == ""


def test_perf_explain_without_batch_states_the_typical_step():
    args = ["perf", "explain", "--model", "llama-3.1-70b", "--gpu", "h100", "-tp", "4"]
    default = CliRunner().invoke(cli, args)
    assert default.exit_code == 0, default.output
    m = re.match(r'assumed --batch "(prefill=(\d+)@0;decode=(\d+)x(\d+))": (\d+) running requests', default.stderr)
    assert m and default.stderr.count("\n") == 1
    assert int(m.group(3)) == int(m.group(5)) >= 1 and int(m.group(2)) >= 1
    explicit = CliRunner().invoke(cli, [*args, "--batch", m.group(1)])
    assert explicit.exit_code == 0 and explicit.stdout == default.stdout  # the printed batch reproduces it


def test_grid_flex_without_n_gpus_sizes_the_fleet_analytically():
    args = ["grid-flex", "--workload", "lmsys", "--lam", "100", "--gpus", "h100", "--no-sim"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    m = re.match(r"assumed --n-gpus (\d+): the fewest H100-SXM GPUs", res.stderr)
    assert m, res.stderr
    n = int(m.group(1))
    assert f"{n}x H100-SXM" in res.stdout
    sized = size_fleet_analytic(load_workload("lmsys"), load_catalog().get("h100"), 100.0, 0.5)
    assert sized.n_gpus == n and sized.analytic_p_ttft_s <= 0.5 and sized.rho <= 0.85
    same = CliRunner().invoke(cli, [*args, "--n-gpus", str(n)])
    assert same.exit_code == 0 and same.stdout == res.stdout


def _kernels_after(modules: str) -> list[str]:
    code = (f"import sys, {modules}\n"
            "print(' '.join(m for m in sys.modules if m.startswith('fleetplan.sim._kernels.')))")
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split()


def test_optimize_and_simulate_import_no_kernel_they_do_not_run():
    assert _kernels_after("fleetplan.cli.optimize_cmd, fleetplan.cli.simulate_cmd") == []  # none until they run
    loaded = _kernels_after("fleetplan.cli.optimize_cmd, fleetplan.cli.simulate_cmd, fleetplan.plan.optimize, "
                            "fleetplan.sim.engine")  # what they load when they run
    assert "fleetplan.sim._kernels.iteration_level" in loaded
    kernels = [m.removeprefix("fleetplan.sim._kernels.") for m in loaded]
    assert not [m for m in kernels if m.startswith(("features", "pdd", "prefix_cache", "flows"))]
