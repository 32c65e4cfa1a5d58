"""``validate_queueing``: the request-level kernel reproduces exact M/M/c waits."""

from __future__ import annotations

import math

import pytest

from fleetplan.errors import ConfigError
from fleetplan.sim.validate import validate_queueing


def test_mm1_row_is_exact_theory_and_close_simulation():
    df = validate_queueing(c_values=(1, 8), rhos=(0.5,), n_customers=100_000, seed=1)
    assert df[["c", "rho"]].values.tolist() == [[1, 0.5], [8, 0.5]]
    mm1 = df.iloc[0]
    # M/M/1, mu = 1, rho = 0.5: P(W>0) = rho, E[W] = rho/(1-rho) = 1, W_99 = ln(0.5/0.01)/0.5
    assert mm1.exact_p_wait == pytest.approx(0.5)
    assert mm1.exact_mean_wait_s == pytest.approx(1.0)
    assert mm1.exact_p99_wait_s == pytest.approx(math.log(50) / 0.5)
    assert mm1.paper_p99_wait_s == pytest.approx(math.log(100))  # eq. 2: E[W] ln 100
    # simulation within sampling error (rho = 0.5 mixes fast; 90k measured customers)
    assert mm1.mean_wait_rel_err < 0.05 and mm1.p_wait_rel_err < 0.02 and mm1.p99_wait_rel_err < 0.06
    # c = 8: only ~6 % of customers wait, so the estimates are noisier (~5 % standard error)
    assert df.iloc[1].p_wait_rel_err < 0.1 and df.iloc[1].mean_wait_rel_err < 0.15


def test_validate_rejects_unstable_rho():
    with pytest.raises(ConfigError, match="unstable"):
        validate_queueing(rhos=(1.0,))
