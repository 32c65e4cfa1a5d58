"""Run the PDD simulator: validate, compile, call ``run_pdd``, wrap results.

``simulate_pdd`` draws the request stream from a workload (named streams ``arrivals`` and
``lengths`` of ``seed``, as ``fleetplan.sim.simulate``); ``simulate_pdd_arrays`` runs given
arrays (tests, traces).  Model and definitions: ``fleetplan.sim._kernels.pdd`` and
``fleetplan.sim.pdd.result``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.sim._kernels.pdd import codes as pc
from fleetplan.sim._kernels.pdd.kernel import run_pdd
from fleetplan.sim._kernels.pdd.state import PddOutputs
from fleetplan.sim.compile import draw_requests
from fleetplan.sim.defaults import DEFAULT_N_REQUESTS, DEFAULT_WARMUP_FRACTION
from fleetplan.sim.pdd.compile import CompiledPdd, compile_pdd
from fleetplan.sim.pdd.flows import add_flow_columns, flow_frame, summarise_network
from fleetplan.sim.pdd.result import PddResult, request_frame, summarise_pdd
from fleetplan.sim.pdd.spec import PddSpec
from fleetplan.sim.spec import ArrivalProcess

__all__ = ["PddRun", "run_compiled_pdd", "run_compiled_pdd_net", "simulate_pdd", "simulate_pdd_arrays"]

# the command line's defaults live in ``sim.defaults`` (light: shown in ``simulate pdd --help``)


def _check_run_args(rate_per_s, n_requests, seed, horizon_s, warmup_fraction) -> None:
    for name, value in (("rate_per_s", rate_per_s), ("horizon_s", horizon_s)):
        if name == "horizon_s" and value is None:
            continue
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0
        if not ok:
            raise ConfigError(f"{name} = {value!r} must be a finite number > 0")
    for name, value, low in (("n_requests", n_requests, 1), ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
            raise ConfigError(f"{name} = {value!r} must be an integer >= {low}")
    wf = warmup_fraction
    if isinstance(wf, bool) or not isinstance(wf, int | float) or not (0 <= wf < 1):
        raise ConfigError(f"warmup_fraction = {wf!r} must be in [0, 1); 0.1 trims the first 10% of arrivals")


class PddRun(NamedTuple):
    """The kernel's raw outputs (``fleetplan.sim._kernels.pdd.state.PddOutputs``) and its event count;
    the flow arrays cut to the flows started (none without a network)."""

    request_t: np.ndarray
    request_i: np.ndarray
    prefill_busy_s: np.ndarray
    decode_busy_s: np.ndarray
    n_events: int
    flow_t: np.ndarray
    flow_i: np.ndarray
    net_stats: np.ndarray


def run_compiled_pdd_net(run: CompiledPdd) -> PddRun:
    """Allocate outputs and call the kernel (``PddRun``)."""
    n = run.n_requests
    n_flows = 2 * n if run.cfg_i[pc.CI_NETWORK] else 0
    out = PddOutputs(
        request_t=np.empty((n, pc.N_OUT_T), dtype=np.float64), request_i=np.empty((n, pc.N_OUT_I), dtype=np.int64),
        prefill_busy_s=np.zeros(int(run.cfg_i[pc.CI_N_PREFILL])),
        decode_busy_s=np.zeros(int(run.cfg_i[pc.CI_N_DECODE])),
        flow_t=np.empty((n_flows, pc.N_FT)), flow_i=np.empty((n_flows, pc.N_FI), dtype=np.int64),
        net_stats=np.zeros(pc.N_NS, dtype=np.int64))
    n_events = run_pdd(run.kernel_requests(), run.kernel_config(), run.net_in, out)
    started = int(out.net_stats[pc.NS_FLOWS])
    return PddRun(out.request_t, out.request_i, out.prefill_busy_s, out.decode_busy_s, int(n_events),
                  out.flow_t[:started], out.flow_i[:started], out.net_stats)


def run_compiled_pdd(run: CompiledPdd) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Allocate outputs and call the kernel: ``(out_t, out_i, pf_busy_s, dec_busy_s, n_events)``."""
    return tuple(run_compiled_pdd_net(run))[:5]


