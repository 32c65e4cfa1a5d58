"""``fleetplan deploy``: a saved run's fleet as a folder of files real tools accept (``fleetplan.deploy``)."""

from __future__ import annotations

import click

from fleetplan.cli.errors import one_line_errors
from fleetplan.cli.options import engine_option, out_option
from fleetplan.errors import ConfigError

_EXAMPLES = """\b
Examples:
  fleetplan optimize --workload lmsys --slo-ttft 500 --json run.json
  fleetplan deploy run.json --out fleet/
  fleetplan deploy run.json --out fleet-sglang/ --engine sglang
  fleetplan deploy run.json --out rank3/ --candidate 3 --force
  fleetplan simulate --fleet fleet/fleet.toml --workload lmsys --lam 100 --replications 3
"""


@click.command("deploy", epilog=_EXAMPLES)
@click.argument("run_json", type=click.Path(exists=True, dir_okay=False))
@out_option(type=click.Path(file_okay=False), help="Folder to write: fleet.toml, engine commands, Kubernetes "
            "manifests, router configuration, README.md (refused if it exists and is not empty, unless --force).")
@click.option("--candidate", type=click.IntRange(min=1), default=None,
              help="Export the candidate of this rank instead of the recommendation (unverified ones say so).")
@engine_option(help="Engine whose launch commands are written: vllm (vllm serve) or sglang "
               "(python -m sglang.launch_server).")
@click.option("--force", is_flag=True, help="Replace a non-empty --out folder (still written whole or not at all).")
@one_line_errors
def deploy(run_json, out_path, candidate, engine, force) -> None:
    """Write the recommended (or --candidate N) fleet of RUN_JSON (`optimize --json`) as files to apply:
    the fleet file `simulate --fleet` reads, per-pool engine launch lines and Kubernetes manifests, vLLM
    Semantic Router's length bands, and a README with what was verified and the command that re-checks it.
    """
    from fleetplan.deploy import read_run, write_deployment

    doc = read_run(run_json)
    try:
        result = write_deployment(doc, out_path, candidate, engine, force)
    except ConfigError as exc:
        if candidate is not None or exc.param != "candidate":
            raise
        verified = doc.get("recommendation") is not None  # a recommendation, but an unverified one
        raise ConfigError(f"{run_json} has {'an unverified recommendation' if verified else 'no recommendation'} "
                          "(was it run with --no-verify?), so no verified fleet to deploy; give --candidate N to "
                          "export the candidate of rank N unverified, or re-run optimize without --no-verify") from None
    state = "verified" if result.verified else "NOT verified (analytic counts)"
    click.echo(f"wrote {result.out_dir}/ ({len(result.files)} files): candidate {result.rank}, {state}; "
               f"re-check it with the simulate command in {result.out_dir}/README.md")
