"""MTP speculative decoding in the step model: the verify step, the draft passes, tokens per step.

DeepSeek-V3 ships ``num_nextn_predict_layers = 1`` multi-token-prediction module: one decoder layer
(an MoE layer), an ``eh_proj`` joining the token embedding and the previous hidden state, and the
shared LM head.  With ``k`` speculative tokens an engine step of ``n`` decoding requests

* runs ``k`` draft passes of that module over the ``n`` decoding requests, each
  ``mtp_draft_pass_s`` = the roofline step of ``StepTimePredictor.mtp_draft_coefficients`` (the decoder
  layer, ``eh_proj`` and the LM head; the simulator's ``draft_coef``, the analytic engine's draft), and
* verifies with the full model, each request passing ``k + 1`` tokens at its context, as vLLM schedules
  it.  In the batch syntax (``verify_batch``) that is the request's decode (its KV read once, by the
  decode-attention term) plus a chunk of ``k`` tokens at offset ``context`` (their GEMM rows, their
  attention FLOPs and their sampling rows; the chunk's own KV read is not charged twice).

With conditional acceptance ``a_j`` of draft position ``j`` (accepted only if every earlier one was), a
step emits on average

    E[tokens] = 1 + sum_{j=1..k} prod_{i<=j} a_i              (the bonus token always)

and the time per output token is ``(verify_s + k draft_s) / E[tokens]``.  ``DEEPSEEK_V3_MTP_ACCEPTANCE``
= 0.85: DeepSeek-V3 Technical Report (arXiv:2412.19437, sec. 5.4.3): "the acceptance rate of the second
token prediction ranges between 85% and 90%", 1.8x tokens per second; the lower end.

**Measured pools** (a base step model fitted to ``aiconfigurator-core``'s tables, ``perf.measured``): the verify
step is the measured step model at the verify width (the same ``verify_batch``: its fitted roofline terms take
the ``k``-token chunks at their context; the tables time decode and prefill shapes, the chunk-at-offset shape is
the fit's interpolation between them), and the draft pass is the measured step scaled by the draft's share of
the work, ``mtp_draft_fraction`` = one MTP layer plus the LM head over the model's active parameters,

    f = (P_layer + V h) / P_active,      P_layer = (P_active - P_embedding) / n_layers,

on the cost terms (the roofline's tile, wave ratio and miss exponent are shapes, ``ROOFLINE_SHAPE_COEFS``): the
tables hold no MTP module to time the draft itself, and the roofline draft would mix a roofline pass into a
measured step.  ``MtpStepModel.draft_coefficients`` gives it to the analytic engine model and
``speculative_json`` writes ``draft_cost_fraction`` = f for the simulator, whose feature compiler applies the same
rule (``sim.features.compile``), so the two phases time the same draft.  The timing source names both parts.

``MtpStepModel`` marks a pool's step model as running MTP (the planner's "MTP on" candidate): its steps are
the base model's (the verify and draft passes are added where the pool is timed: the simulator's feature
kernel from ``speculative_json()``, vLLM's ``speculative_config``; the analytic engine model through
``queueing.speculative.with_speculation``).  The CLI spells it in each engine's launch flags
(``fleetplan.cli.model_options.mtp_launch_flags``: vLLM's speculative config with method mtp, SGLang's EAGLE
speculative algorithm, through which DeepSeek's MTP heads run).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.perf.batch import BatchComposition
from fleetplan.perf.linear import ROOFLINE_SHAPE_COEFS, STEP_MODEL_ROOFLINE, roofline_step_s, step_time_array_s

__all__ = ["DEEPSEEK_V3_MTP_ACCEPTANCE", "MtpStep", "MtpStepModel", "check_mtp_setting", "expected_tokens_per_step",
           "mtp_draft_fraction", "mtp_draft_pass_s", "mtp_of", "mtp_step", "speculative_step", "verify_batch"]

DEEPSEEK_V3_MTP_ACCEPTANCE = 0.85  # DeepSeek-V3 Technical Report sec. 5.4.3 (module docstring)


def expected_tokens_per_step(acceptance: tuple[float, ...]) -> float:
    """``1 + sum_j prod_{i<=j} a_i`` for the conditional acceptances ``a_1..a_k`` (module docstring)."""
    total, reach = 1.0, 1.0
    for j, a in enumerate(acceptance):
        if isinstance(a, bool) or not isinstance(a, int | float) or not (math.isfinite(a) and 0.0 <= a <= 1.0):
            raise ConfigError(f"acceptance[{j}]={a!r} must be a probability in [0, 1] (e.g. 0.85 for DeepSeek-V3 "
                              f"MTP)", param="acceptance", value=a)
        reach *= a
        total += reach
    return total


def verify_batch(batch: BatchComposition, k: int) -> BatchComposition:
    """``batch`` with every decoding request passing ``k + 1`` tokens at its context: its decode plus a
    ``k``-token chunk at offset ``context`` (module docstring; prefill chunks kept)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"num_speculative_tokens={k!r} must be an integer >= 1", param="num_speculative_tokens",
                          value=k)
    ctx = batch.decode_context_tokens
    return BatchComposition(np.concatenate((batch.prefill_tokens, np.full(ctx.size, k))),
                            np.concatenate((batch.prefill_offsets, ctx)), ctx)


