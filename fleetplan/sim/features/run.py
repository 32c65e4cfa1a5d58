"""Python entry point of the feature kernel (``fleetplan.sim._kernels.features.level``).

``run_features`` builds the kernel's named argument groups (``fleetplan.sim._kernels.groups``:
``kernel_arguments``, ``allocate_outputs``), calls ``run_iteration_features`` and returns the raw
arrays: the featureless engine's keys (``fleetplan.sim.engine._run_kernel``; ``failures`` is
all zeros, the feature kernel has no instance failures) plus, per request, ``release_s``
(when the round entered the system), ``cached_tokens`` (prefix-cache hit at its last
admission), ``drafted`` and ``accepted`` (speculative tokens), and per pool
``pool_graph_tokens`` [P, 2] (useful, padding tokens of graphed steps), ``pool_step_kind``
[P, 2] (eager, graphed steps), ``pool_accept_pos`` / ``pool_draft_pos`` [P, SPEC_K_MAX] and
``pool_prefix_tokens`` [P, 2] (looked up, hit), ``pool_itl_hist`` [P, ITL_BINS] (streamed gaps,
``fleetplan.sim._kernels.features.itl``; [P, 0] unless ``log_itl``) and ``last_token_s`` (each
request's latest chunk).  Semantics: docs/runtime_features_contract.md.
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim._kernels import codes
from fleetplan.sim._kernels.features.itl import ITL_BINS
from fleetplan.sim._kernels.features.level import run_iteration_features
from fleetplan.sim._kernels.groups import FeatureInputs, FeatureKernelOutputs, FleetInputs, RequestInputs, RoundInputs
from fleetplan.sim.compile import CompiledFleet, CompiledRequests
from fleetplan.sim.features.arrays import SPEC_K_MAX, CompiledFeatures, RequestExtras

__all__ = ["run_features", "allocate_outputs", "kernel_arguments"]

SEED_MASK = (1 << 63) - 1


def allocate_outputs(n_requests: int, n_instances: int, n_pools: int, log_itl: bool = False) -> dict[str, np.ndarray]:
    """Output arrays of one call, in the field order of ``groups.FeatureKernelOutputs``; ``log_itl``: the
    inter-token histogram (``ITL_BINS`` counts per pool) is kept."""
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
        "pool_itl_hist": np.zeros((n_pools, ITL_BINS if log_itl else 0), dtype=np.int64),
        "last_token_s": np.full(n, np.inf),
    }


def kernel_arguments(fleet: CompiledFleet, requests: CompiledRequests, features: CompiledFeatures,
                     extras: RequestExtras) -> tuple[RequestInputs, FleetInputs, FeatureInputs, RoundInputs]:
    """The kernel's named input groups (``groups.py``), with the dtypes it is compiled for."""
    f, r, x = fleet, requests, features
    i4, i8, f8 = np.int32, np.int64, np.float64
    return (
        RequestInputs(
            arrival_s=r.arrival_s.astype(f8), prompt_tokens=r.prompt_tokens.astype(i8),
            output_tokens=r.output_tokens.astype(i8), req_pool=r.req_pool.astype(i4),
            route_u=np.ascontiguousarray(r.route_u, dtype=f8)),
        FleetInputs(
            pool_inst_start=f.pool_inst_start.astype(i4), pool_router=f.pool_router.astype(i4),
            pool_max_context=f.pool_max_context.astype(i8), pool_max_num_seqs=f.pool_max_num_seqs.astype(i4),
            pool_max_batched_tokens=f.pool_max_batched_tokens.astype(i4), pool_kv_blocks=f.pool_kv_blocks.astype(i8),
            pool_block_tokens=f.pool_block_tokens.astype(i4), pool_step_code=f.pool_step_code.astype(i4),
            pool_step_coef=np.ascontiguousarray(f.pool_step_coef, f8)),
        FeatureInputs(
            policy=x.policy.astype(i4), policy_param=np.ascontiguousarray(x.policy_param, f8),
            graph_mode=x.graph_mode.astype(i4), graph_sizes=np.ascontiguousarray(x.graph_sizes, i8),
            graph_n=x.graph_n.astype(i4), graph_time_s=np.ascontiguousarray(x.graph_time_s, f8),
            spec_k=x.spec_k.astype(i4), spec_accept=np.ascontiguousarray(x.spec_accept, f8),
            draft_code=x.draft_code.astype(i4), draft_coef=np.ascontiguousarray(x.draft_coef, f8),
            prefix_on=x.prefix_on.astype(i4), prefix_entries=x.prefix_entries.astype(i8),
            affinity_slack=x.affinity_slack.astype(i8), spec_seed=int(x.spec_seed) & SEED_MASK),
        RoundInputs(
            prev_req=extras.prev_req.astype(i8), delay_s=extras.delay_s.astype(f8),
            session=extras.session.astype(i8), n_sessions=int(extras.n_sessions),
            new_tokens=extras.new_tokens.astype(i8), prefix_key=np.ascontiguousarray(extras.prefix_key, i8),
            prefix_tokens=np.ascontiguousarray(extras.prefix_tokens, i8)),
    )


def run_features(fleet: CompiledFleet, requests: CompiledRequests, features: CompiledFeatures,
                 extras: RequestExtras, horizon_s: float, max_in_flight: int = 0,
                 log_itl: bool = False) -> dict[str, np.ndarray]:
    """Run the feature kernel; returns the raw output arrays (see the module doc).  ``max_in_flight > 0``:
    closed-loop clients (``fleetplan.sim._kernels.features.level``); ``log_itl``: keep the inter-token
    histogram."""
    n, n_inst, n_pools = requests.n_requests, fleet.n_instances, int(fleet.pool_router.size)
    out = allocate_outputs(n, n_inst, n_pools, log_itl)
    run_iteration_features(*kernel_arguments(fleet, requests, features, extras), FeatureKernelOutputs(**out),
                           float(horizon_s), int(max_in_flight))
    out["failures"] = np.zeros(n, dtype=np.int32)
    return out
