"""``fleetplan validate``: check the simulator against exact theory."""

from __future__ import annotations

import math

import click
from rich.table import Table

from fleetplan.cli.errors import FleetplanGroup
from fleetplan.cli.options import INT_LIST, deprecated_spelling, seed_option, sim_requests_option
from fleetplan.cli.tables import make_console
from fleetplan.sim.defaults import DEFAULT_VALIDATE_C_VALUES as DEFAULT_C_VALUES
from fleetplan.sim.defaults import DEFAULT_VALIDATE_N_CUSTOMERS as DEFAULT_N_CUSTOMERS
from fleetplan.sim.defaults import DEFAULT_VALIDATE_RHOS as DEFAULT_RHOS


class FloatList(click.ParamType):
    """Comma-separated utilisations in (0, 1), e.g. ``0.5,0.8``."""

    name = "rho,rho,..."

    def convert(self, value, param, ctx):  # noqa: D102
        if isinstance(value, tuple):
            return value
        out = []
        for part in (p.strip() for p in str(value).split(",")):
            if not part:
                continue
            try:
                v = float(part)
            except ValueError:
                self.fail(f"{part!r} is not a number; give utilisations such as 0.5,0.8", param, ctx)
            if not (0 < v < 1):
                self.fail(f"{part!r} must be in (0, 1); the queue is unstable at rho >= 1", param, ctx)
            out.append(v)
        if not out:
            self.fail("empty list; give at least one utilisation", param, ctx)
        return tuple(out)


def _fmt(value: float, digits: int = 4) -> str:
    if math.isnan(value):
        return "-"
    return f"{value:.{digits}g}"


def _pct(value: float) -> str:
    return "-" if math.isnan(value) else f"{100 * value:.1f}%"


@click.group("validate", cls=FleetplanGroup, epilog="""\b
Examples:
  fleetplan validate queueing
  fleetplan validate queueing --c 1,8 --rho 0.5,0.9 --sim-requests 100000
""")
def validate() -> None:
    """Check the simulator against exact queueing theory."""


@validate.command("queueing", epilog="""\b
Examples:
  fleetplan validate queueing
  fleetplan validate queueing --c 4 --rho 0.9 --sim-requests 500000 --seed 3
""")
@click.option("--c", "c_values", type=INT_LIST, default=",".join(map(str, DEFAULT_C_VALUES)),
              show_default=True, help="Slots (servers) per instance to test.")
@click.option("--rho", "rhos", type=FloatList(), default=",".join(map(str, DEFAULT_RHOS)), show_default=True,
              help="Utilisations to test, each in (0, 1).")
@sim_requests_option(type=click.IntRange(min=100), default=DEFAULT_N_CUSTOMERS, show_default=True,
                     help="Requests (customers) simulated per (c, rho); the first 10% are warm-up.")
@deprecated_spelling("--customers", "n_requests")
@seed_option
def queueing(c_values, rhos, n_requests, seed) -> None:
    """Request-level simulator vs exact M/M/c: E[W], P(W>0) and P99 wait.

    One instance with c slots, Poisson arrivals at rho*c/E[S], exponential service
    with E[S] = 1 s.  Exact values are Erlang-C (core paper eq. 1) and the M/M/c
    wait tail C*exp(-(c*mu - lambda)*t); 'paper P99' is the paper's eq. (2) form.
    """
    from fleetplan.sim.validate import validate_queueing

    df = validate_queueing(c_values=c_values, rhos=rhos, n_customers=n_requests, seed=seed)
    table = Table(title=f"M/M/c: exact vs simulated ({n_requests:,} customers per row, E[S] = 1 s)")
    for col in ("c", "rho", "E[W] exact", "E[W] sim", "err", "P(W>0) exact", "P(W>0) sim", "err",
                "P99 W exact", "P99 W sim", "err", "P99 W paper eq.2"):
        table.add_column(col, justify="right")
    for row in df.itertuples(index=False):
        table.add_row(
            str(row.c), f"{row.rho:g}",
            _fmt(row.exact_mean_wait_s), _fmt(row.sim_mean_wait_s), _pct(row.mean_wait_rel_err),
            _fmt(row.exact_p_wait), _fmt(row.sim_p_wait), _pct(row.p_wait_rel_err),
            _fmt(row.exact_p99_wait_s), _fmt(row.sim_p99_wait_s), _pct(row.p99_wait_rel_err),
            _fmt(row.paper_p99_wait_s),
        )
    con = make_console(soft_wrap=True, highlight=False)
    con.print(table)
    con.print("waits in seconds; err = |sim - exact| / exact ('-' where the exact value is 0). "
              "Sampling error grows as rho -> 1 (longer correlation).")
