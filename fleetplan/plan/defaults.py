"""The planner's default settings, in a module that imports nothing, so option declarations
(``cli/plan_options``, ``cli/model_options``) can show them in a command's help without
loading the planner, the queueing models, the simulator or numba.

Each value is the one its computing module uses; those modules import it from here
(``plan.optimize``, ``plan.verify``, ``plan.pools``, ``plan.placement``, ``plan.disagg``).
Where a value comes from is said at the definition or in the module that uses it.
"""

from __future__ import annotations

# plan.optimize
DEFAULT_RATE_PER_S = 100.0
DEFAULT_RHO_MAX = 0.85
DEFAULT_MAX_GPUS = 10_000
AVAILABILITY_FROM_CATALOG = "catalog"

# plan.pools: largest step-time margin accepted (steps up to 4x as long as modelled)
MAX_STEP_TIME_MARGIN = 3.0

# plan.placement: GPUs per node of every
# catalog GPU (``GpuProfile.gpus_per_node``, sourced per profile: NVIDIA HGX/DGX H100, H200 and B200 and AMD
# MI300X platforms carry 8 GPUs on one NVLink / Infinity Fabric domain; only help texts quote it, placements
# read the profile's field); the largest instance tried automatically: 8 nodes (wide expert parallelism runs
# at 32-64 GPUs)
GPUS_PER_NODE = 8
DEFAULT_MAX_GPUS_PER_INSTANCE = 64

# plan.verify: candidates verified, replications, and the run-length rule (plan.verify's docstring)
DEFAULT_VERIFY_TOP = 5
DEFAULT_REPLICATIONS = 3
DEFAULT_WARMUP_LIFETIMES = 2.0
DEFAULT_MEASURED_LIFETIMES = 4.0
DEFAULT_MIN_COMPLETIONS = 10_000

# plan.horizon: candidates kept per forecast period
DEFAULT_CANDIDATES_PER_PERIOD = 8

# plan.disagg: the architecture of the catalog's calibrated Llama-3-70B serving constants (80 layers,
# GQA 8 KV heads); attention:FFN ratios; micro-batches (ping-pong: MegaScale-Infer / Step-3; Frontier
# §3.2); KV transfer latency; bytes/s per GB/s; the smallest cost-efficiency gain (Frontier §6.2)
CALIBRATION_MODEL = "llama-3.1-70b"
DEFAULT_AF_RATIOS = ((1, 1), (2, 1), (1, 2))
DEFAULT_MICRO_BATCHES = 2
DEFAULT_KV_LATENCY_S = 0.0
GBPS = 1e9
DEFAULT_MIN_CE_GAIN = 1.08

# plan.gridflex: curtailment levels (percent of nominal power), the demand-response event window (the core
# paper's §4.8 window: N = 15,000 requests at 200 req/s) and the requests per steady-state replication
DEFAULT_FLEX_LEVELS_PCT = (0.0, 10.0, 20.0, 30.0, 40.0, 50.0)
DEFAULT_FLEX_WINDOW_S = 75.0
DEFAULT_FLEX_STEADY_REQUESTS = 20_000

# plan.reliability: probability that every pool has at least its needed instances up
DEFAULT_RELIABILITY_TARGET = 0.99
