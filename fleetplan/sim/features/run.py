"""Python entry point of the feature kernel (``fleetplan.sim._kernels.features.level``).

``run_features`` allocates the outputs, calls ``run_iteration_features`` and returns the raw
arrays: the featureless engine's keys (``fleetplan.sim.engine._run_kernel``; ``failures`` is
all zeros, the feature kernel has no instance failures) plus, per request, ``release_s``
(when the round entered the system), ``cached_tokens`` (prefix-cache hit at its last
admission), ``drafted`` and ``accepted`` (speculative tokens), and per pool
``pool_graph_tokens`` [P, 2] (useful, padding tokens of graphed steps), ``pool_step_kind``
[P, 2] (eager, graphed steps), ``pool_accept_pos`` / ``pool_draft_pos`` [P, SPEC_K_MAX] and
``pool_prefix_tokens`` [P, 2] (looked up, hit).  Semantics: docs/runtime_features_contract.md.
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim._kernels import codes
from fleetplan.sim._kernels.features.level import run_iteration_features
from fleetplan.sim.compile import CompiledFleet, CompiledRequests
from fleetplan.sim.features.arrays import SPEC_K_MAX, CompiledFeatures, RequestExtras

__all__ = ["run_features", "allocate_outputs", "kernel_arguments"]

SEED_MASK = (1 << 63) - 1


def allocate_outputs(n_requests: int, n_instances: int, n_pools: int) -> dict[str, np.ndarray]:
    """Output arrays of one call, in the kernel's argument order."""
    n, n_inst = n_requests, n_instances
    return {
        "inst": np.full(n, -1, dtype=np.int32),
        "first_sched_s": np.full(n, np.inf),
        "first_token_s": np.full(n, np.inf),
        "done_s": np.full(n, np.inf),
        "preemptions": np.zeros(n, dtype=np.int32),
        "status": np.full(n, codes.STATUS_UNFINISHED, dtype=np.int8),
        "busy_s": np.zeros(n_inst, dtype=np.float64),
        "seq_s": np.zeros(n_inst, dtype=np.float64),
        "steps": np.zeros(n_inst, dtype=np.int64),
        "tokens": np.zeros(n_inst, dtype=np.int64),
        "release_s": np.full(n, np.inf),
        "cached_tokens": np.zeros(n, dtype=np.int64),
        "drafted": np.zeros(n, dtype=np.int64),
        "accepted": np.zeros(n, dtype=np.int64),
        "pool_graph_tokens": np.zeros((n_pools, 2), dtype=np.int64),
        "pool_step_kind": np.zeros((n_pools, 2), dtype=np.int64),
        "pool_accept_pos": np.zeros((n_pools, SPEC_K_MAX), dtype=np.int64),
        "pool_draft_pos": np.zeros((n_pools, SPEC_K_MAX), dtype=np.int64),
        "pool_prefix_tokens": np.zeros((n_pools, 2), dtype=np.int64),
    }


def kernel_arguments(fleet: CompiledFleet, requests: CompiledRequests, features: CompiledFeatures,
                     extras: RequestExtras, horizon_s: float) -> tuple:
    """The kernel's input arguments (before the outputs), with the dtypes it is compiled for."""
    f, r, x = fleet, requests, features
    i4, i8, f8 = np.int32, np.int64, np.float64
    return (
        r.arrival_s.astype(f8), r.prompt_tokens.astype(i8), r.output_tokens.astype(i8), r.req_pool.astype(i4),
        np.ascontiguousarray(r.route_u, dtype=f8),
        f.pool_inst_start.astype(i4), f.pool_router.astype(i4), f.pool_max_context.astype(i8),
        f.pool_max_num_seqs.astype(i4), f.pool_max_batched_tokens.astype(i4), f.pool_kv_blocks.astype(i8),
        f.pool_block_tokens.astype(i4), f.pool_step_code.astype(i4), np.ascontiguousarray(f.pool_step_coef, f8),
        float(horizon_s),
        x.policy.astype(i4), np.ascontiguousarray(x.policy_param, f8), x.graph_mode.astype(i4),
        np.ascontiguousarray(x.graph_sizes, i8), x.graph_n.astype(i4), np.ascontiguousarray(x.graph_time_s, f8),
        x.spec_k.astype(i4), np.ascontiguousarray(x.spec_accept, f8), x.draft_code.astype(i4),
        np.ascontiguousarray(x.draft_coef, f8), x.prefix_on.astype(i4), x.prefix_entries.astype(i8),
        x.affinity_slack.astype(i8), int(x.spec_seed) & SEED_MASK,
        extras.prev_req.astype(i8), extras.delay_s.astype(f8), extras.session.astype(i8), int(extras.n_sessions),
        extras.new_tokens.astype(i8), np.ascontiguousarray(extras.prefix_key, i8),
        np.ascontiguousarray(extras.prefix_tokens, i8),
    )


def run_features(fleet: CompiledFleet, requests: CompiledRequests, features: CompiledFeatures,
                 extras: RequestExtras, horizon_s: float, max_in_flight: int = 0) -> dict[str, np.ndarray]:
    """Run the feature kernel; returns the raw output arrays (see the module doc).  ``max_in_flight > 0``:
    closed-loop clients (``fleetplan.sim._kernels.features.level``)."""
    n, n_inst, n_pools = requests.n_requests, fleet.n_instances, int(fleet.pool_router.size)
    out = allocate_outputs(n, n_inst, n_pools)
    run_iteration_features(*kernel_arguments(fleet, requests, features, extras, horizon_s), *out.values(),
                           int(max_in_flight))
    out["failures"] = np.zeros(n, dtype=np.int32)
    return out
