"""Named state groups of the simulator kernels: arrays that travel together, as named tuples.

numba passes a ``collections.namedtuple`` of arrays and scalars to a kernel as one typed argument,
and a kernel builds one as cheaply as a plain tuple; a helper reads ``outs.first_token_s`` where it
read ``outs[1]``, so a field added later shifts nothing.  Each group is built once (by the Python
wrapper for a kernel's inputs and outputs, by the kernel for its own state) and passed whole.
Shapes: N requests, K instances, P pools, R running slots (``sum of max_num_seqs``); dtypes are the
ones the kernels are compiled for (``i4`` int32, ``i8`` int64, ``f8`` float64, ``b1`` bool).

Shared by the iteration-level kernels (``iteration_level``, ``iteration_steps``, ``failures``) and
the feature kernel (``features/``):

``Pools`` (per pool, read-only): ``pool_inst_start`` i4[P + 1] first instance of pool p (instances
of p are ``pool_inst_start[p] .. pool_inst_start[p + 1] - 1``); ``pool_max_num_seqs`` i4[P];
``pool_max_batched_tokens`` i4[P] token budget of a step; ``pool_block_tokens`` i4[P] tokens per KV
block; ``pool_step_code`` i4[P] ``STEP_MODEL_*``; ``pool_step_coef`` f8[P, N_STEP_COEFS] step-model
coefficients (seconds).

``Load`` (routing counters): ``inst_outstanding`` i8[K] routed, not completed requests;
``tree``, ``tree_lo``, ``tree_leaves``: the per-pool tournament trees over ``inst_outstanding``
(``routing.build_outstanding_trees``); ``pool_tokens`` i8[P] prompt + output tokens routed to p
(``POOL_LEAST_LOADED``).

Iteration-level kernel (``iteration_level``; columns of the 2-D arrays in ``iteration_steps``):

``Requests``: ``prompt_tokens`` i8[N], ``output_tokens`` i8[N]; ``generated`` i4[N] output tokens
so far (kept across preemptions); ``next_waiting`` i4[N] link of the FIFO waiting lists.
``Slots`` (running requests; the slots of k are ``run_lo[k] .. run_lo[k] + run_len[k] - 1``):
``run_lo`` i8[K + 1], ``run_len`` i8[K], ``run_req`` i4[R] request in the slot, ``run_state``
i8[R, N_SLOT_FIELDS].
``Instances``: ``wait_ends`` i4[K, 2] (head, tail) of the waiting list; ``free_blocks`` i8[K] free
KV blocks; ``step_f`` f8[K, 2] (start_s, first_step_s) and ``step_i`` i8[K, 4] (n_seqs,
tokens_per_step, m, decode context) of the steps in flight; ``step_end_s`` f8[leaves] end of the
steps in flight, inf when idle (key of the event tree).
``Outputs`` (per request): ``first_sched_s``, ``first_token_s``, ``done_s`` f8[N] times (s);
``preemptions`` i4[N]; ``status`` i1[N] ``STATUS_*``.
``Statistics``: ``inst_busy_s``, ``inst_seq_s`` f8[K] busy time and sequence-seconds;
``inst_steps``, ``inst_tokens`` i8[K]; the step log ``log_dt_s`` f8[L], ``log_n`` i8[L],
``log_len`` i8[2] (entries written, entries dropped; empty arrays when not logging).
``Routing``: ``pool_router`` i4[P] ``ROUTE_*``; ``route_u`` f8[N, 2] routing uniforms;
``rr_next`` i4[P] round-robin cursor; ``out_inst`` i4[N] instance that served the request.
``Health`` (instance failures): ``inst_up`` b1[K]; ``pool_n_up`` i8[P] instances up;
``hold_ends`` i4[P, 2] (head, tail) of the pool's hold queue; ``pool_kv_blocks`` i8[P].

Feature kernel (``features/level.py``; the columns of ``rq``, ``ki``, ``kf`` and ``glob`` are in
``features/state.py``):

``FeatureRequests``: ``prompt_tokens``, ``output_tokens`` i8[N]; ``rq`` i8[N, N_RQ] rows of the
requests in the system; ``row_free`` i8[N] free-row list; ``new_tokens`` i8[N] new prompt tokens
of the round; ``prefix_key`` i8[N, 2] prefix keys (-1 = none); ``prefix_tokens`` i8[N, 2]
cumulative token ends of the two prefix segments; ``sess_id`` i8[N] H2Q-BR session of the request.
``Sessions`` (H2Q-BR, Frontier B.3 symbols): ``sess_z`` i8[S] sticky long flag z; ``sess_h`` i8[S]
cumulative executed prefill tokens H; ``sess_c`` i8[S] carryover credit c; ``glob`` i8[N_GLOB]
the kernel's counters (``G_*``).
``FeatureInstances``: ``run_lo`` i8[K + 1], ``run_req`` i8[R] rows of the running requests;
``ki`` i8[K, N_KI], ``kf`` f8[K, N_KF] instance columns; ``step_end_s`` f8[leaves]; ``run_acc``
i1[R, SPEC_RUN_MAX] accepted drafts per slot and step of a speculative run; ``acc_count``
i8[2, SPEC_K_MAX + 1] scratch counts.
``Features`` (per pool, ``CompiledFeatures``): ``policy`` i4[P] ``SCHED_*``; ``policy_param``
f8[P, 4]; ``graph_mode`` i4[P] ``GRAPH_*``; ``graph_sizes`` i8[P, G] capture sizes (tokens);
``graph_n`` i4[P]; ``graph_time_s`` f8[P, 3] (launch_s, replay_s, piecewise_eager_s); ``spec_k``
i4[P] speculative tokens per step; ``spec_bits`` i8[P, SPEC_K_MAX] acceptance thresholds as 53-bit
integers (``features/rng.accept_thresholds``); ``draft_code`` i4[P]; ``draft_coef``
f8[P, N_STEP_COEFS]; ``prefix_on`` i4[P].
``FeatureOutputs`` (per request): ``first_sched_s``, ``first_token_s``, ``done_s`` f8[N];
``preemptions`` i4[N]; ``status`` i1[N]; ``cached_tokens``, ``drafted``, ``accepted`` i8[N];
``last_token_s`` f8[N] (its latest streamed chunk, ``features/itl.py``).
``FeatureStatistics``: ``inst_busy_s``, ``inst_seq_s`` f8[K]; ``inst_steps``, ``inst_tokens``
i8[K]; per pool i8: ``pool_graph_tokens`` [P, 2] (useful, padding), ``pool_step_kind`` [P, 2]
(eager, graphed), ``pool_accept_pos`` / ``pool_draft_pos`` [P, SPEC_K_MAX], ``pool_prefix_tokens``
[P, 2] (looked up, hit), ``pool_itl_hist`` [P, ITL_BINS or 0] (inter-token gaps, ``features/itl.py``).
``Releases`` (session rounds): ``succ_head``, ``succ_next`` i8[N] successor lists;
``delay_s`` f8[N] tool-call delay; the release heap ``heap_s`` f8[N], ``heap_req`` i8[N],
``heap_n`` i8[1] (size).
``FeatureRouting``: ``pool_router`` i4[P], ``route_u`` f8[N, 2], ``rr_next`` i4[P].
``PrefixCache`` (``prefix_cache.py``): ``inst`` i8[K, N_INST_FIELDS], ``ent`` i8[E, N_ENT_FIELDS],
``tab`` i8[T] (hash table of entry ids).

Kernel arguments (built by ``fleetplan.sim.engine`` for the iteration-level kernels and by
``fleetplan.sim.features.run`` for the feature kernel):

``RequestInputs``: ``arrival_s`` f8[N], ``prompt_tokens``, ``output_tokens`` i8[N], ``req_pool``
i4[N] (``POOL_LEAST_LOADED`` = chosen at arrival), ``route_u`` f8[N, 2].
``FleetInputs``: ``Pools``' arrays plus ``pool_router`` i4[P], ``pool_max_context`` i8[P] (tokens),
``pool_kv_blocks`` i8[P].
``FeatureInputs``: ``Features``' arrays with ``spec_accept`` f8[P, SPEC_K_MAX] (conditional
acceptance of draft position j) instead of ``spec_bits``, plus ``prefix_entries`` i8[P],
``affinity_slack`` i8[P] and ``spec_seed`` (int, 0 <= seed < 2**63).
``RoundInputs`` (``RequestExtras``): ``prev_req`` i8[N], ``delay_s`` f8[N], ``session`` i8[N],
``n_sessions`` (int), ``new_tokens`` i8[N], ``prefix_key`` i8[N, 2], ``prefix_tokens`` i8[N, 2].
``FeatureKernelOutputs``: the raw outputs (``fleetplan.sim.features.run`` docstring), written by
the kernel.
``IterationOutputs`` (iteration-level kernels, written by the kernel): per request ``inst`` i4[N],
``first_sched_s``, ``first_token_s``, ``done_s`` f8[N], ``preemptions`` i4[N], ``status`` i1[N];
per instance ``busy_s``, ``seq_s`` f8[K], ``steps``, ``tokens`` i8[K].
``FailureInputs``: ``fail_event_s`` f8[E] alternating down / up times of each instance, instance
k's from ``fail_lo[k]`` to ``fail_lo[k + 1]`` (i8[K + 1]).
``StepLog`` (``run_iteration_level_logged``): ``log_dt_s`` f8[L], ``log_n`` i8[L], ``log_len`` i8[2].
"""

