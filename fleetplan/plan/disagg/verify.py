"""Phase 2 for PDD and AFD candidates: the PDD simulator (``fleetplan.sim.pdd``) is authoritative.

Both topologies are *simulated* (never only analytic):

* PDD: the prefill pool is P instances of g_p with a token budget of one chunk (so a prompt
  alone takes the screen's S_p) and least-outstanding routing; KV transfer is the screen's
  (latency + prompt x KV bytes per token / bandwidth); the decode pool is D instances of g_d
  with ``max_num_seqs`` = the screen's batch n; decode instances are assigned to the fewest outstanding
  requests (``DECODE_ASSIGNMENT``) bound at prefill start (early).  Step models: the GPU's linear constants, or
  for a served model the operator-level predictor (``VerifySettings.step_models``).
* AFD: the same simulator, each decode instance one AFD unit whose step is the screen's AFD step
  linearised through t_afd(1) and t_afd(n) at the mean context c̄ (``DisaggCandidate.decode_fit``:
  step = base + slope x the batch's context tokens, exact at both points), with the unit's KV
  blocks (a x the attention GPU's).  ``verified_by`` says "simulated (AFD step linearised)".

Pass rule as ``plan.verify``: replications with independent seeds (the same at every count:
common random numbers); the fleet passes when the upper end of the Student-t interval of the
SLO-percentile TTFT and TPOT are within the SLOs.  The roles are coupled (one simulation of the whole
fleet), so the search is per role in turn: a failing fleet grows its binding role by one instance
(or ``GROWTH_SHARE`` of its instances when that is more)
(AFD: one decode unit) until it passes: prefill when TTFT is the worse ratio and its queueing is at least the
decode role's backpressure (the time a finished prefill holds its KV for a decode slot, ``_slot_wait_s``), decode
otherwise.  The first-decode wait is not the decode role's share: it is mostly the step itself, which a larger
decode role barely shortens (held-out agent_heavy, Llama-3.1-8B on H100 tp8 at 100 req/s, prefill ρ 0.2-0.4: a
TTFT a few per cent over the SLO with no queue grew decode from 38 to 58 instances and one AFD fleet's units from
19 to 3,345).  No step cap, only ``max_gpus``, and growth stops (the fleet fails) when ``NO_GAIN_STEPS`` steps in a
row each lower the worse of the TTFT / TPOT ratios to the SLO by less than ``plan.verify.NO_GAIN`` (the co-located
search's rule, there after one step): the same
agent_heavy AFD fleets' TTFT upper bound, a few per cent over the SLO, did not fall as prefill grew to 10,488
instances.  Then prefill,
then decode, is shrunk holding the other (galloping down, then bisection) to the fewest instances
that still pass, never below a role's utilisation-cap floor (``PoolPlan.floor_count``: the fewest instances
whose ρ is within ρ_max, prefill ρ_p and decode slot load ρ_d; the co-located verifier's rule): a decode role's
batch cap b is the largest within the TPOT target, so its TPOT holds up to high slot loads, and without the floor
the search shrank decode roles to a slot load of 0.95-1.0, 15-25 % below the cap's count.
A PDD fleet chosen with an xPyD ratio (``DisaggCandidate.pd_ratio``) grows and shrinks
by whole groups, so the verified fleet is deployable at its ratio.  The KV transfer runs over NVLink when
the simulated counts fit one node of one GPU type, else over the scale-out network
(``DisaggCandidate.kv_bandwidth_at``): a fleet sized on one node that verification grows past it pays
the network's transfer.  ``at_analytic`` holds the analytic and simulated fleet TTFT / TPOT at the analytic
counts (per role: prefill with TTFT, decode with TPOT).

Floor-bound fleets (``floor_replications``): growth stops where the TTFT no longer falls (its floor: prefill,
transfer and first decode step with no queue), and a fleet whose floor sits within the interval's half-width of the
SLO fails though its P-quantile is within it.  Held-out agent_heavy, Llama-3.1-8B at 100 req/s, P99 TTFT 500 ms,
H100 tp8 prefill and decode: prefill 10 -> 15 instances took the mean of 3 replications' P99 TTFT from 498 to
469 ms and the upper bound from 553 to 507 ms (t_2 / √3 = 2.48 sample deviations of ŝ = 15 ms: 38 ms), and every
feasible candidate of that run had that prefill shape (H100 tp8, the fastest swept), so no other role shape had a
lower floor.  So when growth stops and the means are within the SLOs, the check at those counts is extended with
the next seeds' replications (common random numbers still hold; the first ones are not re-run) to the fewest N
whose projected upper end m + t_{N-1} ŝ / √N is within them, at most ``FLOOR_MAX_REPLICATIONS``, projected again
from each extended check; the pass rule (the 95 % interval's upper end within the SLO) is unchanged and the shrink
that follows runs at N.  That fleet passed at 7 replications and 13 prefill instances (mean 479 ms, upper end
499 ms).  A larger N after a failed look is the sequential procedure for a mean to a given precision (Law & Kelton,
*Simulation Modeling and Analysis*, 5th ed., §9.4.1), taken only when the means are within the SLOs and at most
``FLOOR_MAX_REPLICATIONS`` - n times; its price, with normal replications (10^5 trials): a fleet whose true
percentile is exactly the SLO passes 5.4 % of the time against 2.5 % at 3 replications, one half a sample deviation
above it 0.7 % against 0.5 %.  A fleet whose means are above the SLO, or whose interval at the cap is still too
wide, fails with that cause named.

Run length (``run_length``): the whole fleet in one run of at least ``VerifySettings.fixed_requests``
requests, 10 % of them warm-up, unless the decode batch needs longer to fill.  From an empty start the
decode batch is M/G/∞ with lifetimes R_j = o_j t_d (t_d the analytic decode step at n*): at time t it holds
λ ∫_0^t P(R > s) ds, short of its steady λ E[R] by λ E[(R - t)^+].  The warm-up is the first t_w with
E[(R - t_w)^+] <= ``WARMUP_SHORTFALL`` E[R] (heavy-tailed outputs, agent_heavy: about 200 s where 10 % of
20,000 requests at 100 req/s is 20 s, and the run measured a batch 30 % short of its steady size, the
P99 TPOT 25 % low), or, when later, the first t_c whose held context (what the decode step reads) is within
``WARMUP_SHORTFALL`` of its steady level (``context_warmup_s``; a long-lived request holds the largest context:
agent_heavy, Llama-3.1-8B on 38 H100 tp8 decode instances, the count's 125 s left the context short and the
measured mean TPOT 9.3 ms rising through the window, against 11.9 ms after 900 s), both stretched by 1 / (1 - g):
a batch whose size slows its own step relaxes at (1 - g) / (E[o] t_d), not 1 / (E[o] t_d) (``queueing.disagg``;
g = 0.74 there: the context's 200 s left the mean TPOT rising from 9.0 to 10.1 ms through the window); the
measured window keeps 90 % of ``fixed_requests`` after it.

Decode assignment (``DECODE_ASSIGNMENT``): the fewest requests bound and not finished, those still in prefill or
transfer included (the simulator's ``req_level``: a least-outstanding-requests balancer that counts what it has
dispatched, as Envoy's LEAST_REQUEST or a router tracking its in-flight requests).  The screen sizes each decode
instance for λ / D with its slots balanced (``queueing.disagg``); two simpler routers break that where it matters:

* ILS (fewest decode tokens handed off) ignores the requests bound early and still in prefill or transfer, so at
  many decode instances every binding of one prefill-and-transfer time (~0.6 s, hundreds of requests at
  1,000 req/s) goes to the few instances whose handed-off load is lowest: Llama-3.1-70B FP8, azure_conv at
  1,000 req/s, 197 H200 prefill + 77 H200 decode instances: held slots per instance sd 27.9 (req_level 3.6,
  round-robin 7.5) and 11 % of the time at the batch cap, P99 TTFT 3.8 s against the screen's 0.70 s
  (req_level 0.71 s), and verification grew decode 77 -> 134.
* Round-robin ignores load: at two decode instances with lmsys's heavy-tailed outputs one instance fills with
  long-lived requests while the other has free slots, and the prompts bound to it wait (P99 TTFT 22-38x the
  screen's on the grid's B200 lmsys candidates at 50 req/s).

``verify_any`` is the phase-2 task of ``plan.optimize`` (co-located candidates go to
``plan.verify``; ``plan.verify.failed_verification`` is the record kept when a task fails every attempt);
``frontier_pdd_spec`` builds ``plan.frontier``'s PDD / AFD throughput fleets.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from fleetplan.hardware import GpuProfile, with_spares
from fleetplan.metrics import DEFAULT_CONFIDENCE, student_t_interval
from fleetplan.perf.linear import LinearStepModel
from fleetplan.perf.seam import StepModel
from fleetplan.plan.disagg.candidates import (
    BITS_PER_BYTE,
    CALIBRATION_MODEL,
    DEFAULT_AFD_LINK_LATENCY_S,
    DEFAULT_MICRO_BATCHES,
    GBPS,
    DisaggCandidate,
)
from fleetplan.plan.disagg.screen import AfdUnit, ModelShape, decode_load, linear_fit
from fleetplan.plan.pools import fleet_usd_per_h
from fleetplan.plan.space import Topology
from fleetplan.plan.sweep import Candidate
from fleetplan.plan.verify import (
    _STAT_OF_PERCENTILE,
    EXACT,
    NO_GAIN,
    TOO_HIGH,
    TOO_LOW,
    AtAnalytic,
    PoolFigures,
    Verification,
    VerifySettings,
    fleet_direction,
    verify_candidate,
)
from fleetplan.rng import task_seed
from fleetplan.sim.builders import build_pool
from fleetplan.sim.spec import InstanceRouter
from fleetplan.units import H_PER_YEAR, fmt_ms
from fleetplan.workload import Workload

if TYPE_CHECKING:  # the PDD simulator and its kernels are imported when a PDD / AFD fleet is built
    from fleetplan.sim.pdd import PddSpec

FRONTIER_QUADRATURE_POINTS = 4096
#: Share of the steady decode batch a run may still lack when its measured window starts (``run_length``).
WARMUP_SHORTFALL = 0.05
#: Largest decode elasticity g the warm-up's 1 / (1 - g) takes (``run_length``; the screen's own cap).
MAX_WARMUP_ELASTICITY = 0.9
#: Warm-up share of a run whose decode batch fills within it (the PDD simulator's default).
MIN_WARMUP_FRACTION = 0.1
#: Quadrature points of the output lengths the warm-up is computed on.
RUN_LENGTH_POINTS = 4096
#: How verification's simulator assigns decode instances (module docstring).
DECODE_ASSIGNMENT = "req_level"


def warmup_s(output_tokens: np.ndarray, weight: np.ndarray, decode_step_s: float,
             shortfall: float = WARMUP_SHORTFALL) -> float:
    """t_w: the first t with E[(R - t)^+] <= ``shortfall`` E[R], R = o t_d (module docstring), seconds."""
    life = np.asarray(output_tokens, dtype=np.float64) * decode_step_s
    w = np.asarray(weight, dtype=np.float64) / np.sum(weight)
    order = np.argsort(life)
    life, w = life[order], w[order]
    # E[(R - t)^+] at the knots t = 0 and each lifetime l_k: Σ_{j >= k} w_j (l_j - l_k), linear between knots
    # with slope -P(R >= l_k) on (l_{k-1}, l_k]
    tail_w = np.cumsum(w[::-1])[::-1]
    tail_wr = np.cumsum((w * life)[::-1])[::-1]
    knots = np.concatenate([[0.0], life])
    excess = np.concatenate([[tail_wr[0]], tail_wr - tail_w * life])
    goal = shortfall * float(tail_wr[0])
    k = int(np.argmax(excess <= goal))
    if k == 0:
        return 0.0
    return float(knots[k - 1] + (excess[k - 1] - goal) / tail_w[k - 1])


def context_warmup_s(prompt_tokens: np.ndarray, output_tokens: np.ndarray, weight: np.ndarray,
                     decode_step_s: float, shortfall: float = WARMUP_SHORTFALL) -> float:
    """t_c: the first t whose held context falls short of its steady level by at most ``shortfall`` (module
    docstring): a member of age a holds p + a / t_d tokens, so from an empty start the context held is short by
    λ E[∫_t^R (p + a / t_d) da] = λ E[(p (R - t) + (R² - t²) / (2 t_d))^+], R = o t_d; seconds (bisection)."""
    life = np.asarray(output_tokens, dtype=np.float64) * decode_step_s
    p = np.asarray(prompt_tokens, dtype=np.float64)
    w = np.asarray(weight, dtype=np.float64) / np.sum(weight)

    def short(t: float) -> float:
        live = life > t
        return float(w[live] @ (p[live] * (life[live] - t) + (life[live] ** 2 - t * t) / (2.0 * decode_step_s)))

    goal = shortfall * short(0.0)
    lo, hi = 0.0, float(life.max(initial=0.0))
    if short(lo) <= goal:
        return 0.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if short(mid) > goal:
            lo = mid
        else:
            hi = mid
    return hi


def run_length(c: DisaggCandidate, workload: Workload, s: VerifySettings) -> tuple[int, float]:
    """(requests per run, warm-up fraction) for ``c`` (module docstring)."""
    n_fixed = s.fixed_requests()
    step = float(c.pools[1].mean_step_s)
    if s.n_requests is not None or not (math.isfinite(step) and step > 0):
        return n_fixed, MIN_WARMUP_FRACTION
    prompt, output, weight = workload.quadrature(RUN_LENGTH_POINTS)
    if s.max_model_len_tokens is not None:
        served = prompt + output <= s.max_model_len_tokens
        prompt, output, weight = prompt[served], output[served], weight[served]
    if not weight.size:
        return n_fixed, MIN_WARMUP_FRACTION
    # the batch's own drag slows its approach to steady state by 1 / (1 - g) (module docstring)
    drag = 1.0 / (1.0 - min(max(float(c.decode_elasticity), 0.0), MAX_WARMUP_ELASTICITY))
    n_warm = math.ceil(s.rate_per_s * drag * max(warmup_s(output, weight, step),
                                                 context_warmup_s(prompt, output, weight, step)))
    n = max(n_fixed, n_warm + math.ceil((1.0 - MIN_WARMUP_FRACTION) * n_fixed))
    return n, max(MIN_WARMUP_FRACTION, n_warm / n)


def decode_units(c: DisaggCandidate, counts: Sequence[int]) -> int:
    return int(counts[1]) // c.unit[0]


def pdd_spec(c: DisaggCandidate, gpus: Mapping[str, GpuProfile], counts: Sequence[int],
             step_models: Mapping[str, StepModel] | None = None, max_model_len_tokens: int | None = None) -> PddSpec:
    """The simulator's PDD fleet for ``c`` with ``counts`` instances per role (module docstring), limited
    to the served model's ``max_model_len_tokens``."""
    from fleetplan.sim.pdd import AssignPolicy, Binding, KvTransferSpec, PddSpec

    models = step_models or {}
    g_p, g_d = gpus[c.pools[0].gpu], gpus[c.pools[1].gpu]
    ctx = int(c.pools[0].hi_tokens)
    pf_plan = c.pools[0]
    pf = build_pool(g_p, "prefill", int(counts[0]), ctx, router=InstanceRouter.LEAST_OUTSTANDING,
                    max_num_seqs=int(pf_plan.max_num_seqs) or None,
                    max_num_batched_tokens=int(pf_plan.max_num_batched_tokens or g_p.require_serving().chunk_tokens))
    if g_p.name in models:
        pf = replace(pf, step_model=models[g_p.name])
    n = max(1, int(c.decode_batch))
    if c.topology is Topology.AFD:
        base, slope = c.decode_fit
        dec = build_pool(g_d, "decode", decode_units(c, counts), ctx, max_num_seqs=n,
                         kv_blocks=c.unit[0] * int(g_d.require_serving().kv_blocks))
        dec = replace(dec, step_model=LinearStepModel(base, slope * ctx, 0.0, float(ctx)))
    else:
        dec = build_pool(g_d, "decode", int(counts[1]), ctx, max_num_seqs=n)
        if g_d.name in models:
            dec = replace(dec, step_model=models[g_d.name])
    kv_bytes_per_token, _, latency_s = c.kv_link
    transfer = KvTransferSpec(latency_s, c.kv_bandwidth_at(counts), kv_bytes_per_token)
    return PddSpec(pf, dec, transfer, policy=AssignPolicy(DECODE_ASSIGNMENT), binding=Binding.EARLY,
                   max_model_len_tokens=max_model_len_tokens)


