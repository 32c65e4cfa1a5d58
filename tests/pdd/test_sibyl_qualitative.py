"""SIBYL's Table 1 regime (64 decode instances, the paper's own decode model), replicated.

Regime: the paper's simulator (SIBYL §5.4, appendix I, Algorithms 2-3), with the values the
paper states and, where it states none, the choice given in brackets:

* 64 decode instances, processor sharing with the H20 curve ``TPS(N) = -0.423 N^2 + 44.766 N
  - 7.753`` (eq. 15; ``PsThroughputCurve`` default).  Algorithm 3 runs every task it holds, so
  ``max_num_seqs`` is the largest ``N`` with ``TPS(N) > 0`` (105): no cap below the curve.
* Prefill is a pure delay: decode instance bound at arrival (Algorithm 2), prefill instances
  run one prompt at a time (the paper's prefill ``--max-num-seqs 1``) and are never short
  (64 of them at ~2 busy), so prefill time = SIBYL's ESTPREFILL exactly.  [Prefill time:
  fleetplan's roofline predictor for Qwen3-32B on one H20, 0.152 s at 183 tokens, 0.594 s at
  1,000: ``0.02 s + 0.6 ms/token``.]  No KV-transfer time (the simulator has none).
* Workload "ShareGPT" with reasoning (§2.2, appendix F.2): prompts mean 183 tokens, outputs
  mean 5,657, sd ~3,317, capped at 8,192.  [Prompts lognormal(median 133, sigma 0.8): mean
  183; outputs lognormal(median 11,750, sigma 2.5) capped at 8,192: mean 5,659, sd 3,217,
  56 % at the cap; the shape of the paper's CDF is not given beyond these moments.]
* Poisson arrivals [the simulator is trace-driven; vLLM bench's default burstiness is 1] at
  ``RHO = 0.9`` of the decode pool's peak throughput (64 x 1,176.7 tokens/s / 5,657 tokens =
  13.3 requests/s) ["near saturation"; 12.0 requests/s].
* Policies as Algorithm 2: RR cycles over decode instances in arrival order; ILS = least
  outstanding requests on the instance (§2.3; appendix J: unlike REQ LEVEL it does not count
  requests still in prefill) = ``ils_requests``; SIBYL with bucket 256 tokens, EMA alpha 0.99
  [not given in the paper], with either physical pressure (``SibylPressure``):
  - ``sibyl_tokens``: eq. 2's token occupancy ``M = l_in + l``, as the paper writes it;
  - ``sibyl_tasks``: ``M = 1`` per task.  §4.2 defines M as the task's hardware cost and takes
    token occupancy because a real decode step reads the KV; in this decode model the speed of
    every task is ``TPS(N) / N``, set by the number of tasks alone, so a task's cost is one.
    The projection (Types 1-3, survival weights, estimator) is unchanged.
* Optimal-assignment ratio (Table 1: "the pre-assigned instance remains the least-loaded node
  at the actual handoff moment"), on two loads, ties counted as optimal: token occupancy
  (``summary.optimal_assignment_ratio``) and requests in decode, the load that sets speed here
  (``summary.optimal_assignment_ratio_requests``).

Measured (5 replications of 20,000 requests, first 20 % trimmed; mean [range]):

============  ===================  =====================  =====================  ===========
policy        P99 TPOT (ms)        ratio (tokens)         ratio (requests)       longest run
============  ===================  =====================  =====================  ===========
RR            40.6 [39.5, 41.9]    0.016 [0.016, 0.016]   0.026 [0.024, 0.028]   1
ILS           35.9 [35.6, 36.3]    0.039 [0.036, 0.040]   0.53 [0.53, 0.54]      9-11
SIBYL tasks   35.2 [34.8, 35.7]    0.029 [0.028, 0.030]   0.78 [0.77, 0.79]      3-4
SIBYL tokens  3,608 (every run)    0.81 [0.79, 0.84]      0.12 [0.10, 0.14]      160-247
============  ===================  =====================  =====================  ===========

(longest run: consecutive bindings to one decode instance.)  SIBYL tasks is lower than ILS in
P99 TPOT in every replication (paired mean 1.8 %, one-sided 95 % lower bound 1.6 %) and 13 %
below RR; the same holds for buckets 64 and 1,024, alpha 0.9 and 0.999, and load 0.8 and 0.95
(2 replications each).  At this handoff window (~0.15 s, ~2 arrivals) SIBYL tasks differs
little from the paper's REQ LEVEL variant: its survival weights and Type-3 decay move few
decisions.  With longer windows ILS herds on stale counts and falls behind RR, as §5.4 says
(one replication, prefill 1 s + 0.6 ms/token: ILS 41.4 ms, RR 40.5, SIBYL tasks 35.3; 2 s +
0.6 ms/token: 48.4, 40.5, 35.4).

Paper (Table 1, ShareGPT, 64 instances): ratio RR 79.5 %, ILS 71.6 %, SIBYL 94.2 %; P99 TPOT
SIBYL 24.5 % below RR and 47.7 % below ILS (§5.4).

Asserted (paired over replications, one-sided 95 % Student-t lower bound on the mean paired
difference): P99 TPOT of SIBYL (tasks) below RR's and ILS's; SIBYL's ratio above RR's and
ILS's, each SIBYL on the load its pressure counts; as a pinned record of the discrepancy,
what holds instead of the rest; and the full ordering at a 15 s handoff window (3 below).

Not reproduced, and why:

1. With eq. 2's token pressure, SIBYL's P99 TPOT is ~90 times RR's (3,608 / 40.6 ms).
   Token occupancy lags the number of running tasks ``N`` that alone sets the speed
   ``TPS(N)/N`` in this decode model.  A request pending or just handed off weighs about its
   prompt (eqs. 7-8; Type 2/3 = ``l_in`` at ``tau_k = tau``, appendix D), ~183 tokens, while a
   finishing task removes its whole occupancy, up to 8,375 tokens, at once; the look-ahead
   ``tau - t`` is one prefill (~0.15 s, ~5 tokens of decode), so SIBYL sees neither coming.
   After each long completion it routes the next tens of requests to that instance (longest
   runs of consecutive bindings 160-247; RR: 1, ILS: 9-11) and pushes it past the curve's peak
   (``N`` = 53), where throughput falls, up to the 105-task limit (TPOT = 105 / TPS(105) =
   3.6 s).  Beyond 105 our model queues, and queued tasks weigh only their prompt, which feeds
   the collapse further (the paper's curve gives TPS <= 0 there; its simulator does not say
   what happens).  The herding does not need the queue: at 50 % load SIBYL tokens still binds
   runs of up to 107 requests to one instance and its P99 TPOT is 279 ms [72, 650] vs RR's
   28 ms (3 replications).  With vLLM-style steps (``steps``: step = 20 ms + 0.4 ms per
   sequence of 8,192 context tokens, scaled by its context; up to 512 sequences) it is milder
   but present: P99 TPOT SIBYL tokens 72 ms, RR 37 ms, ILS 36 ms (25 requests/s, 3
   replications).  Bucket size and EMA alpha do not matter (buckets 64-1,024, alpha
   0.9-0.999: 3,608 ms every time); ``tests/pdd/test_sibyl_terms.py`` shows the mechanism on
   eqs. 6-8 alone (one 4,200-token task outweighs 22 new 200-token requests).
2. RR's ratio is not above ILS's, and RR's is ~1/64, not 79.5 %: against a per-instance load
   that varies (tokens, or requests in decode with ties counted), a load-blind policy's
   instance is the least loaded of 64 by chance only (measured 1.6 % and 2.6 %).  RR could
   score above ILS only where ILS herds so hard that its pick is worse than a random one,
   i.e. handoff windows of ~10 s (3); no load measure we could derive from the text gives RR
   anywhere near 79.5 % at 64 instances near saturation, and the paper gives the measure no
   further.
3. Handoff windows (one replication each, prefill a pure delay of ``W + 0.6 ms/token`` on
   enough prefill instances that none waits: 64 up to W = 2 s, 1,024 beyond; ratio on
   requests): as W grows ILS's ratio falls (W = 0.02 s: 0.53, 0.5 s: 0.24, 2 s: 0.16, 6 s:
   0.11, 10 s: 0.024, 15 s: 0.017) and from W = 6 s its P99 TPOT
   collapses to the 3.6 s of the curve's end; RR stays at 0.025, SIBYL tasks falls from 0.78 to
   0.08 but keeps its P99 TPOT (36 ms).  Table 1's full ordering, SIBYL < RR < ILS in P99 TPOT
   and SIBYL > RR > ILS in ratio, holds from W ~ 10 s: at W = 15 s (5 replications) P99 TPOT
   SIBYL 35.7 ms [35.3, 36.2], RR 40.6 [39.5, 41.8], ILS 3,608 (every run); ratio SIBYL 0.077
   [0.076, 0.080], RR 0.026 [0.024, 0.028], ILS 0.017 [0.017, 0.018]
   (``test_the_full_table1_ordering_appears_at_long_handoff_windows``).  A reasoning workload's
   short prompts give windows of ~0.15 s, where RR's ratio stays below ILS's.
4. Sensitivity variants (§5.3, appendix J; on SIBYL tasks, 5 replications, P99 TPOT ms, ratio
   on requests): SIBYL 35.2 [34.8, 35.7], 0.78; w/o Type 1 3,608 (every run), 0.00 (blind to
   running tasks it sees only pending ones: instances without any tie at 0 and the lowest
   index wins, so a few instances take most requests and saturate); w/o Type 2
   35.4, 0.64; w/o Type 3 35.3, 0.73; PROB @ 1 35.3, 0.80; REQ LEVEL 35.3, 0.76 (ILS 35.9).
   The paper's ordering of the degradations (Type 1 the largest, 1.99x) holds; REQ LEVEL's 1.83x
   worse P99.9 does not: here speed depends on the task count alone, which REQ LEVEL balances
   (``test_sensitivity_variants_are_pinned``).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from fleetplan import rng as fp_rng
from fleetplan.perf.linear import LinearStepModel
from fleetplan.sim.pdd import KvTransferSpec, PddSpec, simulate_pdd_arrays
from fleetplan.sim.pdd.spec import PsThroughputCurve, SibylParams
from fleetplan.sim.spec import PoolSpec, SchedulerLimits

N_DECODE = 64
N_PREFILL = 64
N_REQUESTS = 20_000
WARMUP_FRACTION = 0.2  # ~330 s: longer than a mean decode (~200 s) from an empty fleet
REPLICATIONS = 5
T_95_ONE_SIDED = {4: 2.132}  # Student t quantile by degrees of freedom
PS_MAX_TASKS = 105  # largest N with TPS(N) > 0 on the paper's H20 curve
PAPER_MEAN_OUTPUT_TOKENS = 5657  # SIBYL §2.2, ShareGPT with reasoning, Qwen3-32B
RHO = 0.9
PREFILL_BASE_S, PREFILL_S_PER_TOKEN = 0.02, 0.0006  # roofline, Qwen3-32B on one H20 (module docstring)
SIBYL_BUCKET_TOKENS, SIBYL_EMA_ALPHA = 256, 0.99
POLICIES = {"round_robin": ("round_robin", "tokens"), "ils_requests": ("ils_requests", "tokens"),
            "sibyl_tasks": ("sibyl", "tasks"), "sibyl_tokens": ("sibyl", "tokens"),
            # the paper's sensitivity variants (§5.3, appendix J), on SIBYL tasks
            "req_level": ("req_level", "tokens"), "sibyl_tasks_no_type1": ("sibyl", "tasks", ("type1",)),
            "sibyl_tasks_no_type2": ("sibyl", "tasks", ("type2",)),
            "sibyl_tasks_no_type3": ("sibyl", "tasks", ("type3",)), "sibyl_tasks_prob1": ("sibyl", "tasks", ("prob",))}


def _rate_per_s() -> float:
    curve = PsThroughputCurve()
    peak_tokens_per_s = max(curve.tokens_per_s(n) for n in range(1, PS_MAX_TASKS + 1))
    return round(RHO * N_DECODE * peak_tokens_per_s / PAPER_MEAN_OUTPUT_TOKENS, 1)


def _requests(seed: int, rate_per_s: float):
    arrival = np.cumsum(fp_rng.stream(seed, "arrivals").exponential(1 / rate_per_s, N_REQUESTS))
    lengths = fp_rng.stream(seed, "lengths")
    prompt = np.clip(lengths.lognormal(math.log(133), 0.8, N_REQUESTS).astype(int), 1, 4096)
    output = np.clip(lengths.lognormal(math.log(11750), 2.5, N_REQUESTS).astype(int), 2, 8192)
    return arrival, prompt, output


def _spec(name: str, prefill_base_s: float = PREFILL_BASE_S, n_prefill: int = N_PREFILL) -> PddSpec:
    policy, pressure, *ablate = POLICIES[name]
    prefill = PoolSpec("prefill", "h20", n_prefill, 4096,
                       LinearStepModel(prefill_base_s, 0.0, PREFILL_S_PER_TOKEN, None),
                       SchedulerLimits(1, 4096, 4096, 16), router="least_outstanding")
    decode = PoolSpec("decode", "h20", N_DECODE, 16384, LinearStepModel(0.02, 0.0, 0.0, None),
                      SchedulerLimits(PS_MAX_TASKS, 8192, 10**6, 16))  # step model unused by processor sharing
    sibyl = SibylParams(SIBYL_BUCKET_TOKENS, SIBYL_EMA_ALPHA, pressure=pressure, ablate=ablate[0] if ablate else ())
    return PddSpec(prefill, decode, KvTransferSpec(), policy, "early", "processor_sharing", sibyl=sibyl)


def _longest_run(decode_instance: np.ndarray) -> int:
    """Longest run of consecutive bindings to one decode instance."""
    change = np.flatnonzero(np.diff(decode_instance) != 0)
    bounds = np.concatenate(([-1], change, [decode_instance.size - 1]))
    return int(np.diff(bounds).max())


@functools.cache
def _runs(policy: str, prefill_base_s: float = PREFILL_BASE_S, n_prefill: int = N_PREFILL) -> tuple:
    rate = _rate_per_s()
    out = []
    for r in range(REPLICATIONS):
        seed = fp_rng.task_seed(11, "sibyl-qualitative", r)
        res = simulate_pdd_arrays(_spec(policy, prefill_base_s, n_prefill), *_requests(seed, rate), rate,
                                  warmup_fraction=WARMUP_FRACTION)
        s = res.summary
        assert s.n_done == s.n_requests - s.n_warmup, policy
        binds = res.requests.sort_values("bind_s", kind="stable")["decode_instance"].to_numpy()
        out.append((s.tpot.p99_s, s.optimal_assignment_ratio, s.optimal_assignment_ratio_requests,
                    _longest_run(binds)))
    return tuple(out)


def _lower_bound(diffs) -> float:
    d = np.asarray(diffs, dtype=float)
    return float(d.mean() - T_95_ONE_SIDED[d.size - 1] * d.std(ddof=1) / math.sqrt(d.size))


def _paired(a: str, b: str, column: int, log: bool = False, **regime) -> list[float]:
    f = math.log if log else float
    return [f(x[column]) - f(y[column]) for x, y in zip(_runs(a, **regime), _runs(b, **regime), strict=True)]


P99, RATIO_TOKENS, RATIO_REQUESTS, LONGEST_RUN = range(4)


@pytest.mark.slow
def test_p99_tpot_of_sibyl_below_round_robin_and_ils():
    """§5.4: SIBYL's P99 TPOT below RR's and ILS's (holds with task pressure)."""
    assert _lower_bound(_paired("round_robin", "sibyl_tasks", P99, log=True)) > 0
    assert _lower_bound(_paired("ils_requests", "sibyl_tasks", P99, log=True)) > 0


