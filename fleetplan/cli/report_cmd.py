"""``fleetplan report``: re-render a saved run as HTML / plots without recomputing.

The exports the planning commands write are in ``fleetplan.cli.report_output``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from fleetplan.cli.errors import one_line_errors
from fleetplan.cli.options import html_option, plots_option
from fleetplan.cli.report_output import render_documents
from fleetplan.errors import ConfigError

if TYPE_CHECKING:
    pass

_EXAMPLES = """\b
Examples:
  fleetplan optimize --workload lmsys --slo-ttft 500 --json run.json
  fleetplan report run.json --html report.html
  fleetplan report run.json --whatif growth.json --html report.html --plots plots/
  fleetplan report flex.json --html flex.html
"""


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
