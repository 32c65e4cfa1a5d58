"""Compile a ``PddSpec`` and a request stream into the PDD kernel's arrays.

* ``cfg_i`` / ``cfg_f``: pool limits, step-model codes, policy codes and scalars (layouts in
  ``fleetplan.sim._kernels.pdd.codes``); ``pf_coef`` / ``dec_coef``: step-model coefficients.
* Per request: ``est_handoff_s`` = (estimated prefill alone on an idle instance when bound
  early, SIBYL's ESTPREFILL) + latency + transfer tail; ``xfer_overlap_s`` and
  ``xfer_tail_s`` (``bytes / bw`` split ``(L-1)/L`` and ``1/L`` with layer-wise streaming).
* With ``spec.network``: ``net_in`` (``state.FabricInputs``: host of each prefill and decode
  instance, path links, path hops, link capacities, ECMP spine of each flow (drawn from the
  stream ``(seed, "ecmp")``), layers' flow bytes, last flow bytes; kernel module ``network``): bytes =
  prompt x KV bytes per token, split ``(L-1)/L`` and ``1/L`` with layer-wise streaming; the
  estimates above then use the fabric's slowest link as the bandwidth.  Without: one-element
  dummies.
* SIBYL's prior rate (before any completion), when not given: the per-task speed of a
  decode instance with a full batch, ``TPS(n)/n`` (processor sharing) or one token per
  decode step of ``max_num_seqs`` requests at half the pool's context (steps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fleetplan.rng import stream
from fleetplan.sim._kernels.pdd import codes as pc
from fleetplan.sim._kernels.pdd.prefill import prefill_alone_s
from fleetplan.sim._kernels.pdd.state import FabricInputs, PddConfig, PddRequests
from fleetplan.sim.network import FlowNetwork
from fleetplan.sim.pdd.spec import AssignPolicy, Binding, DecodeModel, PddSpec, SibylAblation, SibylPressure
from fleetplan.sim.spec import InstanceRouter

__all__ = ["CompiledPdd", "compile_pdd"]

_POLICY = {
    AssignPolicy.ROUND_ROBIN: pc.ASSIGN_ROUND_ROBIN, AssignPolicy.ILS: pc.ASSIGN_ILS_TOKENS,
    AssignPolicy.ILS_REQUESTS: pc.ASSIGN_ILS_REQUESTS, AssignPolicy.SIBYL: pc.ASSIGN_SIBYL,
    AssignPolicy.ORACLE: pc.ASSIGN_ORACLE, AssignPolicy.REQ_LEVEL: pc.ASSIGN_REQ_LEVEL,
}
_BINDING = {Binding.EARLY: pc.BIND_EARLY, Binding.LATE: pc.BIND_LATE}
_DECODE = {DecodeModel.STEPS: pc.DECODE_STEPS, DecodeModel.PROCESSOR_SHARING: pc.DECODE_PS}
_PRESSURE = {SibylPressure.TOKENS: pc.PRESSURE_TOKENS, SibylPressure.TASKS: pc.PRESSURE_TASKS}
_ABLATE = {SibylAblation.TYPE1: pc.ABLATE_TYPE1, SibylAblation.TYPE2: pc.ABLATE_TYPE2,
           SibylAblation.TYPE3: pc.ABLATE_TYPE3, SibylAblation.PROB: pc.ABLATE_PROB}
_PF_ROUTER = {InstanceRouter.ROUND_ROBIN: pc.PF_ROUTE_ROUND_ROBIN,
              InstanceRouter.LEAST_OUTSTANDING: pc.PF_ROUTE_LEAST_OUTSTANDING}

# cfg_i slots of a pool: max_num_seqs, token budget of a step, KV blocks, block size, step-model code, max context
_PREFILL_SLOTS = (pc.CI_PF_MAX_SEQS, pc.CI_PF_BUDGET, pc.CI_PF_KV_BLOCKS, pc.CI_PF_BLOCK, pc.CI_PF_STEP_CODE,
                  pc.CI_PF_MAX_CONTEXT)
_DECODE_SLOTS = (pc.CI_DEC_MAX_SEQS, pc.CI_DEC_BUDGET, pc.CI_DEC_KV_BLOCKS, pc.CI_DEC_BLOCK, pc.CI_DEC_STEP_CODE,
                 pc.CI_DEC_MAX_CONTEXT)


def _set_pool_slots(cfg_i: np.ndarray, slots: tuple[int, ...], pool, step_code: int) -> None:
    """Write a pool's limits, step-model code and context window into its ``cfg_i`` slots."""
    lim = pool.limits
    values = (lim.max_num_seqs, lim.max_num_batched_tokens, lim.kv_blocks, lim.block_size_tokens, step_code,
              pool.max_context_tokens)
    for slot, value in zip(slots, values, strict=True):
        cfg_i[slot] = value


