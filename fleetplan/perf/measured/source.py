"""Which source times a pool's steps: measured operator tables where they exist, the roofline elsewhere.

``measured_step_model(predictor, engine)`` is the one seam (STYLE.md principle 2): for the pool of
``predictor`` (model, GPU, parallelism, weight and KV dtypes; the roofline + engine profile) it returns

* a ``CalibratedStepModel`` (``STEP_MODEL_ROOFLINE`` coefficients, the same object both phases read:
  ``queueing.engine`` evaluates it with ``perf.linear.step_time_array_s``, the simulator kernel with
  the same expression) fitted to ``aiconfigurator-core``'s measured steps (``table``, ``fit``) plus the
  engine's non-kernel overhead (``overhead``): ``c[0] += step_s``, ``c[11] += per_seq_s``; its
  ``source`` is the timing-source label, e.g. ``"aiconfigurator-core 0.12.0 vllm 0.24.0 h100_sxm
  (meta-llama/Meta-Llama-3.1-8B, bfloat16 weights, bfloat16 KV; SILICON) + vllm non-kernel overhead
  1.66 ms/step"``, ``holdout_mape`` its error on the held-out grid shapes (kernels only) and ``scales`` the
  fitted group scales, additive terms, tile and wave, the overhead and the fit's error on the grid;
* ``None`` when the package is absent or does not cover the pool (``coverage``), or when the timing
  choice is ``roofline``, so the caller keeps the roofline predictor, labelled ``ROOFLINE_SOURCE``.
  ``measured_coverage`` gives the reason.

The timing choice (``TimingChoice``) is a parameter, ``timing`` (the CLI's flag of ``timing_source``):

* ``auto``: the measured tables time every pool they cover, the roofline the rest (installing the extra
  is then the choice);
* ``roofline``: the roofline + engine profile everywhere, as without the package;
* ``measured``: the measured tables or nothing: without the package installed, or for a pool its tables do
  not cover, a ``ConfigError`` naming the extra or the reason (``require_measured``).

``timing=None`` falls back to ``$FLEETPLAN_TIMING_SOURCE`` (documented fallback for scripts and test runs
that must reproduce roofline figures), and to ``auto`` without it.

``timing_source(step_model)`` names the source of any step model: ``perf explain`` prints it, and the plan's
JSON carries the label of every measured pool (``inputs.perf_profile[].source``, as calibrated profiles).  A
measured pool with MTP on (``perf.speculative.MtpStepModel`` over the measured step model) is labelled with
both parts: the verify step the measured step at the verify width, the draft pass its share of the step.

Cost: the first pool of a (GPU system, engine) loads AIConfigurator's tables (seconds); each pool then
compiles its operator list (about 2 s) and evaluates 89 shapes (milliseconds); the table is cached on
disk (``table.cache_dir``) and so is the fit (about a second: seven tile/wave shapes are tried), so later
runs only read two JSON files.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import json
import os
from pathlib import Path

import numpy as np

from fleetplan.errors import ConfigError
from fleetplan.names import lookup
from fleetplan.perf.calibrate import CalibratedStepModel
from fleetplan.perf.dp_instance import DataParallelInstance
from fleetplan.perf.linear import LinearStepModel
from fleetplan.perf.measured import aic
from fleetplan.perf.measured.coverage import Fp8Scheme, MeasuredKey, coverage, fp8_scheme
from fleetplan.perf.measured.fit import FIT_VERSION, MeasuredFit, fit_coefficients, step_s_of
from fleetplan.perf.measured.overhead import engine_overhead
from fleetplan.perf.measured.table import (
    GRID_VERSION,
    MeasuredTable,
    cache_dir,
    grid_shapes,
    read_cached,
    write_cached,
    write_text_cached,
)
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.perf.scaled import ScaledStepModel
from fleetplan.perf.speculative import MtpStepModel

__all__ = ["DEFAULT_FP8_SCHEME", "MEASURED_EXTRA", "MEASURED_PREFIX", "ROOFLINE_SOURCE", "TIMING_SOURCE_ENV",
           "TimingChoice", "measured_coverage", "measured_step_model", "measured_table", "require_measured",
           "timing_choice", "timing_source"]

ROOFLINE_SOURCE = "roofline+engine profile"
#: Environment variable that turns the measured source off (``roofline``) where the package is installed:
#: the one switch for runs that must reproduce roofline figures (golden files, comparisons).
TIMING_SOURCE_ENV = "FLEETPLAN_TIMING_SOURCE"
MEASURED_PREFIX = "aiconfigurator-core"
LINEAR_SOURCE = "linear W + H n (serving constants)"
#: FP8 weights without a stated scheme: per-tensor W8A8 (vLLM ``--quantization fp8`` and ModelOpt FP8
#: checkpoints); block-scaled checkpoints (DeepSeek-V3, Qwen3-*-FP8) pass ``Fp8Scheme.BLOCK``.
DEFAULT_FP8_SCHEME = Fp8Scheme.PER_TENSOR


class TimingChoice(enum.Enum):
    """Which sources may time a pool (``TIMING_SOURCE_ENV``)."""

    AUTO = "auto"  # the measured tables where they cover the pool, else the roofline
    ROOFLINE = "roofline"  # the roofline + engine profile everywhere (as without the package)
    MEASURED = "measured"  # the measured tables only: an uncovered pool or a missing package is an error


#: The optional extra that installs the measured tables.
MEASURED_EXTRA = "pip install 'fleetplan[aiconfigurator]'"


def timing_choice(timing: TimingChoice | str | None = None) -> TimingChoice:
    """``timing`` as a ``TimingChoice``; None: ``$FLEETPLAN_TIMING_SOURCE`` (default ``auto``).  An unknown
    value is an ``UnknownNameError`` listing the three."""
    if isinstance(timing, TimingChoice):
        return timing
    if timing is None:
        return lookup(TimingChoice, TIMING_SOURCE_ENV, os.environ.get(TIMING_SOURCE_ENV, TimingChoice.AUTO.value))
    return lookup(TimingChoice, "timing_source", timing)


def require_measured(timing: TimingChoice | str | None = None) -> TimingChoice:
    """``timing_choice(timing)``, checked: ``measured`` without ``aiconfigurator-core`` installed is a
    ``ConfigError`` naming the extra (one line, before any pool is placed)."""
    choice = timing_choice(timing)
    if choice is TimingChoice.MEASURED and aic.package_version() is None:
        raise ConfigError(f"`timing_source` measured needs {aic.DISTRIBUTION}, which is not installed; run "
                          f"{MEASURED_EXTRA}, or use `timing_source` auto or roofline", param="timing_source",
                          value=choice.value)
    return choice


def measured_coverage(predictor: StepTimePredictor, engine: str = "vllm",
                      scheme: Fp8Scheme | str = DEFAULT_FP8_SCHEME,
                      timing: TimingChoice | str | None = None) -> MeasuredKey | str:
    """The pool's ``MeasuredKey``, or why the measured source does not time it (a sentence fragment)."""
    if timing_choice(timing) is TimingChoice.ROOFLINE:
        return "timing source roofline" if timing is not None else f"{TIMING_SOURCE_ENV}={TimingChoice.ROOFLINE.value}"
    version = aic.package_version()
    if version is None:
        return f"{aic.DISTRIBUTION} not installed ({MEASURED_EXTRA})"
    return coverage(predictor.model, predictor.gpu.name, engine, predictor.parallelism, predictor.weight_dtype,
                    predictor.kv_dtype, fp8_scheme(scheme), aic.configs_dir())


