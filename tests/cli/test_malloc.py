"""``fleetplan.cli.malloc``: the command line's allocator thresholds (glibc), and the user's own setting wins."""

from __future__ import annotations

import ctypes
import platform
import subprocess
import sys

import pytest

from fleetplan.cli import malloc

GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's")
def test_glibc_takes_both_thresholds() -> None:
    """mallopt returns 1 for each accepted value; the module asks for 64 MiB / 256 MiB."""
    assert malloc.tune_malloc() is True
    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    assert mallopt(malloc.M_MMAP_THRESHOLD, malloc.MMAP_THRESHOLD_BYTES) == 1
    assert malloc.MMAP_THRESHOLD_BYTES == 64 << 20 and malloc.TRIM_THRESHOLD_BYTES == 256 << 20


@pytest.mark.parametrize("var", ["MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"])
def test_the_users_variable_wins(monkeypatch, var) -> None:
    monkeypatch.setenv(var, "131072")
    assert malloc.tune_malloc() is False


def test_the_console_script_tunes_before_the_command_runs() -> None:
    """``fleetplan.cli.main.main`` calls it first (a fresh process: main leaves with os._exit)."""
    code = ("import fleetplan.cli.main as m, fleetplan.cli.malloc as mm\n"
            "calls = []\n"
            "m.tune_malloc = lambda: calls.append(1) or True\n"
            "import sys; sys.argv = ['fleetplan', '--version']\n"
            "import atexit; atexit.register(lambda: print('tuned', len(calls)))\n"
            "m.main()\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert "tuned 1" in out.stdout


def test_freeze_imported_moves_what_is_alive_to_the_permanent_generation() -> None:
    """``freeze_imported``: every object alive is frozen (the collector skips it), nothing else changes."""
    import gc

    try:
        before = len(gc.get_objects())
        frozen = malloc.freeze_imported()
        assert frozen == gc.get_freeze_count() >= before > 0
        assert len(gc.get_objects()) < before  # the tracked generations are (nearly) empty now
    finally:
        gc.unfreeze()  # the rest of the suite collects as usual


def test_optimize_freezes_after_its_imports(monkeypatch) -> None:
    """The optimize command freezes once the planner is imported, before it plans."""
    from click.testing import CliRunner

    from fleetplan.cli import optimize_cmd
    from fleetplan.cli.main import cli

    calls = []
    monkeypatch.setattr(optimize_cmd, "freeze_imported", lambda: calls.append(1) or 0)
    result = CliRunner().invoke(cli, ["optimize", "--workload", "lmsys", "--slo-ttft", "500", "--no-verify",
                                      "--workers", "1", "--topology", "homo", "--gpus", "h100"])
    assert result.exit_code == 0, result.output
    assert calls == [1]
