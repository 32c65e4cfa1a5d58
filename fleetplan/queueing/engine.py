"""Analytic latency of a pool of continuous-batching engines, from the simulator's own step model.

One physics: the step time ``f`` is the simulator kernel's (``fleetplan.perf.linear.step_time_array_s``
evaluates the same expression as ``fleetplan.sim._kernels.step_model``), and the engine limits
are the simulator pool's (``max_num_seqs``, ``max_num_batched_tokens`` = B, KV blocks).  The pool
stays an M/G/c queue — the slot queue's servers slow down as they fill (a birth-death chain), its
tail exponential with the two-moment burst factor; the prefill server a two-moment (Kingman)
GI/G/1 — and the servers and service moments come from the engine's operating point.

Legend (per instance; G instances share the pool's rate λ, so λ_i = λ / G under the balanced
within-pool router):  request point j has prompt p_j, output o_j, d_j = o_j - 1 decode steps and
decode context C_j = d_j p_j + d_j (d_j - 1) / 2 (sum of its contexts over its decode steps);
n is the decode batch; κ = E[C] / E[d] the mean context of a decoding sequence.

Step times.  A pure decode step of n sequences is t_d(n) = f(n, n, 0, n κ, 0).  A prefill chunk
of x tokens at offset o added to it costs Δ(x, o) = f(n+1, n, x, n κ, x (2o + x)) - t_d(n).  With
chunks of c(n) = B - n tokens (vLLM's token budget after the decodes), prompt j takes
k_j = ceil(p_j / c) steps and adds ΣΔ_j = floor(p_j/c) Δ(c) + Δ(p_j mod c) (attention work summed
exactly: Σ chunk (2 offset + chunk) = p_j²).  Its own prefill lasts

    T_pf,j(n) = k_j t_d(n) + ΣΔ_j(n).

Operating point (throughput balance; Little's law for the decode batch).  Chunks arrive at
λ_i E[k] per second, so the mean step is t̄(n) = t_d(n) / (1 - λ_i Φ(n)) with Φ(n) = E[ΣΔ_j(n)],
and the decode batch it implies is n = λ_i E[d] t̄(n).  The smallest root n* of

    n = λ_i E[d] t_d(n) / (1 - λ_i Φ(n))                                   (fixed point)

is found on a grid of n (the per-n quantities are computed once per pool) and interpolated.  No
root below the concurrency cap n_cap = min(max_num_seqs, KV tokens / time-averaged context) means
the engine runs at the cap and requests queue for a slot.

Queues.  (1) Slots: c = G · n_cap servers; with the instance's batch at n a request holds its
slot for h(n) = T_pf(n) + E[d] t_d(n) / (1 - λ_i Φ(n)) (+ the mean prefill wait below: an admitted
request holds its slot while it waits for the token budget).  A balancing router keeps the
instances' counts even, so l busy slots of the pool release at μ_l = l / h(l / G), and at
c / h(n_cap) beyond c: the engine at its cap is slower than at n*, and the slot queue is a
birth-death chain, p_l ∝ Π_{m<=l} λ/μ_m (a plain M/M/c would use h(n*) throughout and miss the
slow-down exactly when slots run out).  The decode batch varies more than such a count: a prompt's
prefill work stops every decoding sequence of its instance, so the departures it displaces arrive
with it (a cluster of index of dispersion I_eff, ``EngineProfile._dispersion``), and bursty arrivals
add (1 + Ca²)/2; the chain's log-probabilities are divided by that factor φ (the diffusion whose
variance is φ times the chain's).  A₁ = P(L >= c) and a waiting request leaves the queue at
k₁ = (c / h(n_cap) - λ) / ((1 + Ca²)/2).  The slot load is ρ_s = λ h(n_cap) / c (the rate against
the pool's throughput with every slot busy; stable iff ρ_s < 1).
(2) Prefill: the engine prefills B - n tokens per step
of t_full = t_d + Δ(B - n), one FCFS server per instance: GI/G/1 with X_j = p_j t_full / (B - n),
load ρ_p = λ_i E[X] and Kingman's wait ρ E[X] (Ca² + Cs²_X) / (2 (1 - ρ)).  The decode batch n
drifts (Ornstein-Uhlenbeck, Var n = n*/(1 - ε), correlation time τ = E[S]/(1 - ε)) and moves ρ_p
with it.  The queue relaxes over T_q = 2v/(1 - ρ̄_p)² (reflected Brownian motion of variance rate
v = ρ̄_p E[X](Ca² + Cs²_X)); the share g(T_q/τ) = 2(x - 1 + e^{-x})/x² of the drift's variance that
persists over T_q is taken quasi-statically (Gauss-Hermite levels of n, each its own Kingman
queue), the rest adds 2 σ²_fast τ to the work's variance rate (heavy-traffic diffusion).  Prompts
reach an instance with Ca² (1/G + (1 - 1/G) n*/(n* + 32)) under a least-outstanding router (its
counts include the decodes, so it evens prompts only while decodes are few).  A slot is held through
the prefill wait too (E[S_slot] = E[S] + E[W_prefill]).  A prompt that finds no prefill queue runs
beside the decode batch of the instance the router chose, about min(n, 1)(1 - 1/G) below the mean
(the fewest outstanding requests).  The total
wait per level is one atom-exponential with P(W > 0) = 1 - (1 - A₁)(1 - A₂) and the sum of the means.
(3) Step boundary: an arrival waits for the step in progress, R = 0 when the instance is idle
(probability e^{-λ_i E[S]}, M/G/∞) and otherwise uniform on [0, t_d(n*)] (four points).

    TTFT_j = W + R + T_pf,j(n*)

whose p-quantile is the exact quantile of the sum under this model (``ttft._quantile_of_sum``).

TPOT (vLLM's (E2E - TTFT)/(o - 1), requests with o >= 2; a window's mean step never above t_full):
the mean step t̄ during decode, with the
variance of the prefill chunks of others that land in a request's window of d_j t̄ (compound
Poisson at λ_i E[k] chunks/s of second moment E[ΔΣ²/k]) and of the decode batch averaged over that
window (Var n ≈ n* E[S] / (E[S] + d_j t̄), M/G/∞ counts); each request's TPOT is a gamma variable
with that mean and variance and the p-quantile is taken over the mixture.

Utilisation ρ = max(ρ_s, ρ_p) (slots at their busy throughput, prefill server); ρ >= 1 or no stable step is unstable.
Not modelled: preemption under KV pressure beyond the slot cap (the cap uses the time-averaged
context), and runtime features (CUDA graphs, speculation, prefix caching) — pools with them
are sized for the plain engine.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np
from scipy import special

from fleetplan.errors import ConfigError
from fleetplan.memo import IdentityMemo
from fleetplan.perf.api_server import ApiServerCost
from fleetplan.perf.linear import STEP_MODEL_LINEAR, step_time_array_s
from fleetplan.queueing import ttft
from fleetplan.queueing.api_server import ApiServerLoad
from fleetplan.queueing.sizing import InfeasibleReason
from fleetplan.queueing.tail import check_probability_level

__all__ = ["EngineLimits", "EngineModel", "EngineProfile", "EngineState", "EngineSizing", "size_engine_pool",
           "SurvivalTable", "ttft_table", "tpot_table", "mixture_quantile_s", "mixture_quantiles_s", "TpotInputs",
           "load_mixture_kernel", "tpot_mixture", "LatencyTail", "Lazy", "Deferred", "peek"]

try:  # np.interp's own compiled routine for real values, without its Python dispatch (a sweep calls it
    # some 2·10^4 times on a few points each, where the dispatch took longer than the interpolation)
    from numpy._core.multiarray import interp as _interp
except ImportError:  # numpy < 2
    from numpy.core.multiarray import interp as _interp

#: Decode-batch grid points between 1 and the concurrency cap (geometric), plus n = 0.
N_BATCH_GRID = 48
#: Points of the uniform step-boundary wait R.
N_RESIDUAL_POINTS = 3
#: Their positions in the step, (m + 1/2) / N_RESIDUAL_POINTS (read-only).
_RESIDUAL_U = (np.arange(N_RESIDUAL_POINTS) + 0.5) / N_RESIDUAL_POINTS
_RESIDUAL_U.flags.writeable = False
#: The step-boundary wait's points with the idle instance's 0 first (``EngineProfile.ttft_survival``).
_RESIDUAL_U0 = np.concatenate([[0.0], _RESIDUAL_U])
_RESIDUAL_U0.flags.writeable = False
#: Quantile points of the output-length distribution the TPOT mixture is evaluated on.
N_TPOT_BINS = 16
#: Prompt bins of the TTFT distribution (tail-refined; see ``EngineProfile._bin_prompts``).
N_TTFT_BINS = 48
_BISECT_ITERS = 48
#: Gauss-Hermite levels of the decode batch in the quasi-static prefill queue (nodes, weights).
_HERMITE = (lambda z, w: (z, w / w.sum()))(*np.polynomial.hermite_e.hermegauss(5))
#: Cap of the step's elasticity ε in the batch's variance n* / (1 - ε) (a batch this self-slowing is
#: near instability; larger ε would make the variance unbounded).
MAX_ELASTICITY = 0.95
#: Smallest 1 - λ_i Φ a batch level's mean step is evaluated at (a level past it is a transient
#: overload, whose queue the prefill server's fluid backlog accounts for).
MIN_STEP_HEADROOM = 0.05
#: Prefill load above which a batch level counts as a transient overload (fluid backlog).
RHO_TRANSIENT = 0.98
#: Above this many expected prefill events in a decode window their count is taken as normal.
POISSON_NORMAL_EVENTS = 8.0
#: Floor of a TPOT component's standard deviation, relative to the mean step.
MIN_TPOT_SD = 0.01
#: Decode batch at which a least-outstanding router's choices are half random for the prefill queue
#: (``EngineProfile.state``).  Empirical: the value that best fits the simulator on five pools
#: (azure_code/A10G x16 at n* = 2, lmsys/H100 x3 at 8, azure_conv/H100 x2 at 85, agent_heavy/
#: qwen3-30b-a3b H200 TP4 x6 at 160, azure_conv/llama-3.1-8b H100 x2 at 187): P99 TTFT ratios
#: 0.97-1.10 at 32 against 0.90-1.07 at 8 and 0.72-1.0 at the limits (0: Ca²/G, inf: Ca²).
ROUTER_MIXING_BATCH = 32.0
#: Levels of the slot queue's birth-death chain summed exactly (larger pools: on a grid).
SLOT_CHAIN_POINTS = 2048
#: A slot queue whose every-slot-busy probability A₁ is surely below this has A₁ = 0 (``_slot_queue``: a
#: survival changes by less than it, far below any percentile's resolution).
NEGLIGIBLE_SLOT_WAIT = 1e-15
_LOG_NEGLIGIBLE_SLOT_WAIT = math.log(NEGLIGIBLE_SLOT_WAIT)


@dataclass(frozen=True)
class EngineLimits:
    """vLLM scheduler limits of one serving instance (the simulator pool's ``SchedulerLimits``)."""

    max_num_seqs: int
    max_num_batched_tokens: int
    kv_blocks: int
    block_size_tokens: int

    def __post_init__(self) -> None:
        for name in ("max_num_seqs", "max_num_batched_tokens", "kv_blocks", "block_size_tokens"):
            value = getattr(self, name)
            if int(value) != value or value < 1:
                raise ConfigError(f"engine limit {name}={value!r} is invalid: it must be a whole number >= 1")


@dataclass(frozen=True, eq=False)
class EngineModel:
    """Step model (the kernel's code and coefficients) and limits of one serving instance."""

    step_code: int
    step_coef: np.ndarray
    limits: EngineLimits
    api: ApiServerCost = ApiServerCost()  # the API server processes in front (fleetplan.queueing.api_server)

    @classmethod
    def of(cls, step_model, limits: EngineLimits, n_api_servers: int = 1) -> EngineModel:
        """From any ``fleetplan.perf.seam.StepModel`` (what the simulator runs); its API server cost
        with ``n_api_servers`` processes per instance (none for calibrated and linear step models)."""
        code, coef = step_model.kernel_coefficients()
        return cls(int(code), np.array(coef, dtype=np.float64), limits,
                   ApiServerCost.of_step_model(step_model, n_api_servers))

    def step_s(self, n_seqs, n_decode, prefill_tokens, ctx_tokens, attn2) -> np.ndarray:
        return step_time_array_s(self.step_code, self.step_coef, n_seqs, n_decode, prefill_tokens, ctx_tokens,
                                 attn2)


class Lazy:
    """A value computed on first read of a ``Deferred`` field: ``fn(*args)`` (``fn`` a module-level function
    or method and ``args`` plain data, so that the field's owner pickles, e.g. back from a forked child)."""

    def __init__(self, fn: Callable, *args) -> None:
        self.fn, self.args = fn, args

    def __call__(self):
        return self.fn(*self.args)


class Deferred:
    """A field of a frozen dataclass that may be given a ``Lazy``: computed on the first read, then kept.

    The class attribute is the descriptor (``x: float = Deferred(nan)``, ``x: float = Deferred()`` for a
    field without default, or ``field(default=Deferred(None), ...)``; Python's descriptor-typed dataclass
    fields).  Reads, equality, hashing, ``repr`` and ``dataclasses.replace`` see the computed value; a
    pickled object carries the value or the ``Lazy``, whichever it holds.  ``peek`` gives the held
    object without computing it (to hand a lazy value on to another object)."""

    _NO_DEFAULT = object()

    def __init__(self, default=_NO_DEFAULT) -> None:
        self.default = default

    def __set_name__(self, owner, name: str) -> None:
        self.key = "_deferred_" + name

    def __get__(self, obj, owner=None):
        value = self.default if obj is None else obj.__dict__.get(self.key, self.default)
        if value is Deferred._NO_DEFAULT:  # a field without default (the dataclass asks the class)
            raise AttributeError(self.key[len("_deferred_"):])
        if isinstance(value, Lazy):
            value = obj.__dict__[self.key] = value()
        return value

    def __set__(self, obj, value) -> None:
        obj.__dict__[self.key] = self.default if value is self else value


def peek(obj, name: str):
    """The value or ``Lazy`` that ``obj``'s ``Deferred`` field ``name`` holds, not computed (any other
    attribute: its value)."""
    held = obj.__dict__.get("_deferred_" + name, _NOT_HELD)  # where ``Deferred.__set__`` keeps it
    return getattr(obj, name) if held is _NOT_HELD else held


_NOT_HELD = object()


class PoolLoad(NamedTuple):
    """ρ and stability of a pool at each of K counts (``EngineProfile.load``), and ``state()``: the full
    ``EngineState`` of the same counts, computed on demand from the same intermediate arrays."""

    rho: np.ndarray
    stable: np.ndarray
    state: Callable[[], EngineState]


class _LoadParts:
    """The arrays one ``EngineProfile._evaluate`` (K counts) computes on the way to ρ and its latency part
    reads (``EngineProfile._finish``): per count (K,) or (K, L) and (K, grid), the pool's scalars, and the
    slot chain's (A₁, k₁) once computed (``chain``).  ``fleetplan.queueing.lockstep`` builds them for rows
    of many pools at once."""

    __slots__ = ("lam", "counts", "arrival_cv2", "balanced_split", "lam_i", "phi_tab", "r_tab", "n_star", "at_n",
                 "t_d", "phi", "shared", "levels", "spread", "relax_s", "overflow_wait", "wait_l", "a2_l",
                 "prefill_wait", "hold_tab", "hold_full", "burst", "chain", "t_bar", "mean_s", "rho", "stable",
                 "queues_stable")

    def __init__(self, **values) -> None:
        for name, value in values.items():
            setattr(self, name, value)


@dataclass(frozen=True, eq=False)
class EngineState:
    """A pool at each of K instance counts (arrays of shape (K,); seconds, per instance).

    ``lam_i`` per-instance rate; ``decode_batch`` n*; ``t_d`` the decode step and ``mean_step_s`` t̄
    at n*; ``mean_residence_s`` E[S]; ``rho`` max(slot, prefill) utilisation; ``wait_mass`` and
    ``wait_decay_per_s`` (K, L) the wait's P(W > t) = Σ_l v_l A_l exp(-k_l t) over the decode-batch
    levels l of weight v_l (``_HERMITE``); ``idle`` the instance's idle probability;
    ``prefill_binned`` (K, B) own prefill time per prompt bin (mean); ``prefill_levels`` (K, L, 2, B)
    per batch level, alone (an idle prefill server) and behind a queue (token time in full-budget
    steps ``t_full_levels``), which the TTFT distribution pairs with no wait and a wait.
    """

    n_instances: np.ndarray
    lam_i: np.ndarray
    decode_batch: np.ndarray
    t_d: np.ndarray
    mean_step_s: np.ndarray
    mean_residence_s: np.ndarray
    rho: np.ndarray
    stable: np.ndarray
    wait_mass: np.ndarray
    wait_decay_per_s: np.ndarray
    idle: np.ndarray
    prefill_binned: np.ndarray
    phi_s: np.ndarray  # Φ at the operating point: prefill step time per request (s)
    prefill_levels: np.ndarray  # (K, L, 2, B) own prefill per batch level: alone / behind a queue
    t_full_levels: np.ndarray  # (K, L) full-budget step per batch level
    batch_sd: np.ndarray  # (K,) standard deviation of one instance's decode batch
    batch_relax_s: np.ndarray  # (K,) its correlation time E[S] / (1 - ε)
    # The API server's wait (``Deferred``: ``EngineProfile.state`` computes them for its counts on first read)
    api_wait_s: np.ndarray | None = Deferred(None)  # (K,) mean wait for an API server process (Allen-Cunneen)
    api_wait_mass: np.ndarray | None = Deferred(None)  # (K,) P(that wait > 0), Erlang C
    api_wait_decay_per_s: np.ndarray | None = Deferred(None)  # (K,) its tail's rate (Cramér-Lundberg)


class _ApiWait:
    """The API server's wait at the counts of one ``EngineProfile.state`` call, each figure computed for
    all of them on its first read (the counts of one call together: the same arrays, bit for bit, as
    computing them at once).  Most sizing reads only P(wait > 0) and, where it is positive, the tail's rate;
    the mean wait is for reports."""

    def __init__(self, api: ApiServerLoad, lam: float, counts: np.ndarray, arrival_cv2: float) -> None:
        self.api, self.lam, self.counts, self.arrival_cv2 = api, lam, counts, arrival_cv2

    @functools.cached_property
    def api_wait_s(self) -> np.ndarray:
        return self.api.mean_wait_s(self.lam, self.counts, self.arrival_cv2)

    @functools.cached_property
    def api_wait_mass(self) -> np.ndarray:
        return self.api.wait_probability(self.lam, self.counts)

    @functools.cached_property
    def api_wait_decay_per_s(self) -> np.ndarray:
        return self.api.wait_decay_per_s(self.lam, self.counts, self.arrival_cv2)


def _api_wait_rows(wait: _ApiWait, name: str, i: int | None) -> np.ndarray:
    """Field ``name`` of ``wait`` (all counts, or row i as an array of one)."""
    out = getattr(wait, name)
    return out if i is None else out[i:i + 1]


def _two_exponentials(y: np.ndarray, k: np.ndarray, k_api: float) -> np.ndarray:
    """P(W + A > y) for W ~ Exp(k) (k per level, the middle axis of ``y``; may be inf) and A ~ Exp(k_api):
    (k e^{-k_a y} - k_a e^{-k y}) / (k - k_a), or (1 + k y) e^{-k y} where k and k_a agree to 1e-6;
    1 for y < 0 (``_two_exponentials_level`` per level)."""
    out = np.empty(y.shape)
    for lv in range(y.shape[1]):
        yl = y[:, lv]
        out[:, lv] = _two_exponentials_level(yl, np.maximum(yl, 0.0), float(k[lv]), k_api)
    return out


def _two_exponentials_level(y: np.ndarray, yp: np.ndarray, k: float, k_api: float,
                            exp_k: np.ndarray | None = None) -> np.ndarray:
    """``_two_exponentials`` at one level's rate k for the waits y (``yp``: max(y, 0)), computing only
    the form that k takes; ``exp_k``: exp(-k yp) when the caller has it (the same values: -k yp and
    yp (-k) are one product)."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if not math.isfinite(k):
            out = np.exp(-k_api * yp)
        elif abs(k - k_api) <= 1e-6 * max(k_api, 1.0):
            out = (1.0 + k * yp) * (np.exp(-k * yp) if exp_k is None else exp_k)
        else:
            out = (k * np.exp(-k_api * yp) - k_api * (np.exp(-k * yp) if exp_k is None else exp_k)) / (k - k_api)
    return np.where(y < 0, 1.0, out)


def _api_wait_after(y: np.ndarray, api_mass: float, k_api: float) -> np.ndarray:
    """P(W_api > y) = 1 for y < 0, else C exp(-k_a max(y, 0)) (``EngineProfile.ttft_survival``'s no-wait points):
    ``np.where(y < 0, 1.0, C * np.exp(-k_a * np.maximum(y, 0.0)))`` bit for bit (the same elementwise
    operations, a nan y included), the exponential taken only at the points it is kept for (about half of a
    TTFT table's)."""
    keep = ~(y < 0)
    out = np.ones(y.shape)
    kept = y[keep]
    np.maximum(kept, 0.0, out=kept)
    kept *= -k_api
    np.exp(kept, out=kept)
    kept *= api_mass
    out[keep] = kept
    return out


#: Above this many points ``EngineProfile.ttft_survival`` sums its no-wait step functions by sorting (and
#: takes its queued points with an API server wait level by level).
_SORTED_STEP_POINTS = 8


def _queued_with_api(x: np.ndarray, t_queue: np.ndarray, w_queue: np.ndarray, decay: np.ndarray,
                     api_mass: float, k_api: float) -> np.ndarray:
    """The queued part of ``EngineProfile.ttft_survival`` with an API server wait, (X, L), for all levels
    at once: the level-by-level loop's values bit for bit (the same elementwise products per level; each
    level's sum over points is the same product of an (X, M) block and ``w_queue``), in a dozen array
    operations instead of a dozen per level (a sizing search's one-point survivals)."""
    finite = bool(np.all(np.isfinite(decay)))
    y = x[None, :, None] - t_queue[:, None, :]  # (L, X, M)
    yp = np.maximum(y, 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        surv = np.exp(yp * -decay[:, None, None])
    if not finite:
        surv = np.where(y < 0, 1.0, surv)
    # (k e^{-k_a y} - k_a e^{-k y}) / (k - k_a) where k and k_a differ (e^{-k y}: ``surv`` there), the
    # other forms level by level (``_two_exponentials_level``)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        two = (decay[:, None, None] * np.exp(-k_api * yp) - k_api * surv) / (decay - k_api)[:, None, None]
    two = np.where(y < 0, 1.0, two)
    for lv in range(decay.size):
        k = float(decay[lv])
        if not math.isfinite(k) or abs(k - k_api) <= 1e-6 * max(k_api, 1.0):
            two[lv] = _two_exponentials_level(y[lv], yp[lv], k, k_api, None if not finite else surv[lv])
    comb = (1.0 - api_mass) * surv + api_mass * two
    return np.stack([comb[lv] @ w_queue for lv in range(decay.size)], axis=1)


def _step_survival(x: np.ndarray, t: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Σ_m w_m [x < t_lm] (X, L) for each x and level l of ``t`` (L, M): per level the weights of the
    sorted t above x (a suffix sum), O((X + M) log M) instead of X M comparisons."""
    order = np.argsort(t, axis=1, kind="stable")
    ts = np.take_along_axis(t, order, axis=1)
    ws = w[order]
    tail = np.concatenate([np.cumsum(ws[:, ::-1], axis=1)[:, ::-1], np.zeros((t.shape[0], 1))], axis=1)
    out = np.empty((x.size, t.shape[0]))
    for lv in range(t.shape[0]):
        out[:, lv] = tail[lv, np.searchsorted(ts[lv], x, side="right")]
    return out


def _delayed_exp_survival(x: np.ndarray, t: np.ndarray, w: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Σ_m w_m S_lm(x) (X, L) with S_lm(x) = 1 for x < t_lm, else exp(-k_l (x - t_lm)): each level's points
    sorted, the weights of those above x a suffix sum, and the rest exp(-k_l x) Σ_{t_lm <= x} w_m exp(k_l t_lm),
    whose sums are a running log-sum-exp (no overflow at large k t), O((X + M) log M) instead of X M
    exponentials.  ``k`` (L,) finite and >= 0; ``w`` (M,) > 0."""
    order = np.argsort(t, axis=1, kind="stable")
    ts = np.take_along_axis(t, order, axis=1)
    ws = w[order]
    n_lv, m = t.shape
    tail = np.zeros((n_lv, m + 1))
    np.cumsum(ws[:, ::-1], axis=1, out=tail[:, -2::-1])  # Σ of the weights from each sorted point on
    # log Σ_{m' <= m} w_m' exp(k t_m'), with -inf first (no point at or below x)
    log_head = np.empty((n_lv, m + 1))
    log_head[:, 0] = -np.inf
    np.logaddexp.accumulate(np.log(ws) + k[:, None] * ts, axis=1, out=log_head[:, 1:])
    # every level's search in one: level l's points and x shifted by l times twice the largest magnitude (the
    # levels then apart; where a shifted x and point tie differently than unshifted ones, S is 1 either way),
    # so that the count of all points at or below x is l m + that of its own level, at l (m + 1) + it in
    # ``tail`` and ``log_head``
    level = np.arange(n_lv)[:, None]
    shift = level * (2.0 * max(float(np.abs(ts).max()), float(np.abs(x).max())) + 1.0)
    flat = np.searchsorted((ts + shift).ravel(), (x[None, :] + shift).ravel(), side="right").reshape(n_lv, -1)
    flat += level
    return (tail.ravel()[flat] + np.exp(log_head.ravel()[flat] - k[:, None] * x[None, :])).T


def _bisect(survival, lo: float, hi: float, q: float) -> float:
    """Smallest x in [lo, hi] with survival(x) <= q (survival non-increasing), to float precision."""
    while float(survival(np.array([hi]))[0]) > q:  # widen until the bracket holds the quantile
        hi = 2.0 * hi + 1e-6
        if hi > 1e9:
            return math.inf
    for _ in range(_BISECT_ITERS):
        mid = 0.5 * (lo + hi)
        if float(survival(np.array([mid]))[0]) > q:
            lo = mid
        else:
            hi = mid
    return hi


def _grid_cells(x: np.ndarray, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(cell index g, fraction within the cell) of each x on ``grid`` (clamped to its ends): what
    ``_interp_rows`` needs, computed once for several tables at the same x."""
    g = np.minimum(np.maximum(np.searchsorted(grid, x, side="right") - 1, 0), grid.size - 2)
    lo, hi = grid[g], grid[g + 1]
    return g, np.minimum(np.maximum((x - lo) / (hi - lo), 0.0), 1.0)


def _interp_rows(x: np.ndarray, grid: np.ndarray, table: np.ndarray,
                 cells: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Linear interpolation of ``table`` (rows on ``grid``) at each x; shape (K, *table.shape[1:]).
    ``cells``: ``_grid_cells(x, grid)`` when already known."""
    g, frac = cells if cells is not None else _grid_cells(x, grid)
    frac = frac.reshape((-1,) + (1,) * (table.ndim - 1))
    return table.take(g, axis=0) * (1.0 - frac) + table.take(g + 1, axis=0) * frac  # (take: table[g], sooner)


def _geomspace(lo: float, hi: float, n: int) -> np.ndarray:
    """``np.geomspace(lo, hi, n)`` for 0 < lo, 0 < hi and n >= 2, bit for bit (its own steps: 10 to the
    power of ``linspace(log10 lo, log10 hi)``, ends set to ``lo`` and ``hi``) without numpy's generic
    argument handling, which took longer than the sequence (a sweep builds thousands)."""
    a, b = np.log10(np.float64(lo)), np.log10(np.float64(hi))
    step = (b - a) / (n - 1)
    y = np.arange(n, dtype=np.float64)
    if step == 0:  # numpy's path for a zero step (equal ends)
        y /= n - 1
        y *= b - a
    else:
        y *= step
    y += a
    y[-1] = b
    out = np.power(10.0, y)
    out[0], out[-1] = lo, hi
    return out


#: The TTFT bins' tail-probability edges (``EngineProfile._bin_prompts``).
_TAIL_EDGES = np.geomspace(1.0, 1e-6, N_TTFT_BINS + 1)[1:-1]


@functools.lru_cache(maxsize=2048)
def _log_factorials(c: int, n_points: int) -> np.ndarray:
    """ln l! at the levels the slot chain sums (``EngineProfile._slot_queue``): l = 1..c when c <=
    ``n_points``, else ``n_points`` levels evenly spaced on [1, c]; cached (read-only) because a sweep
    meets the same slot counts in many pools (a 70B sweep over 33 GPU set-ups meets about a thousand
    slot counts: 2,048 arrays of at most ``SLOT_CHAIN_POINTS`` values, 32 MiB at most)."""
    lv = np.arange(1.0, c + 1.0) if c <= n_points else np.linspace(1.0, float(c), n_points)
    out = special.gammaln(lv + 1.0)
    out.flags.writeable = False
    return out


class RequestPoints:
    """A pool's request points in prompt order with every quantity that depends on them alone (not on
    the engine): the decode steps and contexts, the prompt bins of the TTFT distribution, the output
    bins of the TPOT mixture.  A sweep sizes the same points on every GPU type and token budget, so
    ``request_points`` builds each set once per process (``EngineProfile`` reads them; arrays read-only).
    """

    def __init__(self, p: np.ndarray, o: np.ndarray, w: np.ndarray) -> None:
        order = np.argsort(p, kind="stable")  # prompt order: T_pf grows with the prompt (TTFT bins)
        p, o, w = np.round(p[order]), np.round(o[order]), w[order]
        self.prompt, self.output, self.weight = p, o, w / w.sum()
        d = o - 1.0
        self.decode_steps = d
        ctx_sum = d * p + d * (d - 1.0) / 2.0
        self.mean_decode_steps = float(self.weight @ d)
        self.mean_ctx = float(self.weight @ ctx_sum) / self.mean_decode_steps if self.mean_decode_steps > 0 else 0.0
        # the time-averaged context of a request (KV cache), before the engine's half block
        self.kv_ctx = float(self.weight @ (ctx_sum + p)) / (self.mean_decode_steps + 1.0)
        self._bin_prompts()
        self.cs2_decode = max(float(self.weight @ d**2) / max(self.mean_decode_steps, 1e-12) ** 2 - 1.0, 0.0)
        self.mean_prompt = float(self.weight @ self.prompt)
        # Second moment of a decoding sequence's context (time-weighted over decode steps).
        pp = self.prompt
        sq = d * pp**2 + pp * d * (d - 1.0) + (d - 1.0) * d * (2.0 * d - 1.0) / 6.0
        self.ctx2 = float(self.weight @ sq) / self.mean_decode_steps if self.mean_decode_steps > 0 else 0.0
        self.prompt_cs2 = float(self.weight @ (self.prompt - self.mean_prompt) ** 2) / self.mean_prompt**2
        self.prompt_sq = (self.prompt * self.prompt)[None, :]  # p², a prompt's attention work (``_tabulate``)
        self.max_prompt = float(self.prompt[-1])  # (sorted)
        # each prompt bin's mean prompt (B,): the fluid prefill behind a queue is linear in it (``_tabulate``)
        self.prompt_binned = np.add.reduceat(self.prompt * self.weight, self.bin_starts) / self.bin_weight
        for a in (self.prompt, self.output, self.weight, self.decode_steps, self.bin_starts, self.bin_weight,
                  self.prompt_sq, self.prompt_binned):
            a.flags.writeable = False

    def _bin_prompts(self) -> None:
        """Prompt bins for the TTFT distribution: T_pf grows with the prompt, so contiguous bins of
        the (sorted) points with edges geometric in the tail probability (1 down to 1e-6) keep the
        upper tail, which sets a high percentile, resolved point by point."""
        tail_prob = 1.0 - np.cumsum(self.weight)
        cuts = np.searchsorted(-tail_prob, -_TAIL_EDGES, side="left") + 1
        starts = np.unique(np.concatenate([[0], cuts[cuts < self.prompt.size]]))
        self.bin_starts = starts
        self.bin_weight = np.add.reduceat(self.weight, starts)
        keep = self.bin_weight > 0
        if not keep.all():  # zero-weight bins carry nothing; merge them away
            self.bin_starts = starts = starts[keep]
            self.bin_weight = np.add.reduceat(self.weight, starts)

    @functools.cached_property
    def queue_weight(self) -> np.ndarray:
        """The prompt bins' weights, each spread over the ``N_RESIDUAL_POINTS`` points of the step a queued
        prompt ends in (``EngineProfile.ttft_survival``)."""
        out = np.repeat(self.bin_weight / N_RESIDUAL_POINTS, N_RESIDUAL_POINTS)
        out.flags.writeable = False
        return out

    @functools.cached_property
    def tpot_bins(self) -> tuple[np.ndarray, np.ndarray]:
        """(d, weight) of up to ``N_TPOT_BINS`` equal-weight bins of the decode steps of requests with
        d >= 1 (d of a bin: 1 / E[1/d], which keeps the mean of 1/d that TPOT spreads with)."""
        d, w = self.decode_steps, self.weight
        mask = d >= 1
        d, w = d[mask], w[mask]
        if d.size == 0:
            return np.zeros(0), np.zeros(0)
        order = np.argsort(d, kind="stable")
        d, w = d[order], w[order] / w.sum()
        cuts = np.searchsorted(np.cumsum(w), np.linspace(0, 1, N_TPOT_BINS + 1)[1:-1], side="right")
        starts = np.unique(np.concatenate([[0], cuts[cuts < d.size]]))
        bw = np.add.reduceat(w, starts)
        inv = np.add.reduceat(w / d, starts)
        keep = bw > 0
        return bw[keep] / inv[keep], bw[keep] / bw[keep].sum()


#: Request point sets ``request_points`` keeps (a sweep meets each set on every GPU type in a row).
REQUEST_POINTS_CACHE = 64
_REQUEST_POINTS = IdentityMemo(REQUEST_POINTS_CACHE, evict="oldest")


def request_points(prompt_tokens, output_tokens, weight) -> RequestPoints:
    """The validated ``RequestPoints`` of these arrays (tokens; weights renormalised to 1), built once
    per process for equal arrays (the last ``REQUEST_POINTS_CACHE`` sets)."""
    p = np.asarray(prompt_tokens, dtype=np.float64)
    o = np.asarray(output_tokens, dtype=np.float64)
    w = np.asarray(weight, dtype=np.float64)
    if p.ndim != 1 or p.shape != o.shape or p.shape != w.shape or p.size == 0:
        raise ConfigError("prompt, output and weight arrays must be 1-D, non-empty and of equal length")
    key = (p.tobytes(), o.tobytes(), w.tobytes())
    pts = _REQUEST_POINTS.get((), key)
    if pts is not None:
        return pts
    if not (np.all(np.isfinite(p) & np.isfinite(o)) and np.all(p >= 1) and np.all(o >= 1)):
        raise ConfigError("every request point needs prompt >= 1 and output >= 1 tokens")
    if not (np.all(np.isfinite(w) & (w >= 0)) and w.sum() > 0):
        raise ConfigError("weights must be finite, >= 0 and have a positive sum")
    return _REQUEST_POINTS.put((), key, RequestPoints(p, o, w))


#: Attention work tables ``_attention_work`` keeps (a pool is sized at up to two token budgets in a row).
ATTENTION_WORK_CACHE = 4
_ATTENTION_WORK = IdentityMemo(ATTENTION_WORK_CACHE)


def _attention_work(e: EngineModel, grid: np.ndarray, mean_ctx: float, pts: RequestPoints,
                    binned: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray | None, np.ndarray | None,
                                                                         np.ndarray]:
    """A prompt's attention work at each batch of ``grid``, f(n+1, n, 0, n κ, p²) - f(n+1, n, 0, n κ, 0): the
    (grid, J) table, its prompt-bin means ``binned`` of it (grid, B) and its mean over the points (grid,);
    the table and bin means None where it is 0 at every point (a step model without attention work, e.g. the
    linear one: nothing to add).  It does not depend on the token budget, so the same step model, grid and
    points (a pool's two token budgets, ``plan.pools``) compute it once: the same call, the same arrays
    (read-only).  ``binned``: the profile's prompt-bin mean (a function of the points alone)."""
    n = grid[:, None]
    ctx = n * mean_ctx
    plain = type(e) is EngineModel  # a subclass (speculative decoding) may time steps its own way
    if plain and e.step_code == STEP_MODEL_LINEAR and e.step_coef[4] == 0.0:
        # the linear model's attention term c₄ · attn2 / 2 is 0 (``perf.linear.step_time_array_s``: both steps
        # add the same terms, so their difference is exactly 0)
        return None, None, np.zeros(grid.size)
    key = (int(e.step_code), e.step_coef.tobytes(), grid.tobytes(), mean_ctx) if plain else None
    hit = _ATTENTION_WORK.get((pts,), key) if plain else None
    if hit is not None:
        return hit
    attn = e.step_s(n + 1.0, n, 0.0, ctx, pts.prompt_sq) - e.step_s(n + 1.0, n, 0.0, ctx, 0.0)
    mean = attn @ pts.weight
    out = (None, None, mean) if not attn.any() else (attn, binned(attn), mean)
    for a in out:
        if a is not None:
            a.flags.writeable = False
    if plain:
        _ATTENTION_WORK.put((pts,), key, out)
    return out


#: API server loads ``_api_load`` keeps (a sweep sizes each point set on many GPU types and two token budgets,
#: most with the same API server cost: a 70B sweep builds 7,322 profiles of 128 (cost, points) pairs).
API_LOAD_CACHE = 1024
_API_LOADS = IdentityMemo(API_LOAD_CACHE)


def _api_load(cost: ApiServerCost, pts: RequestPoints,
              binned: Callable[[np.ndarray], np.ndarray]) -> tuple[ApiServerLoad, np.ndarray, np.ndarray]:
    """(``ApiServerLoad.of`` the points, ``cost.tokenize_s`` of the prompts, ``binned`` of that) for ``cost`` and
    ``pts``: they depend on nothing else, so equal costs on the same points (``request_points`` gives one
    object per set) compute them once: the same calls, the same arrays (read-only).  ``binned``: the
    profile's prompt-bin mean (a function of the points alone)."""
    hit = _API_LOADS.get((pts,), cost)
    if hit is not None:
        return hit
    load = ApiServerLoad.of(cost, pts.prompt, pts.output, pts.weight)
    tokenize_s = cost.tokenize_s(pts.prompt)
    tokenize_binned = binned(tokenize_s)
    for a in (load.busy_points_s, load.busy_weight, tokenize_s, tokenize_binned):
        a.flags.writeable = False
    return _API_LOADS.put((pts,), cost, (load, tokenize_s, tokenize_binned))


class EngineProfile:
    """One pool's engine and request points, with every per-batch quantity tabulated once.

    Parameters
    ----------
    engine : EngineModel
    prompt_tokens, output_tokens, weight : arrays (J,)
        The pool's request points (tokens; weights renormalised to 1; ``request_points``).
    """

    def __init__(self, engine: EngineModel, prompt_tokens, output_tokens, weight) -> None:
        pts = request_points(prompt_tokens, output_tokens, weight)
        self.points = pts
        self.engine = engine
        self.prompt, self.output, self.weight = pts.prompt, pts.output, pts.weight
        lim = engine.limits
        self.decode_steps = pts.decode_steps
        self.mean_decode_steps = pts.mean_decode_steps
        self.mean_ctx = pts.mean_ctx
        # Concurrency cap: max_num_seqs, and the KV cache at the time-averaged context of a request.
        kv_ctx = pts.kv_ctx + lim.block_size_tokens / 2
        n_kv = math.floor(lim.kv_blocks * lim.block_size_tokens / kv_ctx)
        self.n_cap = float(max(1, min(lim.max_num_seqs, n_kv, lim.max_num_batched_tokens - 1)))
        grid = np.unique(np.concatenate([[0.0], _geomspace(1.0, self.n_cap, N_BATCH_GRID)]))
        self.grid = grid
        self._bin_starts, self.bin_weight = pts.bin_starts, pts.bin_weight
        # the API server's load and the prompts' tokenisation (J,) and per bin (B,): before the engine sees them
        self.api, self.tokenize_s, self.tokenize_binned = _api_load(engine.api, pts, self._binned)
        self._tabulate()

    def _binned(self, table: np.ndarray) -> np.ndarray:
        """Weighted mean of ``table``'s last axis within each prompt bin."""
        return np.add.reduceat(table * self.weight, self._bin_starts, axis=-1) / self.bin_weight

    def _tabulate(self) -> None:
        """The per-batch tables (rows: the batch grid).  Per request point j only what is not linear in the
        point: its chunks k_j(n) and prefill work ΣΔ_j(n) (grid, J).  Everything else a sweep reads is a
        prompt bin's weighted mean or the mean over all points, and those of k_j t_d(n) + ΣΔ_j(n) (the own
        prefill alone), k_j t_full(n) + attention (in full-budget steps) and p_j t_full(n) / (B - n) +
        attention (behind a queue) are the same sums of k, ΣΔ, p and the attention work: they are taken
        from those (the (grid, J) tables themselves only when read: ``prefill_s``, ``prefill_full_s``)."""
        e, n = self.engine, self.grid[:, None]
        pts = self.points
        p = self.prompt[None, :]
        ctx = n * self.mean_ctx
        t_d = e.step_s(n[:, 0], n[:, 0], 0.0, ctx[:, 0], 0.0)
        chunk = np.maximum(float(e.limits.max_num_batched_tokens) - n, 1.0)
        base = t_d[:, None]
        full_step = e.step_s(n + 1.0, n, chunk, ctx, 0.0)  # a full budget of prefill (B - n tokens) at batch n
        attn, attn_binned, attn_mean = _attention_work(e, self.grid, self.mean_ctx, pts, self._binned)
        lin = None
        if attn is None and type(e) is EngineModel and e.step_code == STEP_MODEL_LINEAR:
            # The linear model (``perf.linear``): a chunk of x tokens beside n decodes adds c₁ (one more
            # sequence) + c₂ x, so ΣΔ_j = c₁ k_j + c₂ p_j and only the chunk counts are per point (the
            # per-point ΣΔ table built when read, ``work_table``)
            lin = c1, c2 = float(e.step_coef[1]), float(e.step_coef[2])
            k = np.floor(p / chunk)
            k += (p - k * chunk) > 0  # a last, partial chunk
            k_binned = self._binned(k)
            k_mean = k @ self.weight
            sum_delta = None
            binned_delta = c1 * k_binned + c2 * pts.prompt_binned[None, :]
            phi = c1 * k_mean + c2 * pts.mean_prompt
            delta0 = c1 * k[0] + c2 * self.prompt
        elif pts.max_prompt < float(chunk.min()):
            # every prompt is one chunk at every batch (k = 1, no full chunks): ΣΔ_j = Δ(p_j), the values the
            # general form below gives (0 full chunks add 0; the remainder is the prompt, > 0)
            k = None
            sum_delta = e.step_s(n + 1.0, n, p, ctx, 0.0)
            sum_delta -= base
            k_binned = np.ones((self.grid.size, self.bin_weight.size))
            k_mean = np.ones(self.grid.size)
            binned_delta = self._binned(sum_delta if attn is None else np.add(sum_delta, attn, out=sum_delta))
        else:
            full = np.floor(p / chunk)
            rem = p - full * chunk
            partial = rem > 0
            d_rem = np.where(partial, e.step_s(n + 1.0, n, rem, ctx, 0.0) - base, 0.0)
            tables = np.empty((2,) + d_rem.shape)
            sum_delta = np.multiply(full, full_step - base, out=tables[0])
            sum_delta += d_rem
            if attn is not None:
                sum_delta += attn
            k = np.add(full, partial, out=tables[1])
            # both (grid, J) tables binned in one call (each row's sums are those of its own call)
            binned_delta, k_binned = self._binned(tables)
            k_mean = k @ self.weight
        if lin is None:
            phi = sum_delta @ self.weight
            delta0 = sum_delta[0]
        self._k, self._lin = k, lin
        self.t_d = t_d
        self._work = sum_delta  # ΣΔ_j(n) (grid, J), or None: ``work_table``
        # T_pf,j(n) at the empty batch (J,): the floors no count beats (``zero_load_ttft_s``)
        self._prefill0 = (1.0 if k is None else k[0]) * t_d[0] + delta0
        self._cs2_decode = pts.cs2_decode
        self._mean_prompt = pts.mean_prompt
        # Second moment of a decoding sequence's context (``RequestPoints.ctx2``) and the
        # step's cost per context token: the decode work Σ ctx of a batch fluctuates more than n.
        self._ctx2 = pts.ctx2
        mid = float(self.grid[self.grid.size // 2])
        self._s_per_ctx = float(e.step_s(mid, mid, 0.0, mid * self.mean_ctx + 1.0, 0.0)
                                - e.step_s(mid, mid, 0.0, mid * self.mean_ctx, 0.0))
        self._prompt_cs2 = pts.prompt_cs2
        self.phi = phi  # Φ(n) = E[ΣΔ_j(n)]
        full_budget = chunk[:, 0]
        self.t_full = full_step[:, 0]
        self.budget_tokens = full_budget
        # A busy prefill server fills the whole budget: its tokens then cost (t_full - t_d) / (B - n)
        # each, and a prompt's k chunks take k full steps (with a prompt's attention work added).
        self.attn_mean = attn_mean  # a prompt's attention work (s), by batch (grid,)
        self.phi_full = self._mean_prompt * (self.t_full - t_d) / full_budget + self.attn_mean
        # (grid, B) each: own prefill alone (k t_d + ΣΔ), chunks per prompt bin, in full-budget steps
        # (k t_full + attention) and behind a queue: in a busy prefill server a prompt's tokens run at
        # (B - n) per full step from wherever the queue ahead ends, p t_full / (B - n) of token time (plus
        # its attention work), then the step it ends in completes (U t_full more, U uniform: the TTFT
        # distribution adds U, ``ttft_survival``)
        self.k_binned = k_binned
        self.prefill_binned = k_binned * base + binned_delta
        self.prefill_full_binned = k_binned * self.t_full[:, None]
        self.prefill_fluid_binned = (self.t_full / full_budget)[:, None] * pts.prompt_binned[None, :]
        if attn_binned is not None:
            self.prefill_full_binned += attn_binned
            self.prefill_fluid_binned += attn_binned
        # a request's own prefill by batch (grid,), alone and in full-budget steps (``_hold_table``)
        self._prefill_alone_mean = k_mean * t_d + self.phi
        self._prefill_full_mean = k_mean * self.t_full + attn_mean

    @property
    def k_chunks(self) -> np.ndarray:
        """k_j(n) (grid, J): a prompt's chunks at each batch."""
        return np.ones((self.grid.size, self.prompt.size)) if self._k is None else self._k

    @property
    def work_table(self) -> np.ndarray:
        """ΣΔ_j(n) (grid, J): the decode time a prompt's prefill displaces (the linear model's c₁ k_j + c₂ p_j
        built on first read)."""
        if self._work is None:
            c1, c2 = self._lin
            self._work = c1 * self._k + c2 * self.prompt[None, :]
        return self._work

    @functools.cached_property
    def prefill_s(self) -> np.ndarray:
        """T_pf,j(n) = k_j t_d(n) + ΣΔ_j(n) (grid, J): a prompt's own prefill alone at each batch."""
        return self.k_chunks * self.t_d[:, None] + self.work_table

    @functools.cached_property
    def prefill_full_s(self) -> np.ndarray:
        """k_j t_full(n) + its attention work (grid, J): a prompt's own prefill in full-budget steps."""
        attn, _, _ = _attention_work(self.engine, self.grid, self.mean_ctx, self.points, self._binned)
        return self.k_chunks * self.t_full[:, None] + (0.0 if attn is None else attn)

    # ------------------------------------------------------------------ operating point
    def _shared(self, lam_i: np.ndarray) -> np.ndarray:
        """r(λ_i, n) (K, grid): the share of prefill tokens that run in full-budget steps, taken as the
        prefill server's load λ_i E[p] t_full(n) / (B - n) (capped at 1)."""
        return np.minimum(lam_i[:, None] * (self._mean_prompt * self.t_full / self.budget_tokens)[None, :], 1.0)

    def _phi(self, lam_i: np.ndarray, r: np.ndarray | None = None) -> np.ndarray:
        """Φ(λ_i, n) (K, grid): prefill step time per request, alone or in shared full-budget steps
        (``r``: ``_shared(lam_i)`` when already known)."""
        r = self._shared(lam_i) if r is None else r
        return (1.0 - r) * self.phi[None, :] + r * self.phi_full[None, :]

    def _elasticity(self, lam_i: np.ndarray, n_star: np.ndarray, phi_tab: np.ndarray) -> np.ndarray:
        """ε = d ln t̄ / d ln n at n* (K,), from the tabulated steps; clipped to [0, ``MAX_ELASTICITY``]."""
        out = np.zeros(n_star.shape)
        for i in range(n_star.size):
            n = float(n_star[i])
            if n <= 0:
                continue
            lo, hi = max(n * 0.9, 0.0), min(n * 1.1, self.n_cap)
            if hi <= lo:
                continue
            xs = np.array([lo, hi])
            lam = float(lam_i[i])  # scalar arithmetic: the same IEEE operations as on arrays of two
            (phi_lo, phi_hi), (t_lo, t_hi) = _interp(xs, self.grid, phi_tab[i]).tolist(), \
                _interp(xs, self.grid, self.t_d).tolist()
            den_lo, den_hi = 1.0 - lam * phi_lo, 1.0 - lam * phi_hi
            a = t_lo / den_lo if den_lo > 0 else math.inf
            b = t_hi / den_hi if den_hi > 0 else math.inf
            if lo > 0 and math.isfinite(a) and math.isfinite(b) and a > 0:
                out[i] = (math.log(b) - math.log(a)) / (math.log(hi) - math.log(lo))
        return np.minimum(np.maximum(out, 0.0), MAX_ELASTICITY)

    def _prefill_service_s(self, n_star: np.ndarray, spread: np.ndarray, levels: np.ndarray | None = None,
                           excess: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """E[X] (K, L): the mean prompt's time on the prefill server, B - n tokens per full step
        plus its attention work (quadratic in the prompt, outside the per-token step), at the
        Gauss-Hermite levels n* + spread z of the decode batch; a level's decode context
        exceeds n κ by the spread of Σ ctx beyond that of n (its step costs that much more).
        ``levels``: those levels when known; ``excess``: ``_ctx_excess_terms(n_star)`` when known."""
        z = _HERMITE[0]
        if levels is None:
            levels = np.minimum(np.maximum(n_star[:, None] + spread[:, None] * z[None, :], 0.0), self.n_cap)
        over, root = self._ctx_excess_terms(n_star) if excess is None else excess
        ctx_excess = (over * spread / root)[:, None] * z[None, :]
        budget = _interp(levels, self.grid, self.budget_tokens)
        t_full = np.maximum(_interp(levels, self.grid, self.t_full) + self._s_per_ctx * ctx_excess, 1e-9)
        return self._mean_prompt * t_full / budget + _interp(levels, self.grid, self.attn_mean)

    def _ctx_excess_terms(self, n_star: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(√(n E[C²]) - √n κ, max(√n, 1e-12)) (K,): the spread of a batch's Σ ctx beyond that of n is the
        first over the second times the batch's spread (``_prefill_service_s``)."""
        return np.sqrt(n_star * self._ctx2) - np.sqrt(n_star) * self.mean_ctx, np.maximum(np.sqrt(n_star), 1e-12)

    def _operating_batch(self, lam_i: np.ndarray, phi_tab: np.ndarray | None = None) -> np.ndarray:
        """n* for per-instance rates ``lam_i`` (K,): the smallest root of the fixed point, or n_cap
        (``phi_tab``: ``_phi(lam_i)`` when already known)."""
        denom = 1.0 - lam_i[:, None] * (self._phi(lam_i) if phi_tab is None else phi_tab)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.where(denom > 0, self.t_d[None, :] / denom, np.inf)
            h = lam_i[:, None] * self.mean_decode_steps * step - self.grid[None, :]  # > 0 below the root
        first = np.argmax(h <= 0, axis=1).tolist()
        out = np.empty(lam_i.size)
        grid = self.grid
        for i, j in enumerate(first):  # per count, in scalars (the same IEEE operations as on arrays)
            hb = float(h[i, j])
            if not hb <= 0:  # no root below the cap
                out[i] = self.n_cap
            elif j == 0:
                out[i] = 0.0
            else:
                ha, a, b = float(h[i, j - 1]), float(grid[j - 1]), float(grid[j])
                out[i] = a + (b - a) * ha / (ha - hb) if math.isfinite(hb) and ha > hb else a
        return out

    def state(self, lam_per_s: float, n_instances, *, arrival_cv2: float = 1.0,
              balanced_split: bool = True) -> EngineState:
        """Operating point, utilisation and wait of the pool at each count in ``n_instances`` (>= 1).

        ``arrival_cv2`` is the pool stream's Ca² (1 for Poisson); ``balanced_split`` says whether the
        within-pool router balances arrivals (round robin, least outstanding: an instance sees Ca²/G)
        or splits them at random (Ca²).
        """
        return self._evaluate(lam_per_s, n_instances, arrival_cv2, balanced_split, True)

    def load(self, lam_per_s: float, n_instances, *, arrival_cv2: float = 1.0,
             balanced_split: bool = True) -> PoolLoad:
        """ρ and stability of ``state`` at each count, bit for bit, without the latency distributions (the
        wait's levels, the own prefill per level, the API servers' wait): what the utilisation cap's
        count search needs (``size_engine_pool``).  ``PoolLoad.state()`` completes it: the very
        ``EngineState`` that ``state`` gives for these counts."""
        return self._evaluate(lam_per_s, n_instances, arrival_cv2, balanced_split, False)

    def _evaluate(self, lam_per_s: float, n_instances, arrival_cv2: float, balanced_split: bool,
                  latency: bool):
        """``state`` (``latency``) or ``load`` (not): one computation, cut short after ρ for ``load``."""
        counts = np.atleast_1d(np.asarray(n_instances, dtype=np.float64))
        if not all(c >= 1.0 and math.isfinite(c) for c in counts.ravel().tolist()):
            raise ConfigError("instance counts must be finite and >= 1")
        lam = float(lam_per_s)
        if not (math.isfinite(lam) and lam >= 0):
            raise ConfigError(f"pool arrival rate {lam_per_s!r}/s is invalid: it must be finite and >= 0")
        if not (math.isfinite(arrival_cv2) and arrival_cv2 >= 0):
            raise ConfigError(f"arrival Ca²={arrival_cv2!r} is invalid: it must be finite and >= 0")
        lam_i = lam / counts
        r_tab = self._shared(lam_i)
        phi_tab = self._phi(lam_i, r_tab)
        n_star = self._operating_batch(lam_i, phi_tab)
        t_d = _interp(n_star, self.grid, self.t_d)
        phi = np.array([_interp(n_star[i], self.grid, phi_tab[i]) for i in range(n_star.size)])
        shared = np.array([_interp(n_star[i], self.grid, r_tab[i]) for i in range(n_star.size)])
        denom = 1.0 - lam_i * phi
        stable = denom > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            t_bar = np.where(stable, t_d / np.where(stable, denom, 1.0), np.inf)
        at_n = _grid_cells(n_star, self.grid)  # n*'s cell on the grid, for every table below
        # a request's own prefill, mean over the points (K,): alone or in shared full-budget steps (the mean of
        # the per-point tables interpolated at n* is the interpolation of their means)
        prefill = ((1.0 - shared) * _interp_rows(n_star, self.grid, self._prefill_alone_mean, at_n)
                   + shared * _interp_rows(n_star, self.grid, self._prefill_full_mean, at_n))
        # The decode batch fluctuates (below); the mean step over its levels exceeds the step at the
        # mean batch where the step is convex in n (Jensen), so decode steps use the level average.
        z, zw = _HERMITE
        # The batch is an M/G/inf count slowed by its own size: departures n / (E[d] t̄(n)) restore it
        # at (1 - ε) / E[S] with ε = d ln t̄ / d ln n, so (Ornstein-Uhlenbeck) Var n = n* / (1 - ε) and
        # it relaxes over E[S] / (1 - ε).
        elastic = self._elasticity(lam_i, n_star, phi_tab)
        # A balancing router (least outstanding) evens the instances' counts: they share the pool's
        # fluctuation, Var(G n) = G n* / (1 - ε), so one instance's n varies by n* / ((1 - ε) G).
        # Bursty arrivals widen an infinite-server count: Var ≈ mean (1 + (Ca² - 1) / 2) when lives
        # are long against the gaps (Takács' GI/G/inf moments).
        burst = max(1.0 + (arrival_cv2 - 1.0) / 2.0, 0.0)
        spread = np.sqrt(n_star * burst / (1.0 - elastic) / (counts if balanced_split else 1.0))
        raw = n_star[:, None] + spread[:, None] * z[None, :]
        levels = np.minimum(np.maximum(raw, 0.0), self.n_cap)  # (K, L)
        phi_l = np.stack([_interp(levels[i], self.grid, phi_tab[i]) for i in range(n_star.size)])
        den_l = np.maximum(1.0 - lam_i[:, None] * phi_l, MIN_STEP_HEADROOM)
        t_bar = np.where(stable, np.maximum(t_bar, (_interp(levels, self.grid, self.t_d) / den_l) @ zw), t_bar)
        mean_s = prefill + self.mean_decode_steps * np.where(stable, t_bar, 0.0)  # E[S] = E[T_pf] + E[d] t̄
        # (2) prefill server: GI/G/1 per instance (Kingman's two-moment form), quasi-static over
        # the decode batch: n drifts on the time scale of a request's life (E[S]), far slower than a
        # prefill, so the prefill capacity (B - n) / t_full(n) is averaged as a mixture over
        # n ~ Normal(n*, n*) (M/G/inf counts; Gauss-Hermite levels).  A level whose prefill load
        # reaches 1 is a transient overload: its backlog grows for about E[S] (fluid); a level above
        # the concurrency cap queues for slots.
        relax_s = mean_s / (1.0 - elastic)
        # A level above the concurrency cap has more requests than slots: the excess waits for a
        # slot to free, n_cap / E[S] per second (fluid, Little's law on the excess).
        overflow_wait = np.maximum(raw - self.n_cap, 0.0) * mean_s[:, None] / self.n_cap
        cs2_x = self._prompt_cs2
        # The balancing router (least outstanding requests) evens instances' request counts, which
        # regularises the prompts an instance receives only as far as prompts make the count: with
        # n* decoding requests beside them a count difference says little about the prefill queue.
        # Prefill arrivals see Ca² (1/G + (1 - 1/G) m), m = n* / (n* + ROUTER_MIXING_BATCH): Ca²/G
        # (join the shortest queue) with few decodes, Ca² (a random split) when decodes dominate.
        mixing = n_star / (n_star + ROUTER_MIXING_BATCH)
        ca2 = (arrival_cv2 * (1.0 / counts + (1.0 - 1.0 / counts) * mixing) if balanced_split
               else np.full(counts.shape, arrival_cv2))[:, None]
        excess = self._ctx_excess_terms(n_star)
        ex_full = self._prefill_service_s(n_star, spread, levels, excess)  # (the levels above)
        rho_full = lam_i[:, None] * ex_full
        rho_p = rho_full @ zw  # mean prefill load
        # Slow and fast drift.  The queue relaxes over T_q = 2 v / (1 - ρ̄)² = 4 W / (1 - ρ̄), the
        # relaxation time of a reflected Brownian motion of drift -(1 - ρ̄) and variance rate
        # v = ρ̄ E[X] (Ca² + Cs²) (Abate & Whitt 1987; W = v / (2 (1 - ρ̄)) its mean).  The batch's
        # drift has correlation time τ = E[S] / (1 - ε) (Ornstein-Uhlenbeck).
        # The part of the drift that persists over T_q — the variance of its average over a
        # window T_q, the fraction g(x) = 2 (x - 1 + e^{-x}) / x² of its variance at x = T_q / τ —
        # is taken quasi-statically (the levels); the rest is fast and enters as extra input
        # variance of the work (heavy-traffic diffusion), 2 σ_fast² τ per second of work.
        sigma2_rho = ((rho_full - rho_p[:, None]) ** 2) @ zw
        ex_bar = ex_full @ zw
        head = np.maximum(1.0 - rho_p, 1e-9)
        t_q = 2.0 * rho_p * ex_bar * (ca2[:, 0] + cs2_x) / head**2
        x = np.maximum(t_q / np.maximum(relax_s, 1e-12), 1e-9)
        slow = np.where(x < 1e-4, 1.0, 2.0 * (x - 1.0 + np.exp(-x)) / x**2)
        ex = self._prefill_service_s(n_star, spread * np.sqrt(slow), None, excess)  # E[X] per slow level, (K, L)
        rho_l = lam_i[:, None] * ex
        fast2 = sigma2_rho * (1.0 - slow)
        rho_c = np.minimum(rho_l, RHO_TRANSIENT)
        wait_l = ((rho_c * ex * (ca2 + cs2_x) + 2.0 * (fast2 * relax_s)[:, None]) / (2.0 * (1.0 - rho_c))
                  + np.maximum(rho_l - RHO_TRANSIENT, 0.0) * relax_s[:, None] / 2.0)
        a2_l = np.minimum(rho_l, 1.0)
        servers = counts * self.n_cap
        prefill_wait = np.where(rho_p < 1.0, wait_l @ zw, 0.0)
        # (1) slot queue: a birth-death chain over the pool's busy slots (``_slot_queue``), its death
        # rates from the holding time at each batch: an admitted request holds its slot while it
        # waits for the token budget too (vLLM's running list), E[S_slot] = E[S] + E[W_prefill].
        # h(n) (K, grid) for the chain, h(n_cap) (K,) its last column (the grid ends at n_cap); ``load``
        # computes that column alone (elementwise: the same values)
        hold_tab = self._hold_table(lam_i, phi_tab, r_tab) + prefill_wait[:, None] if latency else None
        hold_full = (hold_tab[:, -1] if latency else
                     (self._hold_table(lam_i, phi_tab[:, -1:], r_tab[:, -1:], -1) + prefill_wait[:, None])[:, 0])
        burst = (1.0 + arrival_cv2) / 2.0  # the arrival half of the chain's noise is Ca² times Poisson's
        parts = _LoadParts(lam=lam, counts=counts, arrival_cv2=arrival_cv2, balanced_split=balanced_split,
                           lam_i=lam_i, phi_tab=phi_tab, r_tab=r_tab, n_star=n_star, at_n=at_n, t_d=t_d, phi=phi,
                           shared=shared, levels=levels, spread=spread, relax_s=relax_s, overflow_wait=overflow_wait,
                           wait_l=wait_l, a2_l=a2_l, prefill_wait=prefill_wait, hold_tab=hold_tab,
                           hold_full=hold_full, burst=burst, chain=[])
        # The chain's test (k₁ > 0 or A₁ <= 0) where k₁ alone decides it, else from the chain; ``load``
        # leaves the chain to the latency part (``_finish``), which most loads never reach.
        passes = None if latency else self._slot_chain_passes(lam, counts, hold_full, burst)
        if passes is None:
            a1, k1 = self._slot_chain(parts)
            passes = (k1 > 0) | (a1 <= 0)
        # Slot load: the rate against the slots' throughput with every slot busy (c / h(n_cap)), the
        # most the pool can serve; below the cap the slots are busy a share λ E[S_slot] / c of the time.
        rho_slot = lam * hold_full / servers
        queues_stable = stable & (rho_slot < 1.0) & (rho_p < 1.0) & passes
        # (3) the API server processes in front: ρ_api = λ_i E[t_api] / n (fleetplan.queueing.api_server)
        rho_api = self.api.utilisation(lam_i)
        stable = queues_stable & (rho_api < 1.0)
        util = np.maximum(np.maximum(lam * mean_s / servers, rho_p), rho_api)  # slots, prefill, API servers
        rho = np.where(stable, np.maximum(np.maximum(rho_slot, rho_p), rho_api), np.maximum(util, 1.0))
        parts.t_bar, parts.mean_s, parts.rho = t_bar, mean_s, rho
        parts.stable, parts.queues_stable = stable, queues_stable
        return self._finish(parts) if latency else PoolLoad(rho, stable, functools.partial(self._finish, parts))

    def _slot_chain(self, parts: _LoadParts) -> tuple[np.ndarray, np.ndarray]:
        """(A₁, k₁) of the slot queue (``_slot_queue``, k₁ over the burst factor), computed once per ``parts``."""
        if not parts.chain:
            tab = (parts.hold_tab if parts.hold_tab is not None
                   else self._hold_table(parts.lam_i, parts.phi_tab, parts.r_tab) + parts.prefill_wait[:, None])
            a1, k1 = self._slot_queue(parts.lam, parts.counts, tab, parts.hold_full,
                                      self._dispersion(parts.lam_i, parts.n_star, parts.at_n) * parts.burst)
            parts.chain.append((a1, k1 / parts.burst))
        return parts.chain[0]

    def _finish(self, parts: _LoadParts) -> EngineState:
        """The latency part of the state (the wait's levels, the own prefill per level, the API wait)."""
        # Per level, the slot and prefill waits as one atom-exponential (same P(W > 0) and mean).
        lam, counts, levels, n_star, at_n = parts.lam, parts.counts, parts.levels, parts.n_star, parts.at_n
        lam_i, stable, shared, overflow_wait = parts.lam_i, parts.stable, parts.shared, parts.overflow_wait
        a1, k1 = self._slot_chain(parts)
        a1_l = np.where(overflow_wait > 0, 1.0, a1[:, None])
        mass = 1.0 - (1.0 - a1_l) * (1.0 - parts.a2_l)
        with np.errstate(divide="ignore", invalid="ignore"):
            mean_w = np.where(a1 > 0, a1 / k1, 0.0)[:, None] + overflow_wait + parts.wait_l
            decay = np.where(mean_w > 0, mass / mean_w, 1.0)
        decay = np.where(parts.queues_stable[:, None], decay, 0.0)
        idle = np.exp(-lam_i * np.where(stable, parts.mean_s, 0.0))
        binned = ((1.0 - shared)[:, None] * _interp_rows(n_star, self.grid, self.prefill_binned, at_n)
                  + shared[:, None] * _interp_rows(n_star, self.grid, self.prefill_full_binned, at_n))  # (K, B)
        # The own prefill as a mixture: per batch level (the quasi-static levels of the wait), alone
        # (probability 1 - r) or in full-budget steps shared with other prompts (r).
        flat = levels.ravel()
        # A balancing router sends an arrival to the instance with the fewest outstanding requests:
        # with an idle prefill server there it finds about one request fewer than the mean (none
        # fewer with one instance), min(n, 1) (1 - 1/G).
        chosen = levels - (np.minimum(levels, 1.0) * (1.0 - 1.0 / counts)[:, None] if parts.balanced_split else 0.0)
        alone_l = _interp_rows(chosen.ravel(), self.grid, self.prefill_binned).reshape(levels.shape + (-1,))
        fluid_l = _interp_rows(flat, self.grid, self.prefill_fluid_binned).reshape(levels.shape + (-1,))
        prefill_levels = np.stack([alone_l, fluid_l], axis=2)  # (K, L, 2, B)
        t_full_l = _interp(levels, self.grid, self.t_full)  # (K, L)
        api = _ApiWait(self.api, lam, counts, parts.arrival_cv2)
        return EngineState(counts, lam_i, n_star, parts.t_d, parts.t_bar, parts.mean_s, parts.rho, stable, mass,
                           decay, idle, binned, parts.phi, prefill_levels, t_full_l, parts.spread, parts.relax_s,
                           **{f: Lazy(_api_wait_rows, api, f, None) for f in _API_WAIT_FIELDS})

    def _hold_table(self, lam_i: np.ndarray, phi_tab: np.ndarray, r_tab: np.ndarray,
                    start: int | None = None) -> np.ndarray:
        """h(n) (K, grid): mean slot holding time with the instance's batch at n, T_pf(n) + E[d] t̄(n),
        t̄(n) = t_d(n) / (1 - λ_i Φ(n)) (its headroom floored at ``MIN_STEP_HEADROOM``).  ``start``: the
        grid's columns from there on only (``phi_tab`` and ``r_tab`` given those columns; elementwise, the
        same values as the whole table's)."""
        cols = slice(start, None)
        den = np.maximum(1.0 - lam_i[:, None] * phi_tab, MIN_STEP_HEADROOM)
        t_bar = self.t_d[None, cols] / den
        prefill = ((1.0 - r_tab) * self._prefill_alone_mean[None, cols]
                   + r_tab * self._prefill_full_mean[None, cols])
        return prefill + self.mean_decode_steps * t_bar

    def _slot_chain_passes(self, lam: float, counts: np.ndarray, h_full: np.ndarray,
                           burst: float) -> np.ndarray | None:
        """(k₁ > 0) | (A₁ <= 0) of ``_slot_queue`` (k₁ divided by ``burst``) where k₁ decides it without the
        chain, else None: k₁ = c / h_full - λ (its own operations) where r = λ h_full / c < 1, and there
        k₁ > 0 passes whatever A₁; r >= 1 gives A₁ = 1, k₁ = 0 (fails); λ = 0 gives A₁ = 0 (passes).  A
        row with r < 1 and k₁ <= 0 (float rounding at r near 1) needs A₁: None."""
        if lam <= 0:
            return np.ones(counts.shape, dtype=bool)
        c = np.array([int(round(g * self.n_cap)) for g in counts.tolist()], dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            r = lam * h_full / c
            below = r < 1.0
            passes = np.where(below, c / h_full - lam, 0.0) / burst > 0
        return None if (below & ~passes).any() else passes

    def _dispersion(self, lam_i: np.ndarray, n_star: np.ndarray,
                    cells: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """I_eff (K,): how much more the decode batch varies than an M/G/inf count slowed by its own size.

        A prompt's prefill work ΣΔ_j stops every decoding sequence of its instance for ΣΔ_j, so the
        departures it displaces, λ_i ΣΔ_j / (1 - m) with m = λ_i Φ, arrive with it: in decode-step
        time, arrivals come in clusters (a branching process of offspring mean m and variance
        σ² = m + λ_i² Var ΣΔ), whose index of dispersion is I = 1/(1 - m) + σ²/(1 - m)².  The members
        of a cluster leave independently, so at long lags (where the batch's feedback acts) only
        a share 1/(1 + Cs²_d) of the pair covariance remains (Cs²_d of the decode steps):
        I_eff = 1 + (I - 1)/(1 + Cs²_d), and Var n ≈ I_eff n* / (1 - ε)."""
        work = _interp_rows(n_star, self.grid, self.work_table, cells)  # ΣΔ_j at n* (K, J)
        mean = work @ self.weight
        m = np.minimum(lam_i * mean, 0.95)
        var = np.maximum((work**2) @ self.weight - mean**2, 0.0)
        sigma2 = m + lam_i**2 * var
        index = 1.0 / (1.0 - m) + sigma2 / (1.0 - m) ** 2
        return 1.0 + (index - 1.0) / (1.0 + self._cs2_decode)

    def _slot_queue(self, lam: float, counts: np.ndarray, hold_tab: np.ndarray, h_full: np.ndarray,
                    phi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(A₁, k₁, h_full) of the slot queue, a birth-death chain over the pool's occupied slots l.

        A balancing router keeps the instances' counts even, so with l slots held each instance
        runs l / G requests and releases them at rate (l / G) / h(l / G); the pool's death rate at
        l <= c = G n_cap is μ_l = l / h(l / G) and c / h(n_cap) = c / h_full beyond (every slot busy:
        the engine at its cap is slower than at n*).  p_l ∝ Π_{m<=l} λ / μ_m below c and
        geometric of ratio r = λ h_full / c above it, so A₁ = P(L >= c) = (p_c / (1 - r)) / Z and a
        waiting request leaves the queue at k₁ = c / h_full - λ (M/M/c beyond c).  Pools of more
        than ``SLOT_CHAIN_POINTS`` slots sum the chain on a grid (Euler-Maclaurin)."""
        K = counts.size
        a1 = np.zeros(K)
        k1 = np.zeros(K)
        if lam <= 0:
            return a1, np.full(K, np.inf)
        for i in range(K):
            g = float(counts[i])
            c = int(round(g * self.n_cap))
            r = lam * h_full[i] / c
            scale = 1.0 / phi[i]
            if not r < 1.0:
                a1[i], k1[i] = 1.0, 0.0
                continue
            k1[i] = c / h_full[i] - lam
            # A₁ <= p_c / (1 - r^φ⁻¹) with p_0 = 1 and ln p_c <= (c ln(λ h_max) - ln c!) / φ (each death rate
            # at least l / h_max): below ``NEGLIGIBLE_SLOT_WAIT`` the chain is not summed and A₁ is 0
            log_bound = (c * math.log(lam * float(hold_tab[i].max())) - math.lgamma(c + 1.0)) * scale
            if log_bound < _LOG_NEGLIGIBLE_SLOT_WAIT + math.log1p(-r**scale):
                continue
            if c <= SLOT_CHAIN_POINTS:
                lv = np.arange(1.0, c + 1.0)
                f = math.log(lam) + np.log(_interp(lv / g, self.grid, hold_tab[i]))
                logp = (np.cumsum(f) - _log_factorials(c, SLOT_CHAIN_POINTS)) * scale
                top = max(0.0, float(logp.max()))
                p = np.exp(logp - top)
                below = math.exp(-top) + p[:-1].sum()
            else:
                lv = np.linspace(1.0, float(c), SLOT_CHAIN_POINTS)
                f = math.log(lam) + np.log(_interp(lv / g, self.grid, hold_tab[i]))
                step = lv[1] - lv[0]
                integral = np.concatenate([[0.0], np.cumsum(0.5 * (f[1:] + f[:-1]) * step)])
                logp = (integral + 0.5 * (f[0] + f) - _log_factorials(c, SLOT_CHAIN_POINTS)) * scale
                top = max(0.0, float(logp.max()))
                p = np.exp(logp - top)
                below = math.exp(-top) + float(np.sum(0.5 * (p[1:] + p[:-1])) * step) + 0.5 * (p[0] - p[-1])
            tail_mass = p[-1] / (1.0 - r**scale)
            a1[i] = tail_mass / (below + tail_mass)
        return a1, k1

    # ------------------------------------------------------------------ distributions
    def ttft_survival(self, st: EngineState, i: int, x_s: np.ndarray) -> np.ndarray:
        """P(TTFT > x) at count ``st.n_instances[i]`` for each x (seconds): W_api + tokenisation + W + R +
        T_pf (binned).  The API server's wait W_api is 0 with probability 1 - C, else Exp(k_a) with
        k_a its tail's rate θ (fleetplan.queueing.api_server), independent of the engine's: a point t with
        no engine wait survives as exp(-k_a (x - t)) after t; one with an engine wait Exp(k) as
        (1 - C) exp(-k y) + C (k exp(-k_a y) - k_a exp(-k y)) / (k - k_a), y = x - t (the sum of two
        exponentials; (1 + k y) exp(-k y) where k = k_a)."""
        x = np.atleast_1d(np.asarray(x_s, dtype=np.float64))
        if not st.stable[i]:
            return np.ones(x.shape)
        api_s = self.tokenize_binned  # (B,)
        api_mass, k_api = self.api_wait_tail(st, i)
        u = _RESIDUAL_U
        offsets = _RESIDUAL_U0 * st.t_d[i]  # 0, then u t_d (0 · t_d = 0: t_d is finite)
        idle = float(st.idle[i])
        busy = (1.0 - idle) / N_RESIDUAL_POINTS
        probs = np.array((idle, *(busy,) * N_RESIDUAL_POINTS))
        zw = _HERMITE[1]
        mass, decay = st.wait_mass[i], st.wait_decay_per_s[i]  # (L,)
        # No wait (probability 1 - A_l): the step boundary R, then the prompt's steps alone.
        t_alone = (st.prefill_levels[i][:, 0, :, None] + api_s[None, :, None] + offsets).reshape(mass.size, -1)
        w_alone = (self.bin_weight[:, None] * probs).ravel()
        if api_mass > 0.0:
            alone = _api_wait_after(x[:, None, None] - t_alone[None, :, :], api_mass, k_api) @ w_alone
        elif x.size > _SORTED_STEP_POINTS:
            alone = _step_survival(x, t_alone, w_alone)
        else:
            alone = (x[:, None, None] < t_alone[None, :, :]).astype(np.float64) @ w_alone  # (X, L)
        # A wait (A_l): W | W > 0 ~ Exp(k_l), then token time behind the queue and the rest of the
        # step the prompt ends in (U t_full, U uniform on N_RESIDUAL_POINTS points).
        t_queue = (st.prefill_levels[i][:, 1, :, None] + api_s[None, :, None]
                   + u[None, None, :] * st.t_full_levels[i][:, None, None]).reshape(mass.size, -1)
        w_queue = self.points.queue_weight
        if api_mass > 0.0 and x.size <= _SORTED_STEP_POINTS:  # a few points: all levels at once
            queued = _queued_with_api(x, t_queue, w_queue, decay, api_mass, k_api)
        elif api_mass > 0.0:  # level by level: each level's k picks one form of the two waits' sum
            queued = np.empty((x.size, mass.size))
            finite = bool(np.all(np.isfinite(decay)))
            for lv in range(mass.size):
                y = x[:, None] - t_queue[lv][None, :]
                yp = np.maximum(y, 0.0)
                with np.errstate(over="ignore", invalid="ignore"):
                    surv = np.exp(yp * -decay[lv])
                if not finite:
                    surv = np.where(y < 0, 1.0, surv)
                surv = (1.0 - api_mass) * surv + api_mass * _two_exponentials_level(y, yp, float(decay[lv]), k_api,
                                                                                    None if not finite else surv)
                queued[:, lv] = surv @ w_queue
        elif x.size > _SORTED_STEP_POINTS and np.all(np.isfinite(decay)):  # many points: sorted sums
            queued = _delayed_exp_survival(x, t_queue, w_queue, decay)
        else:
            y = x[:, None, None] - t_queue[None, :, :]
            surv_q = np.maximum(y, 0.0)  # before the token time: exp(-k · 0) = 1 exactly for a finite k
            surv_q *= -decay[None, :, None]
            with np.errstate(over="ignore"):
                np.exp(surv_q, out=surv_q)
            if not np.all(np.isfinite(decay)):  # an infinite k: 0 · inf is no survival of 1
                surv_q = np.where(y < 0, 1.0, surv_q)
            queued = surv_q @ w_queue  # (X, L)
        return ((1.0 - mass) * alone + mass * queued) @ zw

    def api_wait_tail(self, st: EngineState, i: int) -> tuple[float, float]:
        """(C, k_a): the API server's wait at count i is 0 w.p. 1 - C, else Exp(k_a) ((0, inf) when none)."""
        mass = 0.0 if st.api_wait_mass is None else float(st.api_wait_mass[i])
        if mass <= 0.0:  # (mass > 0 fails for nan too) the rate is not read: ``EngineState`` computes it on demand
            return 0.0, math.inf
        decay = math.inf if st.api_wait_decay_per_s is None else float(st.api_wait_decay_per_s[i])
        return (mass, decay) if 0.0 < decay < math.inf else (0.0, math.inf)

    def ttft_quantile_s(self, st: EngineState, p: float) -> np.ndarray:
        """p-quantile TTFT at every count of ``st`` (inf where unstable), from its survival table."""
        p = check_probability_level(p)
        return np.array([mixture_quantile_s([ttft_table(self, st, i)], [1.0], p) for i in range(st.stable.size)])

    def zero_load_ttft_s(self, p: float) -> float:
        """The p-quantile TTFT of a lone request on an idle instance: the floor no count beats."""
        t0, w = _sorted(self._prefill0 + self.tokenize_s, self.weight)
        p = check_probability_level(p)
        if not (np.isfinite(t0).all() and t0[0] >= 0):  # ``ZeroWaitTtft`` says what is wrong
            return ttft.ZeroWaitTtft(t0, w).quantile_s(p)
        return ttft.sorted_quantile(t0, w, p)  # ``ZeroWaitTtft(t0, w).quantile_s(p)``, without its other sums

    def zero_load_violation(self, slo_s: float) -> float:
        """Share of the pool's requests whose own prefill on an idle instance exceeds ``slo_s``: the
        TTFT misses no count can remove."""
        return float(self.weight[self._prefill0 + self.tokenize_s > slo_s].sum())

    def zero_load_tpot_s(self) -> float:
        """TPOT of a lone request (a decode step of one sequence at the mean context)."""
        return float(self.engine.step_s(1.0, 1.0, 0.0, self.mean_ctx, 0.0))

    def _tpot_bins(self) -> tuple[np.ndarray, np.ndarray]:
        """``RequestPoints.tpot_bins`` of the pool's points."""
        return self.points.tpot_bins

    def _tpot_inputs(self, st: EngineState, i: int) -> TpotInputs:
        """What the TPOT mixture at count i needs (``TpotInputs``; ``_tpot_mixture``)."""
        dd, w = self._tpot_bins()
        n_star, t_bar = float(st.decode_batch[i]), float(st.mean_step_s[i])
        chunks = _interp_rows(np.array([n_star]), self.grid, self.k_binned)[0]
        lo = max(n_star - 0.5, 0.0)
        return TpotInputs(
            dd, w, self.bin_weight, np.maximum(st.prefill_binned[i] - chunks * float(st.t_d[i]), 0.0),
            t_bar, float(st.lam_i[i]),
            float(_interp(lo + 1.0, self.grid, self.t_d)) - float(_interp(lo, self.grid, self.t_d)),
            float(st.batch_sd[i]), max(float(st.batch_relax_s[i]), 1e-12),
            float(_interp(n_star, self.grid, self.t_full)))

    def _tpot_mixture(self, st: EngineState, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(weight, mean, sd) of the normal components of the TPOT mixture at count i (seconds):
        ``tpot_mixture`` of ``_tpot_inputs``."""
        return tpot_mixture(self._tpot_inputs(st, i))

    def tpot_survival(self, st: EngineState, i: int, x_s: np.ndarray, mixture=None) -> np.ndarray:
        """P(TPOT > x) over requests with >= 2 output tokens at count ``st.n_instances[i]`` (seconds)."""
        x = np.atleast_1d(np.asarray(x_s, dtype=np.float64))
        if not st.stable[i]:
            return np.ones(x.shape)
        return _tpot_mixture_survival(x, mixture if mixture is not None else self._tpot_mixture(st, i))

    def tpot_quantile_s(self, st: EngineState, p: float) -> np.ndarray:
        """p-quantile TPOT at every count of ``st`` (inf where unstable), from its survival table."""
        p = check_probability_level(p)
        return np.array([mixture_quantile_s([tpot_table(self, st, i)], [1.0], p) for i in range(st.stable.size)])


def _sorted(values: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(values, kind="stable")
    return values[order], weight[order]


class TpotInputs(NamedTuple):
    """What the TPOT mixture of a pool at one count needs (``EngineProfile._tpot_inputs``; seconds): a few
    small arrays and numbers, so that a pool can carry them and build its TPOT distribution only when
    it is read (``LatencyTail``)."""

    decode_steps: np.ndarray  # (D,) d of the output bins (``RequestPoints.tpot_bins``)
    weight: np.ndarray  # (D,) their weights
    bin_weight: np.ndarray  # (B,) weights v_b of the prompt bins
    delta_s: np.ndarray  # (B,) Δ_b: a prompt bin's prefill increment to the decode steps it stops
    mean_step_s: float  # t̄ at n*
    lam_i: float  # per-instance rate (1/s)
    slope_s: float  # t_d(n + 1) - t_d(n) about n*
    batch_sd: float  # standard deviation of the decode batch
    batch_relax_s: float  # its correlation time (floored at 1e-12 s)
    cap_s: float  # t_full(n*), the longest mean step


def tpot_mixture(inp: TpotInputs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(weight, mean, sd) of the normal components of a pool's TPOT mixture (seconds).

    Other prompts arrive at λ_i; each adds its prefill increment Δ_b (per prompt bin b, back to back
    chunks) to the decode steps of the requests decoding meanwhile.  A request of d decode steps
    sees N ~ Poisson(λ_i d t̄) of them: TPOT = t_d + ΣΔ / d.  N = 1 is taken over the bins' sizes
    exactly (a single long prompt sets the tail of short outputs), N >= 2 as a normal of N E[Δ]
    and N Var Δ, and windows with many events as one normal; the batch's drift adds σ.
    """
    dd, w, v, delta_b = inp.decode_steps, inp.weight, inp.bin_weight, inp.delta_s
    t_bar, lam_i = inp.mean_step_s, inp.lam_i
    e_delta = float(v @ delta_b)
    var_delta = float(v @ (delta_b - e_delta) ** 2)
    base = t_bar - lam_i * t_bar * e_delta  # t_d, up to the fixed point's interpolation
    m = lam_i * dd * t_bar  # prompts arriving in a decode window
    # the batch's drift averaged over the decode window T = d t̄: an Ornstein-Uhlenbeck process of
    # correlation time τ keeps the share g(T / τ) = 2 (x - 1 + e^{-x}) / x² of its variance
    x = np.maximum(dd * t_bar / inp.batch_relax_s, 1e-9)
    g = np.where(x < 1e-4, 1.0, 2.0 * (x - 1.0 + np.exp(-x)) / x**2)
    sigma = np.maximum(np.abs(inp.slope_s) * inp.batch_sd * np.sqrt(g), MIN_TPOT_SD * t_bar)
    many = m > POISSON_NORMAL_EVENTS  # many events per window: one normal (the Poisson's CLT)
    weights = [w[many]]
    means = [base + m[many] * e_delta / dd[many]]
    sds = [np.sqrt(m[many] * (var_delta + e_delta**2) / dd[many] ** 2 + sigma[many] ** 2)]
    few = ~many
    if few.any():
        wf, df, mf, sf = w[few], dd[few], np.maximum(m[few], 1e-300), sigma[few]
        p0, p1 = np.exp(-mf), mf * np.exp(-mf)
        weights += [wf * p0, (wf * p1)[:, None] * v[None, :]]
        means += [np.full(df.shape, base), base + delta_b[None, :] / df[:, None]]
        sds += [sf, np.repeat(sf[:, None], v.size, axis=1)]
        m_top = float(mf.max())
        events = np.arange(2, int(m_top + 6.0 * math.sqrt(m_top) + 8.0), dtype=np.float64)
        if events.size:
            pmf = np.exp(events[None, :] * np.log(mf)[:, None] - mf[:, None] - special.gammaln(events + 1.0))
            weights.append(wf[:, None] * pmf)
            means.append(base + events[None, :] * e_delta / df[:, None])
            sds.append(np.sqrt(sf[:, None] ** 2 + events[None, :] * var_delta / df[:, None] ** 2))
    weight, mean, sd = (np.concatenate([np.ravel(a) for a in x]) for x in (weights, means, sds))
    # No decode step outlasts a full-budget step: prompts that arrive together queue for the
    # budget, so a window full of prefill work has every step at t_full(n*), not longer (one long
    # prompt of k >= d chunks gives exactly that; the Poisson sums above do not see the cap).
    mean = np.minimum(mean, inp.cap_s)
    keep = weight > 1e-10
    return weight[keep] / weight[keep].sum(), mean[keep], sd[keep]


def _tpot_mixture_survival(x: np.ndarray, mixture: tuple[np.ndarray, np.ndarray, np.ndarray]) -> np.ndarray:
    """P(TPOT > x) of a mixture of normals (weight, mean, sd) at each x (``EngineProfile.tpot_survival``)."""
    w, mean, sd = mixture
    if w.size == 0:
        return np.zeros(x.shape)
    return special.ndtr((mean[None, :] - x[:, None]) / sd[None, :]) @ w


class LatencyTail:
    """A pool's latency (TTFT or TPOT) at one count, built on first use: its survival table (``table``: a
    ``SurvivalTable`` or a ``Lazy`` that builds it) and its p-quantile (``quantile_s``: given when the
    caller knows it, e.g. a floor; else that of the table)."""

    def __init__(self, table: SurvivalTable | Lazy, p: float, quantile_s: float | None = None) -> None:
        self._table, self.p, self._quantile_s = table, p, quantile_s

    def table(self) -> SurvivalTable:
        if isinstance(self._table, Lazy):
            self._table = self._table()
        return self._table

    def quantile_s(self) -> float:
        if self._quantile_s is None:
            self._quantile_s = mixture_quantile_s([self.table()], [1.0], self.p)
        return self._quantile_s


@dataclass(frozen=True)
class EngineSizing:
    """Result of :func:`size_engine_pool` (seconds; ``n_instances`` excludes spares).

    ``binding`` names what set the count: ``"rho"`` (the utilisation cap or stability), ``"ttft"``,
    ``"tpot"``, or ``""`` for an infeasible pool (``reason`` then says why).
    """

    n_instances: int
    rho: float
    # Built on first read (``LatencyTail``: a pool sized at two token budgets keeps one sizing; the
    # TPOT unless a TPOT target needed it is only read for the candidates shown, verified or written)
    ttft_p_s: float = Deferred()
    tpot_p_s: float = Deferred()
    mean_residence_s: float
    mean_step_s: float
    decode_batch: float
    feasible: bool
    reason: InfeasibleReason | None
    binding: str
    floor_instances: int = 0  # the smallest count the utilisation cap allows (stable, ρ <= rho_max)
    ttft_table: SurvivalTable | None = field(default=Deferred(None), compare=False, repr=False)
    tpot_table: SurvivalTable | None = field(default=Deferred(None), compare=False, repr=False)


class LoadRequest(NamedTuple):
    """What a sizing generator (``sizing_steps``) asks for: ``profile.load(lam_per_s, n_instances, ...)``; it
    is sent the ``PoolLoad`` back (``run_serial`` evaluates it alone, ``fleetplan.queueing.lockstep`` with
    the requests of other pools)."""

    profile: EngineProfile
    lam_per_s: float
    n_instances: np.ndarray
    arrival_cv2: float
    balanced_split: bool

    def serial(self) -> PoolLoad:
        return self.profile.load(self.lam_per_s, self.n_instances, arrival_cv2=self.arrival_cv2,
                                 balanced_split=self.balanced_split)


def run_serial(steps: Generator[LoadRequest, PoolLoad, object]):
    """The value a sizing generator returns, each of its load requests evaluated alone (``LoadRequest.serial``)."""
    try:
        request = next(steps)
        while True:
            request = steps.send(request.serial())
    except StopIteration as done:
        return done.value


def size_engine_pool(profile: EngineProfile, lam_per_s: float, slo_ttft_s: float, p: float,
                     **options) -> tuple[EngineSizing, EngineState | None]:
    """Fewest instances whose p-quantile TTFT (and TPOT) meet the SLOs with ρ <= ``rho_max``.

    Every figure is non-increasing in the count, so the search takes the smallest stable count
    within the utilisation cap, then the smallest count from there whose TTFT (and TPOT) survival
    at the SLO is at most 1 - p (both searches vectorised over counts: ``_first_count``).
    Returns the sizing and the pool's state at the chosen count (None when the rate is 0).
    ``options``: ``sizing_steps``' keywords (``slo_tpot_s``, ``rho_max``, ``max_instances``,
    ``min_spare_instances``, ``arrival_cv2``, ``balanced_split``); the search is ``sizing_steps`` with each
    load request evaluated alone (``run_serial``).
    """
    return run_serial(sizing_steps(profile, lam_per_s, slo_ttft_s, p, **options))


def sizing_steps(
    profile: EngineProfile,
    lam_per_s: float,
    slo_ttft_s: float,
    p: float,
    *,
    slo_tpot_s: float | None = None,
    rho_max: float = 0.85,
    max_instances: int = 10_000,
    min_spare_instances: int = 0,
    arrival_cv2: float = 1.0,
    balanced_split: bool = True,
) -> Generator[LoadRequest, PoolLoad, tuple[EngineSizing, EngineState | None]]:
    """``size_engine_pool`` as a generator: it yields a ``LoadRequest`` wherever the utilisation search needs
    loads not met before and is sent their ``PoolLoad``; it returns what ``size_engine_pool`` returns.
    """
    p = check_probability_level(p)
    if not (math.isfinite(slo_ttft_s) and slo_ttft_s > 0):
        raise ConfigError(f"TTFT SLO {slo_ttft_s!r} s is invalid: it must be > 0 seconds")
    if slo_tpot_s is not None and not (math.isfinite(slo_tpot_s) and slo_tpot_s > 0):
        raise ConfigError(f"TPOT SLO {slo_tpot_s!r} s is invalid: it must be > 0 seconds")
    if not (0.0 < rho_max <= 1.0):
        raise ConfigError(f"rho_max={rho_max!r} is invalid: the utilisation cap must lie in (0, 1]")
    if int(max_instances) != max_instances or max_instances < 1:
        raise ConfigError(f"max_instances={max_instances!r} is invalid: it must be a whole number >= 1")
    lam = float(lam_per_s)
    if lam == 0.0:
        return EngineSizing(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, True, None, ""), None
    kw = {"arrival_cv2": arrival_cv2, "balanced_split": balanced_split}
    states: dict[int, EngineState] = {}  # one count each: the searches below ask for some counts twice
    # counts whose load alone is known: (ρ, stable, batch), the batches (counts, load) completed on demand
    loads: dict[int, tuple[float, bool, int]] = {}
    batches: list[tuple[list[int], PoolLoad]] = []

    def states_at(counts: np.ndarray) -> list[EngineState]:
        """The pool's state at each count (one row each), the counts not met before in one batch (a count
        whose load alone was evaluated completes that load's batch: the same rows ``state`` gave it)."""
        for n in dict.fromkeys(counts.tolist()):
            if int(n) not in states and int(n) in loads:
                batch, load = batches[loads[int(n)][2]]
                full = load.state()
                states.update((m, _state_row(full, i)) for i, m in enumerate(batch))
        todo = [int(n) for n in dict.fromkeys(counts.tolist()) if int(n) not in states]
        if todo:
            batch = profile.state(lam, np.array(todo, dtype=np.float64), **kw)
            states.update((n, _state_row(batch, i)) for i, n in enumerate(todo))
        return [states[int(n)] for n in counts.tolist()]

    def state(n: int) -> EngineState:
        return states_at(np.array([n]))[0]

    def capped(counts: np.ndarray) -> Generator[LoadRequest, PoolLoad, tuple[np.ndarray, np.ndarray]]:
        """Stable within the utilisation cap (and spares above the load); score ρ / ρ_max.  Needs ρ
        alone, so counts not met before are evaluated without their latency (``EngineProfile.load``,
        asked for: ``LoadRequest``)."""
        todo = [int(n) for n in dict.fromkeys(counts.tolist()) if int(n) not in states and int(n) not in loads]
        if todo:
            load = yield LoadRequest(profile, lam, np.array(todo, dtype=np.float64), arrival_cv2, balanced_split)
            batches.append((todo, load))
            loads.update((n, (float(load.rho[i]), bool(load.stable[i]), len(batches) - 1)) for i, n in enumerate(todo))
        pairs = [loads[n][:2] if n in loads else (float(states[n].rho[0]), bool(states[n].stable[0]))
                 for n in (int(x) for x in counts.tolist())]
        rho = np.array([r for r, _ in pairs])
        stable = np.array([ok for _, ok in pairs])
        need = np.ceil(rho * counts - 1e-9) + min_spare_instances
        ok = stable & (rho <= rho_max * (1.0 + 1e-12)) & (counts >= need)
        return ok, rho / rho_max  # unstable: ρ is the offered load over capacity (>= 1), still ∝ 1/n

    def result(n: int, st: EngineState, reason: InfeasibleReason | None, binding: str,
               ttft_s: float | None = None, tpot_s: float | None = None) -> tuple[EngineSizing, EngineState]:
        # the tables and quantiles when read (``ttft_table``, ``tpot_table`` and their p-quantiles)
        ttft = LatencyTail(Lazy(ttft_table, profile, st), p, ttft_s)
        tpot = LatencyTail(Lazy(_tpot_table_of, profile._tpot_inputs(st, 0)) if st.stable[0] else _UNSTABLE, p,
                           tpot_s)
        return EngineSizing(n, float(st.rho[0]), Lazy(LatencyTail.quantile_s, ttft), Lazy(LatencyTail.quantile_s, tpot),
                            float(st.mean_residence_s[0]), float(st.mean_step_s[0]), float(st.decode_batch[0]),
                            reason is None, reason, binding, floor, Lazy(LatencyTail.table, ttft),
                            Lazy(LatencyTail.table, tpot)), st

    floor = 0
    top = int(max_instances)
    # 1. the smallest count that is stable within the utilisation cap, from a bound no count below
    # can beat: the prefill work alone (Φ at an empty batch) must fit in ρ_max of each instance
    # and a request's shortest life (own prefill and decode steps at an empty batch) must fit the slots
    phi_min = float(min(profile.phi.min(), profile.phi_full.min()))
    life_min_s = float(profile.weight @ profile._prefill0) + profile.mean_decode_steps * float(profile.t_d[0])
    api_load = lam * profile.api.mean_busy_s / profile.api.cost.n_servers  # the API servers' share of one instance
    bound = max(lam * phi_min, lam * life_min_s / profile.n_cap, api_load) / rho_max
    n_min = max(1, min(top, math.floor(bound)))
    n_lo = yield from _first_count_steps(capped, n_min, top)
    if n_lo is None:
        st = state(top)
        return result(top, st, InfeasibleReason.UNSTABLE if not st.stable[0] else InfeasibleReason.EXCEEDS_MAX_GPUS, "")
    floor = n_lo
    # 2. floors no count can beat
    floor_ttft = profile.zero_load_ttft_s(p)
    if floor_ttft > slo_ttft_s:
        return result(n_lo, state(n_lo), InfeasibleReason.PREFILL_EXCEEDS_SLO, "", ttft_s=floor_ttft)
    if slo_tpot_s is not None and profile.zero_load_tpot_s() > slo_tpot_s:
        return result(n_lo, state(n_lo), InfeasibleReason.DECODE_EXCEEDS_TPOT_SLO, "",
                      tpot_s=profile.zero_load_tpot_s())
    q = 1.0 - p

    def meets(counts: np.ndarray) -> Generator[LoadRequest, PoolLoad, tuple[np.ndarray, np.ndarray]]:
        """The latency targets hold: P(TTFT > SLO) <= 1 - p (and TPOT), one survival point per count;
        score the larger survival over 1 - p.  (A generator that asks for nothing: ``_first_count_steps``'s
        test.)"""
        yield from ()
        sts = states_at(counts)
        good = np.array([bool(s.stable[0]) for s in sts])
        score = np.full(counts.shape, np.inf)
        for i in np.nonzero(good)[0]:
            miss = profile.ttft_survival(sts[i], 0, np.array([slo_ttft_s]))[0]
            good[i] = miss <= q
            if good[i] and slo_tpot_s is not None:
                miss = max(miss, profile.tpot_survival(sts[i], 0, np.array([slo_tpot_s]))[0])
                good[i] = miss <= q
            score[i] = miss / q
        return good, score

    # 3. the smallest count from there that meets the latency targets
    n = yield from _first_count_steps(meets, n_lo, top)
    if n is None:
        return result(top, state(top), InfeasibleReason.EXCEEDS_MAX_GPUS, "")
    st = state(n)
    if n == n_lo or slo_tpot_s is None:  # known without the TPOT, which stays unread
        return result(n, st, None, "rho" if n == n_lo else "ttft")
    sized, _ = result(n, st, None, "")
    binding = "ttft" if sized.ttft_p_s / slo_ttft_s >= sized.tpot_p_s / slo_tpot_s else "tpot"
    return replace(sized, binding=binding), st


_STATE_FIELDS = dataclasses.fields(EngineState)


_API_WAIT_FIELDS = ("api_wait_s", "api_wait_mass", "api_wait_decay_per_s")
_ROW_FIELDS = tuple(f.name for f in _STATE_FIELDS if f.name not in _API_WAIT_FIELDS)


def _state_row(st: EngineState, i: int) -> EngineState:
    """Count i of ``st`` as a state of one count (every per-count array sliced to row i; a ``Deferred`` API
    wait not yet computed stays so, computed for all of ``st``'s counts when a row first reads it).  A state of
    one count is its own row (every field the same values)."""
    if i == 0 and st.n_instances.size == 1:
        return st
    out = {name: None if (v := getattr(st, name)) is None else v[i:i + 1] for name in _ROW_FIELDS}
    for name in _API_WAIT_FIELDS:
        v = peek(st, name)
        if isinstance(v, Lazy) and v.fn is _api_wait_rows and v.args[2] is None:
            out[name] = Lazy(_api_wait_rows, v.args[0], v.args[1], i)
        else:
            v = getattr(st, name)
            out[name] = None if v is None else v[i:i + 1]
    return EngineState(**out)


def _first_count(test, lo: int, hi: int) -> int | None:
    """Smallest n in [lo, hi] with ``test`` true, for a monotone ``test`` vectorised over counts
    (``_first_count_steps`` with a plain ``test``)."""

    def steps(counts: np.ndarray):
        yield from ()
        return test(counts)

    return run_serial(_first_count_steps(steps, lo, hi))


def _first_count_steps(test, lo: int, hi: int) -> Generator[LoadRequest, PoolLoad, int | None]:
    """Smallest n in [lo, hi] with ``test`` true, for a monotone ``test`` vectorised over counts (``test`` a
    generator function: its load requests pass through).

    ``test(counts)`` gives (ok, score): the verdict per count, and a positive figure that falls with
    the count and is about 1 where the verdict turns (the utilisation over its cap, the latency
    violation share over 1 - p).  Only the verdict decides; the score only guesses.  ``lo`` is tried
    alone first (often the answer).  Then each round tries up to four counts at once: the guess
    where log score reaches 0 on the line (against log n) through the two counts tried so far whose
    scores are nearest 1 (from one count: score ∝ 1/n, as ρ is; none when that line is flat or
    rising), the count below it, and a safety count: the midpoint of the bracket once a count
    passed, else the top of a window above the largest failing count that grows fourfold each
    round, with the count just above the largest failing one until a count passed (the README
    sweep's answer in 50 of the 78 latency searches whose first count failed, and in 92 of 216 such
    utilisation searches; there the guess from one count, for a survival falling much faster than
    1/n, overshot by up to 30 times and a third round bisected back).  A good guess ends the search
    in one round; otherwise the bracket halves or the window grows, so the search takes O(log)
    rounds whatever the scores say."""
    ok, score = yield from test(np.array([lo]))
    if ok[0]:
        return lo
    tried = [(lo, float(score[0]))]
    below = lo  # the largest count known to fail
    above: int | None = None  # the smallest count known to pass
    width = max(4, lo // 4)
    while above is None or above - below > 1:
        guess = _crossing(tried)
        if above is None:
            if below >= hi:
                return None
            top, safety = hi, min(hi, below + width)
            width *= 4
        else:
            top, safety = above - 1, (below + above) // 2
        trial = [safety] if guess is None else [guess - 1, guess, safety]
        if above is None:  # and the next count: the answer of most pools whose first count failed
            trial.append(below + 1)
        counts = np.unique(np.clip(np.array(trial), below + 1, top))
        ok, score = yield from test(counts)
        for n, good, sc in zip(counts.tolist(), ok.tolist(), score.tolist(), strict=True):
            tried.append((n, sc))
            if good:
                above = n
                break
            below = n
    return above


def _crossing(tried: list[tuple[int, float]]) -> int | None:
    """The count where log score reaches 0 (score 1) on the line (log score against log n) through the
    two counts of ``tried`` whose scores are nearest 1, rounded up; through the nearest alone with
    slope -1 (score ∝ 1/n) when there is no second count; the largest count tried + 1 when no score
    is a positive number.  None (no guess: the caller bisects) when the two nearest give no falling
    line in logs: rising, or flat, which includes two different scores with equal logs (99.99999999999993
    and 99.99999999999991), where the line's slope would divide by zero."""
    usable = sorted((abs(math.log(sc)), n, math.log(sc)) for n, sc in tried if math.isfinite(sc) and sc > 0)
    if not usable:
        return max(n for n, _ in tried) + 1
    _, nb, lb = usable[0]
    for _, na, la in usable[1:]:
        if na != nb:
            if (la - lb) * (na - nb) >= 0:  # flat or rising in logs: no line to follow
                return None
            xa, xb = math.log(na), math.log(nb)
            x = xb - lb * (xb - xa) / (lb - la)
            return int(math.ceil(min(math.exp(min(x, 50.0)), 1e15) - 1e-9))
    return int(math.ceil(min(nb * math.exp(lb), 1e15) - 1e-9))


#: Points of a survival table (``SurvivalTable``), geometric in x.
N_TABLE_POINTS = 80
#: Survival level a table reaches at its right end.
TABLE_TAIL = 1e-5


@dataclass(frozen=True, eq=False)
class SurvivalTable:
    """P(X > x) of one pool's latency on a grid of x (seconds, ascending), for fleet mixtures."""

    x_s: np.ndarray
    survival: np.ndarray

    def at(self, x_s: np.ndarray) -> np.ndarray:
        return _interp(x_s, self.x_s, self.survival, left=1.0, right=0.0)

    @functools.cached_property
    def ascending(self) -> bool:
        """Whether ``x_s`` never falls (``mixture_quantiles_s`` merges such tables' points)."""
        return bool(np.all(self.x_s[1:] >= self.x_s[:-1]))

    @functools.cached_property
    def finite(self) -> bool:
        """Whether every point of ``x_s`` is finite (an unstable pool's table ends at inf)."""
        return bool(np.isfinite(self.x_s).all())

    @functools.cached_property
    def strictly_increasing(self) -> bool:
        """Whether ``x_s`` rises strictly (then ``at(x_s)`` is ``survival`` itself)."""
        return bool(np.all(self.x_s[1:] > self.x_s[:-1]))


def _table(survival, lo_s: float, hi_s: float) -> SurvivalTable:
    lo_s = max(lo_s, 1e-7)
    x = _geomspace(lo_s, max(hi_s, 1.5 * lo_s), N_TABLE_POINTS)
    surv = np.minimum.accumulate(np.minimum(np.maximum(survival(x), 0.0), 1.0))
    return SurvivalTable(np.concatenate([[0.0], x]), np.concatenate([[1.0], surv]))


_UNSTABLE = SurvivalTable(np.array([0.0, math.inf]), np.array([1.0, 1.0]))


def ttft_table(profile: EngineProfile, st: EngineState, i: int = 0) -> SurvivalTable:
    """The TTFT survival of ``profile`` at count i of ``st`` as a table (see ``mixture_quantile_s``)."""
    if not st.stable[i]:
        return _UNSTABLE
    api_s = profile.tokenize_binned  # (B,)
    lo = float((st.prefill_levels[i] + api_s).min()) * 0.99
    # the longest no-wait TTFT (step boundary, then the prompt alone) and queued one (token time behind
    # the queue, then the rest of a full-budget step) after the tokenisation, before the waits' tails
    hi = float(max((st.prefill_levels[i][:, 0] + api_s).max() + st.t_d[i],
                   (st.prefill_levels[i][:, 1] + api_s).max() + st.t_full_levels[i].max()))
    mass, decay = st.wait_mass[i], st.wait_decay_per_s[i]
    tail = mass > TABLE_TAIL
    if tail.any():
        hi += float((np.log(mass[tail] / TABLE_TAIL) / decay[tail]).max())
    api_mass, k_api = profile.api_wait_tail(st, i)
    if api_mass > TABLE_TAIL:
        hi += math.log(api_mass / TABLE_TAIL) / k_api
    return _table(lambda x: profile.ttft_survival(st, i, x), lo, hi)


def tpot_table(profile: EngineProfile, st: EngineState, i: int = 0) -> SurvivalTable:
    """The TPOT survival of ``profile`` at count i of ``st`` as a table."""
    return _tpot_table_of(profile._tpot_inputs(st, i)) if st.stable[i] else _UNSTABLE


def _tpot_table_of(inputs: TpotInputs) -> SurvivalTable:
    """``tpot_table`` of a stable pool from its ``TpotInputs``."""
    mix = tpot_mixture(inputs)
    if mix[0].size == 0:
        return SurvivalTable(np.array([0.0, 1e-9]), np.array([1.0, 0.0]))
    w, mean, sd = mix
    lo = max(float((mean - 5.0 * sd).min()), 0.5 * float(mean.min()))
    hi = float((mean + 6.0 * sd).max())
    return _table(lambda x: _tpot_mixture_survival(x, mix), lo, hi)


#: Pools with traffic in one fleet's latency mixture at most (``mixture_quantiles_s``: the kernel's
#: sum of the shares is numpy's, bit for bit, up to 128 terms).
MAX_MIXTURE_TABLES = 128


def mixture_quantiles_s(mixtures: Sequence[tuple[Sequence[SurvivalTable], Sequence[float]]],
                        p: float) -> np.ndarray:
    """``mixture_quantile_s`` of each (tables, shares) of ``mixtures`` (seconds, shape (F,)), bit for bit,
    in one compiled pass (``fleetplan.queueing._kernels.mixture``): a sweep's thousands of fleets
    share a few hundred pool tables, each passed once.  A fleet with a table whose points do not
    ascend (the kernel merges the tables' points) is left to ``mixture_quantile_s``."""
    from fleetplan.queueing._kernels.mixture import MixtureFleets, MixtureTables, mixture_quantiles

    p = check_probability_level(p)
    index: dict[int, int] = {}
    xs: list[np.ndarray] = []
    survs: list[np.ndarray] = []
    starts = [0]
    member_start = [0]
    member_table: list[int] = []
    member_share: list[float] = []
    single: list[bool] = []
    aside: list[int] = []  # fleets with a table whose points do not ascend
    for f, (tables, shares) in enumerate(mixtures):
        n_live = 0
        ascending = True
        for t, share in zip(tables, shares, strict=True):
            if share > 0:
                k = index.get(id(t))
                if k is None:
                    k = index[id(t)] = len(xs)
                    xs.append(np.asarray(t.x_s, dtype=np.float64))
                    survs.append(np.asarray(t.survival, dtype=np.float64))
                    starts.append(starts[-1] + xs[-1].size)
                ascending = ascending and t.ascending
                member_table.append(k)
                member_share.append(float(share))
                n_live += 1
                last = t
        if n_live > MAX_MIXTURE_TABLES:
            raise ConfigError(f"a fleet of {n_live} pools with traffic is more than the {MAX_MIXTURE_TABLES} the "
                              "latency mixture takes; plan with fewer pools")
        if not ascending:
            aside.append(f)
            del member_table[len(member_table) - n_live:], member_share[len(member_share) - n_live:]
        member_start.append(len(member_table))
        single.append(n_live == 1 and last.strictly_increasing)
    empty = np.zeros(0)
    tabs = MixtureTables(np.concatenate(xs) if xs else empty, np.concatenate(survs) if survs else empty,
                         np.array(starts, dtype=np.int64))
    fleets = MixtureFleets(np.array(member_start, dtype=np.int64), np.array(member_table, dtype=np.int64),
                           np.array(member_share, dtype=np.float64), np.array(single, dtype=np.bool_))
    out = np.empty(len(member_start) - 1)
    mixture_quantiles(tabs, fleets, 1.0 - p, out)
    for f in aside:
        out[f] = mixture_quantile_s(*mixtures[f], p)
    return out


def load_mixture_kernel() -> None:
    """Call ``mixture_quantiles_s``' compiled pass once on one tiny fleet, so that numba loads it from its
    cache (or compiles it) now rather than in the sweep's ranking (about 13 ms once a kernel is loaded:
    the command line does it beside the sweep's pool sizing, after the simulator's kernel).  The call
    has the argument types every call has; a head start only."""
    mixture_quantiles_s([((SurvivalTable(np.array([0.0, 1.0]), np.array([1.0, 0.0])),), (1.0,))], 0.5)


#: Below this many terms numpy sums a float64 vector in order (``pairwise_sum`` in
#: numpy/_core/src/umath/loops_utils.h.src), as Python's loop does: ``mixture_quantile_s`` sums a fleet's
#: shares so (the same bits, without an array per fleet).
_SEQUENTIAL_SUM_TERMS = 8


def mixture_quantile_s(tables, shares, p: float) -> float:
    """p-quantile of a latency over all requests of a fleet whose pools (``tables``) carry
    ``shares`` of the requests (renormalised): the smallest x with Σ share · P_pool(X > x) <= 1 - p."""
    p = check_probability_level(p)
    live = [(t, float(s)) for t, s in zip(tables, shares, strict=True) if s > 0]
    if not live:
        return 0.0
    if len(live) == 1 and live[0][0].strictly_increasing:  # its own grid: the survival at its points
        xs, surv = live[0][0].x_s, live[0][0].survival
        if not math.isfinite(xs[-1]):
            return math.inf
    else:
        if len(live) < _SEQUENTIAL_SUM_TERMS:  # numpy's sum of so few: in order (``_SEQUENTIAL_SUM_TERMS``)
            total = 0.0
            for _, s in live:
                total += s
        else:
            total = float(np.array([s for _, s in live]).sum())
        if not all(t.finite for t, _ in live):
            return math.inf
        xs = np.sort(np.concatenate([t.x_s for t, _ in live]))  # repeated points change no crossing below
        # Σ w_i P_i(X > x), w_i = share_i / Σ shares, left to right (each term >= 0: the sum from 0 would
        # add nothing)
        t, s = live[0]
        surv = (s / total) * _interp(xs, t.x_s, t.survival, 1.0, 0.0)
        for t, s in live[1:]:
            surv += (s / total) * _interp(xs, t.x_s, t.survival, 1.0, 0.0)
    q = 1.0 - p
    j = int(np.argmax(surv <= q))
    if surv[j] > q:
        return math.inf
    if j == 0:
        return float(xs[0])
    x0, x1, s0, s1 = xs[j - 1], xs[j], surv[j - 1], surv[j]
    if s0 <= s1:
        return float(x1)
    if s1 > 0:  # the tails are near-exponential: interpolate the log-survival
        return float(x0 + (x1 - x0) * math.log(s0 / q) / math.log(s0 / s1))
    return float(x0 + (x1 - x0) * (s0 - q) / (s0 - s1))