@dataclass(frozen=True)
class MtpStep:
    """One speculative step: verify and draft seconds, expected tokens per request, seconds per output token."""

    verify_s: float
    draft_s: float  # all k passes
    tokens_per_step: float
    plain_step_s: float  # the same batch without speculation

    @property
    def s_per_token(self) -> float:
        return (self.verify_s + self.draft_s) / self.tokens_per_step

    @property
    def speedup(self) -> float:
        """Output tokens per second with MTP over without (> 1: MTP pays)."""
        return self.plain_step_s / self.s_per_token


def mtp_draft_fraction(model) -> float:
    """One MTP draft pass's share of a target step for a step model without an operator-level draft (a measured
    or calibrated one): ``(P_layer + V h) / P_active`` (module docstring), at most 1."""
    head, active = model.vocab_size * model.hidden_size, model.n_active_params()
    layer = (active - model.embedding_params()) / model.n_layers
    return min(1.0, (layer + head) / active)


def _scaled_draft(code: int, coef: np.ndarray, fraction: float) -> np.ndarray:
    """A step's coefficients scaled to a draft pass of ``fraction`` of its work (cost terms only)."""
    out = np.asarray(coef, dtype=np.float64) * fraction
    if code == STEP_MODEL_ROOFLINE:
        for i in ROOFLINE_SHAPE_COEFS:
            out[i] = coef[i]
    return out


def mtp_draft_pass_s(predictor, n_decode: int, decode_context_tokens: int) -> float:
    """Seconds of ONE MTP draft pass over ``n_decode`` decoding requests of ``decode_context_tokens`` summed
    context on ``predictor`` (a ``StepTimePredictor``): ``roofline_step_s`` of its ``mtp_draft_coefficients``
    with no prefill, the simulator kernel's draft term."""
    return roofline_step_s(predictor.mtp_draft_coefficients()[1], n_decode, n_decode, 0, decode_context_tokens, 0)


def mtp_step(predictor, batch: BatchComposition, acceptance: tuple[float, ...]) -> MtpStep:
    """The speculative step of ``batch`` with ``len(acceptance)`` MTP drafts on ``predictor``
    (a ``StepTimePredictor``); the drafts run over the decoding requests only."""
    k = len(acceptance)
    draft_s = k * mtp_draft_pass_s(predictor, batch.n_decode, int(batch.decode_context_sum))
    return MtpStep(verify_s=predictor.predict(verify_batch(batch, k)).total_s, draft_s=draft_s,
                   tokens_per_step=expected_tokens_per_step(acceptance), plain_step_s=predictor.predict(batch).total_s)


def _batch_step_s(code: int, coef: np.ndarray, batch: BatchComposition) -> float:
    """A step model's ``(code, coef)`` on ``batch``'s aggregates (the kernel's expression)."""
    return float(step_time_array_s(code, coef, batch.n_seqs, batch.n_decode, batch.n_prefill_tokens,
                                   batch.decode_context_sum, batch.attn2))


def speculative_step(mtp: MtpStepModel, batch: BatchComposition) -> MtpStep:
    """The speculative step of ``batch`` as both phases time ``mtp``'s pool: its base step model at the verify
    width (``verify_batch``) plus ``k`` draft passes of ``MtpStepModel.draft_coefficients`` over the decoding
    requests (for a measured base: the measured step at the verify width and its share per draft, module
    docstring; for a roofline base ``mtp_step``'s figures)."""
    k = mtp.num_speculative_tokens
    code, coef = mtp.base.kernel_coefficients()
    d_code, d_coef = mtp.draft_coefficients()
    n, ctx = float(batch.n_decode), float(batch.decode_context_sum)
    draft_s = k * float(step_time_array_s(d_code, d_coef, n, n, 0.0, ctx, 0.0))
    return MtpStep(verify_s=_batch_step_s(code, coef, verify_batch(batch, k)), draft_s=draft_s,
                   tokens_per_step=mtp.tokens_per_step, plain_step_s=_batch_step_s(code, coef, batch))


def check_mtp_setting(acceptance: float, num_speculative_tokens: int) -> None:
    """``ConfigError`` unless ``num_speculative_tokens`` is an integer >= 1 and ``acceptance`` a probability."""
    k = num_speculative_tokens
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"num_speculative_tokens={k!r} must be an integer >= 1, e.g. 1 (DeepSeek-V3 ships one "
                          "MTP module)", param="num_speculative_tokens", value=k)
    if isinstance(acceptance, bool) or not isinstance(acceptance, int | float) or not 0.0 <= acceptance <= 1.0:
        raise ConfigError(f"MTP acceptance {acceptance!r} must be a probability in [0, 1], e.g. 0.85 (DeepSeek-V3 "
                          "report sec. 5.4.3)", param="mtp_acceptance", value=acceptance)


