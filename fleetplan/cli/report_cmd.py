"""``fleetplan report``: re-render a saved run as HTML / plots without recomputing.

Also home of ``write_optimize_reports``, the exports ``optimize`` writes (procurement CSV,
candidate CSV, full-run JSON, HTML, plots).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console

from fleetplan.cli.errors import one_line_errors
from fleetplan.cli.options import html_option, plots_option
from fleetplan.cli.tables import make_console
from fleetplan.errors import ConfigError

if TYPE_CHECKING:
    from fleetplan.plan.optimize import OptimizeResult

# The report modules (HTML, plots, JSON, procurement CSV) are imported where a file is written:
# ``optimize`` without exports, the README command, never loads them.

_EXAMPLES = """\b
Examples:
  fleetplan optimize --workload lmsys --slo-ttft 500 --json run.json
  fleetplan report run.json --html report.html
  fleetplan report run.json --whatif growth.json --html report.html --plots plots/
  fleetplan report flex.json --html flex.html
"""


def report_console() -> Console:
    """Console on stdout; when stdout is not a terminal, as wide as the tables (no cell is cut)."""
    return make_console(file=sys.stdout)


def write_optimize_reports(result: OptimizeResult, verify, seed: int, paths: dict, progress,
                           extra: dict | None = None) -> list[str]:
    """Write every requested export of an ``optimize`` run; returns notes for the console.
    ``extra`` keys are added to the run document (e.g. ``peak_valley`` with a rate profile).

    The figures the reports show come with the result (``plan.figures.with_report_figures``): when the
    run was simulated and a document is written, the recommendation is simulated once more
    (``verify``'s request count, the run's seed) for per-pool latency quantiles (CDF plots and the
    procurement report's simulated P99 column).
    """
    notes: list[str] = []
    if not any(paths.get(k) for k in ("candidates_csv", "csv", "json", "html", "plots")):
        return notes
    from fleetplan.plan.figures import with_report_figures

    documents = any(paths.get(k) for k in ("csv", "json", "html", "plots"))
    result = with_report_figures(result, verify if documents else None, seed, progress)
    if paths.get("candidates_csv"):
        from fleetplan.report.optimize_report import write_candidates_csv

        write_candidates_csv(result, paths["candidates_csv"])
    if not documents:
        return notes
    from fleetplan.report.procurement import write_procurement_csv
    from fleetplan.report.run_json import optimize_run_dict, write_json

    doc = {**optimize_run_dict(result, seed, all_candidates=bool(paths.get("json_full"))), **(extra or {})}
    if paths.get("csv"):
        write_procurement_csv(doc["procurement"], paths["csv"])
    if paths.get("json"):
        write_json(doc, paths["json"])
    notes += render_documents(doc, None, None, paths.get("html"), paths.get("plots"))
    return notes


def render_documents(run, whatif, gridflex, html_path, plots_dir) -> list[str]:
    """HTML and/or plot files from documents; returns console notes (the install hint)."""
    from fleetplan.report.html import write_html, write_plots
    from fleetplan.report.plots import PLOT_HINT, plots_available

    notes = []
    if html_path:
        write_html(html_path, run, whatif, gridflex)
    if plots_dir:
        Path(plots_dir).mkdir(parents=True, exist_ok=True)
        write_plots(plots_dir, run, whatif, gridflex)
    if (html_path or plots_dir) and not plots_available():
        notes.append(PLOT_HINT)
    return notes


@click.command("report", epilog=_EXAMPLES)
@click.argument("run_json", type=click.Path(exists=True, dir_okay=False))
@click.option("--whatif", "whatif_json", type=click.Path(exists=True, dir_okay=False), default=None,
              help="A `fleetplan whatif --json` file to add (cost vs λ steps, schedule).")
@html_option(help="Write the HTML page here.")
@plots_option
@one_line_errors
def report(run_json, whatif_json, html_path, plots_dir) -> None:
    """Render RUN_JSON (from optimize, whatif or grid-flex --json) without recomputing."""
    if not html_path and not plots_dir:
        raise ConfigError("nothing to write: give --html OUT.html and/or --plots DIR")
    from fleetplan.report.run_json import load_run

    doc = load_run(run_json)
    docs = {"optimize-run": None, "whatif": None, "grid-flex": None}
    docs[doc["kind"]] = doc
    if whatif_json:
        docs["whatif"] = load_run(whatif_json, kind="whatif")
    for note in render_documents(docs["optimize-run"], docs["whatif"], docs["grid-flex"], html_path, plots_dir):
        click.echo(note)
    for target in (html_path, plots_dir):
        if target:
            click.echo(f"wrote {target}")
