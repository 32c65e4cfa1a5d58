"""MTP on or off in the placement search (issue #26 item 4): a model that ships MTP heads gets an "MTP on"
twin of each roofline placement, which both phases time with the same verify and draft passes; a model
without heads gets none (the launch flags: ``tests/cli/test_mtp_search_cli.py``)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.models import load_model
from fleetplan.perf.dp_instance import DataParallelInstance
from fleetplan.perf.kv_budget import kv_budget
from fleetplan.perf.speculative import MtpStepModel
from fleetplan.plan.placement import mtp_of, place_model, with_mtp_features
from fleetplan.plan.pools import engine_of
from fleetplan.queueing.speculative import SpeculativeEngineModel, mtp_engine
from fleetplan.sim import build_pool
from fleetplan.sim.features.compile import compile_features
from fleetplan.sim.spec import FleetSpec


@pytest.fixture(scope="module")
def twins():
    return place_model(load_model("deepseek-v3"), load_catalog().get("h200"), timing_source="roofline",
                       mtp_acceptance=0.85)


def test_each_placement_has_an_mtp_twin_right_after_it(twins):
    names = [p.gpu.name for p in twins]
    assert names == ["H200 tp8", "H200 tp8 mtp1", "H200 tp1 dp8", "H200 tp1 dp8 mtp1"]
    for off, on in zip(twins[::2], twins[1::2], strict=True):
        assert off.mtp is None and isinstance(on.step_model, MtpStepModel) and mtp_of(on.step_model) is on.mtp
        assert on.parallelism == off.parallelism and on.predictor is off.predictor
        # the MTP module's weights come out of the KV cache (kv_budget with the model's MTP layers)
        p = on.predictor
        budget = kv_budget(p.model, load_catalog().get("h200"), on.parallelism, weight_dtype=p.weight_dtype,
                           kv_dtype=p.kv_dtype, n_mtp_layers=p.model.n_mtp_layers)
        assert on.gpu.serving.kv_blocks == budget.kv_blocks_per_replica < off.gpu.serving.kv_blocks
    assert isinstance(twins[3].step_model.base, DataParallelInstance)


def test_a_model_without_heads_gets_no_twin_and_bad_settings_are_refused():
    llama = load_model("llama-3.1-8b")
    h100 = load_catalog().get("h100")
    assert all(p.mtp is None for p in place_model(llama, h100, timing_source="roofline", mtp_acceptance=0.85))
    with pytest.raises(ConfigError, match="must be a probability"):
        place_model(llama, h100, mtp_acceptance=1.5)
    with pytest.raises(ConfigError, match="num_speculative_tokens"):
        place_model(llama, h100, mtp_acceptance=0.8, num_speculative_tokens=0)
    with pytest.raises(ConfigError, match="ships no MTP heads"):
        MtpStepModel(place_model(llama, h100, timing_source="roofline")[0].predictor)


@pytest.mark.parametrize("which", [1, 3], ids=["tp8", "dp8"])
def test_both_phases_time_the_twin_with_the_same_draft_pass(twins, which):
    """The analytic engine (``plan.pools.engine_of`` -> ``with_speculation``) drafts with the coefficients the
    simulator compiles for the verifier's pool (``with_mtp_features``); on a DP instance both split the
    draft's batch over the ranks."""
    on = twins[which]
    gpus = {on.gpu.name: on.step_model}
    engine = engine_of(on.gpu, 16384, gpus)
    assert isinstance(engine, SpeculativeEngineModel) and engine.num_speculative_tokens == 1
    assert engine.tokens_per_step == pytest.approx(1.85)
    pool = with_mtp_features(dataclasses.replace(build_pool(on.gpu, "p", 1, 16384), step_model=on.step_model))
    assert pool.features.speculative.method == "mtp" and pool.features.speculative.acceptance == (0.85,)
    cf = compile_features(FleetSpec(pools=(pool,)), 0)
    assert engine.draft_code == cf.draft_code[0] and np.allclose(engine.draft_coef, cf.draft_coef[0], rtol=1e-12)
    # the off twin's engine is the plain one, and the hook on a plain engine is the identity
    off = twins[which - 1]
    assert not isinstance(engine_of(off.gpu, 16384, {off.gpu.name: off.step_model}), SpeculativeEngineModel)
    if which == 1:  # no wrapper between the marker and the predictor: the plain hook of the queueing module
        direct = mtp_engine(engine.base, on.predictor, (0.85,))
        assert np.array_equal(direct.draft_coef, engine.draft_coef)
