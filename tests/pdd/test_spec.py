"""PddSpec validation: loud names, one-line errors naming value, rule and fix."""

from __future__ import annotations

import math

import pytest

from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.sim.pdd import AssignPolicy, KvTransferSpec, PddSpec, SibylParams
from fleetplan.sim.pdd.spec import PsThroughputCurve
from tests.pdd.helpers import pool


def test_policy_names_are_a_loud_registry():
    assert AssignPolicy.parse("SIBYL") is AssignPolicy.SIBYL
    with pytest.raises(UnknownNameError, match="round_robin, ils, ils_requests, sibyl, oracle"):
        AssignPolicy.parse("least_loaded")


def test_oracle_needs_late_binding():
    with pytest.raises(ConfigError, match="binding = late"):
        PddSpec(pool("p", 1), pool("d", 1), policy="oracle", binding="early")
    assert PddSpec(pool("p", 1), pool("d", 1), policy="oracle", binding="late").binding.value == "late"


def test_processor_sharing_curve_must_stay_positive_within_max_num_seqs():
    with pytest.raises(ConfigError, match="TPS\\(106\\)"):
        PddSpec(pool("p", 1), pool("d", 1, seqs=128), decode_model="processor_sharing")
    PddSpec(pool("p", 1), pool("d", 1, seqs=100), decode_model="processor_sharing")
    assert PsThroughputCurve().tokens_per_s(53) == pytest.approx(1176.6, abs=0.1)  # the H20 fit's peak


@pytest.mark.parametrize("kwargs", [
    {"latency_s": -1.0}, {"bandwidth_bytes_per_s": 0.0}, {"kv_bytes_per_token": math.nan}, {"n_layers": 0},
])
def test_transfer_rejects_bad_values(kwargs):
    with pytest.raises(ConfigError) as err:
        KvTransferSpec(**kwargs)
    assert "\n" not in str(err.value)


def test_transfer_from_model_uses_kv_bytes_per_token():
    from fleetplan.models.catalog import load_model

    model = load_model("qwen3-32b")
    spec = KvTransferSpec.from_model(model, 1e-3, 50e9, layerwise=True, tp=2)
    assert spec.kv_bytes_per_token == model.kv_bytes_per_token() / 2
    assert spec.n_layers == model.n_layers


def test_sibyl_params_are_checked():
    with pytest.raises(ConfigError, match="ema_alpha"):
        SibylParams(ema_alpha=1.0)
    with pytest.raises(ConfigError, match="bucket_tokens"):
        SibylParams(bucket_tokens=0)


def test_prefill_router_must_be_supported():
    with pytest.raises(ConfigError, match="round_robin or least_outstanding"):
        PddSpec(pool("p", 1, router="random"), pool("d", 1))


def test_pdd_status_codes_mirror_the_simulator_codes():
    from fleetplan.sim._kernels import codes
    from fleetplan.sim._kernels.pdd import codes as pdd_codes

    assert (pdd_codes.ST_DONE, pdd_codes.ST_UNFINISHED, pdd_codes.ST_REJECTED) == (
        codes.STATUS_DONE, codes.STATUS_UNFINISHED, codes.STATUS_REJECTED)