def simulate_pdd_arrays(spec: PddSpec, arrival_s, prompt_tokens, output_tokens, rate_per_s: float = math.nan,
                        horizon_s: float | None = None,
                        warmup_fraction: float = DEFAULT_WARMUP_FRACTION, seed: int = 0) -> PddResult:
    """Simulate the given request arrays (sorted arrivals, prompt and output >= 1) on ``spec``.

    ``seed`` draws the ECMP hashes (stream ``ecmp``) when ``spec.network`` uses ECMP."""
    if not isinstance(spec, PddSpec):
        raise ConfigError(f"spec must be a PddSpec, got {type(spec).__name__}")
    _check_run_args(1.0 if math.isnan(rate_per_s) else rate_per_s, 1, seed, horizon_s, warmup_fraction)
    arrival = np.asarray(arrival_s, dtype=np.float64)
    prompt = np.asarray(prompt_tokens, dtype=np.int64)
    output = np.asarray(output_tokens, dtype=np.int64)
    n = arrival.size
    if n < 1 or prompt.shape != (n,) or output.shape != (n,):
        raise ConfigError(f"{n} arrivals, {prompt.size} prompts, {output.size} outputs; give >= 1 of each, equal")
    if not np.all(np.isfinite(arrival)) or np.any(np.diff(arrival) < 0) or arrival[0] < 0:
        raise ConfigError("arrival times must be finite, >= 0 and non-decreasing; sort the trace")
    if np.any(prompt < 1) or np.any(output < 1):
        raise ConfigError("every request needs prompt_tokens >= 1 and output_tokens >= 1; fix the workload")
    run = compile_pdd(spec, arrival, prompt, output, horizon_s, seed=int(seed))
    out_t, out_i, pf_busy, dec_busy, n_events, fl_t, fl_i, net_stats = run_compiled_pdd_net(run)
    n_warmup = min(int(math.floor(warmup_fraction * n)), n - 1)
    frame = request_frame(arrival, prompt, output, out_t, out_i, n_warmup)
    flows = network = None
    if spec.network is not None:
        flows = flow_frame(spec.network, run.net_in, out_i, fl_t, fl_i)
        add_flow_columns(frame, flows)
        network = summarise_network(spec.network, flows, frame, int(net_stats[pc.NS_PEAK_ACTIVE]))
    summary = summarise_pdd(frame, policy=spec.policy.value, binding=spec.binding.value,
                            decode_model=spec.decode_model.value, rate_per_s=rate_per_s, pf_busy_s=pf_busy,
                            dec_busy_s=dec_busy, n_events=n_events, network=network,
                            max_model_len_tokens=spec.max_model_len_tokens)
    return PddResult(requests=frame, summary=summary, flows=flows)


def simulate_pdd(spec: PddSpec, workload, rate_per_s: float, n_requests: int = DEFAULT_N_REQUESTS, seed: int = 0,
                 horizon_s: float | None = None, warmup_fraction: float = DEFAULT_WARMUP_FRACTION,
                 arrival: ArrivalProcess | str = ArrivalProcess.POISSON, cv: float = 1.0) -> PddResult:
    """Simulate ``n_requests`` arrivals at ``rate_per_s`` of ``workload`` on ``spec``.

    Parameters
    ----------
    spec : PddSpec
        Prefill pool, decode pool, transfer, policy, binding, decode model.
    workload : fleetplan.workload.Workload
        Anything with ``sample(rng, n) -> (prompt_tokens, output_tokens)``.
    rate_per_s : float
        Arrival rate (requests/s).
    seed : int
        Streams ``arrivals``, ``lengths`` and (fabric with ECMP) ``ecmp`` derive from it.
    horizon_s : float, optional
        Stop time (s); requests not finished by then are ``unfinished``.
    warmup_fraction : float
        Share of the earliest arrivals excluded from statistics.
    arrival, cv : ArrivalProcess, float
        Arrival process (Poisson by default; gamma gaps with coefficient of variation ``cv``; replay of
        the workload's trace), drawn as ``fleetplan.sim.simulate`` draws it.
    """
    _check_run_args(rate_per_s, n_requests, seed, horizon_s, warmup_fraction)
    arrival_s, prompt, output = draw_requests(workload, float(rate_per_s), int(n_requests), int(seed), arrival, cv)
    return simulate_pdd_arrays(spec, arrival_s, prompt, output, float(rate_per_s), horizon_s, warmup_fraction,
                               seed=int(seed))
