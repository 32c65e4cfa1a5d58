"""What a co-located candidate deploys: the simulator's fleet as a fleet-file document, and how each
pool serves the model (``fleetplan deploy`` turns it into engine commands and manifests).

``deployment_of(candidate, request)`` builds the fleet phase 2 simulated (``plan.verify.fleet_spec``:
the verified counts when the candidate was verified, else the analytic ones; the largest pool's context
widened to what its KV cache or the served model holds; each pool's engine limits as sized) and writes
it with ``sim.fleet_toml.fleet_document``, every derived setting explicit (``max_num_seqs``,
``max_num_batched_tokens``, ``kv_blocks``, price), so the simulator's fleet-file reader rebuilds the
same pools.  With a served model each pool also records its catalog GPU and parallelism (a swept placement
is named ``"H100-SXM tp2"``; the file names ``h100`` with ``tensor_parallel_size = 2``).  The steps'
``step_time_margin`` is not part of the file (``Deployment.step_time_margin``).  A prefill-decode (pdd)
candidate records the PDD simulator's fleet (``plan.disagg.verify.pdd_spec``): its prefill and decode pools
in the same pool format, the KV transfer and the decode assignment (``Deployment.disaggregated``; no fleet
file holds it as one fleet).  Attention-FFN (afd) candidates have no deployment: None.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fleetplan.perf.dp_instance import DataParallelInstance
from fleetplan.perf.measured import timing_source
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.perf.speculative import MtpStepModel
from fleetplan.plan.deployment_types import Deployment, FleetDelta, PoolDeployment
from fleetplan.plan.space import DISAGGREGATED, Topology
from fleetplan.plan.verify import fleet_spec
from fleetplan.sim.fleet_toml import fleet_document
from fleetplan.sim.spec import FleetSpec

if TYPE_CHECKING:
    from fleetplan.plan.optimize import OptimizeRequest, OptimizeResult
    from fleetplan.plan.sweep import Candidate
    from fleetplan.plan.whatif import WhatIfResult

__all__ = ["DEFAULT_DEPLOY_CANDIDATES", "Deployment", "FleetDelta", "PoolDeployment", "deployment_of", "deployments_of",
           "fleet_delta", "owned_gpus", "whatif_point_result"]

#: How ``perf.measured.timing_source`` names a user's calibrated profile (``--perf-profile``).
CALIBRATED_PREFIX = "calibrated profile"

#: Cheapest candidates that carry a deployment besides every verified one and the recommendation.
DEFAULT_DEPLOY_CANDIDATES = 10

_FLAG_INT = {"--tensor-parallel-size": "tensor_parallel_size", "--pipeline-parallel-size": "pipeline_parallel_size",
             "--data-parallel-size": "data_parallel_size"}


def _serving_of(step_model: Any) -> tuple[str | None, dict[str, int | bool], str | None, str | None, str | None]:
    """(catalog GPU, parallelism keywords, model, weight dtype, KV dtype) of a served-model step model (a
    data-parallel-attention instance: its rank's predictor, whose parallelism holds the ranks; an "MTP on"
    placement: the step model it marks, its drafts in the pool's ``speculative_config``)."""
    if isinstance(step_model, MtpStepModel):
        step_model = step_model.base
    if isinstance(step_model, DataParallelInstance):
        step_model = step_model.base
    if isinstance(step_model, StepTimePredictor):
        par = step_model.parallelism
        kw: dict[str, int | bool] = {"tensor_parallel_size": par.tp}
        if par.pp > 1:
            kw["pipeline_parallel_size"] = par.pp
        if par.dp > 1:
            kw["data_parallel_size"] = par.dp
        if par.ep > 1:
            kw["enable_expert_parallel"] = True
        return (step_model.gpu.name, kw, step_model.model.name, step_model.weight_dtype.value,
                step_model.kv_dtype.value)
    flags = getattr(step_model, "parallelism", None)
    if isinstance(flags, str) and isinstance(getattr(step_model, "gpu", None), str):  # a calibrated profile
        kw = {key: int(m.group(1)) for flag, key in _FLAG_INT.items() if (m := re.search(rf"{flag} (\d+)", flags))}
        if "--enable-expert-parallel" in flags:
            kw["enable_expert_parallel"] = True
        return step_model.gpu, kw, step_model.model, step_model.weight_dtype, step_model.kv_dtype
    return None, {}, None, None, None


def _pdd_fleet(candidate: Candidate, gpus: dict, counts: list[int], models: dict,
               request: OptimizeRequest) -> tuple[FleetSpec, dict[str, Any]]:
    """The PDD simulator's fleet of a prefill-decode candidate (``plan.disagg.verify.pdd_spec``) as two role
    pools and its transfer / assignment settings."""
    from fleetplan.plan.disagg.verify import pdd_spec

    pdd = pdd_spec(candidate, gpus, counts, step_models=models, max_model_len_tokens=request.max_model_len_tokens)
    t = pdd.transfer
    return FleetSpec(pools=(pdd.prefill, pdd.decode)), {
        "roles": ["prefill", "decode"],
        "kv_latency_ms": t.latency_s * 1e3,
        "kv_bandwidth_gb_per_s": None if t.bandwidth_bytes_per_s == float("inf") else t.bandwidth_bytes_per_s / 1e9,
        "kv_bytes_per_token": t.kv_bytes_per_token,
        "policy": pdd.policy.value,
        "binding": pdd.binding.value,
    }


def deployment_of(candidate: Candidate, request: OptimizeRequest) -> Deployment | None:
    """The candidate's deployment (module docstring); None for an attention-FFN candidate."""
    if candidate.topology in DISAGGREGATED and candidate.topology is not Topology.PDD:
        return None
    v = candidate.verification
    verified = v is not None and v.passed
    counts = list(v.verified_counts) if verified else [p.count for p in candidate.pools]
    gpus = {g.name: g for g in request.gpus}
    models = dict(request.step_models)
    disaggregated = None
    if candidate.topology is Topology.PDD:
        spec, disaggregated = _pdd_fleet(candidate, gpus, counts, models, request)
    else:
        spec = fleet_spec(candidate, gpus, counts, models, request.max_model_len_tokens, request.step_time_margin)
    live = [i for i, n in enumerate(counts) if n > 0] if disaggregated is None else [0, 1]
    names, pars, pools = {}, {}, []
    model = weight = kv = None
    calibrated = []
    for i, pool in zip(live, spec.pools, strict=True):
        p = candidate.pools[i]
        catalog, par, m, w, k = _serving_of(models.get(p.gpu))
        if catalog is not None:
            names[pool.name], pars[pool.name] = catalog, par
            model, weight, kv = m, w, k
            if timing_source(models[p.gpu]).startswith(CALIBRATED_PREFIX):
                calibrated.append(catalog)
        spares = int(v.verified_spares[i]) if verified else int(p.spares)
        pools.append(PoolDeployment(pool.name, i + 1, catalog or p.gpu, p.gpus_per_instance, tuple(par.items()),
                                    p.lo_tokens, p.hi_tokens, p.traffic_share, p.lam_per_s, spares,
                                    timing_source(pool.step_model)))
    fleet = fleet_document(spec, names, pars)
    for table in fleet["pool"]:
        if table["name"] in names:  # served model: the placement's price (GPU price x GPUs per instance) applies
            table.pop("price_usd_per_h", None)
    return Deployment(candidate.rank, "verified" if verified else "analytic", fleet,
                      tuple(pools), model, weight, kv, tuple(sorted(set(calibrated))), request.step_time_margin,
                      request.max_model_len_tokens, disaggregated)


def deployments_of(candidates: Any, recommendation: Candidate | None, request: OptimizeRequest,
                   n_cheapest: int = DEFAULT_DEPLOY_CANDIDATES) -> Mapping[tuple, Deployment]:
    """Deployments of the ``n_cheapest`` candidates, every simulated one and the recommendation,
    keyed by ``Candidate.key()``."""
    chosen = [c for i, c in enumerate(candidates) if i < n_cheapest or c.verification is not None]
    if recommendation is not None:
        chosen.append(recommendation)
    out = {}
    for c in chosen:
        if c.key() not in out and c.feasible:
            d = deployment_of(c, request)
            if d is not None:
                out[c.key()] = d
    return out


def owned_gpus(pools: Any) -> dict[str, int]:
    """GPUs per catalog type of a fleet file's pools (``sim.fleet_toml.PoolEntry``): instances times the
    GPUs of one instance (its ``tensor_parallel_size`` x ``pipeline_parallel_size`` x ``data_parallel_size``;
    1 without them)."""
    owned: dict[str, int] = {}
    for entry in pools:
        par = dict(entry.parallelism)
        per = (int(par.get("tensor_parallel_size", 1)) * int(par.get("pipeline_parallel_size", 1))
               * int(par.get("data_parallel_size", 1)))
        owned[entry.gpu.name] = owned.get(entry.gpu.name, 0) + int(entry.n_instances) * per
    return owned


def fleet_delta(owned: Mapping[str, int], deployment: Deployment) -> FleetDelta:
    """The GPUs to buy and to retire to turn ``owned`` into ``deployment`` (``FleetDelta``)."""
    needed: dict[str, int] = {}
    instances = {t["name"]: int(t["instances"]) for t in deployment.fleet["pool"]}
    for p in deployment.pools:
        needed[p.gpu] = needed.get(p.gpu, 0) + (instances[p.name] + p.spares) * p.gpus_per_instance
    types = sorted(set(owned) | set(needed))
    buy = tuple((g, needed.get(g, 0) - owned.get(g, 0)) for g in types if needed.get(g, 0) > owned.get(g, 0))
    retire = tuple((g, owned.get(g, 0) - needed.get(g, 0)) for g in types if owned.get(g, 0) > needed.get(g, 0))
    return FleetDelta(tuple(sorted(owned.items())), tuple(sorted(needed.items())), buy, retire)


def whatif_point_result(result: WhatIfResult) -> OptimizeResult | None:
    """The first rate's fleet of a what-if (the fleet to run now) as a one-candidate ``OptimizeResult`` at that
    rate, recommended, with its verification: what ``fleetplan deploy`` exports; None when no rate has a fleet."""
    from dataclasses import replace

    from fleetplan.plan.optimize import OptimizeResult

    point = next((p for p in result.points if p.fleet is not None), None)
    if point is None:
        return None
    fleet = point.fleet
    request = replace(result.request, rate_per_s=point.rate_per_s, rate_source="the what-if's first rate")
    return OptimizeResult(request=request, candidates=(fleet,), pareto=(fleet,), recommendation=fleet,
                          verification=() if fleet.verification is None else (fleet.verification,),
                          verification_settings=result.verify)
