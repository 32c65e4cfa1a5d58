"""The disaggregated-serving kernel: prefill pool -> KV transfer -> decode pool.

Prefill/decode disaggregation (PDD): a prefill instance runs chunked prefill only, the request's
KV moves to a decode instance chosen by an assignment policy (round-robin, ILS, SIBYL, oracle,
REQ LEVEL), pulled when that instance can hold it, over a link (latency + bytes / bandwidth,
optionally layer-wise) or as flows on a leaf-spine fabric; the decode instance runs vLLM-style
decode steps or SIBYL's processor sharing.  Attention/FFN disaggregation (AFD) runs on the same
kernel: each decode instance is one attention+FFN unit whose step model the planner linearises
(``fleetplan.plan.disagg.verify``).  numpy + numba only, like the rest of ``_kernels``.

Entry point: ``kernel.run_pdd`` (called through ``fleetplan.sim.pdd.engine``).  Modules:

* ``codes``: integer codes (policies, binding, decode model, statuses) and the ``cfg_i`` / ``cfg_f``
  and state-column layouts; ``state``: the named tuples the kernel's arrays travel in (fields and
  units in its docstring); ``queues``: FIFO lists threaded through the requests, the transfer heap;

then in the order a request goes through them:

* ``prefill``: the prefill instances' chunked-prefill steps;
* ``assign``: decode-instance assignment (loads, SIBYL's projection, survival estimator);
* ``transfer``: binding, pull-based reservations, KV transfers and handoffs;
* ``network``: KV transfers as flows on a fabric (max-min sharing from ``_kernels.flows``);
* ``decode``: decode steps with their cruise (runs of identical pure-decode steps as one event),
  or processor sharing;
* ``kernel``: ``run_pdd`` and its event loop (the model's request path in its docstring).

Twin: ``tests/reference/pdd_sim.py`` (with ``pdd.py``, ``pdd_parts.py``, ``pdd_decode.py``,
``pdd_net.py``).  Nothing is imported here, so importing ``codes`` does not load the kernel.
"""
