"""What the ``fleetplan`` entry point costs before any work: subcommands are imported on first use,
the Student-t quantile does not import ``scipy.stats``, and a small local run stays in this process.
(Speed figures: ``benchmarks/bench_cli.py``; nothing here is timed.)"""

from __future__ import annotations

import csv
import importlib
import subprocess
import sys

import click
import numpy as np
import pytest
from click.testing import CliRunner

from fleetplan.cli.groups import ShortHelp
from fleetplan.cli.main import COMMANDS, SUMMARIES, cli
from fleetplan.cli.options import IN_PROCESS_MAX_REQUESTS, executor_from_options, local_workers
from fleetplan.exec import default_workers
from fleetplan.metrics import student_t_interval
from fleetplan.plan.optimize import verification_requests


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", f"{code}\nimport sys; print(' '.join(sys.modules))"],
                         check=True, capture_output=True, text=True)
    return set(out.stdout.split())


def test_the_entry_point_imports_no_command_until_one_runs():
    loaded = _modules_after("import fleetplan.cli.main")
    assert not {module for module, _ in COMMANDS.values()} & loaded
    assert "fleetplan.sim.engine" not in loaded and "numba" not in loaded


def test_optimize_imports_neither_scipy_stats_nor_the_pdd_simulator():
    loaded = _modules_after("import fleetplan.cli.optimize_cmd")
    assert "scipy.stats" not in loaded and "fleetplan.sim.pdd" not in loaded


def test_optimize_without_exports_imports_no_table_library_planner_or_report_writer():
    """pandas, the horizon planner and the HTML/JSON writers load only where a run uses them
    (together about a third of the README command's start-up)."""
    loaded = _modules_after("import fleetplan.cli.optimize_cmd, fleetplan.plan.optimize, fleetplan.sim.steady")
    assert not {"pandas", "fleetplan.plan.horizon.plan", "fleetplan.report.html", "fleetplan.report.run_json",
                "fleetplan.cli.horizon_options"} & loaded


def test_the_planner_imports_neither_scipy_stats_nor_pandas():
    """The co-located planner, its simulator and its report figures (scipy.stats: the pdd/afd screen's
    distributions; pandas: request tables) load neither: about 0.6 s of the README command's start."""
    loaded = _modules_after("import fleetplan.cli.optimize_cmd, fleetplan.plan.optimize, fleetplan.plan.headroom, "
                            "fleetplan.plan.figures, fleetplan.cli.report_output")
    assert not {"scipy.stats", "pandas"} & loaded


def test_optimize_help_imports_no_scipy():
    loaded = _modules_after("import fleetplan.cli.optimize_cmd")
    assert not {name for name in loaded if name == "scipy" or name.startswith("scipy.")}


def test_a_simulated_run_with_reports_loads_no_pandas(tmp_path):
    """Verification, headroom and the run file's latency profiles (``plan.frontier.latency_profile`` reads
    its run's arrays) without a request table."""
    code = ("import sys\nimport fleetplan.cli.main as m\n"
            "try:\n    m.cli.main(args=['optimize', '--workload', 'lmsys', '--slo-ttft', '500', '--lam', '5', '--gpus',"
            " 'h100', '--topology', 'homo', '--quiet', '--json', sys.argv[1]], standalone_mode=False)\n"
            "except SystemExit:\n    pass\nprint('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "run.json")], check=True, capture_output=True,
                         text=True)
    assert out.stdout.split()[-1] == "False" and (tmp_path / "run.json").exists()


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_lazy_command_has_its_registered_name(name):
    module, attr = COMMANDS[name]
    assert getattr(importlib.import_module(module), attr).name == name


def test_group_help_lists_every_command():
    res = CliRunner().invoke(cli, ["--help"])
    assert res.exit_code == 0
    for name in COMMANDS:
        assert f"  {name} " in res.output


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_registered_summary_is_the_commands_own(name):
    """``fleetplan --help`` lists ``SUMMARIES`` instead of importing the commands: each must shorten
    exactly as the command's own help does, at any terminal width."""
    module, attr = COMMANDS[name]
    command = getattr(importlib.import_module(module), attr)
    summary = SUMMARIES[name]
    assert isinstance(summary, ShortHelp) == bool(command.short_help)
    for limit in (30, 45, 80, 400):
        listed = summary if isinstance(summary, ShortHelp) else click.Command(None, help=summary).get_short_help_str(
            limit).strip()
        assert listed == command.get_short_help_str(limit)


def test_group_help_imports_no_command_and_no_numba():
    loaded = _modules_after("from click.testing import CliRunner\nfrom fleetplan.cli.main import cli\n"
                            "assert CliRunner().invoke(cli, ['--help']).exit_code == 0")
    assert not {module for module, _ in COMMANDS.values()} & loaded
    assert "numba" not in loaded and "fleetplan.plan.sweep" not in loaded and "scipy" not in loaded


#: What a command's ``--help`` must not import: numba, the simulator's kernels and engine, the planner's
#: computation (sweep, pool sizing, optimisation, verification) and the queueing models.
HEAVY = ("numba", "fleetplan.sim.engine", "fleetplan.sim._kernels", "fleetplan.plan.sweep", "fleetplan.plan.pools",
         "fleetplan.plan.optimize", "fleetplan.plan.verify", "fleetplan.queueing.engine")
#: ... except the kernels' integer codes (plain ints; the package loads its kernels on first use) and the PDD
#: kernel's codes and named tuples (its package imports nothing; ``sim.pdd`` loads the engine on first use).
LIGHT = {"fleetplan.sim._kernels", "fleetplan.sim._kernels.codes", "fleetplan.sim._kernels.pdd",
         "fleetplan.sim._kernels.pdd.codes", "fleetplan.sim._kernels.pdd.state"}


