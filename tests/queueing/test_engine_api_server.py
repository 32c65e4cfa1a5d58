"""The API server stage in the analytic engine (``fleetplan.queueing.api_server`` wired into
``EngineProfile.state`` and its TTFT): utilisation λ_i E[t_api] / n joins ρ, the pool is unstable past
the ceiling n / E[t_api], and the TTFT gains the mean wait (M/D/1 here: exact) and the tokenisation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fleetplan.hardware import load_catalog
from fleetplan.models import load_model
from fleetplan.perf.api_server import api_server_max_request_rate_per_s
from fleetplan.perf.engine_profile import load_engine_profile
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.queueing.engine import EngineLimits, EngineModel, EngineProfile

VLLM = load_engine_profile("vllm").options
LIMITS = EngineLimits(256, 8192, 20000, 16)


def _profile(options, n_api_servers: int = 1) -> EngineProfile:
    pred = StepTimePredictor(load_model("llama-3.1-8b"), load_catalog().get("H100-SXM"), Parallelism(tp=1),
                             options=options)
    return EngineProfile(EngineModel.of(pred, LIMITS, n_api_servers), np.array([16.0]), np.array([16.0]),
                         np.array([1.0]))


@pytest.mark.parametrize("n_api_servers", [1, 2])
def test_api_servers_cap_the_rate_and_set_rho(n_api_servers: int) -> None:
    prof = _profile(VLLM, n_api_servers)
    ceiling = api_server_max_request_rate_per_s(VLLM, 16, 16, n_api_servers)
    below, above = prof.state(0.98 * ceiling, [1]), prof.state(1.01 * ceiling, [1])
    assert below.stable[0] and below.rho[0] == pytest.approx(0.98)
    assert not above.stable[0] and above.rho[0] >= 1.0


def test_ttft_gains_the_md1_wait_and_the_tokenisation() -> None:
    """One process, every request 16 + 16 tokens: the stage is M/D/1, W = ρ t / (2 (1 - ρ))."""
    staged = _profile(VLLM)
    bare = _profile(dataclasses.replace(VLLM, api_server_s_per_request=0.0, api_server_s_per_token=0.0))
    t = VLLM.api_server_s_per_request + 32 * VLLM.api_server_s_per_token
    lam = 40.0
    st, st0 = staged.state(lam, [1]), bare.state(lam, [1])
    rho = lam * t
    assert st.api_wait_s[0] == pytest.approx(rho * t / (2 * (1 - rho)), rel=1e-9)
    shift = st.api_wait_s[0] + 16 * VLLM.api_server_s_per_token
    x = np.linspace(0.0, 0.2, 401)
    assert staged.ttft_survival(st, 0, x + shift) == pytest.approx(bare.ttft_survival(st0, 0, x), abs=1e-12)
    assert staged.ttft_quantile_s(st, 0.99)[0] > bare.ttft_quantile_s(st0, 0.99)[0] + 0.9 * shift
    assert staged.zero_load_ttft_s(0.5) == pytest.approx(bare.zero_load_ttft_s(0.5) + 16 * VLLM.api_server_s_per_token)
