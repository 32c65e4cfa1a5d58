"""Requests the served model cannot take: prompt + output above its ``max_model_len``.

vLLM answers such a request with an error before scheduling it (``fleetplan.models.context``),
so the planner sizes no pool for it (``plan.points.LengthPoints`` caps every pool range at the
limit) and reports how much traffic that is, exactly from the workload's total-length CDF:

* request share ``P(L > M) = 1 - F(M)``;
* token share ``E[L; L > M] / E[L]`` (prompt + output tokens), with the partial first moment
  integrated exactly bin by bin (``LengthCDF`` is uniform within a bin).

The simulator rejects the same requests (``FleetSpec.max_model_len_tokens``) and counts them
(``GroupSummary.n_too_long``); both are shown beside the fleet in every report.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.workload import Workload

__all__ = ["RejectedTraffic", "rejected_traffic"]


@dataclass(frozen=True)
class RejectedTraffic:
    """Traffic above the served model's limit (``max_model_len_tokens`` None: no limit, nothing rejected)."""

    max_model_len_tokens: int | None
    request_share: float
    token_share: float

    @property
    def any(self) -> bool:
        return self.request_share > 0.0


def rejected_traffic(workload: Workload, max_model_len_tokens: int | None) -> RejectedTraffic:
    """Share of ``workload``'s requests and tokens longer than ``max_model_len_tokens`` (module docstring).

    Raises ``ConfigError`` when every request is longer (no fleet could serve anything).
    """
    if max_model_len_tokens is None:
        return RejectedTraffic(None, 0.0, 0.0)
    cdf = workload.total
    limit = float(max_model_len_tokens)
    share = float(1.0 - cdf.cdf(limit))
    if share >= 1.0:
        raise ConfigError(
            f"every request of workload {workload.name!r} is longer than max_model_len {int(limit):,} tokens "
            f"(shortest {cdf.min_tokens:,.0f}); serve a model with a longer context or pick another workload")
    xs, ps = np.concatenate(([0.0], cdf.tokens)), np.concatenate(([0.0], cdf.fractions))
    a, b, p = xs[:-1], xs[1:], np.diff(ps)
    lo = np.clip(limit, a, b)  # the part of each bin above the limit is (lo, b]
    above = np.divide(p * (b * b - lo * lo), 2.0 * (b - a), out=np.zeros_like(p), where=b > a)
    token_share = float(above.sum() / cdf.mean()) if share > 0 else 0.0
    return RejectedTraffic(int(max_model_len_tokens), share, token_share)
