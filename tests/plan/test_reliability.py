"""Spares for availability (``fleetplan.plan.reliability``) against exact values.

* Binomial: P(Bin(n + s, A) >= n) equals the exact rational sum (``fractions.Fraction``) and
  hand values; ``spares_for_target`` is the smallest s, found by exact brute force.
* Horizon (birth-death chain): one instance, no spare: P = A exp(-T / MTBF) (up at 0, no
  failure in T); T = 0 gives the binomial; longer horizons and fewer spares never help.
* The simulated table on a small fleet: rows, the binomial answer, monotone probabilities.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from fleetplan.errors import ConfigError, InfeasibleError
from fleetplan.hardware import load_catalog
from fleetplan.plan.reliability import (
    prob_enough_up,
    prob_hold_over_horizon,
    reliability_table,
    spares_for_target,
)
from fleetplan.sim.builders import build_pool
from fleetplan.sim.failures import FailureSpec
from fleetplan.sim.spec import FleetSpec
from fleetplan.workload import load_workload


def exact_up(n: int, s: int, a: Fraction) -> Fraction:
    total = n + s
    return sum(Fraction(math.comb(total, k)) * a**k * (1 - a) ** (total - k) for k in range(n, total + 1))


def test_hand_values() -> None:
    assert prob_enough_up(1, 1, 0.9) == pytest.approx(0.99, rel=1e-14)  # 1 - 0.1^2
    assert prob_enough_up(3, 1, 0.9) == pytest.approx(0.9 ** 4 + 4 * 0.9 ** 3 * 0.1, rel=1e-14)  # 0.9477
    assert prob_enough_up(5, 0, 0.8) == pytest.approx(0.8 ** 5, rel=1e-14)
    assert prob_enough_up(4, 3, 1.0) == 1.0


@pytest.mark.parametrize("n", [1, 3, 8, 24, 100])
@pytest.mark.parametrize("a", ["0.95", "0.9871", "0.9989", "0.7"])
def test_binomial_matches_exact_sum(n: int, a: str) -> None:
    for s in range(6):
        assert prob_enough_up(n, s, float(a)) == pytest.approx(float(exact_up(n, s, Fraction(a))), rel=1e-12)


@pytest.mark.parametrize(("n", "a", "target"), [(8, "0.9871", "0.99"), (8, "0.9871", "0.999"), (100, "0.95", "0.99"),
                                                (24, "0.9989", "0.9999"), (3, "0.7", "0.9")])
def test_spares_is_the_smallest_meeting_the_target(n: int, a: str, target: str) -> None:
    s = spares_for_target(n, float(a), float(target))
    assert exact_up(n, s, Fraction(a)) >= Fraction(target)
    assert s == 0 or exact_up(n, s - 1, Fraction(a)) < Fraction(target)


def test_paper_a100_hard_failure_case() -> None:
    """8 A100s at A = 0.9871: 0 spares holds 8 up only 90 % of the time; 1 spare gives 99.4 %."""
    assert prob_enough_up(8, 0, 0.9871) == pytest.approx(0.9871 ** 8, rel=1e-14)
    assert spares_for_target(8, 0.9871, 0.99) == 1
    assert spares_for_target(8, 0.9871, 0.999) == 2


def test_horizon_one_instance_closed_form() -> None:
    mtbf, mttr, horizon = 100.0, 10.0, 37.0
    a = mtbf / (mtbf + mttr)
    assert prob_hold_over_horizon(1, 0, mtbf, mttr, horizon) == pytest.approx(a * math.exp(-horizon / mtbf),
                                                                               rel=1e-12)


def test_horizon_limits_and_monotonicity() -> None:
    mtbf, mttr = 3600.0 * 24 * 150, 3600.0 * 48
    a = mtbf / (mtbf + mttr)
    for n, s in ((8, 0), (8, 1), (8, 2), (30, 3)):
        assert prob_hold_over_horizon(n, s, mtbf, mttr, 0.0) == pytest.approx(prob_enough_up(n, s, a), rel=1e-12)
        month = [prob_hold_over_horizon(n, s, mtbf, mttr, d * 86_400.0) for d in (1, 7, 30, 90)]
        assert all(x >= y for x, y in zip(month, month[1:], strict=False))
    assert prob_hold_over_horizon(8, 2, mtbf, mttr, 30 * 86_400.0) > prob_hold_over_horizon(8, 1, mtbf, mttr,
                                                                                           30 * 86_400.0)
    assert prob_hold_over_horizon(8, 0, math.inf, mttr, 1e9) == 1.0


def test_bad_inputs() -> None:
    with pytest.raises(ConfigError):
        prob_enough_up(0, 1, 0.9)
    with pytest.raises(ConfigError):
        prob_enough_up(3, 1, 1.5)
    with pytest.raises(ConfigError):
        spares_for_target(3, 0.9, 1.0)
    with pytest.raises(InfeasibleError):
        spares_for_target(50, 0.5, 0.999999, max_spares=3)


def test_reliability_table_small_fleet() -> None:
    a100 = load_catalog().get("a100")
    spec = FleetSpec((build_pool(a100, "short", 2, 4096), build_pool(a100, "long", 3, 65_536)))
    failures = FailureSpec(mtbf_s=40.0, mttr_s=20.0)  # A = 2/3: heavy, so spares matter in a short run
    report = reliability_table(spec, load_workload("lmsys"), 50.0, 0.5, failures, horizon_s=3600.0, target=0.9,
                               n_requests=1500, n_replications=2, seed=4)
    assert report.spares_binomial == max(spares_for_target(2, 2 / 3, 0.9), spares_for_target(3, 2 / 3, 0.9))
    assert [r.spares for r in report.rows] == list(range(report.spares_binomial + 2))
    probs = [r.prob_up for r in report.rows]
    assert probs == sorted(probs) and probs[0] == pytest.approx((2 / 3) ** 5, rel=1e-12)
    assert all(r.prob_hold_horizon <= r.prob_up + 1e-12 for r in report.rows)
    assert all(np.isfinite(r.p99_ttft_s) and r.n_instances == 5 + 2 * r.spares for r in report.rows)
    assert report.rows[0].p99_ttft_s > report.p99_ttft_no_failures_s
    assert report.spares_simulated is None or report.rows[report.spares_simulated].meets_slo
