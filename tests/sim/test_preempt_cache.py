"""vLLM v1 preemption with prefix caching: a preempted request's computed full blocks stay cached
under its own key (``fleetplan.sim._kernels.features.state.own_segment``) and are a hit when it is
admitted again, so a request that cannot grow waits instead of re-prefilling from zero (the thrash of
GPUStack's send-everything-at-once runs, docs/serving_validation.md).

A hand-worked KV-saturated case step by step against vLLM's rule (running first, the last running
request preempted, no admission in a step that preempted, admission only if the first chunk's blocks
fit beside the cached ones it re-pins), the kernel against its twin on saturated random cases, and the
invariants (blocks never above the budget, every request completes)."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.sim._kernels import N_STEP_COEFS, STATUS_DONE
from fleetplan.sim.features.arrays import no_extras
from tests.sim.test_features_cases import assert_twin, features_off, run_one
from tests.sim.test_features_cases import run_iteration_features as kernel
from tests.sim.test_kernels_iteration import make_case


def saturated_case(prompts: list[int], outputs: list[int], kv_blocks: int, block: int, budget: int) -> dict:
    """One instance, every request at t = 0, each step exactly 1 s (linear step model, base only)."""
    n = len(prompts)
    coef = np.zeros((1, N_STEP_COEFS))
    coef[0, 0] = 1.0
    return dict(arrival_s=np.zeros(n), prompt_tokens=np.array(prompts, np.int64),
                output_tokens=np.array(outputs, np.int64), req_pool=np.zeros(n, np.int32),
                route_u=np.zeros((n, 2)), pool_inst_start=np.array([0, 1], np.int32),
                pool_router=np.zeros(1, np.int32), pool_max_context=np.array([kv_blocks * block], np.int64),
                pool_max_num_seqs=np.array([4], np.int32), pool_max_batched_tokens=np.array([budget], np.int32),
                pool_kv_blocks=np.array([kv_blocks], np.int64), pool_block_tokens=np.array([block], np.int32),
                pool_step_code=np.zeros(1, np.int32), pool_step_coef=coef, horizon_s=np.inf)


def prefix_on(n_pools: int = 1) -> dict:
    f = features_off(n_pools)
    f["prefix_on"][:] = 1
    f["prefix_entries"][:] = 8
    return f


def test_hand_worked_two_requests_whose_blocks_do_not_fit_together() -> None:
    """A (24 prompt, 6 out) and B (24, 3), 12 blocks of 4 tokens (7 blocks each), 8 tokens a step.

    t 0-3: A prefills 8+8+8 (6 blocks), first token at 3.  Step 4: A decodes (block 7), B admitted
    with 7 tokens (2 blocks, 3 free).  Step 5: A decodes, B 7 -> 14 (4 blocks, 1 free).  Step 6: B's
    next chunk needs 2 blocks, 1 free: B (the last running) is preempted; its 3 full blocks (12 tokens)
    stay cached, 1 block freed (2 free); nobody admitted.  Step 7: B re-admitted with 12 cached tokens:
    first chunk 7 -> 5 blocks, 2 own, fits in 2 free + 3 cached - 3 re-pinned; B at 19, 0 free.
    Step 8: A's 29th token needs a block, none free: B preempted again (4 full blocks cached: 3 + 1
    kept, 1 freed), A takes it; A's 6th token ends it at 8.  Step 9: B admitted with 16 cached tokens,
    prefills 8, first token at 9; tokens 2, 3 at 10, 11."""
    case = saturated_case([24, 24], [6, 3], kv_blocks=12, block=4, budget=8)
    n_steps, out = run_one(kernel, case, prefix_on(), no_extras(case["prompt_tokens"]))
    assert n_steps == 11
    np.testing.assert_array_equal(out["out_first_token_s"], [3.0, 9.0])
    np.testing.assert_array_equal(out["out_done_s"], [8.0, 11.0])
    np.testing.assert_array_equal(out["out_preemptions"], [0, 2])
    np.testing.assert_array_equal(out["out_first_sched_s"], [0.0, 3.0])
    np.testing.assert_array_equal(out["out_cached_tokens"], [0, 16])  # the last admission's hit
    assert_twin(case, prefix_on(), no_extras(case["prompt_tokens"]))


def test_without_prefix_caching_the_preempted_request_starts_over() -> None:
    """The same case with caching off: B's re-admissions start from token 0 (vLLM
    ``--no-enable-prefix-caching``), so it finishes later than with caching on."""
    case = saturated_case([24, 24], [6, 3], kv_blocks=12, block=4, budget=8)
    _, off = run_one(kernel, case, features_off(1), no_extras(case["prompt_tokens"]))
    _, on = run_one(kernel, case, prefix_on(), no_extras(case["prompt_tokens"]))
    assert off["out_done_s"][1] > on["out_done_s"][1]
    assert off["out_cached_tokens"].sum() == 0


def long_prompt_case(seed: int) -> dict:
    """Random small fleets whose KV cache holds about one request: preemption on most steps."""
    case = make_case(seed, n_max=40)
    rng = np.random.default_rng(seed + 1)
    block = case["pool_block_tokens"].astype(np.int64)
    total = case["prompt_tokens"] + case["output_tokens"]
    need = (int(total.max()) + block.max() - 1) // block.max()
    case["pool_kv_blocks"] = np.maximum((need * rng.uniform(1.0, 1.6, len(block))).astype(np.int64),
                                        (total.max() + block - 1) // block)
    case["pool_max_context"] = np.maximum(case["pool_max_context"], total.max())
    case["arrival_s"] = np.sort(rng.uniform(0, 0.05, len(total)))
    case["horizon_s"] = np.inf
    return case


@pytest.mark.parametrize("seed", range(12))
def test_saturated_kernel_matches_twin_and_invariants(seed: int) -> None:
    """Kernel = twin on KV-saturated cases with caching on; the twin checks ``free + held + cached ==
    kv_blocks`` after every pass (blocks never above the budget); every request completes."""
    case = long_prompt_case(seed)
    feats = prefix_on(len(case["pool_router"]))
    checks: dict = {}
    out = assert_twin(case, feats, no_extras(case["prompt_tokens"]), checks)
    assert (out["out_status"] == STATUS_DONE).all()
    assert (out["out_first_token_s"] <= out["out_done_s"]).all()
    for eng in checks["engines"]:
        assert 0 <= eng.free <= case["pool_kv_blocks"][eng.pool]


def test_saturated_cases_preempt_and_hit_their_own_blocks() -> None:
    """The cases above do exercise the mechanism: preemptions happen and re-admissions hit."""
    preempted = hits = 0
    for seed in range(12):
        case = long_prompt_case(seed)
        _, out = run_one(kernel, case, prefix_on(len(case["pool_router"])), no_extras(case["prompt_tokens"]))
        preempted += int(out["out_preemptions"].sum())
        hits += int(out["out_cached_tokens"].sum())
    assert preempted > 0 and hits > 0