@dataclass(frozen=True)
class _Check:
    upper_ttft_s: float
    upper_tpot_s: float
    mean_ttft_s: float
    mean_tpot_s: float
    queue_s: float  # worst replication's SLO-percentile prefill queueing
    slot_wait_s: float  # the same for the decode role's backpressure: the KV held for a slot after prefill
    too_long_share: float = 0.0  # requests above max_model_len (mean over replications)
    too_long_token_share: float = 0.0
    runs: tuple[_Run, ...] = ()  # the replications behind it, in seed order (more are added to them, ``_simulate``)

    def ratio(self, s: VerifySettings) -> float:
        """The worse of the upper TTFT and TPOT bounds over their SLOs."""
        return max(self.upper_ttft_s / s.slo_ttft_s, 0.0 if s.slo_tpot_s is None else self.upper_tpot_s / s.slo_tpot_s)

    def passes(self, s: VerifySettings) -> bool:
        ok = self.upper_ttft_s <= s.slo_ttft_s
        return bool(ok and (s.slo_tpot_s is None or self.upper_tpot_s <= s.slo_tpot_s))


@dataclass(frozen=True)
class _Run:
    """One replication's figures: its SLO-percentile TTFT, TPOT, prefill queueing and slot wait (seconds), and the
    share of its measured requests (and of their tokens) above max_model_len."""

    ttft_s: float
    tpot_s: float
    queue_s: float
    slot_wait_s: float
    too_long_share: float
    too_long_token_share: float