def _help_modules(*args: str) -> set[str]:
    return _modules_after("from click.testing import CliRunner\nfrom fleetplan.cli.main import cli\n"
                          f"res = CliRunner().invoke(cli, {list(args)!r})\n"
                          "assert res.exit_code == 0 and 'Usage:' in res.output, res.output")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_commands_help_imports_no_planner_simulator_or_numba(name):
    """``fleetplan NAME --help`` shows the options and their defaults (``plan.defaults``,
    ``sim.defaults``) without the planner's computation, the simulator's kernels or numba."""
    loaded = _help_modules(name, "--help")
    assert not {m for m in loaded - LIGHT if any(m == h or m.startswith(h + ".") for h in HEAVY)}


@pytest.mark.parametrize("args", [("bench", "serve"), ("validate", "queueing"), ("simulate", "sessions"),
                                  ("simulate", "network"), ("simulate", "pdd")])
def test_subcommands_help_imports_no_planner_simulator_or_numba(args):
    """(``simulate pdd``: ``sim.pdd`` loads its engine on first use, PEP 562.)"""
    loaded = _help_modules(*args, "--help")
    assert not {m for m in loaded - LIGHT if any(m == h or m.startswith(h + ".") for h in HEAVY)}


@pytest.mark.parametrize("name", ["pdd", "sessions", "network"])
def test_simulate_help_lists_each_command_with_its_own_summary(name):
    from fleetplan.cli.simulate_group import SUBCOMMANDS, SUMMARIES

    module, attr = SUBCOMMANDS[name]
    command = getattr(importlib.import_module(module), attr)
    assert SUMMARIES[name] == command.get_short_help_str(400)
    res = CliRunner().invoke(cli, ["simulate", "--help"])
    assert res.exit_code == 0 and f"  {name} " in res.output


def test_unknown_command_is_one_line():
    res = CliRunner().invoke(cli, ["optimise"])
    assert res.exit_code == 2 and "No such command 'optimise'" in res.output


def test_t_quantile_matches_scipy_stats():
    from scipy import stats

    x = np.array([1.0, 1.5, 0.7, 1.2])
    mean, lo, hi = student_t_interval(x, confidence=0.95)
    half = stats.t.ppf(0.975, 3) * np.std(x, ddof=1) / np.sqrt(4)
    assert (mean, lo, hi) == (float(np.mean(x)), mean - float(half), mean + float(half))


def test_small_local_runs_stay_in_process_and_large_ones_use_a_pool():
    assert local_workers("local", None, IN_PROCESS_MAX_REQUESTS) == 1
    assert local_workers("local", None, IN_PROCESS_MAX_REQUESTS + 1) is None
    assert local_workers("local", 2, 10) == 2  # --workers given: as given
    assert local_workers("local", None, None) is None  # no estimate: one worker per core
    assert local_workers("ray", None, 10) is None
    with executor_from_options("local", None, None, simulated_requests=300_000) as ex:
        assert ex.n_workers == 1
    with executor_from_options("local", None, None, simulated_requests=10 * IN_PROCESS_MAX_REQUESTS) as ex:
        assert ex.n_workers == default_workers()


def test_readme_optimize_simulates_a_few_hundred_thousand_requests():
    from fleetplan.hardware import load_catalog
    from fleetplan.plan.optimize import OptimizeRequest, resolve_gpus
    from fleetplan.plan.space import Topology
    from fleetplan.plan.verify import VerifySettings
    from fleetplan.workload import load_workload

    gpus = resolve_gpus(load_catalog(), None)
    request = OptimizeRequest(workload=load_workload("lmsys"), rate_per_s=100.0, slo_ttft_s=0.5, gpus=gpus)
    verify = VerifySettings(slo_ttft_s=0.5, slo_tpot_s=None, rate_per_s=100.0, max_gpus=64)
    assert 0 < verification_requests(request, verify) <= IN_PROCESS_MAX_REQUESTS  # the README runs in-process
    assert verification_requests(request, None) == 0
    both = OptimizeRequest(workload=load_workload("lmsys"), rate_per_s=100.0, slo_ttft_s=0.5, gpus=gpus,
                           topologies=(Topology.HOMO, Topology.PDD), slo_tpot_s=0.05)
    assert verification_requests(both, verify) == 2 * verification_requests(request, verify)  # one more list


def _console_script(*args: str) -> subprocess.CompletedProcess:
    code = f"import sys; sys.argv = ['fleetplan', *{list(args)!r}]\nfrom fleetplan.cli.main import main\nmain()"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_the_console_script_exits_fast_with_every_output_written_and_its_status(tmp_path):
    """``main`` leaves with os._exit after a flush: stdout complete, files written, exit codes kept."""
    out = _console_script("gpus", "list", "--format", "csv")
    assert out.returncode == 0 and out.stdout.count("\n") >= 4 and out.stdout.endswith("\n")
    bad = _console_script("optimize", "--workload", "nope", "--slo-ttft", "500")
    assert bad.returncode == 2 and bad.stderr.startswith("error: unknown workload") and bad.stderr.count("\n") == 1
    csv_path = tmp_path / "c.csv"
    res = _console_script("optimize", "--workload", "lmsys", "--slo-ttft", "500", "--gpus", "h100",
                          "--topology", "homo", "--no-verify", "--quiet", "--candidates-csv", str(csv_path))
    assert res.returncode == 0, res.stderr
    rows = list(csv.reader(csv_path.open()))
    assert len(rows) >= 2 and all(len(r) == len(rows[0]) for r in rows)  # every row there, none cut short
