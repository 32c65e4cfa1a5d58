"""Engine side of the runtime features (#5): when the feature kernel runs, and its pool figures.

The feature kernel (``fleetplan.sim.features.run.run_features``) runs when a pool has a feature
on, a pool uses the ``prefix_affinity`` router, or the run carries session ``RequestExtras``.  It
is iteration-level and has no instance failures: either combination is a one-line ``ConfigError``.
Without extras every request is a standalone round (``no_extras``); without features every pool
is all-off (``no_features``).

Per-pool runtime-feature figures of a run (``GroupSummary`` fields, ``feature_figures``), from the
feature kernel's counters.  Counters cover the whole run, warm-up included (the kernel counts per
pool, not per request):

* ``padding_inflation`` = padding tokens / useful tokens over graphed steps (Frontier Table 2's
  "Inflation: extra vs. useful tokens"); ``graph_step_share`` = graphed steps / all steps.
* ``spec_acceptance_rate`` = accepted drafts / drafted tokens; ``spec_mean_accepted_tokens`` =
  accepted drafts per proposal (a proposal is a request's drafts of one step, i.e. the count at
  position 0; vLLM's "mean acceptance length" is this plus the bonus token);
  ``spec_acceptance_by_position[j]`` = accepted / drafted at position j (unconditional, as vLLM's
  per-position acceptance metric).
* ``prefix_hit_ratio`` = prompt tokens served from the prefix cache / prompt tokens looked up.

A figure is None for a group with no pool using the feature, NaN when it had nothing to count.
"""

from __future__ import annotations

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.sim._kernels import codes
from fleetplan.sim.compile import CompiledRun
from fleetplan.sim.features.arrays import CompiledFeatures, no_extras
from fleetplan.sim.features.compile import no_features
from fleetplan.sim.spec import Level

__all__ = ["FEATURE_FIELDS", "feature_figures", "pool_feature_figures", "run_feature_kernel", "uses_feature_kernel"]


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
    from fleetplan.sim._kernels.features.itl import itl_bin_centre_s
    from fleetplan.sim.features.run import run_features  # the feature kernel compiles on first use

    f, r = run.fleet, run.requests
    features = run.features if run.features is not None else no_features(len(f.pool_names))
    extras = run.extras if run.extras is not None else no_extras(r.prompt_tokens)
    out = run_features(f, r, features, extras, float(run.horizon_s), int(run.max_in_flight), bool(run.log_steps))
    if run.log_steps:  # the streamed gaps as (bin centre, count) pairs, all pools (SimResult.step_log)
        counts = out["pool_itl_hist"].sum(axis=0)
        bins = np.flatnonzero(counts)
        out["step_log_dt_s"], out["step_log_n"] = itl_bin_centre_s(bins), counts[bins]
    return out


def pool_feature_figures(run: CompiledRun, out: dict[str, np.ndarray]) -> tuple[dict, ...] | None:
    """Feature figures per pool, then for the fleet; None when the featureless kernel ran."""
    if "pool_step_kind" not in out:
        return None
    n_pools = len(run.fleet.pool_names)
    per_pool = tuple(feature_figures(out, run.features, [p]) for p in range(n_pools))
    return (*per_pool, feature_figures(out, run.features, list(range(n_pools))))

FEATURE_FIELDS = ("padding_inflation", "graph_step_share", "spec_acceptance_rate", "spec_mean_accepted_tokens",
                  "spec_acceptance_by_position", "prefix_hit_ratio")
_COUNTERS = ("pool_graph_tokens", "pool_step_kind", "pool_accept_pos", "pool_draft_pos", "pool_prefix_tokens")


def _ratio(num: float, den: float) -> float:
    return float(num) / float(den) if den > 0 else float("nan")


def feature_figures(out: dict[str, np.ndarray], features: CompiledFeatures | None, pools: list[int]) -> dict:
    """``FEATURE_FIELDS`` of the group of pool indices ``pools`` (all None without feature counters)."""
    figures: dict = dict.fromkeys(FEATURE_FIELDS)
    if features is None or any(key not in out for key in _COUNTERS):
        return figures
    idx = np.asarray(pools, dtype=np.int64)
    graph = idx[features.graph_mode[idx] != 0]
    if graph.size:
        useful, padding = out["pool_graph_tokens"][graph].sum(axis=0)
        eager, graphed = out["pool_step_kind"][graph].sum(axis=0)
        figures["padding_inflation"] = _ratio(padding, useful)
        figures["graph_step_share"] = _ratio(graphed, eager + graphed)
    spec = idx[features.spec_k[idx] > 0]
    if spec.size:
        accepted = out["pool_accept_pos"][spec].sum(axis=0)
        drafted = out["pool_draft_pos"][spec].sum(axis=0)
        k = int(features.spec_k[spec].max())
        figures["spec_acceptance_rate"] = _ratio(accepted.sum(), drafted.sum())
        figures["spec_mean_accepted_tokens"] = _ratio(accepted.sum(), drafted[0])
        figures["spec_acceptance_by_position"] = tuple(_ratio(accepted[j], drafted[j]) for j in range(k))
    prefix = idx[features.prefix_on[idx] != 0]
    if prefix.size:
        looked_up, hit = out["pool_prefix_tokens"][prefix].sum(axis=0)
        figures["prefix_hit_ratio"] = _ratio(hit, looked_up)
    return figures