def _simulate(c: DisaggCandidate, gpus, counts, workload: Workload, s: VerifySettings,
              prior: Sequence[_Run] = ()) -> _Check:
    """``s.n_replications`` replications of ``c`` at ``counts``; the first ``len(prior)`` are ``prior`` (the same
    seeds: a check is extended with more replications, ``FLOOR_MAX_REPLICATIONS``, without re-running them)."""
    from fleetplan.sim.pdd import simulate_pdd

    spec = pdd_spec(c, gpus, counts, step_models=dict(s.step_models), max_model_len_tokens=s.max_model_len_tokens)
    stat = _STAT_OF_PERCENTILE[s.percentile]
    n_requests, warmup = run_length(c, workload, s)
    runs = list(prior[: s.n_replications])
    # common random numbers: the same streams at every count, so counts are compared on the same traffic
    for i in range(len(runs), s.n_replications):
        r = simulate_pdd(spec, workload, s.rate_per_s, n_requests, task_seed(s.seed, "verify-disagg", repr(c.key()), i),
                         arrival=s.arrival, cv=s.arrival_cv, warmup_fraction=warmup)
        m = r.summary
        runs.append(_Run(getattr(m.ttft, stat), getattr(m.tpot, stat), getattr(m.queue, stat),
                         _slot_wait_s(r.requests, s.percentile), m.n_too_long / max(m.n_requests - m.n_warmup, 1),
                         m.too_long_token_share))
    return _check_of(runs)


