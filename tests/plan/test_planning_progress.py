"""Progress goes through the callback: every stage reports ``done`` rising to ``total``; the
CLI reporter draws nothing when quiet or when stderr is not a terminal."""

from __future__ import annotations

from fleetplan.cli.progress import progress_reporter
from fleetplan.hardware import load_catalog
from fleetplan.plan.gridflex import grid_flex
from fleetplan.plan.optimize import OptimizeRequest, resolve_gpus
from fleetplan.plan.space import Topology
from fleetplan.plan.whatif import whatif
from fleetplan.workload import load_workload


def _recorder():
    calls: list[tuple[str, int, int]] = []
    return calls, lambda stage, done, total: calls.append((stage, done, total))


def _finished(calls, stage):
    mine = [(d, t) for s, d, t in calls if s == stage]
    assert mine, stage
    dones = [d for d, _ in mine]
    assert dones == sorted(dones) and mine[-1][0] == mine[-1][1]


def test_whatif_and_grid_flex_report_progress():
    wl = load_workload("azure_conv")
    cat = load_catalog()
    calls, cb = _recorder()
    req = OptimizeRequest(workload=wl, gpus=resolve_gpus(cat, ["h100"]), slo_ttft_s=0.5, rate_per_s=10.0,
                          topologies=(Topology.HOMO,))
    whatif(req, (10.0, 20.0), progress=cb)
    _finished(calls, "whatif")
    sweeps = [(d, t) for s, d, t in calls if s == "sweep"]  # one sweep per rate, each run to completion
    assert sum(d == t for d, t in sweeps) == 2
    calls.clear()
    grid_flex(wl, cat.get("h100"), 50.0, 4, 0.5, (0, 20), window_s=None, steady_requests=None, progress=cb)
    _finished(calls, "grid-flex")
    assert [c for c in calls if c[0] == "grid-flex"][-1] == ("grid-flex", 2, 2)


def test_reporter_is_silent_when_quiet_or_piped():
    with progress_reporter(quiet=True) as cb:
        assert cb is None
    with progress_reporter() as cb:  # pytest captures stderr: not a terminal
        assert cb is None
