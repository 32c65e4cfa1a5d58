"""Instance-failure options shared by ``simulate`` and ``reliability``: MTBF, MTTR, repair times."""

from __future__ import annotations

import click

from fleetplan.cli.options import POSITIVE, declare
from fleetplan.hardware import load_catalog
from fleetplan.sim.failures import FailureSpec, RepairTimes, failure_spec_from_catalog
from fleetplan.sim.spec import FleetSpec
from fleetplan.units import S_PER_H

FAILURE_OPTIONS = (
    declare("MTBF", "--mtbf-h", "mtbf_h", type=POSITIVE, default=None,
            help="Mean time between failures of one instance, hours (default: the GPU catalog's "
            "failure rate per node-day, applied per instance).")(),
    declare("MTTR", "--mttr-h", "mttr_h", type=click.FloatRange(min=0), default=None,
            help="Mean time to repair, hours (default: the GPU catalog's mttr_days).")(),
    declare("repair-time distribution", "--repair", "repair", type=click.Choice(RepairTimes.names()),
            default=RepairTimes.EXPONENTIAL.value, show_default=True,
            help="Repair-time distribution (fixed: every repair lasts the MTTR).")(),
)


def failure_options(func):
    """Add ``--mtbf-h``, ``--mttr-h`` and ``--repair`` (``simulate``, ``reliability``)."""
    for option in reversed(FAILURE_OPTIONS):
        func = option(func)
    return func


def failures_from_options(spec: FleetSpec, mtbf_h: float | None, mttr_h: float | None, repair: str) -> FailureSpec:
    """Per-pool MTBF/MTTR: the flags where given, else each pool's GPU catalog entry."""
    return failure_spec_from_catalog(
        spec, load_catalog(),
        mtbf_s=None if mtbf_h is None else mtbf_h * S_PER_H,
        mttr_s=None if mttr_h is None else mttr_h * S_PER_H,
        repair=repair,
    )
