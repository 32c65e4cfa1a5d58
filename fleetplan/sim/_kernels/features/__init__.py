"""The feature kernel: iteration-level simulation with the runtime features
(docs/runtime_features_contract.md): CUDA-graph padding, speculative decoding / MTP, prefix caching,
scheduler policies (vLLM v1, SGLang, SPF, MLFQ, H2Q-BR), multi-round sessions and the
prefix-affinity router.  numpy + numba only, like the rest of ``_kernels``.

Entry point: ``level.run_iteration_features`` (called through ``fleetplan.sim.features.run``).
Modules, in the order a step goes through them:

* ``state``: the kernel's state layout (column constants of ``rq`` / ``ki`` / ``kf``), request rows,
  the waiting pairing heaps and the release heap;
* ``rng``: counter-based uniforms of the speculative acceptance draws;
* ``policy``: waiting keys and pass ranks per scheduler policy; ``h2q``: H2Q-BR's incremental ranks;
* ``schedule``: the batch builder (one pass per step), admission, KV allocation, preemption, runs of
  identical steps as one event;
* ``timing``: step durations (graphs, drafts) and step statistics;
* ``commit``: the end of a step: tokens, acceptance, completions, session releases;
* ``level``: the kernel and its event loop.

Twins: ``tests/reference/features_level.py``, ``features_sched.py``, ``features_parts.py``.
Nothing is imported here, so importing one module does not load the others.
"""