@functools.lru_cache(maxsize=256)
def _table(key: MeasuredKey, version: str) -> MeasuredTable | str:
    path = cache_dir() / f"{MEASURED_PREFIX}-{version}-g{GRID_VERSION}-{key.slug()}.json"
    cached = read_cached(path)
    if cached is not None:
        return cached
    try:
        engine_version = aic.database_version(key.system, key.backend)
        if engine_version is None:
            return f"no {key.backend} tables for {key.system}"
        engine = aic.AicEngine(key, engine_version)
        rows = grid_shapes()
        step_s = [(engine.prefill_ms(b, t) if phase == "prefill" else engine.decode_ms(b, t)) * 1e-3
                  for phase, b, t, _ in rows]
        label = (f"{MEASURED_PREFIX} {version} {key.backend} {engine_version} {key.system} ({key.aic_model}, "
                 f"{key.gemm_quant} weights, {key.kv_quant} KV; {aic.DATABASE_MODE})")
        table = MeasuredTable.from_rows(label, key.aic_model, rows, step_s)
    # AIConfigurator raises many kinds of errors for data it lacks (a quant mode without tables, an
    # unsupported operator); each means "not covered", and the pool keeps the roofline.
    except Exception as err:  # noqa: BLE001
        return f"{MEASURED_PREFIX} cannot time {key.slug()}: {type(err).__name__}: {str(err)[:160]}"
    write_cached(path, table)
    return table


def measured_table(predictor: StepTimePredictor, engine: str = "vllm",
                   scheme: Fp8Scheme | str = DEFAULT_FP8_SCHEME,
                   timing: TimingChoice | str | None = None) -> MeasuredTable | str:
    """The pool's measured step table (``table``), or why there is none."""
    key = measured_coverage(predictor, engine, scheme, timing)
    if isinstance(key, str):
        return key
    return _table(key, aic.package_version())


def _fit_path(key: MeasuredKey, version: str, base: np.ndarray) -> Path:
    digest = hashlib.sha1(np.asarray(base, dtype=np.float64).tobytes()).hexdigest()[:16]
    return cache_dir() / f"{MEASURED_PREFIX}-{version}-g{GRID_VERSION}-f{FIT_VERSION}-{key.slug()}-{digest}.json"


def _fitted(key: MeasuredKey, version: str, table: MeasuredTable, code: int, base: np.ndarray) -> MeasuredFit:
    """The fit of ``table`` from ``base`` (cached on disk beside the table: it takes about a second)."""
    path = _fit_path(key, version, base)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return MeasuredFit(tuple(float(c) for c in doc["coefficients"]), dict(doc["scales"]),
                           float(doc["fit_max_abs"]), float(doc["fit_within_10pct"]))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    fit = fit_coefficients(code, base, table.calibration_data())
    write_text_cached(path, json.dumps(dataclasses.asdict(fit)))
    return fit


