"""Per-pool runtime-feature figures of a run (``GroupSummary`` fields), from the feature kernel's counters.

Counters cover the whole run, warm-up included (the kernel counts per pool, not per request):

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

from fleetplan.sim.features_arrays import CompiledFeatures

__all__ = ["FEATURE_FIELDS", "feature_figures"]

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