@pytest.mark.slow
def test_optimal_assignment_ratio_of_sibyl_above_round_robin_and_ils():
    """Table 1's SIBYL > RR and SIBYL > ILS (holds), each SIBYL on the load its pressure counts."""
    for other in ("round_robin", "ils_requests"):
        assert _lower_bound(_paired("sibyl_tasks", other, RATIO_REQUESTS)) > 0
        assert _lower_bound(_paired("sibyl_tokens", other, RATIO_TOKENS)) > 0


@pytest.mark.slow
def test_discrepancies_with_the_paper_are_pinned():
    """Pinned record of what holds INSTEAD of the rest (module docstring, 1-2).

    If a change to SIBYL or to the decode model makes this fail, the discrepancy has moved:
    re-measure and update the module docstring (and assert the paper's result where it now holds)."""
    rr, ils, tokens = _runs("round_robin"), _runs("ils_requests"), _runs("sibyl_tokens")
    # 1. eq. 2's token pressure herds: P99 TPOT far above RR's and ILS's, long runs of bindings
    assert _lower_bound(_paired("sibyl_tokens", "round_robin", P99, log=True)) > math.log(10)
    assert _lower_bound(_paired("sibyl_tokens", "ils_requests", P99, log=True)) > math.log(10)
    assert all(x[LONGEST_RUN] == 1 for x in rr)
    assert min(x[LONGEST_RUN] for x in tokens) > 3 * max(x[LONGEST_RUN] for x in ils)
    # 2. RR's ratio is the chance of a load-blind pick (~1/64), below ILS's on either load
    assert all(x[RATIO_TOKENS] < 3.0 / N_DECODE and x[RATIO_REQUESTS] < 3.0 / N_DECODE for x in rr)
    assert _lower_bound(_paired("ils_requests", "round_robin", RATIO_REQUESTS)) > 0
    assert _lower_bound(_paired("ils_requests", "round_robin", RATIO_TOKENS)) > 0