from __future__ import annotations

from collections import namedtuple

__all__ = [
    "FailureInputs", "FeatureInputs", "FeatureInstances", "FeatureKernelOutputs", "FeatureOutputs", "FeatureRequests",
    "FeatureRouting", "FeatureStatistics", "Features", "FleetInputs", "Health", "Instances", "Load", "Outputs",
    "IterationOutputs", "Pools", "PrefixCache", "Releases", "RequestInputs", "Requests", "RoundInputs",
    "Routing", "Sessions", "Slots", "Statistics", "StepLog", "iteration_groups",
]

# shared
Pools = namedtuple("Pools", ["pool_inst_start", "pool_max_num_seqs", "pool_max_batched_tokens",
                             "pool_block_tokens", "pool_step_code", "pool_step_coef"])
Load = namedtuple("Load", ["inst_outstanding", "tree", "tree_lo", "tree_leaves", "pool_tokens"])

# iteration-level kernel
Requests = namedtuple("Requests", ["prompt_tokens", "output_tokens", "generated", "next_waiting"])
Slots = namedtuple("Slots", ["run_lo", "run_len", "run_req", "run_state"])
Instances = namedtuple("Instances", ["wait_ends", "free_blocks", "step_f", "step_i", "step_end_s"])
Outputs = namedtuple("Outputs", ["first_sched_s", "first_token_s", "done_s", "preemptions", "status"])
Statistics = namedtuple("Statistics", ["inst_busy_s", "inst_seq_s", "inst_steps", "inst_tokens",
                                       "log_dt_s", "log_n", "log_len"])
