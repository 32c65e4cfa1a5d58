"""Analytic physics of disaggregated roles: a prefill-only engine, the KV transfer, a decode-only engine.

One physics with the PDD simulator (``fleetplan.sim._kernels.pdd``): the step time ``f`` is the
kernel's (``EngineModel.step_s`` evaluates the expression of ``fleetplan.sim._kernels.step_model``)
and the limits are the simulator pools' (``EngineLimits``: token budget B, ``max_num_seqs``, KV
blocks).  Times in seconds.

Legend: λ arrival rate of the fleet (1/s), P prefill instances, D decode instances, request point j
with prompt p_j, output o_j and weight w_j; B the prefill token budget, m its ``max_num_seqs``;
b the decode ``max_num_seqs`` (the decode batch cap).

Prefill role (the kernel's ``prefill.py``: FCFS, chunks of at most B tokens, several prompts per step
up to m; a prompt's attention work Σ chunk (2 offset + chunk) = p² whatever its chunking).  With
f(s, 0, x, 0, a) a prefill step of s sequences, x tokens and attention work a, and α the step's cost
per unit of a (additive in both step models):

    S_alone,j = floor(p_j / B) f(1, 0, B, 0, 0) + f(1, 0, p_j mod B, 0, 0) + α p_j²
                (alone on an idle instance: exactly the kernel's ``prefill_alone_s``)
A busy instance's step holds the tokens routed to it during the step before (FCFS token server), so a
prompt's last chunk r_j shares its step with K̄_j - 1 = q_j λ_i t̄ others and pays its token share of it
(``PrefillRole.service_at``, X_j -> S_alone,j as λ_i -> 0; the per-token cost falls with load, most for
MoE steps whose expert weights are read once per step); ρ_p = λ_i E[X], λ_i = λ / P.  q_j is what the
least-outstanding router lets through (``_router_shares``): a prompt of one chunk shares its step only if it
waited (C(P, P ρ_p)) and the router put others behind it, which it does only while every instance holds one waiting
(ρ_p^(P-1), M/M/P's queue), over the length-biased step it waited through (x (1 + Cs²) of a last chunk's step
alone): q = (1 + Cs²) C ρ^(P-1), (1 + Cs²) ρ at P = 1; a longer prompt's step before is its own chunk, and the
router sends prompts to its busy instance while all P are busy: q = C / ρ, 1 at P = 1.  Against the PDD simulator
(geometric prompts of 1,000 tokens, budget 8,192, f = 30 ms + 30 µs per token, S_alone 60 ms): E[Y] 84 / 71 /
64.5 / 60.5 ms against simulated 88 / 72 / 64.5 / 60.5 ms at P = 1 / 2 / 4 / 16 and ρ 0.8-0.85, where every
step shared at the one-instance rate gave 100-104 ms; Llama-3.1-70B FP8, azure_conv at 1,000 req/s on 109 H200
tp2 prefill instances (budget 8,192): E[Y] 104 ms against the simulated 100 ms, where that gave 492 ms and a P99
TTFT 1.42x the simulated (0.77 s against 0.54 s), 0.99x with q.  Prompts of several chunks of a small budget
(512) run 5-10 % longer in the simulator than Y_j (their first chunk rides the step of the prompt before, one
step more than p / B), not modelled.  The prompt itself waits
for that whole last step, not its share: its own time in prefill (the simulator's prefill start to end) is

    Y_j = floor(p_j / B) f(1, 0, B, 0, 0) + f(K̄, 0, r_j + e, 0, 0) + α p_j²      (``PrefillRole.wall_at``)

(Y_j -> S_alone,j as λ_i -> 0).  DeepSeek-V3 FP8 on B200 (tp4 prefill, azure_code at 150 req/s): the simulated
prefill time is 1.2x S_alone for the longest 5 % of prompts and 1.6x for the rest (a short prompt rides a step
of 8,192 tokens), P99 TTFT 1.28-1.36x the screen's with S_alone, 1.04-1.19x with Y_j.
The prefill pool's router sends a prompt to the instance with the fewest outstanding requests: it
waits only when every instance is busy (probability C(P, λ E[X]), Erlang C, as a central queue), and
then for the pooled queue's work (Kimura's GI/G/P conditional wait) plus, as the router counts prompts
and not their work, the residual of its own instance's prompt in place of the first of P to finish:

    P(W > t) = C(P, λ E[X]) exp(-t / m),
    m = E[X] (Ca² + Cs²_X) / 2 [1 / (P (1 - ρ_p)) + 1 - 1 / P] + (E[X³] / (3 E[X²]) - E[X²] / (2 E[X])) / P

(M/G/1's (1 + Cs²) E[X] / (2 (1 - ρ)) at P = 1 with Poisson arrivals; the residual E[X] (1 + Cs²) / 2
as P grows; bursts widen both by Kimura's (Ca² + Cs²) / 2; the last term matches the conditional
wait's second moment at P = 1 (Takács: E[W²] = 2 E[W]² + λ E[X³] / (3 (1 - ρ)), so m = E[W²] / (2 E[W]),
exact for M/M/1 where the term is 0): heavy-tailed prompts (lmsys) wait longer than two moments say);
a prompt's own time after its wait is Y_j.

KV transfer (the kernel's ``transfer.py`` without a fabric, first-order model):

    T_x(p) = latency + p · kv_bytes_per_token / bandwidth

Decode role (the kernel's ``decode.py``: pure decode steps; a handed-off request joins the running
batch and its first step recomputes its last prompt token and emits the first output token).  With
κ = E[o p + o (o - 1) / 2] / E[o] the time-average context of a decoding sequence and
t_d(n) = f(n, n, 0, n κ, 0) the step of n sequences, an instance at rate λ_d = λ / D runs the batch n*,
the smallest root of Little's law for the running batch

    n = λ_d E[o] t̄_d(n),            TPOT mean = t̄_d(n*)

with t̄_d(n) = E[t_d(N*)] the step a member sees: the batch N fluctuates about its mean n (negative binomial
of variance n / (1 - g), below), and a member sees it size-biased, N* = 1 + NB(r + 1, q) for N ~ NB(r, q)
(1 + Poisson(n) at g = 0; members beyond b are b), g taken from the Poisson-smoothed step (``DecodeRole.
mean_step_s``).  For a step linear in n this is t_d(n + 1 / (1 - g)), one to a few sequences more than
t_d(n); for the roofline step it is not: its GEMMs run in 128-token tiles, so t_d jumps by up to 25-50 %
where the batch crosses a multiple of 128 (Llama-3.1-70B FP8 on B200 tp1: 14.2 -> 17.7 ms from 128 to 140
sequences), and the raw t_d(n*) at an n* just below a tile step missed the batch that crosses it: the
grid's B200 decode roles (azure_conv, 50 req/s) had n* = 112 against a simulated mean batch of 140 and P99
TPOT 1.25-1.32x the screen's; with t̄_d, n* = 146 and 0.98-1.02x.  That variance is one instance's M/G/∞ batch;
the decode assignment (fewest requests bound, below) balances the D instances, so an instance runs the pooled
batch's share N_D / D, of variance a_d / ((1 - g) D) (``DecodeRole.mean_step_s`` with ``n_instances``: for a step
linear in n, t_d(n + 1 / ((1 - g) D)), between the whole-batch step t_d(n), the size-biased Poisson one and the
widened one, linearly in the variance ratio; g the elasticity of that pooled curve itself, a fixed point from
g = 0: a narrow batch below a tile step sees the flat step there, not the slope of one instance's smoothed cliff:
Llama-3.1-70B FP8 on 8 B200 tp1 decode instances, azure_conv at 200 req/s, n* 150 with the smoothed cliff's g,
114 pooled, the simulated batch 109 below the 128-sequence tile step, P99 TPOT 0.73x -> 0.93x the screen's).
At a steep step this is the batch itself: agent_heavy, Llama-3.1-8B
on 38 H100 tp8 decode instances (g = 0.74, κ 25k tokens): n* 65.8 with one instance's widening, 52.3 pooled;
the simulator's per-instance batch 51.2 (variance 3.3, not 51 / 0.26), P99 TPOT 0.98x the screen's (0.57x before,
with the verifier's warm-up too short as well, ``plan.disagg.verify.run_length``).

A decode slot is held from the grant (prefill start: early binding) to the last token, h_pre =
E[Y] + E[T_x] before the handoff (the prompt's own time in prefill at the prefill role's count, as the simulator
measures it: S_alone alone, 1.2-1.3x it for prompts sharing steps at a few instances); the slot load is the
rate against the instance's throughput with every slot busy, ρ_d = λ_d (h_pre + E[o] t_d(b)) / b (as the
co-located engine model's slot load; stable iff < 1, and then n* < b).  The kernel grants a transfer only with a
free slot (backpressure).  The wait for a slot is Erlang-C over the pooled D b slots (the assignment balances
them).  Erlang C's exponential tail is not the slots' tail: the slots held are M/G/∞ until they run out, Poisson
of mean a_d = λ_d (h_pre + E[o] t_d(n*)) whatever the lifetimes (insensitivity), but heavy-tailed outputs (lmsys:
a request lives up to 8,815 steps) keep the count above its mean for minutes, and a run that hits the cap b
queues every grant behind the longest-lived requests.  The count is wider than Poisson: a larger batch
slows every step, so its members live longer (elasticity g = n t_d'(n) / t_d(n) at n*); linearised,
dN/dt = λ_d - N / (E[o] t_d(N)) relaxes at rate (1 - g) / (E[o] t_d) under the arrivals' and departures' noise
2 λ_d, so Var N = a_d / (1 - g) (B200 decode at g = 0.73: simulated sd 23 against Poisson's 15).  The decode
assignment (the fewest requests bound and not finished, ``plan.disagg.verify.DECODE_ASSIGNMENT``) pools the
slots: an instance with a free slot has fewer than b requests bound, one without has at least b, so a request is
bound to an instance with a free slot whenever one exists and waits only when all D b are held.  The held slots of
the role, N_D, are M/G/∞ of mean D a_d (the instances balanced, each step slowed by its own batch as one instance
by the whole: variance D a_d / (1 - g)), and the role keeps P(N_D >= D b), a negative binomial of that mean and
variance (Poisson at g <= 0), below a tenth of the tail the SLO percentile leaves (``DecodeState.slot_full``).
One instance's P(N >= b), of mean a_d and variance a_d / (1 - g), is the tail of an assignment blind to the slots
(round-robin: each instance its own M/G/∞): its relative width sqrt(1 / ((1 - g) a_d)) does not shrink with D,
the pooled one's is sqrt(D) narrower, and the per-instance tail sized the role of the issue's 1,000 req/s fleet
(Llama-3.1-70B FP8 on H200 tp1, b = 128, azure_conv) at 76 instances where the slot load allows 71.  The KV cache is
not pooled (the assignment counts requests, not their tokens) and runs out the same way, usually first (b is often
the KV limit at the mean context): the held KV tokens of an instance are compound Poisson, mean K = λ_d Σ_j w_j
(h_pre p_j + o_j t_d (p_j + o_j / 2)); variance λ_d Σ_j w_j o_j t_d (p_j² + p_j o_j + o_j² / 3) (a member's context
grows from p_j to p_j + o_j over its life) when the count is Poisson, and with the count balanced over the D
instances its share a_d E_m[c]² falls to a_d E_m[c]² / D (E_m over the members' time, a_d = λ_d E[o] t_d), the
contexts' own a_d Var_m[c] staying, all widened by 1 / (1 - g); P(held >= the instance's KV tokens) (normal) counts
in ``slot_full`` as well (the larger of the two).  (The grid's AFD
1:2 unit on lmsys at 50 req/s: b = 273, the KV limit at the mean context 2,178 tokens, a_d = 196; P(N >= b)
is 5e-5, but the held KV tokens reach the cache with more than 0.1 % probability, and one of three simulated
replications at one unit had P99 TTFT 7.5x / 14x the screen's; verification and the screen now both give 2.)

TPOT of request j (vLLM's (E2E - TTFT) / (o - 1), o >= 2) is the mean of its o_j - 1 decode steps.
The batch is M/G/∞: members of request type k (Poisson, mean λ_d w_k R_k, R_k = o_k t_d(n*)) add
s_n + s_c c̄_k to every step they share (s_n, s_c the step's cost per sequence and per context token,
c̄_k = p_k + o_k / 2), so averaged over the request's window w_j = (o_j - 1) t_d(n*) the step's variance
is Σ_k λ_d w_k R_k (s_n + s_c c̄_k)² R_k / (R_k + w_j) (a member persists R_k: one long-context request
slows its instance for its whole life); its own context, p_j + o_j / 2
on average, is in each of its steps (mean t_d(n*) + ∂t/∂ctx (p_j + o_j / 2 - κ)); TPOT_j is a gamma
variable with that mean and variance, as in the co-located engine model (``queueing.engine``), and the
p-quantile is taken over the mixture of requests.

TTFT (the simulator's definition: queue + prefill + transfer, backpressure included + first decode step):

    TTFT_j = W_p + Y_j + W_slot + T_x(p_j) + R + t_d(n* + 1)

with R the rest of the decode step in progress when the KV arrives (uniform on [0, t_d(n*)] while the
instance is busy, probability 1 - e^{-n*}; its mean is added) and W_slot's mean added.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy import special

from fleetplan.errors import ConfigError
from fleetplan.queueing.engine import EngineModel
from fleetplan.queueing.erlang import erlang_c
from fleetplan.queueing.ttft import ZeroWaitTtft, ttft_quantile_s

__all__ = ["DecodeRole", "DecodeState", "PrefillRole", "PrefillState", "kv_transfer_s"]

#: Bisection steps of the operating batch and of the TPOT quantile.
_BISECT_ITERS = 60
#: Decode windows (output-length quantiles) the TPOT variance is evaluated on, then interpolated.
_WINDOW_GRID = 64
#: Grid points between 0 and the batch cap on which the operating batch's root is bracketed (and the step a
#: member sees is smoothed, ``DecodeRole.mean_step_s``).
_BATCH_GRID = 256
#: Largest elasticity of the decode step taken for the batch's widening 1 / (1 - g).
_MAX_ELASTICITY = 0.9
#: Damped passes of a pooled role's elasticity on its own step curve (``DecodeRole._curve``).
_POOLED_PASSES = 8
#: Elasticity below which the held slots' count is taken as Poisson (its variance within 1e-9 of the mean's).
_POISSON_ELASTICITY = 1e-9


def kv_transfer_s(prompt_tokens, kv_bytes_per_token: float, bandwidth_bytes_per_s: float,
                  latency_s: float) -> np.ndarray:
    """T_x(p) = latency + p · kv_bytes_per_token / bandwidth, seconds (module docstring)."""
    if not (bandwidth_bytes_per_s > 0):
        raise ConfigError(param="kv_bandwidth_bytes_per_s", value=bandwidth_bytes_per_s,
                          rule="the KV transfer needs a bandwidth > 0")
    return latency_s + np.asarray(prompt_tokens, dtype=np.float64) * kv_bytes_per_token / bandwidth_bytes_per_s


def _normalised(weight) -> np.ndarray:
    w = np.asarray(weight, dtype=np.float64)
    return w / w.sum()


@dataclass(frozen=True, eq=False)
class PrefillRole:
    """A prefill-only instance (``engine``) serving the prompts ``prompt_tokens`` of weight ``weight``.

    ``alone_s`` S_alone,j per point; ``attention_s`` its attention share α p_j² (module docstring)."""

    engine: EngineModel
    prompt_tokens: np.ndarray
    weight: np.ndarray
    alone_s: np.ndarray
    attention_s: np.ndarray

    @classmethod
    def of(cls, engine: EngineModel, prompt_tokens, weight) -> PrefillRole:
        p = np.maximum(np.asarray(prompt_tokens, dtype=np.float64), 1.0)
        w = _normalised(weight)
        budget = float(engine.limits.max_num_batched_tokens)
        full = float(engine.step_s(1, 0, budget, 0, 0))
        probe = budget * budget
        alpha = (float(engine.step_s(1, 0, budget, 0, probe)) - full) / probe
        n_full = np.floor(p / budget)
        rest = p - n_full * budget
        rest_s = np.where(rest > 0, engine.step_s(1, 0, rest, 0, 0), 0.0)
        return cls(engine, p, w, n_full * full + rest_s + alpha * p * p, alpha * p * p)

    @property
    def mean_prompt_tokens(self) -> float:
        return float(self.weight @ self.prompt_tokens)

    @property
    def mean_service_s(self) -> float:
        """E[S_alone]: instance-seconds a prompt costs an idle instance (the most it costs)."""
        return float(self.weight @ self.alone_s)

    def service_at(self, lam_i: float, n_instances: int = 1) -> np.ndarray:
        """X_j (``_at``): instance-seconds prompt j costs at per-instance rate ``lam_i`` in a role of
        ``n_instances``."""
        return self._at(lam_i, n_instances)[0]

    def wall_at(self, lam_i: float, n_instances: int = 1) -> np.ndarray:
        """Y_j (``_at``): prompt j's own time in prefill at per-instance rate ``lam_i`` in a role of ``n_instances``,
        its last chunk's step whole (module docstring)."""
        return self._at(lam_i, n_instances)[1]

    def _at(self, lam_i: float, n_instances: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """(X_j, Y_j) at per-instance rate ``lam_i`` in a role of P = ``n_instances`` (module docstring): the last
        chunk r_j = p_j mod B (or p_j) shares its step with the e = min(K̄ - 1, m - 1) E[p] (at most B - r_j) tokens
        of the K̄ - 1 = q λ_i t̄ prompts routed to the busy instance during the step before,
        t̄ = f(K̄, 0, min(B, E[r] + (K̄ - 1) E[p]), 0, 0) and q = C(P, P ρ_p) / ρ_p (the least-outstanding router
        sends a prompt to a busy instance only when all P are busy; 1 at P = 1 and when ρ_p >= 1), ρ_p = λ_i E[X]
        (a fixed point, by iteration):

            X_j = floor(p_j / B) f(1, 0, B, 0, 0) + r_j / (r_j + e) f(K̄, 0, r_j + e, 0, 0) + α p_j²

        and Y_j the same with the last step whole (S_alone,j at λ_i -> 0; full chunks share no step)."""
        key = (lam_i, max(1, int(n_instances)))
        if key not in self._memo:
            self._memo[key] = self._solve_at(lam_i, key[1])
        return self._memo[key]

    @cached_property
    def _memo(self) -> dict:
        """(X_j, Y_j) by (λ_i, P): count searches ask for the same counts with other after-times."""
        return {}

    def _solve_at(self, lam_i: float, n_instances: int) -> tuple[np.ndarray, np.ndarray]:
        """``_at``'s fixed point in (t̄, ρ_p)."""
        eng = self.engine
        budget = float(eng.limits.max_num_batched_tokens)
        seqs_cap = float(eng.limits.max_num_seqs)
        p, w = self.prompt_tokens, self.weight
        n_full = np.floor(p / budget)
        rest = p - n_full * budget
        n_full, rest = np.where(rest > 0, n_full, n_full - 1), np.where(rest > 0, rest, budget)
        chunked = n_full >= 1
        mean_p, mean_rest = self.mean_prompt_tokens, float(w @ rest)
        full = n_full * float(eng.step_s(1, 0, budget, 0, 0)) + self.attention_s

        def parts(others: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            extra = np.minimum(others * mean_p, budget - rest)
            last = eng.step_s(1.0 + others, 0, rest + extra, 0, 0)
            return full + rest / (rest + extra) * last, full + last

        # a one-chunk prompt that waited arrived during a step, length-biased: E[T²] / E[T] = t̄ (1 + Cs²_T), Cs²_T
        # of a last chunk's step alone
        alone = eng.step_s(1, 0, rest, 0, 0)
        mean_alone = float(w @ alone)
        bias = 1.0 + float(w @ (alone - mean_alone) ** 2) / mean_alone**2 if mean_alone > 0 else 1.0

        def shares(rho: float) -> np.ndarray:
            single, chained = _router_shares(n_instances, rho)
            return np.where(chunked, chained, bias * single)

        step = float(eng.step_s(1, 0, mean_rest, 0, 0))
        rho = lam_i * self.mean_service_s
        for _ in range(_BISECT_ITERS):
            q = shares(rho)
            others = min(float(w @ q) * lam_i * step, seqs_cap - 1.0)
            new = float(eng.step_s(1.0 + others, 0, min(budget, mean_rest + others * mean_p), 0, 0))
            new_rho = lam_i * float(w @ parts(np.minimum(q * lam_i * step, seqs_cap - 1.0))[0])
            if abs(new - step) <= 1e-12 + 1e-9 * step and abs(new_rho - rho) <= 1e-9 * max(rho, 1e-12):
                break
            step, rho = new, 0.5 * (rho + new_rho)  # damped: sharing lowers ρ_p, and a lower ρ_p less sharing
        return parts(np.minimum(shares(rho) * lam_i * step, seqs_cap - 1.0))

    def state(self, lam: float, n_instances: int, after_s, p: float, arrival_cv2: float = 1.0) -> PrefillState:
        """The role of ``n_instances`` at fleet rate ``lam`` (module docstring): ρ_p, the wait's P(W > t) =
        A e^{-k t} and the p-quantile of W + Y_j + ``after_s`` (``queueing.ttft``, exact for the sum)."""
        n = int(n_instances)
        lam_i = lam / n
        x, own = self._at(lam_i, n)
        mean = float(self.weight @ x)
        cs2 = float(self.weight @ (x - mean) ** 2) / mean**2
        rho = lam_i * mean
        if not rho < 1.0:
            return PrefillState(n, rho, mean, cs2, 1.0, 0.0, math.inf, math.inf)
        mass = float(erlang_c(n, lam * mean))
        # conditional mean wait: the pooled queue's, plus the residual of one instance's prompt in place of the
        # first of P to finish (the router counts prompts, not their work)
        # (bursts of arrivals widen both by Kimura's (Ca² + Cs²) / 2)
        scale = mean * (arrival_cv2 + cs2) / 2.0 * (1.0 / (n * (1.0 - rho)) + 1.0 - 1.0 / n)
        # the pooled queue's second moment (Takács): E[X³] / (3 E[X²]) in place of E[X²] / (2 E[X]), shared by P
        m2, m3 = float(self.weight @ x**2), float(self.weight @ x**3)
        decay = 1.0 / max(scale + (m3 / (3.0 * m2) - m2 / (2.0 * mean)) / n, 0.5 * scale)
        t0 = own + np.broadcast_to(np.asarray(after_s, dtype=np.float64), self.alone_s.shape)
        order = np.argsort(t0, kind="stable")
        zero = ZeroWaitTtft(t0[order], self.weight[order])
        ttft_p = float(ttft_quantile_s(np.array([mass]), np.array([decay]), zero, p)[0])
        wait_p = float(np.log(mass / (1.0 - p)) / decay) if mass > 1.0 - p else 0.0
        return PrefillState(n, rho, mean, cs2, mass, decay, wait_p, ttft_p)

    def zero_wait_quantile_s(self, after_s, p: float) -> float:
        """The p-quantile of S_alone,j + ``after_s`` with no queue: the floor no count beats."""
        t0 = self.alone_s + np.broadcast_to(np.asarray(after_s, dtype=np.float64), self.alone_s.shape)
        order = np.argsort(t0, kind="stable")
        return ZeroWaitTtft(t0[order], self.weight[order]).quantile_s(p)


@dataclass(frozen=True)
class PrefillState:
    """A prefill role of ``n_instances``: load ρ_p, E[X] and Cs² of X, the wait's A and k (1/s), the
    p-quantile of the wait and of W + S_alone + after (seconds)."""

    n_instances: int
    rho: float
    mean_service_s: float
    cs2: float
    wait_mass: float
    wait_decay_per_s: float
    wait_p_s: float
    ttft_p_s: float


def _router_shares(n_instances: int, rho: float) -> tuple[float, float]:
    """(q_1, q_2) of ``PrefillRole._at``: the prompts riding a prompt's last step, over λ_i t̄, for a prompt of one
    chunk (it waited, C(P, P ρ), and the least-outstanding router put others behind it only while every instance
    held a prompt waiting, ρ^(P - 1): ρ at P = 1) and for one whose step before was its own chunk (the router sends
    a prompt to its busy instance while all P are busy: C(P, P ρ) / ρ per second it is busy; 1 at P = 1); both 1
    when ρ >= 1 (every instance always busy)."""
    if not rho < 1.0:
        return 1.0, 1.0
    if rho <= 0.0:
        return 0.0, 1.0 if n_instances == 1 else 0.0
    if n_instances == 1:
        return rho, 1.0
    c = float(erlang_c(n_instances, n_instances * rho))
    return c * rho ** (n_instances - 1), min(1.0, c / rho)


def _slots_full(cap: float, mean: float, elasticity: float) -> float:
    """P(N >= cap) for the held slots N of mean ``mean`` and variance mean / (1 - g) (module docstring): a
    negative binomial, Poisson at g <= 0; 1 when g >= 1 (no restoring drift)."""
    if mean <= 0.0:
        return 0.0
    g = min(max(elasticity, 0.0), 1.0)
    if g >= 1.0:
        return 1.0
    from scipy import stats  # here, not at import: half a second that co-located runs never need

    if g <= _POISSON_ELASTICITY:  # r = mean (1 - g) / g overflows as g -> 0; the variance is Poisson's to 1e-9
        return float(stats.poisson.sf(cap - 1.0, mean))
    r = mean * (1.0 - g) / g  # Var = mean + mean² / r = mean / (1 - g)
    return float(stats.nbinom.sf(cap - 1.0, r, r / (r + mean)))


@dataclass(frozen=True)
class DecodeState:
    """A decode role of ``n_instances`` at the fleet rate: operating batch n*, mean step t_d(n*), slot load
    ρ_d, mean slot wait, mean first-decode time (R + t_d(n* + 1)) and the P-quantile TPOT (seconds)."""

    n_instances: int
    batch: float
    step_s: float
    slot_load: float
    slot_wait_s: float
    first_decode_s: float
    tpot_p_s: float
    stable: bool
    slot_full: float = 0.0  # P(N >= b): an instance's slots all held (module docstring)


@dataclass(frozen=True, eq=False)
class DecodeRole:
    """A decode-only instance (``engine``; ``limits.max_num_seqs`` = the batch cap b) and the requests'
    decode-side moments (module docstring)."""

    engine: EngineModel
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    weight: np.ndarray
    mean_output_tokens: float
    context_tokens: float  # κ

    @classmethod
    def of(cls, engine: EngineModel, prompt_tokens, output_tokens, weight) -> DecodeRole:
        p = np.maximum(np.asarray(prompt_tokens, dtype=np.float64), 1.0)
        o = np.maximum(np.asarray(output_tokens, dtype=np.float64), 1.0)
        w = _normalised(weight)
        mean_o = float(w @ o)
        kappa = float(w @ (o * p + o * (o - 1) / 2)) / mean_o
        return cls(engine, p, o, w, mean_o, kappa)

    def step_s(self, n) -> np.ndarray:
        """t_d(n) = f(n, n, 0, n κ, 0)."""
        n = np.asarray(n, dtype=np.float64)
        return self.engine.step_s(n, n, 0.0, n * self.context_tokens, 0.0)

    def batch_cap(self, tpot_target_s: float, kv_blocks: int | None = None, ranks: int = 1) -> int:
        """The largest b with t_d(b) <= the TPOT target whose b sequences of κ tokens fit the KV blocks
        (the engine's unless given); 0 when one sequence does not.

        With ``ranks`` attention-DP ranks (``perf.dp_instance``: the instance's batch split evenly over its
        ranks) each rank schedules its own batch from its own KV cache, so the limits are a rank's: b is
        ``ranks`` x a whole per-rank batch (vLLM's ``max_num_seqs`` per DP rank, SGLang's
        ``max_running_requests`` over ``dp_size``) whose b / ranks sequences fit one rank's blocks / ranks
        (b below ``ranks``: one sequence on some ranks, the others idle)."""
        lim = self.engine.limits
        blocks = lim.kv_blocks if kv_blocks is None else kv_blocks
        ranks = max(1, int(ranks))
        per_seq = max(1, math.ceil(self.context_tokens / lim.block_size_tokens))
        n_kv = ranks * int((blocks // ranks) // per_seq) if ranks > 1 else int(blocks // per_seq)
        if ranks > 1 and n_kv < 1:  # a rank's cache holds no mean context, the instance's may hold a few
            n_kv = min(ranks - 1, int(blocks // per_seq))
        if n_kv < 1:
            return 0
        steps = self.step_s(np.arange(1, n_kv + 1))
        ok = np.flatnonzero(steps <= tpot_target_s * (1.0 + 1e-12))
        b = int(ok[-1] + 1) if ok.size else 0
        return ranks * (b // ranks) if b >= ranks else b

    @cached_property
    def _smoothed(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(grid of mean batches n in [0, b], t̄_d(n), g(n)) on ``_BATCH_GRID`` + 1 points (module docstring:
        the step a member sees, averaged over the batch's fluctuation)."""
        cap = int(self.engine.limits.max_num_seqs)
        grid = np.linspace(0.0, float(cap), _BATCH_GRID + 1)
        k = np.arange(0, cap + 1, dtype=np.float64)
        t_k = self.step_s(k)

        def seen(var_ratio: np.ndarray) -> np.ndarray:
            # the members a member sees: itself and the others, size-biased: 1 + Poisson(n) (var_ratio 1) or
            # 1 + NB(r + 1, q) for N ~ NB(r, q) of mean n and variance n var_ratio; more than b are b
            # (every grid point at once: one row of the pmf per mean batch n)
            out = np.full(grid.size, t_k[min(1, cap)])
            live = grid > 0.0
            poisson = live & (var_ratio <= 1.0 + 1e-9)
            wide = live & ~poisson
            pmf = np.zeros((grid.size, k.size))
            j = k[None, 1:] - 1.0  # others 0..b-1 (k = 0 has none)
            if poisson.any():
                mean = grid[poisson, None]
                pmf[poisson, 1:] = np.exp(j * np.log(mean) - mean - special.gammaln(j + 1.0))
            if wide.any():
                q = 1.0 / var_ratio[wide, None]
                r = grid[wide, None] * q / (1.0 - q) + 1.0
                pmf[wide, 1:] = np.exp(special.gammaln(j + r) - special.gammaln(r) - special.gammaln(j + 1.0)
                                       + r * np.log(q) + j * np.log1p(-q))
            pmf[:, -1] += np.maximum(0.0, 1.0 - pmf.sum(axis=1))
            out[live] = (pmf[live] * t_k[None, :]).sum(axis=1)
            return out

        def elasticity(t_bar: np.ndarray) -> np.ndarray:
            g = grid * np.gradient(t_bar, grid) / np.maximum(t_bar, 1e-30)
            return np.clip(g, 0.0, _MAX_ELASTICITY)

        poisson = seen(np.ones(grid.size))
        g = elasticity(poisson)
        t_bar = seen(1.0 / (1.0 - g))
        return grid, t_bar, elasticity(t_bar)

    @cached_property
    def _pooled_curves(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(t_d(n) interpolated between whole batches, t̄_d(n) at variance ratio 1 (size-biased Poisson), g(n) of
        that, the variance ratio 1 / (1 - g) of ``_smoothed``) on ``_smoothed``'s grid (``mean_step_s``)."""
        grid, _, _ = self._smoothed
        cap = int(self.engine.limits.max_num_seqs)
        k = np.arange(0, cap + 1, dtype=np.float64)
        t_k = self.step_s(k)
        raw = np.interp(grid, k, t_k)
        # the size-biased Poisson curve and its elasticity, as ``_smoothed`` builds them
        live = grid > 0.0
        pmf = np.zeros((grid.size, k.size))
        j = k[None, 1:] - 1.0
        mean = grid[live, None]
        pmf[live, 1:] = np.exp(j * np.log(mean) - mean - special.gammaln(j + 1.0))
        pmf[:, -1] += np.maximum(0.0, 1.0 - pmf.sum(axis=1))
        poisson = np.full(grid.size, t_k[min(1, cap)])
        poisson[live] = (pmf[live] * t_k[None, :]).sum(axis=1)
        g = np.clip(grid * np.gradient(poisson, grid) / np.maximum(poisson, 1e-30), 0.0, _MAX_ELASTICITY)
        return raw, poisson, g, 1.0 / (1.0 - g)

    def _curve(self, n_instances: int) -> np.ndarray:
        """t̄_d on ``_smoothed``'s grid for a role of ``n_instances`` (``mean_step_s``)."""
        grid, t_bar, _ = self._smoothed
        d = max(1, int(n_instances))
        if d == 1:
            return t_bar
        key = ("curve", d)
        if key not in self._memo:
            raw, poisson, _, v_max = self._pooled_curves

            def at(v: np.ndarray) -> np.ndarray:
                # a step linear in n is t_d(n + v) for every v: between the whole-batch step (v = 0), the
                # size-biased Poisson one (v = 1) and the widened one (v = 1 / (1 - g)), linearly in v
                wide = np.where(v_max > 1.0 + 1e-12, (v - 1.0) / np.maximum(v_max - 1.0, 1e-12), 0.0)
                return np.where(v >= 1.0, poisson + wide * (t_bar - poisson), raw + v * (poisson - raw))

            # g of the pooled batch's own curve, from g = 0 (a narrow batch far below a tile step sees the flat step
            # there, not the smoothed cliff one instance's wide batch would cross); a few damped passes
            g = np.zeros(grid.size)
            for _ in range(_POOLED_PASSES):
                curve = at(1.0 / ((1.0 - g) * d))
                g_new = np.clip(grid * np.gradient(curve, grid) / np.maximum(curve, 1e-30), 0.0, _MAX_ELASTICITY)
                g = 0.5 * (g + g_new)
            self._memo[key] = at(1.0 / ((1.0 - g) * d))
        return self._memo[key]

    def mean_step_s(self, n, n_instances: int = 1) -> np.ndarray:
        """t̄_d(n): the mean decode step a member sees at mean batch n in a role of ``n_instances`` (module
        docstring), interpolated."""
        grid = self._smoothed[0]
        return np.interp(np.asarray(n, dtype=np.float64), grid, self._curve(n_instances))

    def operating_batch(self, lam_i: float, n_instances: int = 1) -> float:
        """n*: the smallest root of n = λ_d E[o] t̄_d(n) below the cap b (b when there is none) in a role of
        ``n_instances``: the first sign change on a grid of ``_BATCH_GRID`` points, then bisection."""
        cap = float(self.engine.limits.max_num_seqs)
        load = lam_i * self.mean_output_tokens
        grid, t_bar = self._smoothed[0], self._curve(n_instances)
        gap = load * t_bar - grid
        below = np.flatnonzero(gap <= 0)
        if not below.size:
            return cap
        k = int(below[0])
        if k == 0:
            return 0.0
        lo, hi = float(grid[k - 1]), float(grid[k])
        for _ in range(_BISECT_ITERS // 2):
            mid = 0.5 * (lo + hi)
            if load * float(np.interp(mid, grid, t_bar)) - mid > 0:
                lo = mid
            else:
                hi = mid
        return hi

    @cached_property
    def _memo(self) -> dict:
        """(n*, t̄_d(n*)) and the TPOT quantile by per-instance rate: a count search asks for the same counts
        again with another h_pre, and neither depends on it."""
        return {}

    def _operating(self, lam_i: float, n_instances: int = 1) -> tuple[float, float]:
        key = ("batch", lam_i, n_instances)
        if key not in self._memo:
            n = self.operating_batch(lam_i, n_instances)
            self._memo[key] = (n, float(self.mean_step_s(n, n_instances)))
        return self._memo[key]

    def _tpot_at(self, lam_i: float, n_instances: int, p: float) -> float:
        key = ("tpot", lam_i, n_instances, p)
        if key not in self._memo:
            self._memo[key] = self._tpot_quantile(*self._operating(lam_i, n_instances), p, n_instances)
        return self._memo[key]

    def tpot_p_s(self, lam: float, n_instances: int, p: float) -> float:
        """The P-quantile TPOT of ``n_instances`` at fleet rate ``lam`` (``state``'s, which does not depend on h_pre);
        inf when the operating batch reaches the cap."""
        d = int(n_instances)
        lam_i = lam / d
        n, _ = self._operating(lam_i, d)
        return self._tpot_at(lam_i, d, p) if n < float(self.engine.limits.max_num_seqs) else math.inf

    def slot_load(self, lam: float, n_instances: int, pre_decode_s: float) -> float:
        """ρ_d = λ_d (h_pre + E[o] t_d(b)) / b (module docstring)."""
        cap = float(self.engine.limits.max_num_seqs)
        return lam / n_instances * (pre_decode_s + self.mean_output_tokens * float(self.step_s(cap))) / cap

    def state(self, lam: float, n_instances: int, p: float, pre_decode_s: float) -> DecodeState:
        """The role of ``n_instances`` at fleet rate ``lam``; ``pre_decode_s`` h_pre (slot held before the
        handoff); ``p`` the TPOT percentile level."""
        d = int(n_instances)
        cap = float(self.engine.limits.max_num_seqs)
        lam_i = lam / d
        n, t = self._operating(lam_i, d)
        residence = self.mean_output_tokens * t
        hold = pre_decode_s + residence
        slot_load = self.slot_load(lam, d, pre_decode_s)
        stable = bool(n < cap and slot_load < 1.0)
        wait = math.inf
        if stable:
            c, a = d * int(cap), lam * hold
            wait = float(erlang_c(c, a)) * hold / (c - a)
        first = (1.0 - math.exp(-n)) * 0.5 * t + t
        tpot = self._tpot_at(lam_i, d, p) if stable else math.inf
        g = self._elasticity(n)
        # the decode assignment pools the slots (module docstring): all D b held, of D a_d on average
        full = max(_slots_full(d * cap, d * lam_i * hold, g),
                   self._kv_full(lam_i, t, pre_decode_s, g, d)) if stable else 1.0
        return DecodeState(d, n, t, slot_load, wait, first, tpot, stable, full)

    def _kv_full(self, lam_i: float, t: float, pre_decode_s: float, elasticity: float, n_instances: int = 1) -> float:
        """P(held KV tokens >= the instance's) (module docstring), normal approximation; the members' count
        balanced over ``n_instances`` (its variance a_d / D, the contexts' a_d Var_m(c))."""
        lim = self.engine.limits
        capacity = float(lim.kv_blocks) * float(lim.block_size_tokens)
        p, o, w = self.prompt_tokens, self.output_tokens, self.weight
        mean = lam_i * float(w @ (pre_decode_s * p + o * t * (p + o / 2.0)))
        g = min(max(elasticity, 0.0), 0.99)
        members = lam_i * float(w @ (o * t))  # a_d of the decoding members, and Σ their mean context
        first = lam_i * float(w @ (o * t * (p + o / 2.0)))
        pooled = first * first / members * (1.0 - 1.0 / max(1, int(n_instances))) if members > 0 else 0.0
        var = (lam_i * float(w @ (o * t * (p * p + p * o + o * o / 3.0))) - pooled) / (1.0 - g)
        if var <= 0.0:
            return float(mean >= capacity)
        from scipy import stats  # here, not at import (``_slots_full``)

        return float(stats.norm.sf((capacity - mean) / math.sqrt(var)))

    def elasticity(self, n: float) -> float:
        """g at mean batch n (``_elasticity``): how much a larger batch slows its step, n t̄_d'(n) / t̄_d(n)."""
        return self._elasticity(n)

    def _elasticity(self, n: float) -> float:
        """g = n t̄_d'(n) / t̄_d(n) (module docstring), of the smoothed step (the raw step's tile steps have no
        derivative), at most ``_MAX_ELASTICITY``."""
        grid, _, g = self._smoothed
        return float(np.interp(n, grid, g))

    def _tpot_quantile(self, n: float, t: float, p: float, n_instances: int = 1) -> float:
        """The p-quantile of TPOT over requests with o >= 2 (module docstring)."""
        f = self.engine.step_s
        ctx = n * self.context_tokens
        at = float(f(n, n, 0.0, ctx, 0.0))
        # s_n: one more sequence at fixed context, of the smoothed step (its slope less the context's share)
        per_ctx = float(f(n, n, 0.0, ctx + 1.0, 0.0)) - at  # s_c: one more context token
        grid, t_bar = self._smoothed[0], self._curve(n_instances)
        per_seq = max(float(np.interp(n, grid, np.gradient(t_bar, grid))) - per_ctx * self.context_tokens, 0.0)
        many = self.output_tokens >= 2
        if not many.any():
            return t
        o, w, prompt = self.output_tokens[many], self.weight[many], self.prompt_tokens[many]
        w = w / w.sum()
        window = (o - 1) * t
        # members k in the batch: M/G/∞, Poisson of mean λ_d w_k R_k (Σ = n*), each adding s_n + s_c c̄_k to a step
        # (c̄_k = p_k + o_k / 2) for R_k = o_k t; over a window w a member's share persists R_k / (R_k + w)
        lam_i = n / (self.mean_output_tokens * t)
        resid = self.output_tokens * t
        load = lam_i * self.weight * resid * (per_seq + per_ctx * (self.prompt_tokens + self.output_tokens / 2.0)) ** 2
        grid = np.unique(np.quantile(window, np.linspace(0.0, 1.0, _WINDOW_GRID)))
        var_grid = (load[:, None] * resid[:, None] / (resid[:, None] + grid[None, :])).sum(axis=0)
        sd = np.sqrt(np.interp(window, grid, var_grid))
        # its own context, p_j + o_j / 2 on average over its decode steps, is in every step of its window
        mean = np.maximum(t + per_ctx * (prompt + o / 2.0 - self.context_tokens), 0.5 * t)
        hi = max(float(self.step_s(self.engine.limits.max_num_seqs)), float(mean.max()) + 10.0 * float(sd.max()))
        if not (sd > 0).any():
            return t
        shape = mean * mean / np.maximum(sd * sd, 1e-30)
        scale = mean / shape

        def survival(x: float) -> float:
            return float(w @ special.gammaincc(shape, x / scale))

        q = 1.0 - p
        if survival(hi) > q:
            return hi
        from scipy.optimize import brentq  # here, not at import (``_slots_full``)

        # survival(0) = 1 > q >= survival(hi): Brent's method, a few evaluations where bisection took twenty
        return float(brentq(lambda x: survival(x) - q, 0.0, hi, xtol=1e-7 * hi, rtol=1e-9))
