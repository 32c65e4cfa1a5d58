"""Named groups of the PDD kernel's arrays: what travels together, as named tuples.

numba passes a ``collections.namedtuple`` of arrays to a kernel as one typed argument and builds
one inside a kernel as cheaply as a plain tuple; a helper reads ``fabric.capacity_bytes_per_s``
where it read ``net_in[4]``, so a field added later shifts nothing.  The kernel's arguments are
built once by the Python wrapper (``fleetplan.sim.pdd.compile`` and ``.engine``); the kernel builds
its own state.  The columns of the 2-D arrays (``OT_*``, ``OI_*``, ``RI_*``, ``PI_*``, ``DI_*``,
``DF_*``, ``FT_*``, ``FI_*``, ``NF_*``, ``NI_*``, ``NS_*``) and the ``cfg_i`` / ``cfg_f`` slots
(``CI_*``, ``CF_*``) are named in ``codes``.  Shapes: N requests, P prefill instances, D decode
instances, F = 2N flows (0 without a fabric), L links, H hosts, S spines; dtypes ``i8`` int64,
``f8`` float64, ``b1`` bool.

Kernel arguments (``run_pdd(requests, config, fabric, outputs)``):

``PddRequests`` (sorted by arrival): ``arrival_s`` f8[N] arrival time (s); ``prompt_tokens``,
``output_tokens`` i8[N]; ``est_handoff_s`` f8[N] SIBYL's estimate of the time from binding to
handoff (s); ``xfer_overlap_s`` f8[N] the part of the KV transfer that may overlap prefill from the
grant on (s, layer-wise streaming, else 0); ``xfer_tail_s`` f8[N] the rest after prefill (s).

``PddConfig``: ``cfg_i`` i8[N_CFG_I] pool limits and codes (``CI_*``); ``cfg_f`` f8[N_CFG_F]
latency (s), horizon (s), the processor-sharing curve, SIBYL's scalars (``CF_*``); ``pf_coef``,
``dec_coef`` f8[N_STEP_COEFS] step-model coefficients of the prefill and decode pools (seconds).

``FabricInputs`` (``CI_NETWORK = 1``; one-element dummies without a fabric): ``prefill_host`` i8[P]
and ``decode_host`` i8[D] host of each instance; ``path_links`` i8[H * H * S, max hops] links of
each path and ``path_hops`` i8[H, H] its length (``fleetplan.sim.network.FlowNetwork``);
``capacity_bytes_per_s`` f8[L] link capacities; ``ecmp_spine`` i8[F] pre-drawn spine of each flow
(ECMP hash); ``layer_bytes`` f8[N] bytes of the layers' flow (all but the last layer, layer-wise
only, else 0); ``last_bytes`` f8[N] bytes of the last flow.

``PddOutputs`` (written by the kernel): ``request_t`` f8[N, N_OUT_T] event times of each request
(s, inf when not reached; ``OT_*``); ``request_i`` i8[N, N_OUT_I] instances, preemptions, status,
assignment optimality (``OI_*``); ``prefill_busy_s`` f8[P] and ``decode_busy_s`` f8[D] busy time
of each instance (s); ``flow_t`` f8[F, N_FT] start and end time of each flow (s); ``flow_i``
i8[F, N_FI] request, kind and spine of each flow; ``net_stats`` i8[N_NS] flows started and peak
flows active at once (``NS_*``).

Kernel state (built by ``run_pdd``; the helpers take these groups whole):

``RequestState``: ``ri`` i8[N, N_RI] per-request counters and links (``RI_*``: computed, target
and generated tokens, KV blocks held on the decode and on the prefill side, FIFO link, pending-list
links, tokens scheduled in the step in flight, network phase ``NET_*``); ``v_join_tokens`` f8[N]
processor-sharing virtual time at which the request joined the running set (tokens).

``PrefillState``: ``pi`` i8[P, N_PI] (``PI_*``: running requests, waiting queue head and tail, free
KV blocks, requests outstanding: queued, prefilling or holding KV); ``step_start_s`` f8[P] start of
the step in flight (s); ``run`` i8[P, prefill max_num_seqs] running requests in admission order;
``step_end_s`` f8[leaves(P)] end of the step in flight (s, inf when idle; keys of the event tree).

``DecodeState``: ``di`` i8[D, N_DI] (``DI_*``: running requests, waiting (preempted) queue,
reservation queue and pending list (heads and tails), free KV blocks, token load, requests in
decode, transfers in flight, the cruise's step counts and context); ``df`` f8[D, N_DF] (``DF_*``:
processor-sharing virtual time (tokens) and its last update (s), step start (s), the cruise's
step ends (s) and step-time parts (s, s per context token)); ``run`` i8[D, decode max_num_seqs];
``step_end_s`` f8[leaves(D)] next event of each instance (s, inf when idle).

``Statistics`` (SIBYL's estimators): ``survival`` f8[B] survival of the output length per bucket of
``CF_BUCKET_TOKENS`` tokens; ``completed`` f8[N_GF] tokens and decode seconds of the completed
decodes (``GF_*``; their ratio is the system decode rate, tokens/s).

``Transfers``: the transfer heap, ``heap_end_s`` f8[N] event times (s) and ``heap_req`` i8[N]
requests, ordered by (time, request); ``counters`` i8[N_GI] round-robin cursors of the prefill
router and of decode assignment, and the heap's size (``GI_*``).

``FabricState`` (``network``; sized for F flows): ``net_f`` f8[N_NF] network clock and next
completion time (s, ``NF_*``); ``net_i`` i8[N_NI] active flows, flows started, rates stale, peak
active, completions pending and the next one (``NI_*``); ``active`` i8[F] active flows in start
order; ``remaining_bytes`` f8[F]; ``rate_bytes_per_s`` f8[F] max-min rate of each active flow;
``frozen`` b1[F] progressive-filling scratch; ``flow_links`` i8[F, max hops] and ``flow_hops``
i8[F] the path of each flow; ``link_flows`` i8[L] active flows on each link; ``cap_left_bytes_per_s``
f8[L] and ``n_left`` i8[L] progressive-filling scratch; ``done`` i8[F] the flows completing at the
network clock, handled one per event.
"""