Routing = namedtuple("Routing", ["pool_router", "route_u", "rr_next", "out_inst"])
Health = namedtuple("Health", ["inst_up", "pool_n_up", "hold_ends", "pool_kv_blocks"])

# feature kernel: state
FeatureRequests = namedtuple("FeatureRequests", ["prompt_tokens", "output_tokens", "rq", "row_free", "new_tokens",
                                                 "prefix_key", "prefix_tokens", "sess_id"])
Sessions = namedtuple("Sessions", ["sess_z", "sess_h", "sess_c", "glob"])
FeatureInstances = namedtuple("FeatureInstances", ["run_lo", "run_req", "ki", "kf", "step_end_s", "run_acc",
                                                   "acc_count"])
Features = namedtuple("Features", ["policy", "policy_param", "graph_mode", "graph_sizes", "graph_n", "graph_time_s",
                                   "spec_k", "spec_bits", "draft_code", "draft_coef", "prefix_on"])
FeatureOutputs = namedtuple("FeatureOutputs", ["first_sched_s", "first_token_s", "done_s", "preemptions", "status",
                                               "cached_tokens", "drafted", "accepted", "last_token_s"])
FeatureStatistics = namedtuple("FeatureStatistics", ["inst_busy_s", "inst_seq_s", "inst_steps", "inst_tokens",
                                                     "pool_graph_tokens", "pool_step_kind", "pool_accept_pos",
                                                     "pool_draft_pos", "pool_prefix_tokens", "pool_itl_hist"])
