"""vLLM's ``async_scheduling`` under the measured tables: the fitted per-step overhead outside the kernels is
overlapped too (``fleetplan.bench.instance``); needs the aiconfigurator extra."""

from __future__ import annotations

from dataclasses import replace

import pytest

pytest.importorskip("aiconfigurator_core")

from fleetplan.bench import EngineArgs  # noqa: E402
from fleetplan.hardware import load_catalog  # noqa: E402
from fleetplan.models import load_model  # noqa: E402


def test_async_scheduling_takes_the_measured_step_overhead_off() -> None:
    engine = EngineArgs(load_model("llama-3.1-8b"), load_catalog().get("H100-SXM"), timing_source="measured")
    plain = engine.step_model()
    overlapped = replace(engine, async_scheduling=True).step_model()
    over = plain.scales["overhead_step_s"]
    assert over > 0 and overlapped.scales["overhead_step_s"] == 0.0
    assert overlapped.coefficients[0] == pytest.approx(plain.coefficients[0] - over, rel=1e-12)
    assert overlapped.coefficients[1:] == plain.coefficients[1:]
    assert overlapped.source.endswith("async scheduling (per-step overhead overlapped)")