from __future__ import annotations

from collections import namedtuple

__all__ = ["DecodeState", "FabricInputs", "FabricState", "PddConfig", "PddOutputs", "PddRequests", "PrefillState",
           "RequestState", "Statistics", "Transfers"]

PddRequests = namedtuple("PddRequests", ["arrival_s", "prompt_tokens", "output_tokens", "est_handoff_s",
                                         "xfer_overlap_s", "xfer_tail_s"])
PddConfig = namedtuple("PddConfig", ["cfg_i", "cfg_f", "pf_coef", "dec_coef"])
FabricInputs = namedtuple("FabricInputs", ["prefill_host", "decode_host", "path_links", "path_hops",
                                           "capacity_bytes_per_s", "ecmp_spine", "layer_bytes", "last_bytes"])
PddOutputs = namedtuple("PddOutputs", ["request_t", "request_i", "prefill_busy_s", "decode_busy_s", "flow_t",
                                       "flow_i", "net_stats"])
FabricState = namedtuple("FabricState", ["net_f", "net_i", "active", "remaining_bytes", "rate_bytes_per_s", "frozen",
                                         "flow_links", "flow_hops", "link_flows", "cap_left_bytes_per_s", "n_left",
                                         "done"])
RequestState = namedtuple("RequestState", ["ri", "v_join_tokens"])
PrefillState = namedtuple("PrefillState", ["pi", "step_start_s", "run", "step_end_s"])
DecodeState = namedtuple("DecodeState", ["di", "df", "run", "step_end_s"])
Statistics = namedtuple("Statistics", ["survival", "completed"])
Transfers = namedtuple("Transfers", ["heap_end_s", "heap_req", "counters"])
