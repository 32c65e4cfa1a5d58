"""The API server in the analytic model: a utilisation constraint, its wait and the prompt's tokenisation.

The same model as the simulator's stage (``fleetplan.sim.api_server``; costs ``fleetplan.perf.api_server``):
each of a pool's G instances has ``n`` API server processes, request j holds one for
``t_j = s_per_request + s_per_token (p_j + o_j) + s_per_output_chunk ceil(o_j / stream_interval)``
(``fleetplan.perf.api_server``) and reaches the engine after its wait for a process and
its tokenisation ``s_per_token p_j``.  The pool's load balancer hands a request to a free process, so the
pool's G n processes are one FCFS queue.  Over the pool's request points (weights w_j), at pool rate
λ = G λ_i:

    E[t] = Σ w_j t_j,   Cs² = Σ w_j t_j² / E[t]² - 1,   a = λ E[t],   ρ_api = a / (G n) = λ_i E[t] / n  (< 1)

and the wait is Allen-Cunneen's M/G/c approximation with c = G n and the Erlang-C probability of
waiting (``fleetplan.queueing.erlang``; exact for exponential service, Kingman's for c = 1):

    W_api = C(c, a) E[t] / (c - a) · (Ca² + Cs²) / 2.

For the TTFT's tail the wait is taken as a distribution, not its mean: 0 with probability
1 - C(c, a), else exponential with the decay rate θ of the exact M/G/1 tail P(W > x) ~ e^{-θx}
(Cramér-Lundberg) for one server c times as fast (service t_j / c), the root θ > 0 of

    λ (Σ w_j exp(θ t_j / c) - 1) = θ,

scaled by (1 + Cs²) / (Ca² + Cs²) for non-Poisson arrivals (the diffusion limit's dependence on Ca²).
Its heavy-traffic limit is Allen-Cunneen's 2 (c - a) / (E[t] (Ca² + Cs²)); at light load it decays much
faster for the API server's near-constant t (M/D/1 at ρ = 0.13: θ = 262/s against 2 (1 - ρ) / t = 139/s),
which the simulator's P99 follows (``benchmarks/bench_api_server_tail.py``).

So TTFT_j gains ``W_api + s_per_token p_j`` and the instance's rate is capped at ``n / E[t]``.

Hook for ``fleetplan.queueing.engine`` (the lead wires it): ``ApiServerLoad.of(cost, prompt, output,
weight)`` once per pool; ``utilisation(λ_i)`` joins ρ = max(ρ_s, ρ_p, ρ_api) and the sizing test,
``mean_wait_s(λ, G)`` and ``cost.tokenize_s(p_j)`` add to each TTFT point.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.memo import IdentityMemo
from fleetplan.perf.api_server import ApiServerCost
from fleetplan.queueing.erlang import erlang_c

__all__ = ["ApiServerLoad"]


@dataclass(frozen=True, eq=False)
class ApiServerLoad:
    """One pool's API server work per request: ``cost`` and the moments of ``t_api`` over its request points."""

    cost: ApiServerCost
    mean_busy_s: float
    busy_cs2: float
    busy_points_s: np.ndarray  # (J,) t_j
    busy_weight: np.ndarray  # (J,) w_j, summing to 1

    @classmethod
    def of(cls, cost: ApiServerCost, prompt_tokens, output_tokens, weight) -> ApiServerLoad:
        t = np.atleast_1d(cost.busy_s(prompt_tokens, output_tokens))
        w = np.asarray(weight, dtype=np.float64)
        if w.shape != t.shape or not (np.all(np.isfinite(w) & (w >= 0)) and w.sum() > 0):
            raise ConfigError("API server load: weights must match the request points, be finite, >= 0 and have a "
                              "positive sum")
        w = w / w.sum()
        mean = float(w @ t)
        cs2 = max(float(w @ t**2) / mean**2 - 1.0, 0.0) if mean > 0 else 0.0
        return cls(cost, mean, cs2, t, w)

    @property
    def max_rate_per_s(self) -> float:
        """Requests per second one instance's API servers can take, ``n / E[t]``."""
        return self.cost.max_rate_per_s(self.mean_busy_s)

    def utilisation(self, lam_i) -> np.ndarray:
        """ρ_api = λ_i E[t] / n per instance rate ``lam_i`` (0 when not modelled)."""
        return np.asarray(lam_i, dtype=np.float64) * self.mean_busy_s / self.cost.n_servers

    def wait_probability(self, lam_per_s, n_instances) -> np.ndarray:
        """P(W_api > 0) = C(c, a), Erlang C with c = ``n_instances`` x n (1 where ρ_api >= 1; 0 when not modelled)."""
        lam = np.asarray(lam_per_s, dtype=np.float64)
        g = np.asarray(n_instances)
        if self.mean_busy_s == 0.0:
            return np.zeros(np.broadcast(lam, g).shape)
        key = self._memo_key("C", lam, g, 0.0)
        hit = _MEMO.get((self,), key)
        if hit is not None:
            return hit
        n = g.astype(np.int64) * self.cost.n_servers
        a = lam * self.mean_busy_s
        stable = a < n
        return self._remember(key, np.where(stable, erlang_c(n, np.where(stable, a, 0.0)), 1.0))

    def _memo_key(self, kind: str, lam: np.ndarray, g: np.ndarray, arrival_cv2: float) -> tuple:
        """What ``_MEMO`` keys a figure by besides this load (by identity): the exact arguments."""
        return (kind, lam.tobytes(), lam.shape, g.tobytes(), g.shape, g.dtype.str, float(arrival_cv2))

    def _remember(self, key: tuple, out: np.ndarray) -> np.ndarray:
        out.flags.writeable = False
        return _MEMO.put((self,), key, out)

    def wait_decay_per_s(self, lam_per_s, n_instances, arrival_cv2: float = 1.0) -> np.ndarray:
        """θ: the rate of the wait's exponential tail (module docstring); 0 where ρ_api >= 1, inf when
        not modelled."""
        lam = np.asarray(lam_per_s, dtype=np.float64)
        g = np.asarray(n_instances)
        shape = np.broadcast(lam, g).shape
        if self.mean_busy_s == 0.0:
            return np.full(shape, np.inf)
        key = self._memo_key("theta", lam, g, arrival_cv2)
        hit = _MEMO.get((self,), key)
        if hit is not None:
            return hit
        lam_b = np.broadcast_to(lam, shape).ravel()
        c = (np.broadcast_to(g, shape).ravel().astype(np.int64) * self.cost.n_servers).astype(np.float64)
        stable = lam_b * self.mean_busy_s < c
        theta = _cramer_lundberg_root(lam_b / c, self.busy_points_s, self.busy_weight, self.mean_busy_s, stable) * c
        scale = (1.0 + self.busy_cs2) / (arrival_cv2 + self.busy_cs2)
        return self._remember(key, np.where(stable, theta * scale, 0.0).reshape(shape))

    def mean_wait_s(self, lam_per_s, n_instances, arrival_cv2: float = 1.0) -> np.ndarray:
        """Allen-Cunneen's mean wait for one of the pool's ``n_instances`` x n processes at pool rate
        ``lam_per_s`` (module docstring); ``inf`` where ρ_api >= 1."""
        lam = np.asarray(lam_per_s, dtype=np.float64)
        g = np.asarray(n_instances)
        if not np.all((g >= 1) & (g == np.floor(g))):
            raise ConfigError(f"n_instances={n_instances!r} must be whole numbers >= 1", param="n_instances",
                              value=n_instances)
        if self.mean_busy_s == 0.0:
            return np.zeros(np.broadcast(lam, g).shape)
        n = g.astype(np.int64) * self.cost.n_servers
        a = lam * self.mean_busy_s
        stable = a < n
        a_ok = np.where(stable, a, 0.0)
        wait = erlang_c(n, a_ok) * self.mean_busy_s / (n - a_ok) * (arrival_cv2 + self.busy_cs2) / 2.0
        return np.where(stable, wait, np.inf)


