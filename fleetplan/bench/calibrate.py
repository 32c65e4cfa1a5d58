"""Calibrate the predictor's efficiencies on a deployment's own serving measurements.

Measurements (``ServingMeasurement``): each is one benchmark run with its client settings and
its measured means, read from

* a ``vllm bench serve`` result JSON (``read_bench_result``): client settings ``num_prompts``,
  ``request_rate``, ``burstiness``, ``max_concurrency``; request lengths from ``input_lens`` /
  ``output_lens`` when saved (its ``save_detailed`` option), else the mean lengths
  ``total_input_tokens / completed`` and ``total_output_tokens / completed`` (exact for the
  random dataset with ``random_range_ratio`` 0); measured ``mean_ttft_ms``, ``mean_tpot_ms``
  (else ``mean_itl_ms``) and ``output_throughput``.  fleetplan's own result JSON carries the
  simulated configuration under ``fleetplan`` and is read the same way.  Every one of those
  measured means, and ``completed``, ``duration``, ``total_input_tokens`` and
  ``total_output_tokens``, must be present as a finite number above 0 (``RESULT_RULES``): a run
  file with a missing, null, negative or zero value is refused in one line naming the field,
  never fitted on.  The client's endpoint is the file's ``backend`` (``client_backend``): a chat
  endpoint's run (vLLM's ``openai-chat``; ``sglang.bench_serving``'s ``*-chat`` backends) is
  re-simulated as one, its prompts prefilled with the chat template's tokens and a role chunk
  streamed first (``fleetplan.bench.serve``), every other name as the completions endpoint; a file
  without the key is vLLM's default ``vllm``.  fleetplan's own file records its client under
  ``fleetplan.client_backend`` and the template tokens it prefilled under
  ``fleetplan.chat_template_tokens``.
* a vLLM server's Prometheus ``/metrics`` text (``read_prometheus_metrics``) plus the client
  settings of the run that produced it (given by the caller): the means ``_sum / _count`` of the
  histograms ``vllm:time_to_first_token_seconds`` and ``vllm:time_per_output_token_seconds``
  (or its successor ``vllm:inter_token_latency_seconds``); ``vllm:iteration_tokens_total`` is
  read for the report (mean tokens per engine step).

Fit (``fit_serving``): the ``FIT_OPTIONS`` of ``PredictorOptions`` (GEMM efficiency, weight
streaming efficiency, host time per step) minimise the sum of squared relative errors of every
measured mean, each run simulated with ``run_bench_serve``, by ``scipy.optimize.least_squares``
(trust-region reflective) within ``FIT_BOUNDS``; finite-difference step ``FIT_DIFF_STEP``.
Residuals before (the engine profile's options) and after are returned.  The fitted predictor's
kernel coefficients become a ``CalibratedStepModel`` (``EngineArgs.perf_profile``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import numpy as np

from fleetplan.bench.datasets import DatasetSpec
from fleetplan.bench.instance import EngineArgs
from fleetplan.bench.serve import CHAT_BACKEND, CLIENT_BACKENDS, BenchServeConfig, run_bench_serve
from fleetplan.errors import ConfigError, DataFormatError
from fleetplan.perf.calibrate import CalibratedStepModel
from fleetplan.perf.overheads import PredictorOptions

__all__ = ["FIT_BOUNDS", "FIT_OPTIONS", "ServingFit", "ServingMeasurement", "client_backend", "fit_serving",
           "read_bench_result", "read_prometheus_metrics", "measurement_from_metrics"]

FIT_OPTIONS = ("gemm_efficiency", "weight_bandwidth_efficiency", "cpu_overhead_s")
FIT_BOUNDS = ((0.2, 1.0), (0.3, 1.0), (0.0, 10e-3))  # fractions of peak; seconds per step
FIT_DIFF_STEP = 1e-3
METRIC_KEYS = ("mean_ttft_ms", "mean_tpot_ms", "output_throughput")
REQUIRED_RESULT_KEYS = ("completed", "duration", "total_input_tokens", "total_output_tokens")
TTFT_HISTOGRAM = "vllm:time_to_first_token_seconds"
TPOT_HISTOGRAMS = ("vllm:time_per_output_token_seconds", "vllm:inter_token_latency_seconds")
ITERATION_TOKENS_HISTOGRAM = "vllm:iteration_tokens_total"
#: What each value of a result file counts; each must be a finite number above 0.
RESULT_RULES = {"completed": "requests that completed", "duration": "seconds the run took",
                "total_input_tokens": "prompt tokens sent", "total_output_tokens": "tokens generated",
                "mean_ttft_ms": "a latency in ms", "mean_tpot_ms": "a latency in ms", "mean_itl_ms": "a latency in ms",
                "output_throughput": "tokens/s"}


@dataclass(frozen=True, eq=False)
class ServingMeasurement:
    """One measured run: client settings, request lengths and measured means (vLLM's keys and units)."""

    source: str
    num_prompts: int
    request_rate_per_s: float
    burstiness: float
    max_concurrency: int | None
    dataset: DatasetSpec
    measured: MappingProxyType = field(hash=False)  # METRIC_KEYS subset -> value
    lengths: tuple[np.ndarray, np.ndarray] | None = None  # per-request (prompt, output) when the file has them
    backend: str = "vllm"  # the client's endpoint (``CLIENT_BACKENDS``; ``client_backend``)
    chat_template_tokens: int | None = None  # the chat endpoint's template tokens; None = the model's

    def config(self, seed: int = 0) -> BenchServeConfig:
        return BenchServeConfig(self.dataset, self.num_prompts, self.request_rate_per_s, self.burstiness,
                                self.max_concurrency, seed, ("ttft", "tpot"), (99.0,), backend=self.backend,
                                chat_template_tokens=self.chat_template_tokens)


def client_backend(name: str, value) -> str:
    """The client endpoint of a result file's ``backend`` value (module docstring): a ``CLIENT_BACKENDS`` name as
    it is, another name ending in ``chat`` (``sglang.bench_serving``'s ``sglang-oai-chat``, ``vllm-chat``,
    ``lmdeploy-chat``) ``openai-chat``, any other ``openai`` (a completions-style endpoint), None ``vllm`` (the
    default of ``vllm bench serve``'s ``backend`` option); ``DataFormatError`` for a value that is not a string."""
    if value is None:
        return "vllm"
    if not isinstance(value, str) or not value:
        raise DataFormatError(name, "backend", f"`backend` {value!r} is not the name of a benchmark client",
                              "give the unedited result JSON, whose backend names the client's endpoint")
    if value in CLIENT_BACKENDS:
        return value
    return CHAT_BACKEND if value.endswith("chat") else "openai"


def read_bench_result(path: str | Path, input_len: int | None = None, output_len: int | None = None,
                      chat_template_tokens: int | None = None) -> ServingMeasurement:
    """A ``vllm bench serve`` (or ``fleetplan bench serve``) result JSON as a measurement (module docstring).
    ``chat_template_tokens`` applies to a chat endpoint's run only (None: the count fleetplan's own file recorded,
    else the model's)."""
    name = str(path)
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise DataFormatError(name, None, f"cannot read: {err.strerror}", "check the path") from None
    except json.JSONDecodeError as err:
        raise DataFormatError(name, f"line {err.lineno}", "is not JSON",
                              "give the result file vllm bench serve saves (its save_result option)") from None
    missing = [k for k in REQUIRED_RESULT_KEYS if not isinstance(doc, dict) or k not in doc]
    if missing or not any(k in doc for k in (*METRIC_KEYS, "mean_itl_ms")):
        lacking = missing or ["mean_ttft_ms, mean_tpot_ms, output_throughput"]
        raise DataFormatError(name, None, f"is not a vllm bench serve result (no {', '.join(lacking)})",
                              "give the result file vllm bench serve saves (its save_result option)")
    tpot_key = "mean_tpot_ms" if "mean_tpot_ms" in doc or "mean_itl_ms" not in doc else "mean_itl_ms"
    for key in (*REQUIRED_RESULT_KEYS, "mean_ttft_ms", tpot_key, "output_throughput"):
        _check_result_value(name, doc, key)
    measured = {k: float(doc[k]) for k in ("mean_ttft_ms", "output_throughput")}
    measured["mean_tpot_ms"] = float(doc[tpot_key])
    completed = int(doc["completed"])
    rate = doc.get("request_rate", "inf")
    rate_per_s = math.inf if rate in ("inf", None) else float(rate)
    conc = doc.get("max_concurrency")
    lengths = None
    if isinstance(doc.get("input_lens"), list) and isinstance(doc.get("output_lens"), list) and input_len is None:
        try:
            lengths = (np.maximum(np.array(doc["input_lens"], dtype=np.int64), 1),
                       np.maximum(np.array(doc["output_lens"], dtype=np.int64), 1))
        except (TypeError, ValueError):
            raise DataFormatError(name, "input_lens", "lengths are not integers") from None
        n = int(lengths[0].size)
        dataset = DatasetSpec(random_input_len=int(lengths[0].mean()), random_output_len=int(lengths[1].mean()))
    else:
        mean_in = input_len or max(1, round(int(doc["total_input_tokens"]) / completed))
        mean_out = output_len or max(1, round(int(doc["total_output_tokens"]) / completed))
        dataset = DatasetSpec(random_input_len=int(mean_in), random_output_len=int(mean_out))
        n = int(doc.get("num_prompts") or completed)
    own = doc.get("fleetplan") if isinstance(doc.get("fleetplan"), dict) else None
    if own is not None:
        recorded = own.get("chat_template_tokens")
        # a file of an earlier release has no client_backend: it ran the chat endpoint when it prefilled template tokens
        earlier = CHAT_BACKEND if isinstance(recorded, int) and recorded > 0 else None
        backend = client_backend(name, own.get("client_backend", earlier))
        if chat_template_tokens is None and backend == CHAT_BACKEND and isinstance(recorded, int):
            chat_template_tokens = recorded
    else:
        backend = client_backend(name, doc.get("backend", doc.get("endpoint_type")))
    return ServingMeasurement(name, n, rate_per_s, float(doc.get("burstiness") or 1.0),
                              None if conc is None else int(conc), dataset, MappingProxyType(measured), lengths,
                              backend, chat_template_tokens if backend == CHAT_BACKEND else None)


def _check_result_value(name: str, doc: dict, key: str) -> None:
    """``DataFormatError`` naming ``key`` unless ``doc[key]`` is a finite number above 0 (``RESULT_RULES``)."""
    value = doc.get(key)
    if key not in doc or value is None:
        problem = f"the measured value `{key}` is missing" if key not in doc else f"`{key}` is null"
    elif isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        problem = f"`{key}` {value!r} is not a finite number"
    elif value <= 0:
        problem = f"`{key}` {value!r} must be above 0 ({RESULT_RULES.get(key, 'a measured mean')})"
    else:
        return
    raise DataFormatError(name, key, problem, "give the unedited result JSON of a run that completed requests "
                          "(vllm bench serve's save_result option), or drop this file")


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+([-+0-9.eEinfNa]+)")


def read_prometheus_metrics(path: str | Path) -> dict[str, float]:
    """Means of vLLM's latency histograms in a ``/metrics`` dump: ``ttft_s``, ``tpot_s`` and, when present,
    ``iteration_tokens`` (mean tokens per engine step); ``DataFormatError`` without the TTFT and TPOT ones."""
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise DataFormatError(name, None, f"cannot read: {err}", "check the path") from None
    sums: dict[str, float] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line.strip())
        if not m:
            continue
        metric, value = m.group(1), m.group(3)
        try:
            sums[metric] = sums.get(metric, 0.0) + float(value)  # summed over label sets (engines, models)
        except ValueError:
            continue

    def mean(histogram: str) -> float | None:
        count = sums.get(f"{histogram}_count")
        return None if not count else sums.get(f"{histogram}_sum", 0.0) / count

    ttft = mean(TTFT_HISTOGRAM)
    tpot = next((v for h in TPOT_HISTOGRAMS if (v := mean(h)) is not None), None)
    if ttft is None or tpot is None:
        lacking = [TTFT_HISTOGRAM] if ttft is None else []
        lacking += [" or ".join(TPOT_HISTOGRAMS)] if tpot is None else []
        raise DataFormatError(name, None, f"has no (non-empty) histogram {', '.join(lacking)}",
                              "give the text of a vLLM server's /metrics after the benchmark run")
    out = {"ttft_s": ttft, "tpot_s": tpot}
    it = mean(ITERATION_TOKENS_HISTOGRAM)
    if it is not None:
        out["iteration_tokens"] = it
    return out


