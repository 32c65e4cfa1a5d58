"""Shared click options and parameter types, defined once.

Each validates at parse time and fails with a one-line message naming the value,
the rule and the fix (click prints it and exits 2).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from pathlib import Path

import click

from fleetplan.errors import ConfigError
from fleetplan.exec import Executor, make_executor

#: Simulated requests (tasks x requests x replications) up to which a local run without --workers stays
#: in this process.  A pool's start-up (its fork server imports the simulator and loads the kernels from
#: numba's cache, 1.1 s on 2 cores) costs more than two workers save below about this much work:
#: ``benchmarks/bench_cli.py`` on a 2-core machine shared with other work (load average ~2), ``optimize``
#: with 5 x 3 replications of 20,000 requests (300,000): 2.6 s in-process, 4.2 s on a pool of 2; of
#: 100,000 (1.5 M): 6.1 s against 6.8 s; of 300,000 (4.5 M): 13.0 s against 9.6 s.
IN_PROCESS_MAX_REQUESTS = 2_000_000


class PositiveFloat(click.ParamType):
    """A finite number > 0."""

    name = "number>0"

    def convert(self, value, param, ctx):  # noqa: D102
        if isinstance(value, float):
            v = value
        else:
            try:
                v = float(value)
            except (TypeError, ValueError):
                self.fail(f"{value!r} is not a number; give a positive number", param, ctx)
        if not math.isfinite(v) or v <= 0:
            self.fail(f"{value!r} must be a finite number > 0", param, ctx)
        return v


class Fraction(click.ParamType):
    """A number in (0, 1]."""

    name = "fraction"

    def __init__(self, open_high: bool = False) -> None:
        self.open_high = open_high

    def convert(self, value, param, ctx):  # noqa: D102
        try:
            v = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number; give a fraction in (0, 1]", param, ctx)
        hi_ok = v < 1 if self.open_high else v <= 1
        if not (math.isfinite(v) and v > 0 and hi_ok):
            bound = "(0, 1)" if self.open_high else "(0, 1]"
            self.fail(f"{value!r} must be in {bound}", param, ctx)
        return v


class IntList(click.ParamType):
    """Comma-separated positive integers, e.g. ``4096,8192``."""

    name = "int,int,..."

    def convert(self, value, param, ctx):  # noqa: D102
        if isinstance(value, tuple):
            return value
        out = []
        for part in str(value).split(","):
            part = part.strip()
            if not part:
                continue
            try:
                v = int(float(part))
            except ValueError:
                self.fail(f"{part!r} is not an integer; give comma-separated token counts", param, ctx)
            if v <= 0 or float(part) != v:
                self.fail(f"{part!r} must be a positive integer", param, ctx)
            out.append(v)
        if not out:
            self.fail("empty list; give at least one value", param, ctx)
        return tuple(out)


class NameList(click.ParamType):
    """Comma-separated names (checked against a registry by the library)."""

    name = "name,name,..."

    def convert(self, value, param, ctx):  # noqa: D102
        if isinstance(value, tuple):
            return value
        out = tuple(p.strip() for p in str(value).split(",") if p.strip())
        if not out:
            self.fail("empty list; give at least one name", param, ctx)
        return out


POSITIVE = PositiveFloat()
FRACTION = Fraction()
INT_LIST = IntList()
NAME_LIST = NameList()

seed_option = click.option(
    "--seed", type=click.IntRange(min=0), default=0, show_default=True,
    help="One seed for every random stream of the run (arrivals, lengths, routing).",
)
workload_option = click.option(
    "--workload", "workload", required=True,
    help="Workload: a bundled name (lmsys, azure_conv, ...), a CDF JSON file or a trace (CSV/JSONL).",
)
ARRIVAL_OPTIONS = (
    click.option("--arrival", type=click.Choice(("poisson", "gamma", "replay")), default="poisson", show_default=True,
                 help="Arrival process sized for and simulated: poisson, gamma (gaps with CV --cv) or replay (the "
                 "trace workload's own timestamps, rescaled to the rate)."),
    click.option("--cv", "arrival_cv", type=POSITIVE, default=None,
                 help="Inter-arrival CV for --arrival gamma (the analytic phase takes Ca2 = CV^2) [default: 1.0]."),
    click.option("--ca2-window-s", type=POSITIVE, default=None,
                 help="--arrival replay: time scale of the trace's burstiness (index of dispersion of counts) on the "
                 "replay clock, seconds [default: 1]."),
)


def arrival_spec(arrival: str, arrival_cv: float | None, ca2_window_s: float | None):
    """The library's ``ArrivalSpec`` from the arrival options (options that nothing would read are refused)."""
    from fleetplan.plan.arrivals import ArrivalSpec

    if arrival_cv is not None and arrival != "gamma":
        raise ConfigError(f"--cv applies to --arrival gamma only (got --arrival {arrival}); add --arrival gamma or "
                          "drop --cv")
    if ca2_window_s is not None and arrival != "replay":
        raise ConfigError(f"--ca2-window-s applies to --arrival replay only (got --arrival {arrival}); add "
                          "--arrival replay or drop --ca2-window-s")
    kw = {} if ca2_window_s is None else {"ca2_window_s": ca2_window_s}
    return ArrivalSpec(arrival, 1.0 if arrival_cv is None else arrival_cv, **kw)


