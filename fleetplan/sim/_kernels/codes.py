"""Integer codes shared by the simulator kernels and their Python wrappers.

Plain ints (no enums) so numba treats them as compile-time constants and
``fleetplan.sim.compile`` can import them without importing numba.
"""

# Request status written to ``out_status``.
STATUS_DONE = 0
STATUS_UNFINISHED = 1  # still queued/running (or not yet arrived) when the horizon was reached
STATUS_REJECTED = 2  # can never be served by its pool (context or KV budget too small)

# Within-pool routers (``pool_router``).
ROUTE_LEAST_OUTSTANDING = 0
ROUTE_ROUND_ROBIN = 1
ROUTE_RANDOM = 2
ROUTE_POWER_OF_TWO = 3
N_ROUTERS = 4

# Between-pool routing: ``req_pool[i] >= 0`` is chosen by compile; this value lets the
# kernel pick, at arrival, the least-loaded pool that fits the request.
POOL_LEAST_LOADED = -1

# Event kinds; the event order is (time_s, kind, seq): step ends before arrivals.
EV_STEP_END = 0
EV_ARRIVAL = 1

# Step models (mirror of fleetplan.perf.linear; kernels may not import it).
STEP_MODEL_LINEAR = 0
STEP_MODEL_ROOFLINE = 1  # fleetplan.perf.predictor.StepTimePredictor and calibrated profiles
N_STEP_MODELS = 2
N_STEP_COEFS = 22  # 8 -> 18 for STEP_MODEL_ROOFLINE, 20 for its window term, 21 for the sparse-attention prefill
#                   query, 22 for the MoE hit experts' compute offset (layout in fleetplan.perf.linear)

# Instance failures (iteration level): per instance, the pre-drawn event times alternate
# down, up, down, up, ... (an even position within the instance's slice is a failure).
# Events are ordered step ends, then instance down/up events, then arrivals at equal times.
FAIL_EVENT_DOWN = 0  # position parity of a failure in an instance's event slice
FAIL_EVENT_UP = 1  # position parity of a repair
ROUTE_KEY_DOWN = 1 << 61  # a down instance's key in the least-outstanding min tree: never chosen

# Runtime features (#5; docs/runtime_features_contract.md).
ROUTE_PREFIX_AFFINITY = 4  # within-pool router of the feature kernel only
SCHED_VLLM_V1 = 0
SCHED_SGLANG = 1
SCHED_SPF = 2
SCHED_MLFQ = 3
SCHED_H2Q_BR = 4
N_SCHED = 5
GRAPH_NONE = 0
GRAPH_FULL_DECODE_ONLY = 1
GRAPH_PIECEWISE = 2
N_GRAPH_MODES = 3

# Path choice of a KV flow at its start (``_kernels/flows.py``): the pre-drawn ECMP spine, or the
# spine whose path is least loaded now.
POLICY_ECMP = 0
POLICY_RESERVATION = 1
