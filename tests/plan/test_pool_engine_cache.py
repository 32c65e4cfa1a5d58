"""A sweep builds each serving engine once (``plan.pools._engine_for``): the cached engine is ``engine_of``'s
for the same inputs, one object for equal inputs and another for any input that differs."""

from __future__ import annotations

import numpy as np

from fleetplan.hardware import load_catalog
from fleetplan.plan import pools as pools_mod
from fleetplan.plan.pools import PlanSettings, engine_of


def _settings(**kw) -> PlanSettings:
    return PlanSettings(rate_per_s=10.0, slo_ttft_s=0.5, percentile=99.0, rho_max=0.85, max_gpus=1000,
                        tail_model="exp", ttft_model="quantile", compress_gamma=1.5, n_prefill_seqs=None, **kw)


def test_cached_engines_are_engine_of():
    pools_mod._ENGINES.clear()
    pools_mod._ENGINES_BY_ID.clear()
    cat = load_catalog()
    gpus = [cat.get("H100-SXM"), cat.get("A100")]
    for gpu in gpus:
        for ctx in (2048, 8192):
            for settings in (_settings(), _settings(step_time_margin=0.1), _settings(max_num_seqs=64)):
                for budget in (None, 4096):
                    got = pools_mod._engine_for(gpu, ctx, settings, budget)
                    assert pools_mod._engine_for(gpu, ctx, settings, budget) is got  # the same objects: by identity
                    want = engine_of(gpu, ctx, dict(settings.step_models), settings.step_time_margin,
                                     settings.max_num_seqs, budget)
                    assert got.step_code == want.step_code and np.array_equal(got.step_coef, want.step_coef)
                    assert got.limits == want.limits and got.api == want.api
                    assert pools_mod._engine_for(gpu, ctx, _settings(**{k: getattr(settings, k) for k in (
                        "step_time_margin", "max_num_seqs")}), budget) is got  # equal inputs: one engine
    assert len(pools_mod._ENGINES) == 2 * 2 * 3 * 2
