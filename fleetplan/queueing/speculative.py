"""Speculative decoding (MTP, draft models) in the analytic engine model: a step per output token.

The simulator's speculative step (``fleetplan.sim._kernels.features.timing``) of a batch whose ``n_d``
decoding requests each draft ``k`` tokens is the verify step -- every decode plus a ``k``-token chunk at
its context, in the token budget and the attention work -- plus ``k`` draft passes over the decodes:

    T(n_seqs, n_d, x, C, A) = f(n_seqs, n_d, x + k n_d, C, A + 2 k C + n_d k²) + k g(n_d, n_d, 0, C, 0)

(f the pool's step model, g the draft's: ``StepTimePredictor.mtp_draft_coefficients`` for MTP; C the
decodes' summed context, Σ_r k (2 c_r + k) = 2 k C + n_d k²).  A step emits
E = 1 + Σ_j Π_{i<=j} a_i tokens per decoding request (``fleetplan.perf.speculative``), so a request
of d output tokens decodes for d / E steps.  ``fleetplan.queueing.engine`` counts d decode steps of
t_d(n) = f(n, n, 0, C, 0) and prices a prefill chunk by the step it lengthens; this model gives it

    step_s(n_seqs, n_d, 0, C, A) = T(n_seqs, n_d, 0, C, A) - (1 - 1/E) T(n_d, n_d, 0, C, 0)   (no prompt chunk)
    step_s(n_seqs, n_d, x, C, A) = T(n_seqs, n_d, x, C, A)                                 (x > 0),

i.e. a decode step t_d = T_d / E per output token (the decode life d T_d / E, Little's law for the
batch and the TPOT mean all follow), and a step with a prompt chunk a whole speculative step: a prompt's
k prefill steps cost k t_d + sum(T(x) - t_d) = sum T(x), and the prefill server's full-budget step is
T(B - n), the time it holds the engine.  The price: a chunk displaces T(x) - T_d / E of decode time rather
than T(x) - T_d (TPOT a little pessimistic).  With the per-token discount on chunk steps too (as first
built) an MTP pool's prefill capacity came out high: on the agreement benchmark's
``deepseek-v3-h200-mtp`` set-up 7 % of simulated P99 TTFT within ±25 % of the analytic, 39 beyond 2x
(fleets overloaded at the analytic count); with whole chunk steps 89 %, none beyond 2x (TPOT 100 % -> 91 %
within ±25 %, range 0.51-0.98).  Left approximate (expectation form): the acceptance's own variance in the
TPOT and the token budget a step's drafts use (vLLM counts them; the engine model chunks B - n tokens).

Wired into the sweep: ``fleetplan.plan.pools.engine_of`` returns ``with_speculation(EngineModel.of(step, limits),
step)``, which is ``speculative_engine`` with the draft coefficients the simulator compiles
(``fleetplan.sim.features.compile``) for a pool whose step model is an "MTP on" candidate
(``perf.speculative.MtpStepModel``, ``plan.placement``), the plain engine otherwise; every ``EngineProfile``
computation then reads it unchanged (``tests/plan/test_mtp_agreement.py``: P99 TPOT of a DeepSeek-V3 H200
TP8 MTP pool, simulated / analytic 0.86-0.93).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.perf.linear import step_time_array_s
from fleetplan.perf.speculative import expected_tokens_per_step

__all__ = ["SpeculativeEngineModel", "mtp_engine", "speculative_engine", "with_speculation"]


@dataclass(frozen=True, eq=False)
class SpeculativeEngineModel:
    """An ``EngineModel`` whose decode step is per output token (module docstring); ``limits``,
    ``step_code`` and ``step_coef`` are the plain engine's."""

    base: object  # EngineModel
    num_speculative_tokens: int
    tokens_per_step: float
    draft_code: int
    draft_coef: np.ndarray

    @property
    def limits(self):
        return self.base.limits

    @property
    def step_code(self) -> int:
        return self.base.step_code

    @property
    def step_coef(self) -> np.ndarray:
        return self.base.step_coef

    @property
    def api(self):
        """The plain engine's API server cost (drafting does not change the API server's work)."""
        return self.base.api

    def speculative_step_s(self, n_seqs, n_decode, prefill_tokens, ctx_tokens, attn2) -> np.ndarray:
        """T: the simulator's step with every decode drafting k (module docstring)."""
        k = self.num_speculative_tokens
        n_d = np.asarray(n_decode, dtype=np.float64)
        ctx = np.asarray(ctx_tokens, dtype=np.float64)
        verify = self.base.step_s(n_seqs, n_d, np.asarray(prefill_tokens, dtype=np.float64) + k * n_d, ctx,
                                  np.asarray(attn2, dtype=np.float64) + 2.0 * k * ctx + n_d * k * k)
        return verify + k * step_time_array_s(self.draft_code, self.draft_coef, n_d, n_d, 0.0, ctx, 0.0)

    def step_s(self, n_seqs, n_decode, prefill_tokens, ctx_tokens, attn2) -> np.ndarray:
        """T minus (1 - 1/E) of the decodes' own speculative step when no prompt chunk runs (per output
        token); T itself when one does (module docstring: a prompt's prefill steps are whole steps)."""
        decode = self.speculative_step_s(n_decode, n_decode, 0.0, ctx_tokens, 0.0)
        alone = np.asarray(prefill_tokens, dtype=np.float64) <= 0.0
        return (self.speculative_step_s(n_seqs, n_decode, prefill_tokens, ctx_tokens, attn2)
                - np.where(alone, 1.0 - 1.0 / self.tokens_per_step, 0.0) * decode)