def measurement_from_metrics(path: str | Path, cfg: BenchServeConfig) -> ServingMeasurement:
    """A measurement from a ``/metrics`` dump and the client settings ``cfg`` of its run."""
    means = read_prometheus_metrics(path)
    measured = {"mean_ttft_ms": 1e3 * means["ttft_s"], "mean_tpot_ms": 1e3 * means["tpot_s"]}
    return ServingMeasurement(str(path), cfg.num_prompts, cfg.request_rate_per_s, cfg.burstiness, cfg.max_concurrency,
                              cfg.dataset, MappingProxyType(measured), backend=cfg.backend,
                              chat_template_tokens=cfg.chat_template_tokens)


@dataclass(frozen=True, eq=False)
class ServingFit:
    """Fitted options, residuals (relative, per measurement and metric) before and after, and the profile."""

    options: PredictorOptions
    labels: tuple[str, ...]
    residuals_before: np.ndarray
    residuals_after: np.ndarray
    profile: CalibratedStepModel


def _with(base: PredictorOptions, x: np.ndarray) -> PredictorOptions:
    return dataclasses.replace(base, **{name: float(v) for name, v in zip(FIT_OPTIONS, x, strict=True)})


def predicted_metrics(engine: EngineArgs, m: ServingMeasurement, seed: int = 0) -> dict[str, float]:
    """The simulated counterparts of ``m.measured``."""
    metrics = run_bench_serve(engine, m.config(seed), m.lengths).metrics
    return {k: float(metrics[k]) for k in m.measured}


