"""The one place that maps library errors to exit codes and words them for the command line.

A ``FleetplanError`` (and click's own usage errors) become one line on stderr and
exit code 2, never a traceback.  The library names parameters as its Python API does
(``rate_per_s``) and gives infeasibility a reason code; ``render_error`` respells them with the
invoking command's flags and fix hints (``fleetplan.cli.options.FLAG_OF_PARAM`` and
``FIX_OF_REASON``).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import click

from fleetplan.errors import FleetplanError

EXIT_USAGE = 2


def render_error(exc: FleetplanError, command: str | None = None) -> str:
    """``exc`` as one line in the CLI's vocabulary: flags for parameters, flag-naming fix hints.

    ``command`` is the invoking command's path without the program name (``"optimize"``,
    ``"bench serve"``); it selects that command's own spellings where they differ.
    """
    from fleetplan.cli.options import FIX_OF_REASON, cli_param

    def name_of(name: str) -> str:
        spelt = cli_param(name, command)
        return spelt.flag if spelt else f"`{name}`"

    def value_of(name: str, value: object) -> str:
        spelt = cli_param(name, command)
        return spelt.show(value) if spelt else repr(value)

    fix = FIX_OF_REASON.get(exc.reason) if exc.reason else None
    return exc.render(name_of, value_of, fix)


def _echo_error(exc: FleetplanError, ctx: click.Context | None = None, sub: str | None = None) -> None:
    """Print ``exc`` for the command of ``ctx`` (its subcommand ``sub``, when a group caught it)."""
    ctx = ctx or click.get_current_context(silent=True)
    parts = [] if ctx is None else ctx.command_path.split()[1:]
    command = " ".join(parts + ([sub] if sub else [])) or None
    click.echo(f"error: {render_error(exc, command)}", err=True)


class FleetplanGroup(click.Group):
    """Click group whose commands turn ``FleetplanError`` into a one-line exit 2.

    Click's own usage errors (a bad option value, a missing option) are printed the
    same way, as one ``error:`` line instead of click's three-line usage block.
    """

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):  # noqa: D102
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.UsageError as exc:
            click.echo(f"error: {' '.join(exc.format_message().split())}", err=True)
            sys.exit(EXIT_USAGE)
        except click.exceptions.ClickException as exc:
            click.echo(f"error: {' '.join(exc.format_message().split())}", err=True)
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except FleetplanError as exc:
            _echo_error(exc, ctx, ctx.invoked_subcommand)
            sys.exit(EXIT_USAGE)
        except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
            click.echo(f"error: {exc.filename}: {exc.strerror}", err=True)
            sys.exit(EXIT_USAGE)


def one_line_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator for standalone commands (same mapping as ``FleetplanGroup``)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except FleetplanError as exc:
            _echo_error(exc)
            sys.exit(EXIT_USAGE)

    return wrapper