def speculative_engine(engine, acceptance: tuple[float, ...], draft_code: int,
                       draft_coef) -> SpeculativeEngineModel:
    """``engine`` (an ``EngineModel``) drafting ``len(acceptance)`` tokens per step with conditional
    acceptances ``acceptance`` and draft pass ``(draft_code, draft_coef)`` (the simulator's)."""
    if not acceptance:
        raise ConfigError("speculative engine: acceptance is empty; give one conditional acceptance per draft "
                          "position (num_speculative_tokens >= 1)", param="acceptance", value=acceptance)
    return SpeculativeEngineModel(engine, len(acceptance), expected_tokens_per_step(tuple(acceptance)),
                                  int(draft_code), np.array(draft_coef, dtype=np.float64))


def mtp_engine(engine, predictor, acceptance: tuple[float, ...]) -> SpeculativeEngineModel:
    """``engine`` with MTP drafts of ``predictor`` (a ``StepTimePredictor``: ``mtp_draft_coefficients``)."""
    return speculative_engine(engine, acceptance, *predictor.mtp_draft_coefficients())


def with_speculation(engine, step_model):
    """``engine`` (an ``EngineModel`` of ``step_model``) with MTP where ``step_model`` or a wrapper under it is
    a ``perf.speculative.MtpStepModel`` (the planner's "MTP on" candidate), else ``engine`` unchanged: the
    hook ``plan.pools.engine_of`` calls so that both phases time MTP candidates alike.  The draft pass is
    ``MtpStepModel.draft_coefficients`` (the predictor's ``mtp_draft_coefficients``; a measured step's share)
    mapped through the wrappers above the MTP marker (a DP instance's batch split), as the simulator's
    ``sim.features.compile`` maps it."""
    from fleetplan.perf.speculative import MtpStepModel

    wrappers, step = [], step_model  # outermost first, down to the predictor
    while getattr(step, "base", None) is not None:
        wrappers.append(step)
        step = step.base
    mtp = next((w for w in wrappers if isinstance(w, MtpStepModel)), None)
    if mtp is None:
        return engine
    code, coef = mtp.draft_coefficients()  # the predictor's draft, or a measured step's share
    for wrapper in reversed(wrappers):  # innermost first, as the simulator's compile maps a rank's pass
        code, coef = _as_seen_by(wrapper, code, coef)
    return speculative_engine(engine, mtp.acceptances, code, coef)


def _as_seen_by(wrapper, code: int, coef) -> tuple[int, np.ndarray]:
    """A rank's pass through one wrapper: a slowdown's factor, a DP instance's batch split."""
    from fleetplan.perf.scaled import ScaledStepModel, scale_step_coefficients

    if isinstance(wrapper, ScaledStepModel):
        return code, scale_step_coefficients(code, coef, wrapper.factor)
    return wrapper.instance_coefficients(code, coef)
