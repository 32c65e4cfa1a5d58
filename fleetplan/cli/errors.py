"""The one place that maps library errors to exit codes.

A ``FleetplanError`` (and click's own usage errors) become one line on stderr and
exit code 2, never a traceback.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import click

from fleetplan.errors import FleetplanError

EXIT_USAGE = 2


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
            click.echo(f"error: {exc}", err=True)
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
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_USAGE)

    return wrapper
