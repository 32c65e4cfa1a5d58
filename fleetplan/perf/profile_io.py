"""Read measured engine steps (CSV) and read/write calibrated profiles (JSON).

Calibration CSV (``examples/calibration_example.csv``): UTF-8, ``#`` lines are comments, a
header row naming at least these columns (any order; other columns are ignored, e.g. a
timestamp), then one measured engine step per row:

    n_seqs                 requests in the step (prefill chunks + decodes), integer >= 1
    n_decode               of which decoding one token, integer in [0, n_seqs]
    prefill_tokens         prompt tokens computed in the step, >= n_seqs - n_decode
    decode_context_tokens  sum of the decoding requests' context lengths (tokens)
    prefill_attention_work sum over prefill chunks of chunk * (offset + chunk / 2); a multiple of 0.5
    step_ms                measured step duration, milliseconds > 0

vLLM's scheduler output per step (``SchedulerOutput.num_scheduled_tokens`` and the requests'
``num_computed_tokens``) gives all of them; a profiler trace gives ``step_ms``.  Errors name
the file and the row (1-based, counting the header as row 1).

Profile JSON or TOML (TOML when the name ends in ``.toml``, same keys,
``scales`` as a table): ``{"format": "fleetplan-perf-profile", "version": 1,
"step_model": "roofline", "coefficients": [18 floats], "scales": {...}, "model", "gpu",
"parallelism", "weight_dtype", "kv_dtype", "holdout_mape", "n_rows", "source"}``.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np

from fleetplan.errors import ConfigError, DataFormatError
from fleetplan.perf.calibrate import CalibratedStepModel, CalibrationData
from fleetplan.units import ms_to_s

__all__ = ["CSV_COLUMNS", "PROFILE_FORMAT", "PROFILE_VERSION", "read_calibration_csv", "save_perf_profile",
           "load_perf_profile"]

CSV_COLUMNS = ("n_seqs", "n_decode", "prefill_tokens", "decode_context_tokens", "prefill_attention_work", "step_ms")
PROFILE_FORMAT = "fleetplan-perf-profile"
PROFILE_VERSION = 1
_INT_COLUMNS = CSV_COLUMNS[:4]


def _number(path: str, row: int, column: str, text: str) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise DataFormatError(path, f"row {row}, column {column}", f"{text!r} is not a number",
                              "give a plain decimal number") from None
    if not math.isfinite(value) or value < 0:
        raise DataFormatError(path, f"row {row}, column {column}", f"{value} must be finite and >= 0")
    return value


def _check_row(path: str, row: int, n_seqs: int, n_decode: int, prefill: int, attn2: int, step_ms: float) -> None:
    where = f"row {row}"
    if n_seqs < 1 or n_decode > n_seqs:
        raise DataFormatError(path, where, f"n_seqs={n_seqs}, n_decode={n_decode}: need 1 <= n_seqs and "
                              "n_decode <= n_seqs")
    if prefill < n_seqs - n_decode or (prefill > 0) != (attn2 > 0):
        raise DataFormatError(path, where, f"prefill_tokens={prefill} with {n_seqs - n_decode} prefill requests "
                              f"and attention work {attn2 / 2}: each prefill request computes >= 1 token and "
                              "prefill tokens imply attention work")
    if step_ms <= 0:
        raise DataFormatError(path, where, f"step_ms={step_ms} must be > 0")


def read_calibration_csv(path: str | Path) -> CalibrationData:
    """Measured steps from a calibration CSV (module docstring); ``DataFormatError`` names file and row."""
    name = str(path)
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise DataFormatError(name, None, f"cannot read: {err.strerror}", "check the path") from None
    numbered = [(i + 1, line) for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")]
    if not numbered:
        raise DataFormatError(name, None, "no header row", f"start with the header {','.join(CSV_COLUMNS)}")
    rows = list(csv.reader([line for _, line in numbered]))
    header = [h.strip() for h in rows[0]]
    missing = [c for c in CSV_COLUMNS if c not in header]
    if missing:
        raise DataFormatError(name, f"row {numbered[0][0]}", f"header lacks {', '.join(missing)}",
                              f"columns needed: {','.join(CSV_COLUMNS)}")
    index = {c: header.index(c) for c in CSV_COLUMNS}
    cols = {c: [] for c in CSV_COLUMNS}
    for (row_no, _), cells in zip(numbered[1:], rows[1:], strict=True):
        if len(cells) != len(header):
            raise DataFormatError(name, f"row {row_no}", f"{len(cells)} cells for {len(header)} columns")
        values = {c: _number(name, row_no, c, cells[index[c]].strip()) for c in CSV_COLUMNS}
        for c in _INT_COLUMNS:
            if values[c] != int(values[c]):
                raise DataFormatError(name, f"row {row_no}, column {c}", f"{values[c]} must be a whole number")
        attn2 = 2.0 * values["prefill_attention_work"]
        if attn2 != int(attn2):
            raise DataFormatError(name, f"row {row_no}, column prefill_attention_work",
                                  f"{values['prefill_attention_work']} must be a multiple of 0.5")
        _check_row(name, row_no, int(values["n_seqs"]), int(values["n_decode"]), int(values["prefill_tokens"]),
                   int(attn2), values["step_ms"])
        for c in CSV_COLUMNS:
            cols[c].append(attn2 if c == "prefill_attention_work" else values[c])
    if not cols["step_ms"]:
        raise DataFormatError(name, None, "header but no data rows", "add one measured step per row")
    ints = {c: np.array(cols[c], dtype=np.int64) for c in _INT_COLUMNS}
    return CalibrationData(ints["n_seqs"], ints["n_decode"], ints["prefill_tokens"], ints["decode_context_tokens"],
                           np.array(cols["prefill_attention_work"], dtype=np.int64),
                           ms_to_s(np.array(cols["step_ms"], dtype=np.float64)), name)


def _toml_value(value) -> str:
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return repr(float(value)) if isinstance(value, float) else str(value)


def _to_toml(doc: dict) -> str:
    lines = [f"{k} = {_toml_value(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    for k, v in doc.items():
        if isinstance(v, dict):
            lines += ["", f"[{k}]", *(f"{kk} = {_toml_value(vv)}" for kk, vv in v.items())]
    return "\n".join(lines) + "\n"


def save_perf_profile(profile: CalibratedStepModel, path: str | Path) -> None:
    """Write ``profile`` as JSON, or as TOML when ``path`` ends in ``.toml`` (same keys; module docstring)."""
    doc = {"format": PROFILE_FORMAT, "version": PROFILE_VERSION, "step_model": "roofline",
           "coefficients": list(profile.coefficients), "scales": dict(profile.scales), "model": profile.model,
           "gpu": profile.gpu, "parallelism": profile.parallelism, "weight_dtype": profile.weight_dtype,
           "kv_dtype": profile.kv_dtype, "holdout_mape": profile.holdout_mape, "n_rows": profile.n_rows,
           "source": profile.source}
    text = _to_toml(doc) if Path(path).suffix.lower() == ".toml" else json.dumps(doc, indent=2) + "\n"
    Path(path).write_text(text, encoding="utf-8")


def load_perf_profile(path: str | Path) -> CalibratedStepModel:
    """A calibrated profile from JSON (or TOML, ``.toml``), ready for the simulator (``kernel_coefficients()``)."""
    name = str(path)
    if Path(path).suffix.lower() == ".toml":
        import tomllib

        try:
            doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as err:
            raise DataFormatError(name, None, f"cannot read: {err.strerror}", "check the path") from None
        except tomllib.TOMLDecodeError as err:
            raise DataFormatError(name, None, f"invalid TOML: {err}") from None
        return _profile_from_doc(name, doc)
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise DataFormatError(name, None, f"cannot read: {err.strerror}", "check the path") from None
    except json.JSONDecodeError as err:
        raise DataFormatError(name, f"line {err.lineno}", f"invalid JSON: {err.msg}") from None
    return _profile_from_doc(name, doc)


def _profile_from_doc(name: str, doc) -> CalibratedStepModel:
    if not isinstance(doc, dict) or doc.get("format") != PROFILE_FORMAT or doc.get("version") != PROFILE_VERSION:
        raise DataFormatError(name, None, "not a fleetplan perf profile (format/version)",
                              "write one with fleetplan perf calibrate")
    fields = ("coefficients", "scales", "model", "gpu", "parallelism", "weight_dtype", "kv_dtype", "holdout_mape",
              "n_rows", "source")
    missing = [f for f in fields if f not in doc]
    if missing:
        raise DataFormatError(name, None, f"missing {', '.join(missing)}", "regenerate with fleetplan perf calibrate")
    try:
        return CalibratedStepModel(**{f: doc[f] for f in fields})
    except (TypeError, ValueError, ConfigError) as err:
        raise DataFormatError(name, "coefficients", str(err), "regenerate with fleetplan perf calibrate") from None
