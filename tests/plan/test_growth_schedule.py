"""Procurement schedule arithmetic, checked by hand.

λ(t) = 50 (1.15)^t.  Fleets: A (4 GPUs) holds to 80 req/s, B (6) to 150, C (9) to 300.
Month 0: λ = 50 -> A (buy 4).  A runs out at t = ln(80/50)/ln 1.15 = 3.3629 months ->
start + floor(3.3629 x 30.4375) = start + 102 days; first whole month above 80 is m = 4
(50 x 1.15^4 = 87.45) -> B (+2).  B runs out at t = ln(3)/ln 1.15 = 7.8606 months -> +239
days; m = 8 (152.95) -> C (+3).  C runs out at t = ln 6/ln 1.15 = 12.8200 months; with a
12-month horizon λ(12) = 267.5 <= 300, so no fourth row.  Lead time 8 weeks = 56 days.
"""

from __future__ import annotations

import datetime as dt
import math
from types import SimpleNamespace

import pytest

from fleetplan.errors import ConfigError
from fleetplan.plan.growth import DAYS_PER_MONTH, months_to_reach, procurement_schedule
from fleetplan.plan.space import Topology
from fleetplan.plan.whatif import WhatIfPoint

START = dt.date(2026, 1, 1)


def point(rate: float, gpus: int, holds: float) -> WhatIfPoint:
    pool = SimpleNamespace(count=gpus, spares=0, gpu="H100-SXM", hi_tokens=16384)
    fleet = SimpleNamespace(topology=Topology.HOMO, pools=(pool,), total_gpus_needed=gpus,
                            cost_usd_per_year=gpus * 35_215.2)
    return WhatIfPoint(rate, fleet, holds, False, False, None)


POINTS = (point(50, 4, 80.0), point(100, 6, 150.0), point(200, 9, 300.0))


def test_schedule_by_hand():
    s = procurement_schedule(POINTS, 50.0, 0.15, 12, START, lead_time_weeks=8)
    assert [(r.month, r.total_gpus, r.gpus_to_add) for r in s.steps] == [(0, 4, 4), (4, 6, 2), (8, 9, 3)]
    assert s.steps[1].rate_per_s == pytest.approx(50 * 1.15**4)
    assert months_to_reach(80, 50, 0.15) == pytest.approx(math.log(1.6) / math.log(1.15))
    assert s.steps[0].previous_runs_out_on is None and s.steps[0].order_by == START - dt.timedelta(days=56)
    assert s.steps[1].previous_runs_out_on == START + dt.timedelta(days=102)
    assert s.steps[1].order_by == START + dt.timedelta(days=102 - 56)
    assert s.steps[2].previous_runs_out_on == START + dt.timedelta(days=math.floor(7.8606 * DAYS_PER_MONTH))
    assert s.steps[2].previous_runs_out_on == START + dt.timedelta(days=239)
    assert s.uncovered_from_month is None


def test_growth_beyond_the_planned_range_is_reported():
    s = procurement_schedule(POINTS, 50.0, 0.15, 24, START)
    assert s.uncovered_from_month == 13  # 50 x 1.15^13 = 307.6 > 300
    assert len(s.steps) == 3


def test_bad_growth_inputs_are_one_line_errors():
    for kwargs in ({"growth_per_month": 0.0}, {"months": 0}, {"lead_time_weeks": -1.0}):
        args = {"points": POINTS, "start_rate_per_s": 50.0, "growth_per_month": 0.15, "months": 12,
                "start_date": START, **kwargs}
        with pytest.raises(ConfigError):
            procurement_schedule(**args)