@dataclass(frozen=True)
class MtpStepModel:
    """``base`` (a pool's step model) served with ``num_speculative_tokens`` MTP drafts per step, each position
    accepted with conditional probability ``acceptance`` (module docstring).  Its own steps are the base's: the
    drafts and the verify step are the timing phases'.  ``roofline``: the pool's operator-level predictor when
    ``base`` holds none (a measured step model, ``perf.measured``): its model, and the placement it times."""

    base: object  # StepModel
    acceptance: float = DEEPSEEK_V3_MTP_ACCEPTANCE
    num_speculative_tokens: int = 1
    roofline: object | None = None  # StepTimePredictor of a measured base (None: base holds the predictor)

    def __post_init__(self) -> None:
        check_mtp_setting(self.acceptance, self.num_speculative_tokens)
        if self.predictor() is None:
            raise ConfigError(f"MTP needs the pool's operator-level predictor (its model and MTP module), got "
                              f"{type(self.base).__name__} without one; give `roofline` (the placement's predictor)",
                              param="timing_source")
        if not self.predictor().model.n_mtp_layers:
            raise ConfigError(f"{self.predictor().model.name} ships no MTP heads (num_nextn_predict_layers 0 in its "
                              "config.json); MTP is for models that ship them (DeepSeek-V3/R1, GLM-4.5/4.6, MiMo)",
                              param="model", value=self.predictor().model.name)

    @property
    def acceptances(self) -> tuple[float, ...]:
        return (self.acceptance,) * self.num_speculative_tokens

    @property
    def tokens_per_step(self) -> float:
        return expected_tokens_per_step(self.acceptances)

    def _chain_predictor(self):
        from fleetplan.perf.predictor import StepTimePredictor

        step = self.base
        while not isinstance(step, StepTimePredictor) and getattr(step, "base", None) is not None:
            step = step.base
        return step if isinstance(step, StepTimePredictor) else None

    def predictor(self):
        """The ``StepTimePredictor`` under every wrapper (``base``) of the step model, else ``roofline``, or None."""
        return self._chain_predictor() or self.roofline

    @property
    def measured_draft(self) -> bool:
        """True when the base holds no operator-level predictor: the draft is the base step's share."""
        return self._chain_predictor() is None

    def draft_fraction(self) -> float | None:
        """``mtp_draft_fraction`` of the model for a measured base (module docstring), None for a roofline one."""
        return mtp_draft_fraction(self.predictor().model) if self.measured_draft else None

    def draft_coefficients(self) -> tuple[int, np.ndarray]:
        """``(code, coef)`` of one rank's draft pass: the predictor's ``mtp_draft_coefficients``, or for a measured
        base the measured step under every wrapper (one rank's: a data-parallel instance's ranks each draft for
        their own batch) scaled by ``draft_fraction`` (module docstring).  Callers map it through the wrappers
        (``instance_coefficients``), as they map the predictor's draft."""
        if not self.measured_draft:
            return self.predictor().mtp_draft_coefficients()
        step = self.base
        while getattr(step, "base", None) is not None:
            step = step.base
        code, coef = step.kernel_coefficients()
        return code, _scaled_draft(code, coef, self.draft_fraction())

    def kernel_coefficients(self) -> tuple[int, np.ndarray]:
        return self.base.kernel_coefficients()

    def instance_coefficients(self, code: int, coef: np.ndarray) -> tuple[int, np.ndarray]:
        """A pass of the base's (the draft) as this step model sees it: unchanged (MTP wraps no batch split)."""
        return code, coef

    def t_iter_s(self, n_seqs, context_tokens=None):
        return self.base.t_iter_s(n_seqs, context_tokens)

    def speculative_json(self) -> str:
        """vLLM's ``speculative_config`` with the acceptance key the simulator reads
        (``sim.features.speculative.SpeculativeConfig.from_json``), and for a measured base the draft's share of a
        step (``draft_cost_fraction``, the simulator's draft of a pool without a predictor)."""
        frac = self.draft_fraction()
        extra = "" if frac is None else f', "draft_cost_fraction": {frac!r}'
        return (f'{{"method": "mtp", "num_speculative_tokens": {self.num_speculative_tokens}, '
                f'"acceptance_rate": {self.acceptance!r}{extra}}}')


def mtp_of(step_model) -> MtpStepModel | None:
    """The ``MtpStepModel`` marker of an "MTP on" pool's step model, read through its wrappers, or None."""
    step = step_model
    while step is not None and not isinstance(step, MtpStepModel):
        step = getattr(step, "base", None)
    return step