@dataclass(frozen=True, eq=False)
class CompiledPdd:
    """Everything one ``run_pdd`` call needs (requests sorted by arrival)."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    est_prefill_s: np.ndarray
    est_handoff_s: np.ndarray
    xfer_overlap_s: np.ndarray
    xfer_tail_s: np.ndarray
    cfg_i: np.ndarray
    cfg_f: np.ndarray
    pf_coef: np.ndarray
    dec_coef: np.ndarray
    net_in: FabricInputs | None = None

    @property
    def n_requests(self) -> int:
        return int(self.arrival_s.size)

    def kernel_requests(self) -> PddRequests:
        """The kernel's per-request inputs (``state.PddRequests``)."""
        return PddRequests(arrival_s=self.arrival_s, prompt_tokens=self.prompt_tokens, output_tokens=self.output_tokens,
                           est_handoff_s=self.est_handoff_s, xfer_overlap_s=self.xfer_overlap_s,
                           xfer_tail_s=self.xfer_tail_s)

    def kernel_config(self) -> PddConfig:
        """The kernel's configuration (``state.PddConfig``)."""
        return PddConfig(cfg_i=self.cfg_i, cfg_f=self.cfg_f, pf_coef=self.pf_coef, dec_coef=self.dec_coef)


def _prior_rate(spec: PddSpec) -> float:
    if spec.sibyl.prior_rate_tokens_per_s is not None:
        return float(spec.sibyl.prior_rate_tokens_per_s)
    n = spec.decode.limits.max_num_seqs
    if spec.decode_model is DecodeModel.PROCESSOR_SHARING:
        return spec.ps_curve.tokens_per_s(n) / n
    step_s = float(spec.decode.step_model.t_iter_s(n, spec.decode.max_context_tokens / 2))
    return 1.0 / step_s if step_s > 0 else 1.0


def _net_in(spec: PddSpec, prompt: np.ndarray, seed: int) -> FabricInputs:
    """The kernel's network inputs (module docstring); dummies without a network."""
    net = spec.network
    if net is None:
        one_i, one_f = np.zeros(1, dtype=np.int64), np.zeros(1)
        return FabricInputs(prefill_host=one_i, decode_host=one_i, path_links=np.full((1, 1), -1, dtype=np.int64),
                            path_hops=np.zeros((1, 1), dtype=np.int64), capacity_bytes_per_s=one_f, ecmp_spine=one_i,
                            layer_bytes=one_f, last_bytes=one_f)
    pf_hosts, dec_hosts = net.hosts(spec.prefill.n_instances, spec.decode.n_instances)
    links, hops, capacity = FlowNetwork(net.fabric).kernel_inputs()
    full = prompt * float(spec.transfer.kv_bytes_per_token)
    n_layers = spec.transfer.n_layers if spec.transfer.layerwise else 1
    ecmp = stream(seed, "ecmp").integers(0, net.fabric.n_spines, size=max(2 * prompt.size, 1)).astype(np.int64)
    return FabricInputs(prefill_host=np.asarray(pf_hosts, dtype=np.int64),
                        decode_host=np.asarray(dec_hosts, dtype=np.int64), path_links=links, path_hops=hops,
                        capacity_bytes_per_s=capacity, ecmp_spine=ecmp,
                        layer_bytes=np.ascontiguousarray(full * (n_layers - 1) / n_layers),
                        last_bytes=np.ascontiguousarray(full / n_layers))


