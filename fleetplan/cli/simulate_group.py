"""``fleetplan simulate``: every simulator under one group.

``fleetplan simulate --fleet FILE.toml ...`` simulates a fleet (``simulate_cmd``, the default command,
unchanged); ``simulate pdd`` a prefill-decode disaggregated fleet, ``simulate sessions`` multi-round
sessions and RL rollouts, ``simulate network`` the KV-transfer network on its own.  Each module is
imported only when its command runs.
"""

from __future__ import annotations

from fleetplan.cli.groups import DefaultCommandGroup

SUBCOMMANDS = {
    "pdd": ("fleetplan.cli.pdd_cmd", "simulate_pdd_cmd"),
    "sessions": ("fleetplan.cli.sessions_cmd", "simulate_sessions_cmd"),
    "network": ("fleetplan.cli.network_cmd", "network_cmd"),
}
DEFAULT = ("fleetplan.cli.simulate_cmd", "simulate_cmd")
#: command -> the first paragraph of its help, listed by ``simulate --help`` without importing the command
#: (``tests/cli/test_startup.py`` checks each against the command's own)
SUMMARIES = {
    "pdd": "Simulate prefill pool -> KV transfer -> decode pool; print the TTFT breakdown and TPOT.",
    "sessions": "Simulate multi-round sessions (agents, reasoning) or RL-rollout bursts; print session metrics.",
    "network": "KV transfers on a leaf-spine fabric: completion time and slowdown by path policy.",
}

simulate = DefaultCommandGroup(
    "simulate", lazy_commands=SUBCOMMANDS, summaries=SUMMARIES, default=DEFAULT,
    short_help="Simulate a fleet; commands: pdd, sessions, network.",
    help="Simulate a fleet serving a workload (no command: the options below); print P50/P90/P99 TTFT, TPOT, "
    "E2E per pool. The commands simulate a prefill-decode disaggregated fleet (pdd), multi-round sessions "
    "or RL rollouts (sessions) and the KV-transfer network alone (network); `fleetplan simulate COMMAND "
    "--help` shows each one's options.",
    epilog="""\b
Commands' examples:
  fleetplan simulate pdd --workload lmsys --lam 20 --prefill-instances 4 --decode-instances 8
  fleetplan simulate sessions --gpu h100 --instances 8 --sessions frontier_agentic --lam 0.5 --tool-delay-s 1
  fleetplan simulate network --lam 12 --sim-flows 10000 --replications 3
""",
)