LONG_WINDOW = {"prefill_base_s": 15.0, "n_prefill": 1024}  # a 15 s handoff window; prefill a pure delay


@pytest.mark.slow
def test_the_full_table1_ordering_appears_at_long_handoff_windows():
    """Module docstring, 3: with a ~15 s window between binding and handoff (prefill a pure delay:
    1,024 prefill instances), ILS herds on stale counts, and SIBYL (tasks) < RR < ILS in P99 TPOT
    and SIBYL > RR > ILS in optimal-assignment ratio (requests) -- Table 1's ordering, not its
    magnitudes (RR stays at the ~1/64 of a load-blind pick)."""
    assert _lower_bound(_paired("round_robin", "sibyl_tasks", P99, log=True, **LONG_WINDOW)) > 0
    assert _lower_bound(_paired("ils_requests", "round_robin", P99, log=True, **LONG_WINDOW)) > 0
    assert _lower_bound(_paired("sibyl_tasks", "round_robin", RATIO_REQUESTS, **LONG_WINDOW)) > 0
    assert _lower_bound(_paired("round_robin", "ils_requests", RATIO_REQUESTS, **LONG_WINDOW)) > 0
    assert all(x[RATIO_REQUESTS] < 3.0 / N_DECODE for x in _runs("round_robin", **LONG_WINDOW))



@pytest.mark.slow
def test_sensitivity_variants_are_pinned():
    """Module docstring, 4: without Type 1 SIBYL loses sight of the running tasks and herds (the
    paper's largest P99 degradation, 1.99x; here the collapse to the curve's end); Type 2, Type 3
    and the survival weights move P99 TPOT by under 3 %; REQ LEVEL matches SIBYL tasks (the paper:
    1.83x worse P99.9 -- not reproduced, as speed depends on the task count alone here)."""
    sibyl = _runs("sibyl_tasks")
    assert _lower_bound(_paired("sibyl_tasks_no_type1", "sibyl_tasks", P99, log=True)) > math.log(10)
    for name in ("sibyl_tasks_no_type2", "sibyl_tasks_no_type3", "sibyl_tasks_prob1", "req_level"):
        for x, y in zip(_runs(name), sibyl, strict=True):
            assert abs(math.log(x[P99] / y[P99])) < 0.03, name
    assert _lower_bound(_paired("ils_requests", "req_level", P99, log=True)) > 0  # pending counts help
