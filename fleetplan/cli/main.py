"""``fleetplan`` entry point: registers the subcommands."""

from __future__ import annotations

import importlib

import click

from fleetplan.cli.errors import FleetplanGroup

# (module, attribute) of each subcommand; a module registers one click command or group.
_COMMANDS = (
    ("fleetplan.cli.optimize_cmd", "optimize"),
    ("fleetplan.cli.workloads_cmd", "workloads"),
    ("fleetplan.cli.gpus_cmd", "gpus"),
    ("fleetplan.cli.simulate_cmd", "simulate"),
    ("fleetplan.cli.sessions_cmd", "simulate_sessions_cmd"),
    ("fleetplan.cli.reliability_cmd", "reliability"),
    ("fleetplan.cli.validate_cmd", "validate"),
    ("fleetplan.cli.models_cmd", "models"),
    ("fleetplan.cli.perf_cmd", "perf"),
    ("fleetplan.cli.pdd_cmd", "simulate_pdd_cmd"),
    ("fleetplan.cli.network_cmd", "network"),
    ("fleetplan.cli.whatif_cmd", "whatif_command"),
    ("fleetplan.cli.gridflex_cmd", "grid_flex_command"),
    ("fleetplan.cli.report_cmd", "report"),
)


@click.group(cls=FleetplanGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="fleetplan")
def cli() -> None:
    """fleetplan: the cheapest GPU fleet that meets your P99 TTFT/TPOT SLOs.

    \b
    Examples:
      fleetplan optimize --workload lmsys.json --slo-ttft 500
      fleetplan workloads list
      fleetplan gpus show h100
    """


for _module, _attr in _COMMANDS:
    try:
        _mod = importlib.import_module(_module)
    except ModuleNotFoundError as _exc:  # a command not written yet
        if _exc.name != _module:
            raise
        continue
    cli.add_command(getattr(_mod, _attr))


def main() -> None:
    cli(prog_name="fleetplan")


if __name__ == "__main__":
    main()