input_fraction_option = click.option(
    "--input-fraction", type=Fraction(open_high=True), default=None,
    help="Share of a request's total tokens that is prompt, for CDFs that give totals only "
    "(default: the workload's own, else 0.8 as documented in the README).",
)


class PriceOverride(click.ParamType):
    """``NAME=USD_PER_HOUR``, e.g. ``h100=2.49`` (the GPU name is checked by the catalog)."""

    name = "GPU=USD"

    def convert(self, value, param, ctx):  # noqa: D102
        if isinstance(value, tuple):
            return value
        gpu, sep, price = str(value).partition("=")
        if not sep or not gpu.strip():
            self.fail(f"{value!r} is not GPU=USD_PER_HOUR; write e.g. h100=2.49", param, ctx)
        try:
            usd = float(price)
        except ValueError:
            self.fail(f"price {price!r} in {value!r} is not a number; write e.g. h100=2.49", param, ctx)
        if not math.isfinite(usd) or usd <= 0:
            self.fail(f"price {price!r} in {value!r} must be a finite USD per GPU-hour > 0", param, ctx)
        return gpu.strip(), usd


gpu_profiles_option = click.option(
    "--gpu-profiles", "gpu_profiles", default=None,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="User TOML that overrides fields of bundled GPUs or adds GPUs ([gpu.<NAME>] tables).",
)
price_option = click.option(
    "--price", "prices", multiple=True, type=PriceOverride(),
    help="Override a GPU's price per GPU-hour, e.g. --price h100=2.49 (repeatable).",
)


def executor_options(func):
    """``--executor local|ray``, ``--workers N``, ``--ray-address auto|HOST:PORT`` for commands that
    run independent simulations; the command receives ``executor``, ``workers``, ``ray_address``
    and builds the executor with ``executor_from_options``."""
    func = click.option(
        "--ray-address", "ray_address", default=None, metavar="auto|HOST:PORT",
        help="Ray cluster for --executor ray: 'auto' (default) joins the cluster this machine belongs to "
        "(`ray start --head`), HOST:PORT a remote head node.",
    )(func)
    func = click.option(
        "--workers", "workers", type=click.IntRange(min=1), default=None,
        help="Worker processes for --executor local (1 runs in this process; default: in this process when the "
        f"command simulates at most {IN_PROCESS_MAX_REQUESTS:,} requests in all, where a pool's start-up costs more "
        "than it saves, else one per core).",
    )(func)
    return click.option(
        "--executor", "executor", default="local", show_default=True, metavar="local|ray",
        help="Where independent simulations run: local (a process pool on this machine) or ray "
        "(a Ray cluster; needs pip install 'fleetplan[ray]'). Results are identical either way.",
    )(func)


def local_workers(executor: str, workers: int | None, simulated_requests: int | None) -> int | None:
    """``--workers`` as given, or 1 (in this process) for a local run of at most
    ``IN_PROCESS_MAX_REQUESTS`` simulated requests when it was not given (``None``: one per core)."""
    if workers is not None or executor != "local" or simulated_requests is None:
        return workers
    return 1 if simulated_requests <= IN_PROCESS_MAX_REQUESTS else None


@contextlib.contextmanager
def executor_from_options(executor: str, workers: int | None, ray_address: str | None,
                          simulated_requests: int | None = None) -> Iterator[Executor]:
    """The executor chosen by ``executor_options``, closed (workers stopped) when the block ends::

        with executor_from_options(executor, workers, ray_address, simulated_requests=n) as run_tasks:
            result = optimize(request, verify, progress, map_fn=run_tasks)

    ``simulated_requests`` (tasks x requests x replications the command will simulate, when it can
    tell) lets a local run without ``--workers`` stay in this process (``local_workers``); results
    are identical either way.  An unknown name, Ray not installed, or an option of the other
    executor is a ``FleetplanError`` (one line, exit 2 via ``fleetplan.cli.errors``).
    """
    workers = local_workers(executor, workers, simulated_requests)
    built = make_executor(executor, workers=workers, ray_address=ray_address)
    try:
        yield built
    finally:
        built.close()
