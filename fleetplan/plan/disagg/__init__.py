"""Disaggregated fleets: prefill/decode (``pdd``) and attention/FFN (``afd``) split across GPU pools.

Entry point: ``candidates.disagg_candidates`` (``plan.optimize`` calls it for the ``pdd`` and ``afd``
topologies), which sizes every role with the roles' physics of ``fleetplan.queueing.disagg`` (prefill role, KV
transfer, decode role, as the PDD simulator runs them) and the model figures and AFD step of ``screen``;
``placements`` adds the roles' own instance shapes of an MoE model (wide DP-attention + EP decode instances over
several nodes), which the command line sweeps for ``pdd`` / ``afd``. ``economics`` ranks the candidates by spend
ratio and cost efficiency against each family's all-premium baseline; ``verify`` is phase 2, the PDD simulator
deciding the counts (imported on use: it loads the simulator).
"""

from fleetplan.plan.defaults import DEFAULT_MIN_CE_GAIN
from fleetplan.plan.disagg.candidates import (
    CALIBRATION_MODEL,
    DEFAULT_AF_RATIOS,
    DEFAULT_KV_LATENCY_S,
    DEFAULT_MICRO_BATCHES,
    GBPS,
    DisaggCandidate,
    DisaggSettings,
    check_disagg_inputs,
    disagg_candidates,
)
from fleetplan.plan.disagg.economics import Economics, economics
from fleetplan.plan.disagg.screen import ModelShape

__all__ = [
    "CALIBRATION_MODEL",
    "DEFAULT_AF_RATIOS",
    "DEFAULT_KV_LATENCY_S",
    "DEFAULT_MICRO_BATCHES",
    "DEFAULT_MIN_CE_GAIN",
    "GBPS",
    "DisaggCandidate",
    "DisaggSettings",
    "Economics",
    "ModelShape",
    "check_disagg_inputs",
    "disagg_candidates",
    "economics",
]
