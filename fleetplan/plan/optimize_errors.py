"""One-line explanations when ``optimize`` finds no fleet: the binding constraint and the fix.

The binding constraint is the most common reason code (``fleetplan.errors.REASONS``) among the
candidates, as the sweep, the pool sizing and the verifier recorded it (``Candidate.reason_code``);
the error carries it as ``InfeasibleError.reason`` for a front end to give its own fix hint.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from fleetplan.errors import InfeasibleError
from fleetplan.plan.optimize import OptimizeRequest, OptimizeResult
from fleetplan.plan.sweep import Candidate
from fleetplan.units import fmt_ms

__all__ = ["infeasible_error", "no_verified_fleet_error", "FIX_OF_REASON"]

#: The fix for each binding constraint, in the Python API's parameter names.
FIX_OF_REASON = {
    "prefill-alone": "raise `slo_ttft_s`, add a lower `thresholds_tokens` so long prompts get their own pool, "
                     "or use faster GPUs",
    "decode": "raise `slo_tpot_s`, or use faster GPUs (with a served model: a larger `tensor_parallel_size`)",
    "max-gpus": "raise `max_gpus` or lower `rate_per_s`",
    "unstable": "raise `max_gpus` or lower `rate_per_s`",
    "verification-failed": "raise `top_k`, raise `max_gpus`, relax the SLO or lower `rate_per_s`",
    "prefill-bound": "the percentile is set by prompts' own prefill, not by queueing: raise `slo_ttft_s`, use "
                     "faster GPUs (with a served model: a larger `tensor_parallel_size`), raise "
                     "`max_num_batched_tokens`, or serve a shorter `max_model_len_tokens`",
    "other": "relax the SLO or widen the candidate space",
}


def binding_reason(candidates: Sequence[Candidate]) -> str:
    """The most common reason code among ``candidates`` (a candidate without one counts as ``"other"``).

    Ties go to the code met first, in the order the sweep gave the candidates."""
    counts = Counter(c.reason_code or "other" for c in candidates)
    return counts.most_common(1)[0][0] if counts else "other"


def infeasible_error(request: OptimizeRequest, candidates: Sequence[Candidate]) -> InfeasibleError:
    """One-line explanation of why no candidate fits, naming the binding constraint."""
    binding = binding_reason(candidates)
    example = next((c.reason for c in candidates if c.reason), "no candidate")
    return InfeasibleError(
        f"no fleet meets P{request.percentile:g} TTFT <= {fmt_ms(request.slo_ttft_s)}"
        + ("" if request.slo_tpot_s is None else f" and TPOT <= {fmt_ms(request.slo_tpot_s)}")
        + " at "
        f"{request.rate_per_s:g} req/s within `max_gpus` {request.max_gpus}: infeasible up to "
        f"{request.max_gpus} GPUs; binding constraint: {example}",
        param="max_gpus", value=request.max_gpus, reason=binding, fix=FIX_OF_REASON[binding],
    )


def no_verified_fleet_error(request: OptimizeRequest, result: OptimizeResult) -> InfeasibleError:
    """One line when analytic candidates exist but none passed the simulator."""
    failed = [v for v in result.verification if v.reason]
    codes = {v.reason_code for v in failed}
    # every candidate prefill-bound: no count helps, say what would; otherwise the general fix
    code = "prefill-bound" if codes == {"prefill-bound"} else "verification-failed"
    closest = min(failed, key=lambda v: v.cost_usd_per_year) if failed else None
    return InfeasibleError(
        f"none of the {len(result.verification)} cheapest analytic fleets passed simulation at "
        f"{request.rate_per_s:g} req/s (P99 TTFT <= {fmt_ms(request.slo_ttft_s)}): "
        + (f"the cheapest, candidate {closest.rank}: {closest.reason}" if closest else "see the table"),
        reason=code, fix=FIX_OF_REASON[code],
    )
