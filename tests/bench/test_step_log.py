"""The iteration kernel's step log equals its twin's (as a multiset); its token-weighted mean is the exact
mean ITL."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.sim._kernels import STATUS_DONE, run_iteration_level
from fleetplan.sim._kernels.iteration_level import run_iteration_level_logged
from tests.reference.iteration_level import run_iteration_level as twin_iteration_level
from tests.sim.test_kernels_iteration import make_case, run_case


def _logged(case: dict, n_in_flight: int = 0):
    cap = int(np.sum(case["prompt_tokens"]) + np.sum(case["output_tokens"])) * 2 + 16
    log_dt, log_n, log_len = np.zeros(cap), np.zeros(cap, dtype=np.int64), np.zeros(2, dtype=np.int64)
    n, out = run_case(run_iteration_level_logged, case, max_in_flight=n_in_flight, log_dt_s=log_dt, log_n=log_n,
                      log_len=log_len)
    assert log_len[1] == 0
    return n, out, log_dt[:log_len[0]], log_n[:log_len[0]]


@pytest.mark.parametrize("seed", range(30))
def test_log_equals_twin_and_outputs_are_unchanged(seed: int) -> None:
    case = dict(make_case(seed, n_max=80), horizon_s=np.inf)
    n_plain, out_plain = run_case(run_iteration_level, dict(case))
    n, out, dt, cnt = _logged(dict(case))
    assert n == n_plain
    for name in out_plain:
        np.testing.assert_array_equal(out[name], out_plain[name], err_msg=name)
    twin_log: list = []
    run_case(twin_iteration_level, dict(case), step_log=twin_log)
    # the kernel commits a run of decode steps as one event, so instances interleave differently: same multiset
    t_dt, t_cnt = np.array([d for d, _ in twin_log]), np.array([c for _, c in twin_log], dtype=np.int64)
    assert dt.size == t_dt.size
    a, b = np.lexsort((dt, cnt)), np.lexsort((t_dt, t_cnt))
    np.testing.assert_array_equal(cnt[a], t_cnt[b])
    np.testing.assert_allclose(dt[a], t_dt[b], rtol=1e-12, atol=0)


@pytest.mark.parametrize("seed", range(20))
def test_token_weighted_mean_is_the_exact_mean_itl(seed: int) -> None:
    """Without preemption every non-first token's gap is the step that made it."""
    case = dict(make_case(seed, n_max=80), horizon_s=np.inf)
    case["pool_kv_blocks"] = case["pool_kv_blocks"] * 1000  # no preemption
    _, out, dt, cnt = _logged(case)
    if np.any(out["out_preemptions"] > 0):
        pytest.skip("preemption in this case")
    done = (out["out_status"] == STATUS_DONE) & (case["output_tokens"] > 1)
    decode_s = np.sum(out["out_done_s"][done] - out["out_first_token_s"][done])
    n_tokens = np.sum(case["output_tokens"][done] - 1)
    if n_tokens == 0:
        pytest.skip("no multi-token request")
    # tokens of rejected or single-token requests do not enter the log
    assert np.sum(cnt) == n_tokens
    assert np.sum(dt * cnt) == pytest.approx(decode_s, rel=1e-9)