#: Figures ``ApiServerLoad.wait_probability`` and ``wait_decay_per_s`` keep, by load object and arguments: a
#: sweep sizes the same points at the same rate on many GPU types (one ``ApiServerLoad`` for all,
#: ``fleetplan.queueing.engine``), which meet the same counts (a 70B sweep: 8,035 θ calls, 5,079
#: different).  The same call's arrays (read-only): the counts of one call stay together, as the root's
#: matrix products saw them.
MEMO_SIZE = 16384
_MEMO = IdentityMemo(MEMO_SIZE)

#: Newton steps of ``_cramer_lundberg_root`` at most (it converges in about six).
_NEWTON_ITERS = 60


def _cramer_lundberg_root(rate: np.ndarray, t: np.ndarray, w: np.ndarray, mean_t: float,
                          stable: np.ndarray) -> np.ndarray:
    """u > 0 with ``rate`` (Σ w_j exp(u t_j) - 1) = u for each per-server rate (K,) where ``stable``
    (rate E[t] < 1), else 0: θ / c of ``ApiServerLoad.wait_decay_per_s`` (λ (M(θ/c) - 1) = θ divided by c).

    In logs, g(u) = ln(rate (M(u) - 1)) - ln u (M - 1 = Σ w_j expm1(u t_j), no cancellation near 0) rises
    from ln(rate E[t]) < 0 (the ratio (M(u) - 1) / u of a convex M with M(0) = 1 grows) and is nearly
    linear where the longest t_j dominates, so Newton's steps on it are long where those on the plain
    equation, an exponential, crawl.  Doubling from 1 / E[t] brackets the root; safeguarded Newton (a
    step outside the bracket bisects instead) ends when a step moves u by no more than 4 ulps, all
    states at once.  (It replaced a per-state bisection of 140 evaluations that took a fifth of a 70B
    sweep; both end at the root to float precision.)  The doubling evaluates g alone, and Newton's first
    step reuses its last evaluation (the same point)."""
    def g_of(u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """g(u), with u t and M(u) - 1 for its slope."""
        z = u[:, None] * t[None, :]
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            m1 = np.expm1(z) @ w
            return np.log(rate * m1) - np.log(u), z, m1

    def slope_of(u: np.ndarray, z: np.ndarray, m1: np.ndarray) -> np.ndarray:
        """g'(u) = M'(u) / (M(u) - 1) - 1 / u."""
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            return (np.exp(z) @ tw) / m1 - 1.0 / u

    tw = t * w
    hi = np.where(stable, 1.0 / mean_t, 1.0)
    at_hi = None  # g at the bracket's end once it holds every root: Newton's first point (the same values)
    for _ in range(80):  # double until past the root
        g_hi = g_of(hi)
        grow = stable & (g_hi[0] <= 0.0)
        if not grow.any():
            at_hi = g_hi
            break
        hi = np.where(grow, 2.0 * hi, hi)
    lo = np.zeros_like(hi)
    u = hi.copy()
    active = stable.copy()
    for _ in range(_NEWTON_ITERS):
        g, z, m1 = g_of(u) if at_hi is None else at_hi
        at_hi = None
        slope = slope_of(u, z, m1)
        lo, hi = np.where(g <= 0.0, u, lo), np.where(g > 0.0, u, hi)
        with np.errstate(divide="ignore", invalid="ignore"):
            nxt = u - g / slope
        nxt = np.where((slope > 0.0) & (nxt > lo) & (nxt < hi), nxt, 0.5 * (lo + hi))
        active &= (np.abs(nxt - u) > 4.0 * np.spacing(u)) & (g != 0.0)
        u = np.where(active, nxt, u)
        if not active.any():
            break
    return np.where(stable, u, 0.0)
