"""Flat arrays of the runtime features (#5) as the feature kernel sees them.

``CompiledFeatures`` is built per fleet by ``fleetplan.sim.features`` from the pools'
``RuntimeFeatures``; ``RequestExtras`` per request stream by ``fleetplan.sim.sessions``
(multi-round sessions, RL bursts, shared prefixes).  The kernel
(``fleetplan.sim._kernels.features.level``) is called through
``fleetplan.sim.features.run.run_features``.  Semantics: docs/runtime_features_contract.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["CompiledFeatures", "RequestExtras", "SPEC_K_MAX", "no_extras"]

SPEC_K_MAX = 16  # most speculative tokens per step the kernel supports


@dataclass(frozen=True, eq=False)
class CompiledFeatures:
    """Per-pool feature arrays (P pools)."""

    policy: np.ndarray  # i4[P] SCHED_* code
    policy_param: np.ndarray  # f8[P, 4] MLFQ (q0_s, n_levels, 0, 0); H2Q-BR (L_tokens, C_tokens, B, 0)
    graph_mode: np.ndarray  # i4[P] GRAPH_* code
    graph_sizes: np.ndarray  # i8[P, G] ascending capture sizes (tokens); entries past graph_n unused
    graph_n: np.ndarray  # i4[P] number of valid capture sizes (0 when mode is none)
    graph_time_s: np.ndarray  # f8[P, 3] (launch_s, replay_s, piecewise_eager_s)
    spec_k: np.ndarray  # i4[P] num_speculative_tokens, 0 = off
    spec_accept: np.ndarray  # f8[P, SPEC_K_MAX] conditional acceptance of position j
    draft_code: np.ndarray  # i4[P] step-model code of one draft pass
    draft_coef: np.ndarray  # f8[P, N_STEP_COEFS]
    prefix_on: np.ndarray  # i4[P] 1 = prefix caching on
    prefix_entries: np.ndarray  # i4[P] prefix-cache entries per instance
    affinity_slack: np.ndarray  # i8[P] prefix-affinity router: outstanding-request slack before falling back
    spec_seed: int  # seed of the acceptance draws (from the run's seed)

    @property
    def any_on(self) -> bool:
        """True when some pool uses a feature (the featureless kernel suffices otherwise)."""
        return bool(
            np.any(self.policy != 0) or np.any(self.graph_mode != 0) or np.any(self.spec_k > 0)
            or np.any(self.prefix_on != 0)
        )


@dataclass(frozen=True, eq=False)
class RequestExtras:
    """Per-request (per-round) arrays (N rows, the run's request order)."""

    prev_req: np.ndarray  # i8[N] previous round of the same session, -1 = released at arrival_s
    delay_s: np.ndarray  # f8[N] tool-call delay after prev completes (0 for first rounds)
    session: np.ndarray  # i8[N] session index 0..n_sessions-1, -1 = none
    n_sessions: int
    new_tokens: np.ndarray  # i8[N] new prompt tokens of the round (= prompt for standalone requests)
    prefix_key: np.ndarray  # i8[N, 2] (key0, key1), -1 = none
    prefix_tokens: np.ndarray  # i8[N, 2] cumulative token ends (t0, t1) of the two segments


def no_extras(prompt_tokens: np.ndarray) -> RequestExtras:
    """Extras of a plain request stream: every request a standalone round, no shared prefix."""
    prompt = np.asarray(prompt_tokens, dtype=np.int64)
    n = prompt.size
    return RequestExtras(
        prev_req=np.full(n, -1, dtype=np.int64),
        delay_s=np.zeros(n, dtype=np.float64),
        session=np.full(n, -1, dtype=np.int64),
        n_sessions=0,
        new_tokens=prompt.copy(),
        prefix_key=np.full((n, 2), -1, dtype=np.int64),
        prefix_tokens=np.zeros((n, 2), dtype=np.int64),
    )
