"""The API server in the analytic model: a utilisation constraint, its wait and the prompt's tokenisation.

The same model as the simulator's stage (``fleetplan.sim.api_server``; costs ``fleetplan.perf.api_server``):
each of a pool's G instances has ``n`` API server processes, request j holds one for
``t_j = s_per_request + s_per_token (p_j + o_j)`` and reaches the engine after its wait for a process and
its tokenisation ``s_per_token p_j``.  The pool's load balancer hands a request to a free process, so the
pool's G n processes are one FCFS queue.  Over the pool's request points (weights w_j), at pool rate
λ = G λ_i:

    E[t] = Σ w_j t_j,   Cs² = Σ w_j t_j² / E[t]² - 1,   a = λ E[t],   ρ_api = a / (G n) = λ_i E[t] / n  (< 1)

and the wait is Allen-Cunneen's M/G/c approximation with c = G n and the Erlang-C probability of
waiting (``fleetplan.queueing.erlang``; exact for exponential service, Kingman's for c = 1):

    W_api = C(c, a) E[t] / (c - a) · (Ca² + Cs²) / 2.

So TTFT_j gains ``W_api + s_per_token p_j`` and the instance's rate is capped at ``n / E[t]``.

Hook for ``fleetplan.queueing.engine`` (the lead wires it): ``ApiServerLoad.of(cost, prompt, output,
weight)`` once per pool; ``utilisation(λ_i)`` joins ρ = max(ρ_s, ρ_p, ρ_api) and the sizing test,
``mean_wait_s(λ, G)`` and ``cost.tokenize_s(p_j)`` add to each TTFT point.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.perf.api_server import ApiServerCost
from fleetplan.queueing.erlang import erlang_c

__all__ = ["ApiServerLoad"]


@dataclass(frozen=True, eq=False)
class ApiServerLoad:
    """One pool's API server work per request: ``cost`` and the moments of ``t_api`` over its request points."""

    cost: ApiServerCost
    mean_busy_s: float
    busy_cs2: float

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
        return cls(cost, mean, cs2)

    @property
    def max_rate_per_s(self) -> float:
        """Requests per second one instance's API servers can take, ``n / E[t]``."""
        return self.cost.max_rate_per_s(self.mean_busy_s)

    def utilisation(self, lam_i) -> np.ndarray:
        """ρ_api = λ_i E[t] / n per instance rate ``lam_i`` (0 when not modelled)."""
        return np.asarray(lam_i, dtype=np.float64) * self.mean_busy_s / self.cost.n_servers

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
