"""Measured operator data as a step-time source: NVIDIA ``aiconfigurator-core``.

``aiconfigurator-core`` (PyPI, Apache-2.0, github.com/ai-dynamo/aiconfigurator; the optional extra
``fleetplan[aiconfigurator]``) ships per-operator timings measured per GPU system, serving engine and
engine version (GEMM by dtype and shape, context/generation attention, MLA, MoE by experts/top-k/EP,
NCCL and custom all-reduce) and a compiled engine that composes them into the latency of one engine
iteration.  This package turns those timings into the coefficients of the one step model both phases
read (``fleetplan.perf.seam``), so the analytic screen and the simulator run the same measured steps.

Entry point: ``source.measured_step_model(predictor, engine)`` -> a ``CalibratedStepModel`` whose
``source`` is the timing source label, or ``None`` when the package or its data do not cover the pool
(the roofline + engine profile then times it); ``source.timing_source(step_model)`` names the source of
any step model.  Modules, in the order data flows:

* ``coverage``: which (GPU, engine, model, parallelism, dtypes) the tables cover, as a ``MeasuredKey``;
* ``aic``: the one module that imports ``aiconfigurator_core`` (engine steps at batch shapes);
* ``table``: the grid of batch shapes, the measured step table (cached on disk) and its interpolation;
* ``fit``: the step model's coefficients from the table (bounded least squares on the log ratio);
* ``overhead``: the engine's per-step time outside the kernels (``engine_profiles/*.toml``
  ``[measured_overhead]``), added to the measured kernels;
* ``source``: the seam above.
"""

from fleetplan.perf.measured.source import ROOFLINE_SOURCE, measured_step_model, timing_source

__all__ = ["ROOFLINE_SOURCE", "measured_step_model", "timing_source"]