def compile_pdd(spec: PddSpec, arrival_s, prompt_tokens, output_tokens, horizon_s: float | None = None, *,
                seed: int = 0, cruise: bool = True) -> CompiledPdd:
    """Arrays for ``fleetplan.sim._kernels.pdd.kernel.run_pdd`` (module docstring).

    ``seed`` names the ECMP stream (network only); ``cruise=False`` advances decode steps one
    at a time (same results, more events: for tests and benchmarks)."""
    arrival = np.ascontiguousarray(arrival_s, dtype=np.float64)
    prompt = np.ascontiguousarray(prompt_tokens, dtype=np.int64)
    output = np.ascontiguousarray(output_tokens, dtype=np.int64)
    pf, dec, tr = spec.prefill, spec.decode, spec.transfer
    pf_code, pf_coef = pf.step_model.kernel_coefficients()
    dec_code, dec_coef = dec.step_model.kernel_coefficients()
    est_prefill = np.zeros(prompt.size)
    prefill_alone_s(prompt, int(pf.limits.max_num_batched_tokens), int(pf_code),
                    np.ascontiguousarray(pf_coef, dtype=np.float64), est_prefill)
    bandwidth = float(tr.bandwidth_bytes_per_s)
    if spec.network is not None:
        bandwidth = float(spec.network.fabric.capacity_bytes_per_s().min())
    full_s = prompt * float(tr.kv_bytes_per_token) / bandwidth
    n_layers = tr.n_layers if tr.layerwise else 1
    tail = full_s / n_layers
    overlap = full_s * (n_layers - 1) / n_layers
    est_handoff = float(tr.latency_s) + tail
    if spec.binding is Binding.EARLY:
        est_handoff = est_prefill + est_handoff
    bucket = int(spec.sibyl.bucket_tokens)
    n_buckets = int(math.ceil(int(output.max(initial=1)) / bucket)) + 2
    cfg_i = np.zeros(pc.N_CFG_I, dtype=np.int64)
    cfg_i[pc.CI_N_PREFILL] = pf.n_instances
    cfg_i[pc.CI_N_DECODE] = dec.n_instances
    _set_pool_slots(cfg_i, _PREFILL_SLOTS, pf, pf_code)
    cfg_i[pc.CI_PF_ROUTER] = _PF_ROUTER[pf.router]
    _set_pool_slots(cfg_i, _DECODE_SLOTS, dec, dec_code)
    cfg_i[pc.CI_DECODE_MODEL] = _DECODE[spec.decode_model]
    cfg_i[pc.CI_POLICY] = _POLICY[spec.policy]
    cfg_i[pc.CI_BINDING] = _BINDING[spec.binding]
    cfg_i[pc.CI_N_BUCKETS] = n_buckets
    cfg_i[pc.CI_CRUISE] = int(bool(cruise))
    cfg_i[pc.CI_SIBYL_PRESSURE] = _PRESSURE[spec.sibyl.pressure]
    cfg_i[pc.CI_SIBYL_ABLATE] = sum(_ABLATE[a] for a in spec.sibyl.ablate)
    if spec.network is not None:
        cfg_i[pc.CI_NETWORK] = 1
        cfg_i[pc.CI_NET_POLICY] = spec.network.path_policy.code
        cfg_i[pc.CI_N_HOSTS] = spec.network.fabric.n_hosts
        cfg_i[pc.CI_N_SPINES] = spec.network.fabric.n_spines
    cfg_f = np.zeros(pc.N_CFG_F, dtype=np.float64)
    cfg_f[pc.CF_LATENCY_S] = tr.latency_s
    cfg_f[pc.CF_HORIZON_S] = math.inf if horizon_s is None else float(horizon_s)
    cfg_f[pc.CF_PS_A], cfg_f[pc.CF_PS_B], cfg_f[pc.CF_PS_C] = spec.ps_curve.a, spec.ps_curve.b, spec.ps_curve.c
    cfg_f[pc.CF_BUCKET_TOKENS] = bucket
    cfg_f[pc.CF_EMA_ALPHA] = spec.sibyl.ema_alpha
    cfg_f[pc.CF_PRIOR_RATE_TOKENS_PER_S] = _prior_rate(spec)
    return CompiledPdd(
        arrival_s=arrival, prompt_tokens=prompt, output_tokens=output, est_prefill_s=est_prefill,
        est_handoff_s=np.ascontiguousarray(est_handoff, dtype=np.float64),
        xfer_overlap_s=np.ascontiguousarray(overlap, dtype=np.float64),
        xfer_tail_s=np.ascontiguousarray(tail, dtype=np.float64), cfg_i=cfg_i, cfg_f=cfg_f,
        pf_coef=np.ascontiguousarray(pf_coef, dtype=np.float64),
        dec_coef=np.ascontiguousarray(dec_coef, dtype=np.float64), net_in=_net_in(spec, prompt, seed),
    )
