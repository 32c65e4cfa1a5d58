"""Reading and writing workload CDF JSON files.

Two layouts are accepted (inference-fleet-sim section 3.3 ships the first):

(a) a plain list ``[[tokens, cumulative_fraction], ...]`` of TOTAL tokens per request;
(b) an object::

      {"cdf": [[t, F], ...],             total tokens per request (required)
       "input_cdf": [...], "output_cdf": [...],   prompt / output tokens (both or neither)
       "copula": [[p_ij, ...], ...],      optional K x K checkerboard copula of (input, output)
       "input_fraction": 0.8,             optional prompt share for totals-only files
       "arrival_rate_per_s": 1.23,        optional, a fitted trace's mean rate
       "source": ..., "license": ..., "n_samples": ..., "generated_by": ...,
       "provenance": ..., "seed": ...}    any other key is kept as metadata

Every problem is reported as a one-line ``DataFormatError`` naming the file and the
position (``"cdf point 3"``, ``"line 4, column 7"``).  Files are written atomically.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fleetplan.errors import ConfigError, DataFormatError
from fleetplan.workload.cdf import LengthCDF, check_points

__all__ = ["CdfDocument", "parse_cdf_document", "read_cdf_json", "write_cdf_json", "COPULA_KEY"]

COPULA_KEY = "copula"
# A copula read from JSON may carry rounding error; beyond this its cells must sum to 1.
_COPULA_SUM_TOL = 1e-6
_FILE_MODE = 0o644  # mkstemp creates 0600; data files are meant to be shared
_CDF_KEYS = ("cdf", "input_cdf", "output_cdf")
_KNOWN_KEYS = _CDF_KEYS + (
    COPULA_KEY,
    "input_fraction",
    "arrival_rate_per_s",
    "source",
    "license",
    "n_samples",
    "generated_by",
)


@dataclass(frozen=True, eq=False)
class CdfDocument:
    """A parsed CDF file: the three distributions plus the descriptive fields."""

    total: LengthCDF
    input: LengthCDF | None
    output: LengthCDF | None
    copula: np.ndarray | None
    input_fraction: float | None
    arrival_rate_per_s: float | None
    source: str
    license: str
    n_samples: int | None
    generated_by: str
    metadata: dict[str, Any]


def _points(path: str, key: str, value: Any) -> LengthCDF:
    if not isinstance(value, list):
        raise DataFormatError(
            path,
            key,
            f"{key} is a {type(value).__name__}, not a list",
            "give a list of [tokens, cumulative_fraction] pairs",
        )
    if not value:
        raise DataFormatError(
            path, key, "the CDF is empty", "give at least 2 [tokens, cumulative_fraction] points"
        )
    tokens, fractions = [], []
    for i, pair in enumerate(value):
        ok = (
            isinstance(pair, list)
            and len(pair) == 2
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in pair)
        )
        if not ok:
            raise DataFormatError(
                path,
                f"{key} point {i + 1}",
                f"{json.dumps(pair)} is not a [tokens, fraction] pair",
                "each point must be two numbers",
            )
        tokens.append(float(pair[0]))
        fractions.append(float(pair[1]))
    t, f = np.array(tokens), np.array(fractions)
    problem = check_points(t, f)
    if problem is not None:
        where, what, fix = problem
        raise DataFormatError(path, f"{key} {where}", what, fix)
    return LengthCDF(t, f)


def _copula(path: str, value: Any) -> np.ndarray:
    fix = "give a square list of non-negative cell probabilities summing to 1"
    try:
        arr = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataFormatError(path, COPULA_KEY, "copula is not a matrix of numbers", fix) from None
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.size == 0:
        raise DataFormatError(path, COPULA_KEY, f"copula has shape {arr.shape}, not K x K", fix)
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise DataFormatError(path, COPULA_KEY, "copula has a negative or non-finite cell", fix)
    if abs(arr.sum() - 1.0) > _COPULA_SUM_TOL:
        raise DataFormatError(path, COPULA_KEY, f"copula cells sum to {arr.sum():.9g}", fix)
    return arr / arr.sum()


def _optional_number(path: str, obj: dict, key: str, hi_open: float) -> float | None:
    """``obj[key]`` as a number in (0, hi_open), or ``None`` when absent/null."""
    if key not in obj or obj[key] is None:
        return None
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or not 0.0 < v < hi_open:
        raise DataFormatError(path, key, f"{key} is {v!r}", f"give a number in (0, {hi_open:g})")
    return float(v)


def parse_cdf_document(obj: Any, path: str) -> CdfDocument:
    """Validate decoded JSON ``obj`` (layout (a) or (b)) read from ``path``."""
    if isinstance(obj, list):
        return CdfDocument(_points(path, "cdf", obj), None, None, None, None, None, "", "", None, "", {})
    if not isinstance(obj, dict):
        raise DataFormatError(
            path,
            None,
            f"top-level JSON is a {type(obj).__name__}",
            "give a list of [tokens, fraction] points or an object with a 'cdf' key",
        )
    if "cdf" not in obj:
        raise DataFormatError(
            path,
            None,
            f"object has no 'cdf' key (keys: {', '.join(map(str, obj)) or 'none'})",
            "add 'cdf': [[tokens, cumulative_fraction], ...] of total tokens",
        )
    total = _points(path, "cdf", obj["cdf"])
    has_in, has_out = obj.get("input_cdf") is not None, obj.get("output_cdf") is not None
    if has_in != has_out:
        given = "input_cdf" if has_in else "output_cdf"
        raise DataFormatError(
            path, given, f"{given} is given alone", "give both input_cdf and output_cdf, or neither"
        )
    inp = _points(path, "input_cdf", obj["input_cdf"]) if has_in else None
    out = _points(path, "output_cdf", obj["output_cdf"]) if has_out else None
    copula = _copula(path, obj[COPULA_KEY]) if obj.get(COPULA_KEY) is not None else None
    if copula is not None and inp is None:
        raise DataFormatError(
            path,
            COPULA_KEY,
            "copula given without input_cdf and output_cdf",
            "give both marginals or drop the copula",
        )
    n_samples = obj.get("n_samples")
    if n_samples is not None and (
        isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples < 1
    ):
        raise DataFormatError(
            path, "n_samples", f"n_samples is {n_samples!r}", "give a positive integer or null"
        )
    texts = {}
    for key in ("source", "license", "generated_by"):
        v = obj.get(key)  # descriptive text; absent means not recorded
        if v is not None and not isinstance(v, str):
            raise DataFormatError(path, key, f"{key} is a {type(v).__name__}", "give a string")
        texts[key] = v or ""
    return CdfDocument(
        total=total,
        input=inp,
        output=out,
        copula=copula,
        input_fraction=_optional_number(path, obj, "input_fraction", 1.0),
        arrival_rate_per_s=_optional_number(path, obj, "arrival_rate_per_s", math.inf),
        source=texts["source"],
        license=texts["license"],
        n_samples=n_samples,
        generated_by=texts["generated_by"],
        metadata={k: v for k, v in obj.items() if k not in _KNOWN_KEYS},
    )


def decode_json(text: str, path: str) -> Any:
    """``json.loads`` with a one-line error naming the line and column."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFormatError(
            path,
            f"line {exc.lineno}, column {exc.colno}",
            f"malformed JSON: {exc.msg}",
            "fix the JSON syntax",
        ) from None


