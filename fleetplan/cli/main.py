"""``fleetplan`` entry point: registers the subcommands, each imported only when it runs.

A command module imports its part of the library (the simulator, the PDD kernels, scipy's
statistics, ...); importing all of them costs about half a second before any work, so the
group imports only the module of the command being run (``--help`` of the group imports them
all, to show their summaries).
"""

from __future__ import annotations

import importlib

import click

from fleetplan.cli.errors import FleetplanGroup

# command name -> (module, attribute); a module defines one click command or group with that name.
COMMANDS = {
    "optimize": ("fleetplan.cli.optimize_cmd", "optimize"),
    "workloads": ("fleetplan.cli.workloads_cmd", "workloads"),
    "gpus": ("fleetplan.cli.gpus_cmd", "gpus"),
    "simulate": ("fleetplan.cli.simulate_cmd", "simulate"),
    "simulate-sessions": ("fleetplan.cli.sessions_cmd", "simulate_sessions_cmd"),
    "reliability": ("fleetplan.cli.reliability_cmd", "reliability"),
    "validate": ("fleetplan.cli.validate_cmd", "validate"),
    "models": ("fleetplan.cli.models_cmd", "models"),
    "perf": ("fleetplan.cli.perf_cmd", "perf"),
    "simulate-pdd": ("fleetplan.cli.pdd_cmd", "simulate_pdd_cmd"),
    "network": ("fleetplan.cli.network_cmd", "network"),
    "whatif": ("fleetplan.cli.whatif_cmd", "whatif_command"),
    "grid-flex": ("fleetplan.cli.gridflex_cmd", "grid_flex_command"),
    "report": ("fleetplan.cli.report_cmd", "report"),
    "bench": ("fleetplan.cli.bench_cmd", "bench"),
}


class LazyGroup(FleetplanGroup):
    """A ``FleetplanGroup`` whose subcommands are imported on first use (``COMMANDS``)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *super().list_commands(ctx)})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS or cmd_name in self.commands:
            return super().get_command(ctx, cmd_name)
        module, attr = COMMANDS[cmd_name]
        command = getattr(importlib.import_module(module), attr)
        self.add_command(command, cmd_name)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="fleetplan")
def cli() -> None:
    """fleetplan: the cheapest GPU fleet that meets your P99 TTFT/TPOT SLOs.

    \b
    Examples:
      fleetplan optimize --workload lmsys.json --slo-ttft 500
      fleetplan workloads list
      fleetplan gpus show h100
    """


def main() -> None:
    cli(prog_name="fleetplan")


if __name__ == "__main__":
    main()
