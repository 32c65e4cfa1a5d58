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
* ``None`` when the package is absent or does not cover the pool (``coverage``), or when
  ``$FLEETPLAN_TIMING_SOURCE`` is ``roofline``, so the caller keeps the roofline predictor, labelled
  ``ROOFLINE_SOURCE``.  ``measured_coverage`` gives the reason.  Installing the extra is the choice:
  where it is installed the measured tables time every pool they cover (``auto``).

``timing_source(step_model)`` names the source of any step model: ``perf explain`` prints it, and the plan's
JSON carries the label of every measured pool (``inputs.perf_profile[].source``, as calibrated profiles).

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

__all__ = ["DEFAULT_FP8_SCHEME", "MEASURED_PREFIX", "ROOFLINE_SOURCE", "TIMING_SOURCE_ENV", "TimingChoice",
           "measured_coverage", "measured_step_model", "measured_table", "timing_choice", "timing_source"]

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


def timing_choice() -> TimingChoice:
    """``$FLEETPLAN_TIMING_SOURCE`` (default ``auto``); an unknown value is an ``UnknownNameError``."""
    return lookup(TimingChoice, TIMING_SOURCE_ENV, os.environ.get(TIMING_SOURCE_ENV, TimingChoice.AUTO.value))


def measured_coverage(predictor: StepTimePredictor, engine: str = "vllm",
                      scheme: Fp8Scheme | str = DEFAULT_FP8_SCHEME) -> MeasuredKey | str:
    """The pool's ``MeasuredKey``, or why the measured source does not time it (a sentence fragment)."""
    if timing_choice() is TimingChoice.ROOFLINE:
        return f"{TIMING_SOURCE_ENV}={TimingChoice.ROOFLINE.value}"
    version = aic.package_version()
    if version is None:
        return f"{aic.DISTRIBUTION} not installed (pip install 'fleetplan[aiconfigurator]')"
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
                   scheme: Fp8Scheme | str = DEFAULT_FP8_SCHEME) -> MeasuredTable | str:
    """The pool's measured step table (``table``), or why there is none."""
    key = measured_coverage(predictor, engine, scheme)
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
                        scheme: Fp8Scheme | str = DEFAULT_FP8_SCHEME) -> CalibratedStepModel | None:
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
    """
    if not isinstance(predictor, StepTimePredictor):
        raise ConfigError(f"measured_step_model needs the pool's StepTimePredictor, got {type(predictor).__name__}")
    key = measured_coverage(predictor, engine, scheme)
    if isinstance(key, str):
        return None
    version = aic.package_version()
    table = _table(key, version)
    if isinstance(table, str):
        return None
    code, base = predictor.kernel_coefficients()
    fit = _fitted(key, version, table, code, base)
    held = table.calibration_data(held_out=True)
    holdout_mape = float(np.mean(np.abs(step_s_of(np.array(fit.coefficients), held) / held.step_s - 1.0)))
    over = engine_overhead(engine)
    coef = list(fit.coefficients)
    coef[0] += over.step_s
    coef[11] += over.per_seq_s
    p = predictor
    return CalibratedStepModel(
        coefficients=tuple(coef), scales={**fit.scales, "overhead_step_s": over.step_s,
                                          "overhead_per_seq_s": over.per_seq_s, "grid_max_abs_error": fit.fit_max_abs,
                                          "grid_within_10pct": fit.fit_within_10pct},
        model=p.model.name, gpu=p.gpu.name, parallelism=p.parallelism.flags(), weight_dtype=p.weight_dtype.value,
        kv_dtype=p.kv_dtype.value, holdout_mape=holdout_mape, n_rows=table.calibration_data().n_rows,
        source=f"{table.label} + {over.label()}")


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
    raise ConfigError(f"{type(step_model).__name__} is not a known step model; cannot name its timing source")
