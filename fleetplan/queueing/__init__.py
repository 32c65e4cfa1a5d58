"""Analytical queueing layer: the engine model (one physics with the simulator), Erlang-C, wait-tail
forms, the core paper's service moments, pool sizing.

Symbols λ, μ, c, ρ, Cs² are used inside this package (legends in each module).
Never imports ``fleetplan.sim``.
"""

from fleetplan.queueing.engine import (
    EngineLimits,
    EngineModel,
    EngineProfile,
    EngineSizing,
    EngineState,
    SurvivalTable,
    mixture_quantile_s,
    size_engine_pool,
)
from fleetplan.queueing.erlang import erlang_b, erlang_c
from fleetplan.queueing.service import (
    SeqCostScaling,
    ServiceModel,
    ServiceMoments,
    pool_service_moments,
    seq_cost_scaling,
)
from fleetplan.queueing.sizing import InfeasibleReason, PoolLatency, PoolSizing, pool_latency, size_pool
from fleetplan.queueing.tail import TailModel, mean_wait_s, tail_model, wait_quantile_s, wait_survival_params
from fleetplan.queueing.ttft import (
    TtftModel,
    ZeroWaitTtft,
    ttft_model,
    ttft_quantile_s,
    zero_wait_ttft_quantile_s,
)

__all__ = [
    "EngineLimits",
    "EngineModel",
    "EngineProfile",
    "EngineSizing",
    "EngineState",
    "SurvivalTable",
    "mixture_quantile_s",
    "size_engine_pool",
    "erlang_b",
    "erlang_c",
    "TailModel",
    "tail_model",
    "wait_quantile_s",
    "mean_wait_s",
    "wait_survival_params",
    "TtftModel",
    "ttft_model",
    "ttft_quantile_s",
    "ZeroWaitTtft",
    "zero_wait_ttft_quantile_s",
    "SeqCostScaling",
    "seq_cost_scaling",
    "ServiceModel",
    "ServiceMoments",
    "pool_service_moments",
    "InfeasibleReason",
    "PoolLatency",
    "PoolSizing",
    "pool_latency",
    "size_pool",
]