def _residuals(engine: EngineArgs, measurements, seed: int) -> np.ndarray:
    out = []
    for m in measurements:
        pred = predicted_metrics(engine, m, seed)
        out += [pred[k] / v - 1.0 for k, v in m.measured.items()]
    return np.array(out)


def fit_serving(engine: EngineArgs, measurements: list[ServingMeasurement], seed: int = 0) -> ServingFit:
    """Fit ``FIT_OPTIONS`` to ``measurements`` (module docstring); ``engine.options`` is the start."""
    from scipy.optimize import least_squares

    if not measurements:
        raise ConfigError("no serving measurements to calibrate on; give `bench_result` FILE or `metrics` FILE",
                          param="measurements")
    if engine.perf_profile is not None:
        raise ConfigError("calibrate from the predictor, not from a `perf_profile`; drop `perf_profile`",
                          param="perf_profile")
    labels = tuple(f"{Path(m.source).name}:{k}" for m in measurements for k in m.measured)
    if len(labels) < len(FIT_OPTIONS):
        raise ConfigError(f"{len(labels)} measured means cannot fix {len(FIT_OPTIONS)} parameters; give more runs")
    base = engine.options
    x0 = np.array([getattr(base, n) for n in FIT_OPTIONS], dtype=np.float64)
    lo, hi = np.array([b[0] for b in FIT_BOUNDS]), np.array([b[1] for b in FIT_BOUNDS])
    x0 = np.clip(x0, lo + 1e-9, hi - 1e-9)

    def fun(x):
        return _residuals(dataclasses.replace(engine, options=_with(base, x)), measurements, seed)

    before = fun(x0)
    sol = least_squares(fun, x0, bounds=(lo, hi), diff_step=FIT_DIFF_STEP, x_scale=np.maximum(x0, 1e-4))
    options = _with(base, sol.x)
    after = fun(sol.x)
    fitted = dataclasses.replace(engine, options=options)
    pred = fitted.predictor()
    profile = CalibratedStepModel(
        coefficients=tuple(float(c) for c in pred.kernel_coefficients()[1]),
        scales=MappingProxyType({n: float(getattr(options, n)) for n in FIT_OPTIONS}),
        model=engine.model.name, gpu=engine.gpu.name, parallelism=engine.parallelism.flags(),
        weight_dtype=engine.weight_dtype.value, kv_dtype=engine.kv_cache_dtype.value,
        holdout_mape=float(np.mean(np.abs(after))), n_rows=len(labels),
        source="fleetplan perf calibrate (serving fit, in-sample mean |relative error|) on "
               + ", ".join(Path(m.source).name for m in measurements),
    )
    return ServingFit(options, labels, before, after, profile)
