"""Integer codes and array layouts of the prefill-decode disaggregation kernel (``pdd``).

Plain ints so numba treats them as compile-time constants and ``fleetplan.sim.pdd`` can
import them without numba.  Mirrored by ``fleetplan.sim.pdd.spec`` enums (the registry)
and by the Python twin ``tests/reference/pdd.py``.
"""

# Decode-instance assignment policies (``CI_POLICY``).
ASSIGN_ROUND_ROBIN = 0
ASSIGN_ILS_TOKENS = 1  # fewest decode tokens (prompt + generated) at the binding moment
ASSIGN_ILS_REQUESTS = 2  # fewest requests in decode at the binding moment
ASSIGN_SIBYL = 3  # projected load at the handoff moment (SIBYL §4, Algorithm 1)
ASSIGN_ORACLE = 4  # late binding to the least-loaded instance (tokens) at prefill end
ASSIGN_REQ_LEVEL = 5  # fewest requests bound and not finished, pending ones included (SIBYL's REQ LEVEL)

# When the decode instance is bound (``CI_BINDING``).
BIND_EARLY = 0  # when the prefill instance first schedules the request (prefill start)
BIND_LATE = 1  # when the request's last prefill chunk ends

# Decode model (``CI_DECODE_MODEL``).
DECODE_STEPS = 0  # vLLM-style steps: continuous batching, KV blocks, recompute preemption
DECODE_PS = 1  # SIBYL appendix I: processor sharing, TPS(N) = a N^2 + b N + c

# SIBYL's physical pressure M_k of a task (``CI_SIBYL_PRESSURE``): its token occupancy
# (prompt + generated; eq. 2, the paper's choice for KV-bandwidth-bound decode) or one unit
# per task (decode speed set by the number of tasks alone, as in processor sharing).
PRESSURE_TOKENS = 0
PRESSURE_TASKS = 1

# SIBYL ablations (``CI_SIBYL_ABLATE``, a bit set; the SIBYL paper's §5.3 and appendix J):
# drop Type 1, Type 2 or Type 3 terms, or PROB @ 1 (survival weights of eqs. 6-7 set to 1).
ABLATE_TYPE1, ABLATE_TYPE2, ABLATE_TYPE3, ABLATE_PROB = 1, 2, 4, 8

# Prefill-pool router (``CI_PF_ROUTER``).
PF_ROUTE_ROUND_ROBIN = 0
PF_ROUTE_LEAST_OUTSTANDING = 1  # fewest requests queued, running or holding KV

# ``PddConfig.cfg_i`` layout (int64).  CI_CRUISE: 1 to advance runs of identical decode steps as one event
# (``decode``; results are identical, only the event count changes).  CI_NETWORK: 1 when
# KV transfers are flows on a fabric (``network``), with path policy ``CI_NET_POLICY``
# (``flows.POLICY_*``) over ``CI_N_HOSTS`` hosts and ``CI_N_SPINES`` spines.
# CI_SIBYL_PRESSURE: ``PRESSURE_*`` above; CI_SIBYL_ABLATE: ``ABLATE_*`` bits above.
(CI_N_PREFILL, CI_N_DECODE, CI_PF_MAX_SEQS, CI_PF_BUDGET, CI_PF_KV_BLOCKS, CI_PF_BLOCK, CI_PF_STEP_CODE,
 CI_PF_ROUTER, CI_PF_MAX_CONTEXT, CI_DEC_MAX_SEQS, CI_DEC_BUDGET, CI_DEC_KV_BLOCKS, CI_DEC_BLOCK,
 CI_DEC_STEP_CODE, CI_DEC_MAX_CONTEXT, CI_DECODE_MODEL, CI_POLICY, CI_BINDING, CI_N_BUCKETS, CI_CRUISE,
 CI_NETWORK, CI_NET_POLICY, CI_N_HOSTS, CI_N_SPINES, CI_SIBYL_PRESSURE, CI_SIBYL_ABLATE) = range(26)
N_CFG_I = 26

# ``PddConfig.cfg_f`` layout (float64).
(CF_LATENCY_S, CF_HORIZON_S, CF_PS_A, CF_PS_B, CF_PS_C, CF_BUCKET_TOKENS, CF_EMA_ALPHA,
 CF_PRIOR_RATE_TOKENS_PER_S) = range(8)
N_CFG_F = 8

