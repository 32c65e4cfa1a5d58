"""``executor_options`` and ``executor_from_options`` (``fleetplan.cli.options``): the CLI's
--executor/--workers/--ray-address on a throwaway command, as the real commands will use them."""

from __future__ import annotations

import sys

import click
import pytest
from click.testing import CliRunner

from fleetplan.cli.errors import FleetplanGroup
from fleetplan.cli.options import executor_from_options, executor_options
from fleetplan.exec import LocalExecutor, default_workers
from tests.exec.exec_tasks import slow_square


@click.group(cls=FleetplanGroup)
def cli() -> None:
    """Test group."""


@cli.command("squares")
@executor_options
def squares(executor, workers, ray_address) -> None:
    with executor_from_options(executor, workers, ray_address) as ex:
        out = sorted((o.index, o.value) for o in ex.map(slow_square, [1, 2, 3]))
        click.echo(f"{ex.describe()} {[v for _, v in out]}")


def _run(*args: str):
    return CliRunner().invoke(cli, ["squares", *args], standalone_mode=True)


def test_default_is_local_with_one_worker_per_core():
    result = _run()
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"local ({default_workers()} workers) [1, 4, 9]"


def test_workers_one_runs_in_process():
    result = _run("--workers", "1")
    assert result.exit_code == 0 and result.output.strip() == "local (1 workers) [1, 4, 9]"


def test_unknown_executor_is_one_line_listing_valid_names():
    result = _run("--executor", "dask")
    assert result.exit_code == 2
    assert result.output.strip() == "error: unknown executor 'dask': valid executor names are local, ray"


def test_ray_without_ray_installed_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` raise ImportError
    result = _run("--executor", "ray")
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --executor ray needs Ray, which is not installed")
    assert lines[0].endswith("run: pip install 'fleetplan[ray]'")


def test_options_of_the_other_executor_are_rejected_not_ignored():
    result = _run("--executor", "ray", "--workers", "2")
    assert result.exit_code == 2 and "--workers 2 applies to --executor local only" in result.output
    result = _run("--ray-address", "10.0.0.1:6379")
    assert result.exit_code == 2 and "applies to --executor ray only" in result.output
    result = _run("--workers", "0")
    assert result.exit_code == 2 and "--workers" in result.output


def test_the_helper_closes_the_executor():
    with executor_from_options("local", 2, None) as ex:
        assert isinstance(ex, LocalExecutor) and ex.n_workers == 2
        list(ex.map(slow_square, [1]))
        assert 1 <= len(ex.worker_pids()) <= 2
    assert ex.worker_pids() == ()


@pytest.mark.parametrize("flag", ["--executor", "--workers", "--ray-address"])
def test_help_documents_the_options(flag):
    assert flag in CliRunner().invoke(cli, ["squares", "--help"]).output
