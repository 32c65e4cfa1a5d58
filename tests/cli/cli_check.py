"""Shared CLI test helpers: invoke the CLI and check a one-line error (value, rule, fix; exit 2)."""

from __future__ import annotations

from click.testing import CliRunner

from fleetplan.cli.main import cli


def run(*args: str):
    """``fleetplan ARGS`` through click's runner (stdout and stderr kept apart)."""
    return CliRunner().invoke(cli, list(args))


def one_line_error(result, *needles: str) -> None:
    """Exit code 2, exactly one ``error:`` line on stderr, no traceback, each needle in that line."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.stderr)
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert "Traceback" not in result.output + result.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
