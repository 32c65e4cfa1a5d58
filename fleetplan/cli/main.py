"""``fleetplan`` entry point: registers the subcommands, each imported only when it runs.

A command module imports its part of the library (the simulator, the PDD kernels, scipy's
statistics, ...); importing all of them costs about two seconds on two cores before any work, so
the group imports only the module of the command being run, and ``fleetplan --help`` none: it
lists each command's summary from ``SUMMARIES`` (``tests/cli/test_startup.py`` checks that each
is the command's own).
"""

from __future__ import annotations

import atexit
import os
import sys

import click

from fleetplan.cli.groups import LazyGroup, ShortHelp
from fleetplan.cli.malloc import tune_malloc

# command name -> (module, attribute); a module defines one click command or group with that name.
COMMANDS = {
    "optimize": ("fleetplan.cli.optimize_cmd", "optimize"),
    "workloads": ("fleetplan.cli.workloads_cmd", "workloads"),
    "gpus": ("fleetplan.cli.gpus_cmd", "gpus"),
    "simulate": ("fleetplan.cli.simulate_group", "simulate"),
    "reliability": ("fleetplan.cli.reliability_cmd", "reliability"),
    "validate": ("fleetplan.cli.validate_cmd", "validate"),
    "models": ("fleetplan.cli.models_cmd", "models"),
    "perf": ("fleetplan.cli.perf_cmd", "perf"),
    "whatif": ("fleetplan.cli.whatif_cmd", "whatif_command"),
    "grid-flex": ("fleetplan.cli.gridflex_cmd", "grid_flex_command"),
    "report": ("fleetplan.cli.report_cmd", "report"),
    "bench": ("fleetplan.cli.bench_cmd", "bench"),
    "deploy": ("fleetplan.cli.deploy_cmd", "deploy"),
}

#: command name -> its summary: the first paragraph of its help, or its ``short_help`` (``ShortHelp``).
SUMMARIES = {
    "optimize": "Find the cheapest fleet whose P99 TTFT meets --slo-ttft at --lam requests/s.",
    "workloads": "Bundled request-length workloads (CDFs) and trace fitting.",
    "gpus": "Inspect the GPU catalog: specs, default prices, calibration and sources.",
    "simulate": ShortHelp("Simulate a fleet; commands: pdd, sessions, network."),
    "reliability": "Spares per pool so that P(at least n of n+s instances up) >= TARGET (binomial, eq. 6 "
                   "availability), and the simulated P99 TTFT/TPOT with failure injection for each spares count.",
    "validate": "Check the simulator against exact queueing theory.",
    "models": "Inspect model configs: shape, parameters, weight and KV-cache sizes, KV budget on a GPU.",
    "perf": "Step-time predictor: per-operator breakdown and calibration from measured steps.",
    "whatif": 'Cheapest fleet per λ and the rate up to which each one holds ("buy before then").',
    "grid-flex": "Batch-cap (vLLM --max-num-seqs) curtailment levels: n_max, W/GPU, fleet kW, P99 TTFT.",
    "report": "Render RUN_JSON (from optimize, whatif or grid-flex --json) without recomputing.",
    "bench": "Serving benchmarks against the simulator (vLLM's client, predicted).",
    "deploy": "Write the recommended (or --candidate N) fleet of RUN_JSON (`optimize --json`) as files to apply: "
              "the fleet file `simulate --fleet` reads, per-pool engine launch lines and Kubernetes manifests, "
              "vLLM Semantic Router's length bands, and a README with what was verified and the command that "
              "re-checks it.",
}

#: Old command paths, kept for one release (hidden, each with a one-line note): old -> new.
DEPRECATED_COMMANDS = {
    ("simulate-pdd",): ("simulate", "pdd"),
    ("simulate-sessions",): ("simulate", "sessions"),
    ("network", "simulate"): ("simulate", "network"),
}


@click.group(cls=LazyGroup, lazy_commands=COMMANDS, summaries=SUMMARIES, deprecated_commands=DEPRECATED_COMMANDS,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="fleetplan")
def cli() -> None:
    """fleetplan: the cheapest GPU fleet that meets your P99 TTFT/TPOT SLOs.

    \b
    Examples:
      fleetplan optimize --workload lmsys.json --slo-ttft 500
      fleetplan workloads list
      fleetplan gpus show h100
      fleetplan simulate --fleet examples/two_pool_a100.toml --workload lmsys --lam 100
      fleetplan simulate pdd --workload lmsys --lam 20
    """


def main() -> None:
    """The ``fleetplan`` console script: run the command, then leave at once.

    An orderly interpreter teardown destroys every object numba built (its typing and lowering
    registries: some 10^5 objects once a kernel is loaded), about 0.2 s on two cores after the
    command's work is done.  The exit handlers still run (logging, temporary directories,
    multiprocessing), the standard streams are flushed, and every file the commands write is closed
    when written; an exception other than ``SystemExit`` leaves the usual way, with its traceback.
    """
    tune_malloc()  # the allocator's thresholds for numpy's temporaries (fleetplan.cli.malloc)
    try:
        cli(prog_name="fleetplan")
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("message"): the message on stderr, status 1
        print(code, file=sys.stderr)
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing more to say
            pass
    os._exit(code)


if __name__ == "__main__":
    main()