def read_cdf_json(path: str | os.PathLike) -> CdfDocument:
    """Read and validate a CDF JSON file."""
    p = str(path)
    with open(p, encoding="utf-8") as fh:
        text = fh.read()
    return parse_cdf_document(decode_json(text, p), p)


def _fmt_points(points: list) -> str:
    rows = ",\n".join(f"    [{json.dumps(t)}, {json.dumps(f)}]" for t, f in points)
    return "[\n" + rows + "\n  ]"


def format_cdf_json(doc: dict[str, Any]) -> str:
    """JSON text for ``doc``: one breakpoint (and one copula row) per line, keys in order."""
    parts = []
    for key, value in doc.items():
        if key in _CDF_KEYS and isinstance(value, list):
            body = _fmt_points(value)
        elif key == COPULA_KEY and value is not None:
            body = "[\n" + ",\n".join("    " + json.dumps(list(row)) for row in value) + "\n  ]"
        else:
            body = json.dumps(value, indent=2).replace("\n", "\n  ")
        parts.append(f"  {json.dumps(key)}: {body}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def write_cdf_json(path: str | os.PathLike, doc: dict[str, Any]) -> Path:
    """Validate ``doc`` and write it to ``path`` atomically (temp file in the same dir + ``os.replace``)."""
    target = Path(path)
    if not target.parent.is_dir():
        raise ConfigError(
            f"output directory {str(target.parent)!r} does not exist; create it or choose another `out`",
            param="out", value=str(target),
        )
    text = format_cdf_json(doc)
    parse_cdf_document(json.loads(text), str(target))  # never write a file we could not read back
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, _FILE_MODE)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return target