# ``PddOutputs.request_t`` columns (``out_t`` in the kernel; float64 seconds, inf when not reached).
OT_PF_SCHED, OT_PF_END, OT_BIND, OT_GRANT, OT_HANDOFF, OT_FIRST_TOKEN, OT_DONE = range(7)
N_OUT_T = 7

# ``PddOutputs.request_i`` columns (``out_i`` in the kernel; int64).
# OI_OPTIMAL: 1 if the bound instance had the least token load at handoff, 0 if not, -1 if
# never handed off; OI_OPTIMAL_REQUESTS: the same with the number of requests in decode as load.
OI_PF_INST, OI_DEC_INST, OI_PREEMPTIONS, OI_STATUS, OI_OPTIMAL, OI_OPTIMAL_REQUESTS = range(6)
N_OUT_I = 6

# Per-request int state (``RequestState.ri`` columns, ``R_i`` in the kernel).
# RI_NET: network phase of the KV transfer (NET_* below).
RI_COMP, RI_TARGET, RI_GEN, RI_HELD_D, RI_HELD_P, RI_NXT, RI_PPREV, RI_PNEXT, RI_SCHED, RI_NET = range(10)
N_RI = 10

# Per-prefill-instance int state (``PrefillState.pi`` columns, ``P_i``).
PI_LEN, PI_WHEAD, PI_WTAIL, PI_FREE, PI_NOUT = range(5)
N_PI = 5

# Per-decode-instance int state (``DecodeState.di`` columns, ``D_i``).
# DI_CR_*: the run of decode steps in flight (``decode``): steps in the run, steps committed
# (time, load), steps applied to the requests, requests in the run (0: not pure decode), context.
(DI_LEN, DI_WHEAD, DI_WTAIL, DI_FREE, DI_RHEAD, DI_RTAIL, DI_PHEAD, DI_PTAIL, DI_LOAD_TOKENS,
 DI_N_IN_DECODE, DI_INFLIGHT, DI_CR_M, DI_CR_K, DI_CR_KREQ, DI_CR_N, DI_CR_CTX) = range(16)
N_DI = 16

# Per-decode-instance float state (``DecodeState.df`` columns, ``D_f``): PS virtual time, its last update, step start;
# the run's end of the step in progress, end of its first step, and pure-decode step parts.
DF_V, DF_T_LAST, DF_STEP_START, DF_CR_END, DF_CR_E0, DF_CR_BASE, DF_CR_PER_CTX = range(7)
N_DF = 7

# Counters: ``Transfers.counters`` (``G_i``) = (rr prefill, rr decode, transfer-heap size);
# ``Statistics.completed`` (``G_f``) = (tokens of completed decodes, their decode seconds) for the
# system-average rate.
GI_RR_P, GI_RR_D, GI_HEAP = range(3)
N_GI = 3
GF_TOKENS, GF_SECONDS = range(2)
N_GF = 2

# Request status (same values as ``codes.STATUS_*``: done, unfinished, rejected).
ST_DONE, ST_UNFINISHED, ST_REJECTED = 0, 1, 2

# Network phase of a request's KV transfer (RI_NET): nothing started; the layers' flow (all
# but the last layer, layer-wise only) in flight; ready for the last flow once prefilled;
# the last flow (the whole KV without layer-wise) scheduled or in flight.
NET_IDLE, NET_LAYERS, NET_READY, NET_LAST = range(4)

# Flow kinds (``flow_i[:, FI_KIND]``) and per-flow outputs (``PddOutputs.flow_t`` float, ``flow_i`` int).
FLOW_LAYERS, FLOW_LAST = range(2)
FT_START, FT_DONE = range(2)
N_FT = 2
FI_REQ, FI_KIND, FI_SPINE = range(3)
N_FI = 3

# Network scalars (``FabricState``): net_f = (clock, next completion), net_i = (active, flows started, dirty,
# peak active, completions pending, next pending index).
NF_NOW, NF_NEXT = range(2)
N_NF = 2
NI_ACTIVE, NI_FLOWS, NI_DIRTY, NI_PEAK, NI_PENDING, NI_PHEAD = range(6)
N_NI = 6

# Network statistics (``PddOutputs.net_stats``): flows started, peak flows active at once.
NS_FLOWS, NS_PEAK_ACTIVE = range(2)
N_NS = 2