Releases = namedtuple("Releases", ["succ_head", "succ_next", "delay_s", "heap_s", "heap_req", "heap_n"])
FeatureRouting = namedtuple("FeatureRouting", ["pool_router", "route_u", "rr_next"])
PrefixCache = namedtuple("PrefixCache", ["inst", "ent", "tab"])

# feature kernel: arguments
RequestInputs = namedtuple("RequestInputs", ["arrival_s", "prompt_tokens", "output_tokens", "req_pool", "route_u"])
FleetInputs = namedtuple("FleetInputs", ["pool_inst_start", "pool_router", "pool_max_context", "pool_max_num_seqs",
                                         "pool_max_batched_tokens", "pool_kv_blocks", "pool_block_tokens",
                                         "pool_step_code", "pool_step_coef"])
FeatureInputs = namedtuple("FeatureInputs", ["policy", "policy_param", "graph_mode", "graph_sizes", "graph_n",
                                             "graph_time_s", "spec_k", "spec_accept", "draft_code", "draft_coef",
                                             "prefix_on", "prefix_entries", "affinity_slack", "spec_seed"])
RoundInputs = namedtuple("RoundInputs", ["prev_req", "delay_s", "session", "n_sessions", "new_tokens", "prefix_key",
                                         "prefix_tokens"])
FeatureKernelOutputs = namedtuple("FeatureKernelOutputs", [
    "inst", "first_sched_s", "first_token_s", "done_s", "preemptions", "status", "busy_s", "seq_s", "steps",
    "tokens", "release_s", "cached_tokens", "drafted", "accepted", "pool_graph_tokens", "pool_step_kind",
    "pool_accept_pos", "pool_draft_pos", "pool_prefix_tokens", "pool_itl_hist", "last_token_s"])
IterationOutputs = namedtuple("IterationOutputs", ["inst", "first_sched_s", "first_token_s", "done_s", "preemptions",
                                                   "status", "busy_s", "seq_s", "steps", "tokens"])
FailureInputs = namedtuple("FailureInputs", ["fail_event_s", "fail_lo"])
StepLog = namedtuple("StepLog", ["log_dt_s", "log_n", "log_len"])


def iteration_groups(arrays: dict) -> tuple:
    """``(RequestInputs, FleetInputs, IterationOutputs)`` from flat arrays named as the fields, the
    outputs as ``out_<field>`` (per request) and ``inst_<field>`` (per instance): for tests and
    benchmarks that keep their cases in flat dicts."""
    def output(field: str):
        return arrays[f"out_{field}"] if f"out_{field}" in arrays else arrays[f"inst_{field}"]
    return (RequestInputs(**{k: arrays[k] for k in RequestInputs._fields}),
            FleetInputs(**{k: arrays[k] for k in FleetInputs._fields}),
            IterationOutputs(**{k: output(k) for k in IterationOutputs._fields}))
