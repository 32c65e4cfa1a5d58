"""Inter-token gaps of a KV-saturated all-at-once run under vLLM v1's scheduler: exact theory.

Why a median ITL of a ``vllm bench serve`` run with every request sent at once can be a pure decode
step while the mean TPOT is a mixed one (GPUStack's gpt-oss-120b A100 32000/100 run: median ITL
24 ms, mean TPOT 225 ms, docs/serving_validation.md), and what decides which one it is: the number
``N`` of requests the KV cache holds.

vLLM v1's ``Scheduler.schedule`` (vllm-project/vllm ``vllm/v1/core/sched/scheduler.py``, v0.10-v0.13;
read at 00024d314514900f361ad072af6931e403b7f589, same rules): running requests first, in admission
order, each ``min(tokens left, budget)``; then waiting requests FCFS while the budget lasts, each
admitted only if ``KVCacheManager.allocate_slots`` finds the blocks of its first chunk (else
``break``), none in a step that preempted.  The simulator's kernels follow these rules
(``fleetplan.sim._kernels.iteration_steps``, ``fleetplan.sim._kernels.features.schedule``).

Case.  ``M = m N`` requests at t = 0, prompt ``P``, output ``O > N``, one block of ``B >= P + O``
tokens each, ``N`` blocks: a request holds exactly one block from admission to completion, so
nobody is preempted and a waiting request is admitted exactly when a completion frees a block.
Token budget ``P + N``: a steady-state admission takes its whole prompt in one step beside the
``N - 1`` decodes.  Then request ``k <= N`` (ramp) has its first token at step ``k``, and from the
first completion (step ``O``) on, cycle ``c`` admits requests ``cN + 1 .. cN + N`` at steps
``cO + 1 .. cO + N`` (one prefill each) followed by ``O - N`` pure decode steps.  Every request's
``O - 1`` decode gaps are therefore ``N - 1`` mixed ones and ``O - N`` pure ones, except the last
cycle's request ``j`` which sees ``N - j`` mixed ones: in all

    mixed gaps = (M - N)(N - 1) + N(N - 1)/2,     pure gaps = M (O - 1) - mixed gaps.

With the step time ``W + c_p * prefill_tokens`` every pure step lasts exactly ``W``, so the median
ITL is the pure decode step when ``O - N > N - 1`` and a mixed step when ``O - N < N - 1``: the
KV capacity, not the step model, decides which mode the median reports.  Checked on the feature
kernel (prefix caching on and off, the kernel = twin), whose histogram counts each streamed gap, and
on the featureless kernel's step log."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.sim._kernels import N_STEP_COEFS, STATUS_DONE
from fleetplan.sim._kernels.features.itl import itl_bin
from fleetplan.sim._kernels.iteration_level import run_iteration_level_logged
from fleetplan.sim.features.arrays import no_extras
from tests.sim.test_features_cases import assert_twin, features_off
from tests.sim.test_kernels_iteration import call_kernel
from tests.sim.test_preempt_cache import prefix_on

PROMPT, OUTPUT, BLOCK = 224, 32, 256
W_S, PREFILL_S_PER_TOKEN = 0.01, 1e-4  # a pure step lasts W; a prefill token adds 0.1 ms


def all_at_once_case(n_fit: int, cycles: int) -> dict:
    """``cycles * n_fit`` requests at t = 0 on one instance whose KV holds ``n_fit`` of them."""
    n = cycles * n_fit
    coef = np.zeros((1, N_STEP_COEFS))
    coef[0, 0] = W_S
    coef[0, 2] = PREFILL_S_PER_TOKEN
    return dict(arrival_s=np.zeros(n), prompt_tokens=np.full(n, PROMPT, np.int64),
                output_tokens=np.full(n, OUTPUT, np.int64), req_pool=np.zeros(n, np.int32),
                route_u=np.zeros((n, 2)), pool_inst_start=np.array([0, 1], np.int32),
                pool_router=np.zeros(1, np.int32), pool_max_context=np.array([n_fit * BLOCK], np.int64),
                pool_max_num_seqs=np.array([256], np.int32),
                pool_max_batched_tokens=np.array([PROMPT + n_fit], np.int32),
                pool_kv_blocks=np.array([n_fit], np.int64), pool_block_tokens=np.array([BLOCK], np.int32),
                pool_step_code=np.zeros(1, np.int32), pool_step_coef=coef, horizon_s=np.inf)


def theory_gaps(n_fit: int, n_requests: int) -> tuple[int, int]:
    """(pure, mixed) decode gaps over all requests (module docstring)."""
    mixed = (n_requests - n_fit) * (n_fit - 1) + n_fit * (n_fit - 1) // 2
    return n_requests * (OUTPUT - 1) - mixed, mixed


def median_is_pure(pure: int, total: int) -> bool:
    """The pooled median (numpy's, between the two middle gaps when the count is even) is ``W`` exactly when
    both middle gaps are pure ones, i.e. the shortest ``pure`` gaps reach past the middle."""
    return pure > total // 2


# N well below, just below and well above the flip at O - N = N - 1 (N = 16.5 for O = 32); the ramp stays
# free of two first tokens in one step while (N - 1)(N + 2)/2 < P.
@pytest.mark.parametrize(("n_fit", "pure_median"), [(4, True), (12, True), (20, False)])
@pytest.mark.parametrize("caching", [False, True])
def test_feature_kernel_gaps_follow_the_theory(n_fit: int, pure_median: bool, caching: bool) -> None:
    case = all_at_once_case(n_fit, cycles=3)
    feats = prefix_on() if caching else features_off(1)
    out = assert_twin(case, feats, no_extras(case["prompt_tokens"]))
    assert (out["out_status"] == STATUS_DONE).all()
    assert out["out_preemptions"].sum() == 0
    hist = out["pool_itl_hist"][0]
    pure, mixed = theory_gaps(n_fit, len(case["arrival_s"]))
    assert hist.sum() == pure + mixed
    assert hist[itl_bin(W_S)] == pure  # every other gap carries >= 1 prefill token: 0.1 ms longer
    assert median_is_pure(pure, pure + mixed) == pure_median
    cum = np.cumsum(hist)
    total = int(cum[-1])
    median_bins = np.searchsorted(cum, [(total - 1) // 2, total // 2], side="right")
    assert (median_bins == itl_bin(W_S)).all() == pure_median


@pytest.mark.parametrize("n_fit", [4, 12, 20])
def test_featureless_kernel_step_log_follows_the_theory(n_fit: int) -> None:
    """The same counts in the featureless kernel's step log (each token past a request's first gets the
    duration of the step that produced it; no preemption here, so that is its gap)."""
    case = all_at_once_case(n_fit, cycles=3)
    n_req = len(case["arrival_s"])
    outs = {"out_inst": np.zeros(n_req, np.int32), "out_first_sched_s": np.zeros(n_req),
            "out_first_token_s": np.zeros(n_req), "out_done_s": np.zeros(n_req),
            "out_preemptions": np.zeros(n_req, np.int32), "out_status": np.zeros(n_req, np.int8),
            "inst_busy_s": np.zeros(1), "inst_seq_s": np.zeros(1), "inst_steps": np.zeros(1, np.int64),
            "inst_tokens": np.zeros(1, np.int64)}
    log_dt_s, log_n, log_len = np.zeros(4096), np.zeros(4096, np.int64), np.zeros(2, np.int64)
    call_kernel(run_iteration_level_logged, case, outs, log_dt_s=log_dt_s, log_n=log_n, log_len=log_len)
    assert log_len[1] == 0 and (outs["out_status"] == STATUS_DONE).all()
    dt, n = log_dt_s[:log_len[0]], log_n[:log_len[0]]
    pure, mixed = theory_gaps(n_fit, n_req)
    assert n.sum() == pure + mixed
    assert n[dt == W_S].sum() == pure
    assert (dt[dt != W_S] > W_S).all()
