"""One-line explanations when ``optimize`` finds no fleet: the binding constraint and the fix."""

from __future__ import annotations

from collections.abc import Sequence

from fleetplan.errors import InfeasibleError
from fleetplan.plan.optimize import OptimizeRequest, OptimizeResult
from fleetplan.plan.sweep import Candidate

__all__ = ["infeasible_error", "no_verified_fleet_error"]


def infeasible_error(request: OptimizeRequest, candidates: Sequence[Candidate]) -> InfeasibleError:
    """One-line explanation of why no candidate fits, naming the binding constraint."""
    reasons: dict[str, int] = {}
    for c in candidates:
        text = c.reason or ""
        kind = (
            "prefill"
            if "prefill alone" in text
            else "decode"
            if "decode alone" in text
            else "max-gpus"
            if "max-gpus" in text
            else "unstable"
            if "unstable" in text
            else "other"
        )
        reasons[kind] = reasons.get(kind, 0) + 1
    binding = max(reasons, key=reasons.get) if reasons else "other"
    example = next((c.reason for c in candidates if c.reason), "no candidate")
    fixes = {
        "prefill": "raise --slo-ttft, add a lower --b-short so long prompts get their own pool, or use faster GPUs",
        "decode": "raise --slo-tpot, or use faster GPUs (with --model: a larger --tensor-parallel-size)",
        "max-gpus": "raise --max-gpus or lower --lam",
        "unstable": "raise --max-gpus or lower --lam",
        "other": "relax the SLO or widen the candidate space",
    }
    return InfeasibleError(
        f"no fleet meets P{request.percentile:g} TTFT <= {request.slo_ttft_s * 1e3:g} ms"
        + ("" if request.slo_tpot_s is None else f" and TPOT <= {request.slo_tpot_s * 1e3:g} ms")
        + " at "
        f"{request.rate_per_s:g} req/s within --max-gpus {request.max_gpus}: infeasible up to "
        f"{request.max_gpus} GPUs; binding constraint: {example}; fix: {fixes[binding]}"
    )



def no_verified_fleet_error(request: OptimizeRequest, result: OptimizeResult) -> InfeasibleError:
    """One line when analytic candidates exist but none passed the simulator."""
    reasons = [v.reason for v in result.verification if v.reason]
    return InfeasibleError(
        f"none of the {len(result.verification)} cheapest analytic fleets passed simulation at "
        f"{request.rate_per_s:g} req/s (P99 TTFT <= {request.slo_ttft_s * 1e3:g} ms): "
        f"{reasons[0] if reasons else 'see the table'}; fix: raise --verify-top, raise --max-gpus, relax the SLO "
        "or lower --lam"
    )