def _check_of(runs: Sequence[_Run]) -> _Check:
    """The pass rule's figures over replications: the Student-t interval's mean and upper end of the SLO-percentile
    TTFT and TPOT, the worst queueing and slot wait, the mean too-long shares."""
    mean, _, hi = student_t_interval([r.ttft_s for r in runs])
    tpot_mean, _, tpot_hi = student_t_interval([r.tpot_s for r in runs])
    return _Check(hi, tpot_hi, mean, tpot_mean, max(r.queue_s for r in runs), max(r.slot_wait_s for r in runs),
                  sum(r.too_long_share for r in runs) / len(runs),
                  sum(r.too_long_token_share for r in runs) / len(runs), tuple(runs))


def _slot_wait_s(requests, percentile: float) -> float:
    """The ``percentile`` of the decode role's backpressure over a run's measured requests: max(0, grant - prefill
    end), the time a finished prefill holds its KV until its decode instance grants a slot (the part of the
    TTFT a larger decode role removes; ``sim.pdd``'s transfer starts at max(prefill end, grant))."""
    measured = requests[~requests["warmup"].to_numpy()]
    grant, end = measured["grant_s"].to_numpy(), measured["prefill_end_s"].to_numpy()
    both = np.isfinite(grant) & np.isfinite(end)  # rejected or never granted: no wait to count
    wait = np.maximum(grant[both] - end[both], 0.0)
    return float(np.percentile(wait, percentile)) if wait.size else 0.0