def measured_step_model(predictor: StepTimePredictor, engine: str = "vllm",
                        scheme: Fp8Scheme | str = DEFAULT_FP8_SCHEME,
                        timing: TimingChoice | str | None = None,
                        host_overlapped: bool = False) -> CalibratedStepModel | None:
    """The measured step model of ``predictor``'s pool (module docstring), None where it is not covered.

    Parameters
    ----------
    predictor : StepTimePredictor
        The pool's roofline predictor (model, GPU, parallelism, dtypes, the engine profile's options): the
        shape of the fitted terms and the fallback.
    engine : str
        Engine profile name (``vllm``, ``sglang``, ``trtllm``): whose measured tables and overhead.
    scheme : Fp8Scheme or str
        How FP8 weights are scaled (``fp8`` per tensor, ``fp8_block``); read only for FP8 weights.
    timing : TimingChoice, str or None
        ``auto``, ``roofline`` or ``measured`` (module docstring); None: ``$FLEETPLAN_TIMING_SOURCE``, else auto.
    host_overlapped : bool
        The engine overlaps its per-step host work with the GPU (vLLM's async scheduling): the fitted per-step
        overhead outside the kernels is not added (its per-sequence part is).

    Raises
    ------
    ConfigError
        ``timing`` is ``measured`` and the package is missing or its tables do not cover the pool.
    """
    if not isinstance(predictor, StepTimePredictor):
        raise ConfigError(f"measured_step_model needs the pool's StepTimePredictor, got {type(predictor).__name__}")
    strict = require_measured(timing) is TimingChoice.MEASURED
    key = measured_coverage(predictor, engine, scheme, timing)
    table = key if isinstance(key, str) else _table(key, aic.package_version())
    if isinstance(table, str):
        if strict:
            raise ConfigError(f"`timing_source` measured: {predictor.model.name} on {predictor.gpu.name} at "
                              f"{predictor.parallelism.flags()} is not covered ({table}); use `timing_source` auto "
                              "(the roofline times what the tables lack) or another GPU/engine", param="timing_source",
                              value=TimingChoice.MEASURED.value)
        return None
    version = aic.package_version()
    code, base = predictor.kernel_coefficients()
    fit = _fitted(key, version, table, code, base)
    held = table.calibration_data(held_out=True)
    holdout_mape = float(np.mean(np.abs(step_s_of(np.array(fit.coefficients), held) / held.step_s - 1.0)))
    over = engine_overhead(engine)
    step_s = 0.0 if host_overlapped else over.step_s
    coef = list(fit.coefficients)
    coef[0] += step_s
    coef[11] += over.per_seq_s
    p = predictor
    overlapped = ", async scheduling (per-step overhead overlapped)" if host_overlapped else ""
    return CalibratedStepModel(
        coefficients=tuple(coef), scales={**fit.scales, "overhead_step_s": step_s,
                                          "overhead_per_seq_s": over.per_seq_s, "grid_max_abs_error": fit.fit_max_abs,
                                          "grid_within_10pct": fit.fit_within_10pct},
        model=p.model.name, gpu=p.gpu.name, parallelism=p.parallelism.flags(), weight_dtype=p.weight_dtype.value,
        kv_dtype=p.kv_dtype.value, holdout_mape=holdout_mape, n_rows=table.calibration_data().n_rows,
        source=f"{table.label} + {over.label()}{overlapped}")


def timing_source(step_model) -> str:
    """Which source times ``step_model``'s steps: the measured label, the roofline, a calibration or the
    linear constants (a slowed model adds its factor, a data-parallel-attention instance its ranks:
    ``perf.dp_instance``); ``ConfigError`` for an unknown kind."""
    if isinstance(step_model, CalibratedStepModel):
        if step_model.source.startswith(MEASURED_PREFIX):
            return step_model.source
        return f"calibrated profile ({step_model.source})"
    if isinstance(step_model, StepTimePredictor):
        return ROOFLINE_SOURCE
    if isinstance(step_model, LinearStepModel):
        return LINEAR_SOURCE
    if isinstance(step_model, ScaledStepModel):
        return f"{timing_source(step_model.base)} x {step_model.factor:g}"
    if isinstance(step_model, DataParallelInstance):
        return f"{timing_source(step_model.base)}, the batch split over {step_model.ranks} attention ranks"
    if isinstance(step_model, MtpStepModel):
        frac = step_model.draft_fraction()
        draft = "" if frac is None else (f" (verify: this step at the verify width; draft pass: {frac:.3g} x this "
                                         "step, one MTP layer and the LM head, the tables holding no MTP module)")
        return (f"{timing_source(step_model.base)}, MTP {step_model.num_speculative_tokens} draft(s) at acceptance "
                f"{step_model.acceptance:g}{draft}")
    raise ConfigError(f"{type(step_model).__name__} is not a known step model; cannot name its timing source")
