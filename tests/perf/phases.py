"""A shared check of the step-time tests: both phases read one set of coefficients."""

from __future__ import annotations

import pytest

from fleetplan.perf.batch import BatchComposition
from fleetplan.perf.linear import roofline_step_s, step_time_array_s


def assert_phases_agree(step, shapes, context_tokens: int) -> None:
    """For each (decode requests, prefill tokens) of ``shapes`` (each decode request at ``context_tokens``): the
    simulator's step (``roofline_step_s``) equals the analytic engine model's (``step_time_array_s``) to 1e-12 and
    the predictor's own sum of parts with expected routing (``step.predict``) to 1e-9."""
    code, coef = step.kernel_coefficients()
    for n_decode, prefill in shapes:
        ctx, attn2 = context_tokens * n_decode, prefill * prefill
        sim = roofline_step_s(coef, n_decode + (prefill > 0), n_decode, prefill, ctx, attn2)
        ana = float(step_time_array_s(code, coef, n_decode + (prefill > 0), n_decode, prefill, ctx, attn2))
        assert sim == pytest.approx(ana, rel=1e-12)
        batch = BatchComposition.uniform(n_decode, context_tokens, int(prefill > 0), prefill)
        assert sim == pytest.approx(step.predict(batch).total_s, rel=1e-9)