def _steps(c: DisaggCandidate) -> tuple[tuple[int, ...], ...]:
    """Instances added per step of each role: prefill one instance; decode one instance (PDD) or one
    AFD unit (attention and FFN GPUs together); a PDD fleet chosen with an xPyD ratio moves by whole
    groups (x prefill and y decode instances), so it stays deployable at that ratio."""
    if c.pd_ratio is not None:
        return (tuple(int(k) for k in c.pd_ratio),)
    n = len(c.pools)
    prefill = (1,) + (0,) * (n - 1)
    decode = (0, *(c.unit if c.topology is Topology.AFD else (1,)))
    return prefill, decode


#: A failing fleet grows its binding role by this share of its units per step (at least one unit), so a
#: fleet of hundreds of instances takes tens of simulations, not hundreds; the shrink that follows bisects
#: back to the fewest units that pass, so the overshoot costs no GPUs.
GROWTH_SHARE = 0.1
#: Growth stops after this many steps in a row that each lower the worse SLO ratio by less than ``NO_GAIN``
#: (two: one flat step of a noisy simulation is not yet a floor).
NO_GAIN_STEPS = 2


def _grow(c: DisaggCandidate, counts: list[int], check: _Check, s: VerifySettings) -> None:
    ttft_ratio = check.upper_ttft_s / s.slo_ttft_s
    tpot_ratio = 0.0 if s.slo_tpot_s is None else check.upper_tpot_s / s.slo_tpot_s
    steps = _steps(c)
    if len(steps) == 1:
        step = steps[0]
    else:
        prefill, decode = steps
        step = prefill if ttft_ratio >= tpot_ratio and check.queue_s >= check.slot_wait_s else decode
    role = next(i for i, k in enumerate(step) if k)
    units = max(1, int(GROWTH_SHARE * (counts[role] // step[role])))
    for i, k in enumerate(step):
        counts[i] += k * units


#: Most replications a floor-bound fleet's check is extended to (``floor_replications``): 10, so the 95 % interval's
#: half-width is t_9 / √10 = 0.72 sample deviations, against t_2 / √3 = 2.48 at the default 3.
FLOOR_MAX_REPLICATIONS = 10


def floor_replications(check: _Check, s: VerifySettings) -> int | None:
    """Replications that could let a floor-bound fleet pass, or None (module docstring, "Floor-bound fleets").

    From the check's n replications, each metric's sample deviation is ŝ = (u - m) √n / t_{n-1} (u the interval's
    upper end, m the mean, t the Student-t quantile at ``metrics.DEFAULT_CONFIDENCE``); the answer is the fewest N in
    (n, ``FLOOR_MAX_REPLICATIONS``] with m + t_{N-1} ŝ / √N within the SLO for TTFT and (with a target) TPOT:
    None when a mean is itself above its SLO (more replications only narrow the interval around it) or no N
    within the cap reaches it."""
    from scipy.special import stdtrit

    n = len(check.runs)
    q = 0.5 + DEFAULT_CONFIDENCE / 2.0
    pairs = [(check.mean_ttft_s, check.upper_ttft_s, s.slo_ttft_s)]
    if s.slo_tpot_s is not None:
        pairs.append((check.mean_tpot_s, check.upper_tpot_s, s.slo_tpot_s))
    if n < 2 or any(not (math.isfinite(u) and m <= slo) for m, u, slo in pairs):
        return None
    sd = [(u - m) * math.sqrt(n) / float(stdtrit(n - 1, q)) for m, u, _ in pairs]
    for big_n in range(n + 1, FLOOR_MAX_REPLICATIONS + 1):
        half = float(stdtrit(big_n - 1, q)) / math.sqrt(big_n)
        if all(m + half * d <= slo for (m, _, slo), d in zip(pairs, sd, strict=True)):
            return big_n
    return None


def _floor_note(check: _Check, s: VerifySettings) -> str:
    """The failure's cause when the means are within the SLOs and only the interval is not (``floor_replications``
    found no count of replications that could narrow it enough, or the last did not)."""
    if check.mean_ttft_s > s.slo_ttft_s or (s.slo_tpot_s is not None and check.mean_tpot_s > s.slo_tpot_s):
        return ""
    return (f"; the mean over {len(check.runs) or s.n_replications} replications, TTFT "
            f"{fmt_ms(check.mean_ttft_s, '.0f')}, is within the SLO but its 95 % interval is not")


def verify_disagg(candidate: DisaggCandidate, gpus: Mapping[str, GpuProfile], workload: Workload, s: VerifySettings,
                  availability: Callable[[GpuProfile], float]) -> Verification:
    """Simulate ``candidate``; grow its binding role until it passes (bounded by ``max_gpus``), then
    shrink each role in turn, galloping down then bisecting, to the fewest instances that still pass."""
    counts = [p.count for p in candidate.pools]
    analytic = tuple(counts)
    memo: dict[tuple[int, ...], _Check] = {}
    n_runs = 0  # replications simulated

    def check_at(cs: Sequence[int]) -> _Check:
        nonlocal n_runs
        key = tuple(int(n) for n in cs)
        have = memo.get(key)
        if have is None or 0 < len(have.runs) < s.n_replications:
            prior = () if have is None else have.runs
            memo[key] = _simulate(candidate, gpus, key, workload, s, prior=prior)
            n_runs += s.n_replications - len(prior)
        return memo[key]

    check = first = check_at(counts)
    a = candidate.ttft_p_s
    disagreement = (check.mean_ttft_s - a) / a if a > 0 else float("inf")
    steps, reason, flat = 0, None, 0
    while not check.passes(s):
        if sum(counts) >= s.max_gpus:
            reason = (f"simulated P{s.percentile:g} TTFT upper bound {fmt_ms(check.upper_ttft_s, '.0f')} / TPOT "
                      f"{fmt_ms(check.upper_tpot_s, '.1f')} still above the SLO after {steps} growth steps")
            break
        before = check
        _grow(candidate, counts, check, s)
        steps += 1
        check = check_at(counts)
        flat = flat + 1 if not check.passes(s) and check.ratio(s) >= NO_GAIN * before.ratio(s) else 0
        if flat < NO_GAIN_STEPS:
            continue
        # floor-bound: more instances no longer lower it; when the means are within the SLOs, it is the
        # interval that is too wide: more replications of the same seeds narrow it (module docstring)
        while not check.passes(s) and (more := floor_replications(check, s)) is not None:
            s = replace(s, n_replications=more)
            check = check_at(counts)
        if check.passes(s):
            break
        reason = (f"simulated P{s.percentile:g} TTFT upper bound {fmt_ms(check.upper_ttft_s, '.0f')} / TPOT "
                  f"{fmt_ms(check.upper_tpot_s, '.1f')} above the SLO: more instances no longer lower it "
                  f"(after {steps} growth steps{_floor_note(check, s)})")
        break
    if reason is None:
        for step in _steps(candidate):
            role = next(i for i, k in enumerate(step) if k)
            units = counts[role] // step[role]

            def at(u: int, step=step, base=tuple(counts)) -> list[int]:
                out = list(base)
                for i, k in enumerate(step):
                    if k:
                        out[i] = u * k
                return out

            # counts below a role's utilisation-cap floor are out of bounds, as in phase 1 and ``plan.verify``
            # (``PoolPlan.floor_count``: verification never goes below it)
            lo = max([0] + [-(-candidate.pools[i].floor_count // k) - 1 for i, k in enumerate(step) if k])
            lo, hi, gallop = min(lo, units - 1), units, 1
            while hi - gallop > lo:
                if check_at(at(hi - gallop)).passes(s):
                    hi, gallop = hi - gallop, gallop * 2
                else:
                    lo = hi - gallop
                    break
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if check_at(at(mid)).passes(s):
                    hi = mid
                else:
                    lo = mid
            counts = at(hi)
        check = check_at(counts)
    passed = reason is None
    spares = [with_spares(n, availability(gpus[p.gpu])) - n for p, n in zip(candidate.pools, counts, strict=True)]
    per = [p.gpus_per_instance for p in candidate.pools]
    total = sum((n + sp) * g for n, sp, g in zip(counts, spares, per, strict=True))
    cost = fleet_usd_per_h(candidate.pools, counts, spares)
    shown = check if passed else first
    nan = float("nan")
    roles = [PoolFigures(p.ttft_p_s, first.mean_ttft_s, nan, nan, False) if i == 0 else
             PoolFigures(nan, nan, candidate.decode_step_s, first.mean_tpot_s, False)
             for i, p in enumerate(candidate.pools)]
    at_analytic = AtAnalytic(a, first.mean_ttft_s, candidate.decode_step_s, first.mean_tpot_s, tuple(roles))
    pool_dir = tuple(EXACT if v == n else (TOO_HIGH if v < n else TOO_LOW) for n, v in zip(analytic, counts,
                                                                                          strict=True))
    return Verification(
        rank=candidate.rank, analytic_counts=analytic, verified_counts=tuple(counts),
        verified_spares=tuple(int(x) for x in spares), passed=passed, p99_ttft_s_sim=shown.upper_ttft_s,
        p99_tpot_s_sim=shown.upper_tpot_s, p99_ttft_s_analytic=a, disagreement=disagreement,
        flagged=abs(disagreement) > s.disagreement_threshold, total_gpus=total,
        cost_usd_per_year=cost * H_PER_YEAR, reason=reason, at_analytic=at_analytic, pool_direction=pool_dir,
        direction=fleet_direction(pool_dir), n_simulations=n_runs,
        too_long_share_sim=first.too_long_share, too_long_token_share_sim=first.too_long_token_share)


def verify_any(candidate: Candidate, gpus, workload, s, availability) -> Verification:
    """``plan.verify.verify_candidate`` for co-located candidates, ``verify_disagg`` for PDD / AFD."""
    if isinstance(candidate, DisaggCandidate):
        return verify_disagg(candidate, gpus, workload, s, availability)
    return verify_candidate(candidate, gpus, workload, s, availability)


def frontier_pdd_spec(architecture: str, workload: Workload, gpu: GpuProfile, n_prefill: int, n_rest: int, cap: int,
                      max_context_tokens: int) -> tuple[PddSpec, int]:
    """A throughput-frontier fleet of one GPU type (``plan.frontier``): ``n_prefill`` prefill
    instances and ``n_rest`` decode GPUs (AFD: paired into 1:1 units, step linearised at the
    workload's mean decode context), decode batch capped at ``cap``; returns it and the GPUs used."""
    from fleetplan.models.catalog import load_model
    from fleetplan.sim.pdd import AssignPolicy, Binding, KvTransferSpec, PddSpec

    sv = gpu.require_serving()
    shape = ModelShape.of(load_model(CALIBRATION_MODEL))
    ctx = int(max_context_tokens)
    pf = build_pool(gpu, "prefill", n_prefill, ctx, router=InstanceRouter.LEAST_OUTSTANDING,
                    max_num_batched_tokens=int(sv.chunk_tokens))
    bandwidth = gpu.network_gbps * GBPS / BITS_PER_BYTE
    if architecture == "afd":
        units = n_rest // 2
        c_bar = decode_load(*workload.quadrature(FRONTIER_QUADRATURE_POINTS)).mean_context_tokens
        unit = AfdUnit(sv, sv, 1, 1, DEFAULT_MICRO_BATCHES, bandwidth, DEFAULT_AFD_LINK_LATENCY_S)
        steps = unit.step_s(np.array([1, cap]), c_bar, shape)
        base, slope = linear_fit(float(steps[0]), float(steps[1]), cap, c_bar)
        dec = build_pool(gpu, "decode", units, ctx, max_num_seqs=cap)
        dec = replace(dec, step_model=LinearStepModel(base, slope * ctx, 0.0, float(ctx)))
        n_used = n_prefill + 2 * units
    else:
        dec = build_pool(gpu, "decode", n_rest, ctx, max_num_seqs=cap)
        n_used = n_prefill + n_rest
    spec = PddSpec(pf, dec, KvTransferSpec(0.0, bandwidth, shape.kv_bytes_per_token), policy=AssignPolicy.ILS,
                   binding=Binding.EARLY)
    return spec, n_used
