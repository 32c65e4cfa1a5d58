"""Engine side of the runtime features (#5): when the feature kernel runs, and its pool figures.

The feature kernel (``fleetplan.sim.features_run.run_features``) runs when a pool has a feature
on, a pool uses the ``prefix_affinity`` router, or the run carries session ``RequestExtras``.  It
is iteration-level and has no instance failures: either combination is a one-line ``ConfigError``.
Without extras every request is a standalone round (``no_extras``); without features every pool
is all-off (``no_features``).
"""

from __future__ import annotations

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.sim._kernels import codes
from fleetplan.sim.compile import CompiledRun
from fleetplan.sim.features_arrays import no_extras
from fleetplan.sim.features_compile import no_features
from fleetplan.sim.features_result import feature_figures
from fleetplan.sim.spec import Level

__all__ = ["pool_feature_figures", "run_feature_kernel", "uses_feature_kernel"]


def uses_feature_kernel(run: CompiledRun) -> bool:
    """True when ``run`` needs the feature kernel (module docstring)."""
    return ((run.features is not None and run.features.any_on) or run.extras is not None
            or bool(np.any(run.fleet.pool_router == codes.ROUTE_PREFIX_AFFINITY)))


def run_feature_kernel(run: CompiledRun, level: Level) -> dict[str, np.ndarray]:
    """The feature kernel's raw outputs for ``run`` (``ConfigError`` at level request or with failures)."""
    if level is not Level.ITERATION:
        raise ConfigError("runtime features (CUDA graphs, speculative decoding, prefix caching, scheduler policies, "
                          "prefix_affinity routing, sessions) need level iteration; use `level` iteration")
    if run.fail_event_s is not None:
        raise ConfigError("failures cannot be combined with runtime features (the feature kernel has no instance "
                          "failures); drop `failures` or turn the features off")
    from fleetplan.sim.features_run import run_features  # the feature kernel compiles on first use

    f, r = run.fleet, run.requests
    features = run.features if run.features is not None else no_features(len(f.pool_names))
    extras = run.extras if run.extras is not None else no_extras(r.prompt_tokens)
    return run_features(f, r, features, extras, float(run.horizon_s), int(run.max_in_flight))


def pool_feature_figures(run: CompiledRun, out: dict[str, np.ndarray]) -> tuple[dict, ...] | None:
    """Feature figures per pool, then for the fleet; None when the featureless kernel ran."""
    if "pool_step_kind" not in out:
        return None
    n_pools = len(run.fleet.pool_names)
    per_pool = tuple(feature_figures(out, run.features, [p]) for p in range(n_pools))
    return (*per_pool, feature_figures(out, run.features, list(range(n_pools))))
