"""Tables that survive a pipe: one console factory and ``--format table|csv|json|markdown``.

On a terminal a rich table fits the window (cells may wrap).  When stdout is not a terminal
(``fleetplan models list | cat``, a file, a test runner) the console has no width limit, so no
cell is ever cut to "qwen3-235b-a…" or "1,03…": rows are as wide as their content.  ``--format``
(``fleetplan.cli.options.format_option``) turns the same rows into CSV, JSON (a list of objects keyed
by the column headers) or a GitHub-flavoured markdown table, for scripts and documents.
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from fleetplan.cli.options import FORMATS  # the --format choices (format_option, with the shared options)
from fleetplan.units import s_to_ms

__all__ = [
    "FORMATS", "details_table", "emit_table", "emit_tables", "make_console", "render", "table_rows",
]

UNLIMITED_WIDTH = 100_000  # characters: "as wide as the content" for a console that is not a terminal


def make_console(**kwargs: Any) -> Console:
    """A rich console for stdout: the terminal's width on a terminal, unlimited otherwise."""
    if not sys.stdout.isatty() and "width" not in kwargs:
        kwargs["width"] = UNLIMITED_WIDTH
    return Console(**kwargs)


def _plain(cell: Any) -> str:
    return cell.plain if hasattr(cell, "plain") else str(cell)


def table_rows(table: Table) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of a rich ``Table`` as plain strings."""
    headers = [_plain(c.header) for c in table.columns]
    columns = [[_plain(cell) for cell in c.cells] for c in table.columns]
    n_rows = max((len(col) for col in columns), default=0)
    rows = [[col[i] if i < len(col) else "" for col in columns] for i in range(n_rows)]
    return headers, rows


def _markdown_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(table: Table, fmt: str) -> str:
    """``table`` as CSV, JSON or markdown text (``fmt`` one of ``FORMATS`` other than "table")."""
    headers, rows = table_rows(table)
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(headers)
        writer.writerows(rows)
        return buf.getvalue()
    if fmt == "json":
        return json.dumps([dict(zip(headers, row, strict=True)) for row in rows], indent=2) + "\n"
    if fmt == "markdown":
        lines = []
        if table.title:
            lines += [f"**{_markdown_cell(_plain(table.title))}**", ""]
        lines.append("| " + " | ".join(_markdown_cell(h) for h in headers) + " |")
        lines.append("|" + "|".join("---" for _ in headers) + "|")
        lines += ["| " + " | ".join(_markdown_cell(c) for c in row) + " |" for row in rows]
        return "\n".join(lines) + "\n"
    raise ValueError(f"unknown table format {fmt!r}")


def emit_table(table: Table, fmt: str = "table", console: Console | None = None) -> None:
    """Print ``table`` to stdout in ``fmt``."""
    if fmt == "table":
        (console or make_console()).print(table)
    else:
        click.echo(render(table, fmt), nl=False)


def emit_tables(tables: list[Table], fmt: str = "table", console: Console | None = None) -> None:
    """Print several tables: JSON as one object keyed by table title, CSV and markdown as sections
    (CSV: a ``# title`` line before each, a blank line between them)."""
    if fmt == "table":
        con = console or make_console()
        for table in tables:
            con.print(table)
    elif fmt == "json":
        doc = {}
        for i, table in enumerate(tables):
            headers, rows = table_rows(table)
            doc[_plain(table.title) if table.title else f"table {i + 1}"] = [
                dict(zip(headers, row, strict=True)) for row in rows]
        click.echo(json.dumps(doc, indent=2))
    else:
        parts = [(f"# {_plain(t.title)}\n" if fmt == "csv" and t.title else "") + render(t, fmt) for t in tables]
        click.echo("\n".join(parts), nl=False)


def details_table(title: str, items: list[tuple[str, str]]) -> Table:
    """A two-column (field, value) table of ``items``."""
    table = Table(title=title)
    table.add_column("field")
    table.add_column("value")
    for key, value in items:
        table.add_row(key, value)
    return table


def ms_cell(value_s: float | None, digits: int = 1, inf: str = "inf") -> str:
    """Seconds shown as milliseconds (``1,234.5``): ``-`` when None or NaN (not modelled, not
    simulated), ``inf`` (or e.g. ``"unstable"``) when infinite.  The CLI's one latency formatter."""
    if value_s is None or math.isnan(value_s):
        return "-"
    if math.isinf(value_s):
        return inf
    return f"{s_to_ms(value_s):,.{digits}f}"
