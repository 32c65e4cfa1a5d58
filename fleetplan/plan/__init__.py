"""Planning: which fleet to buy, verified, and how it grows.

Phase 1 (``optimize.analytical_phase``: ``space`` -> ``points`` -> ``pools`` -> ``sweep``) sizes every
candidate fleet with the analytic engine model; phase 2 (``verify``) simulates the cheapest in steady
state and searches each pool's count both ways; ``optimize.optimize`` is the entry point of both.
Around it: ``disagg/`` (pdd / afd fleets), ``headroom`` (step-time and rate margins), ``whatif`` /
``growth`` (traffic steps), ``horizon/`` (procurement plans over a forecast), ``peak`` (rate profiles),
``gridflex``, ``reliability`` (spares), ``frontier`` (cost vs latency), ``figures`` (everything a
report shows, computed here so ``report`` only formats).  Imports workload, hardware, models, perf,
queueing and sim; never report, exec or cli.
"""
