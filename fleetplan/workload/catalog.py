"""Finding workloads: bundled CDFs (``cdfs/*.json``), CDF files and traces.

``load_workload(x)`` resolves, in order:

1. an existing path: ``.csv`` / ``.jsonl`` is a trace (fitted in memory with
   ``fleetplan.workload.fit``; the ``Workload`` keeps the trace for replay and its mean
   arrival rate), ``.json`` a CDF file (layouts in ``cdf_io``); any other name is a CDF
   if the whole file parses as one JSON value, else a trace (CSV or JSON lines);
2. a bundled name, with or without ``.json`` (``lmsys``, ``lmsys.json``) in
   ``fleetplan.paths.cdfs_dir()``;
3. otherwise ``UnknownNameError`` listing the bundled names.

``input_fraction`` (prompt share of totals-only CDFs) is, in order: the argument, the
file's own ``input_fraction`` key, ``DEFAULT_INPUT_FRACTION``.  Giving it for a
workload that has its own prompt/output CDFs is an error (it would be ignored).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from fleetplan.errors import ConfigError, DataFormatError, UnknownNameError
from fleetplan.paths import cdfs_dir
from fleetplan.workload.burstiness import ARRIVALS_KEY, ArrivalStats
from fleetplan.workload.cdf_io import CdfDocument, parse_cdf_document, read_cdf_json
from fleetplan.workload.fit import fit
from fleetplan.workload.traces import TRACE_SUFFIXES, Trace, read_trace
from fleetplan.workload.workload import DEFAULT_INPUT_FRACTION, Workload

__all__ = ["list_workloads", "load_workload", "workload_from_document", "workload_from_trace"]

_JSON_SUFFIX = ".json"


def list_workloads() -> tuple[str, ...]:
    """Names of the bundled workloads (``cdfs/<name>.json``), sorted."""
    return tuple(sorted(p.stem for p in cdfs_dir().glob(f"*{_JSON_SUFFIX}")))


def _is_json_document(path: Path) -> bool:
    """True when the whole file parses as one JSON value (a CDF), not as CSV / JSON lines."""
    try:
        json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    return True


def _input_fraction(name: str, doc: CdfDocument, input_fraction: float | None) -> float:
    if input_fraction is not None:
        if doc.input is not None:
            raise ConfigError(
                f"input fraction {input_fraction} has no effect: workload {name} gives its own input "
                "and output CDFs; drop `input_fraction`", param="input_fraction", value=input_fraction
            )
        return float(input_fraction)
    if doc.input_fraction is not None:
        return doc.input_fraction
    return DEFAULT_INPUT_FRACTION


def workload_from_document(
    name: str, doc: CdfDocument, input_fraction: float | None = None, trace: Trace | None = None
) -> Workload:
    """``Workload`` from a parsed CDF document (see module docstring for ``input_fraction``)."""
    return Workload(
        name=name,
        total=doc.total,
        input=doc.input,
        output=doc.output,
        copula=doc.copula,
        input_fraction=_input_fraction(name, doc, input_fraction),
        source=doc.source,
        license=doc.license,
        n_samples=doc.n_samples,
        generated_by=doc.generated_by,
        arrival_rate_per_s=doc.arrival_rate_per_s,
        trace=trace,
        arrival_stats=None if ARRIVALS_KEY not in doc.metadata
        else ArrivalStats.from_dict(doc.metadata[ARRIVALS_KEY], name),
    )


def workload_from_trace(path: str | os.PathLike, input_fraction: float | None = None) -> Workload:
    """Read a trace and fit it in memory (``fit`` with default resolution)."""
    p = Path(path)
    trace = read_trace(p)
    doc = parse_cdf_document(fit(trace, command=f"load_workload({str(p)!r})"), str(p))
    return workload_from_document(p.stem, doc, input_fraction, trace=trace)


def load_workload(name_or_path: str | os.PathLike, input_fraction: float | None = None) -> Workload:
    """Load a bundled workload by name, a CDF JSON file or a trace (CSV / JSONL).

    Parameters
    ----------
    name_or_path : str or path
        ``lmsys``, ``lmsys.json``, ``path/to/cdf.json`` or ``path/to/trace.csv``.
    input_fraction : float, optional
        Prompt share of total tokens for totals-only CDFs, in (0, 1).
    """
    if input_fraction is not None and not 0.0 < float(input_fraction) < 1.0:
        raise ConfigError(f"input fraction {input_fraction} must be in (0, 1)")
    p = Path(name_or_path)
    if p.exists():
        if p.is_dir():
            raise DataFormatError(str(p), None, "is a directory", "give a CDF JSON file or a trace file")
        if p.suffix.lower() in TRACE_SUFFIXES:
            return workload_from_trace(p, input_fraction)
        if p.suffix.lower() == _JSON_SUFFIX or _is_json_document(p):
            return workload_from_document(p.stem, read_cdf_json(p), input_fraction)
        return workload_from_trace(p, input_fraction)
    name = str(name_or_path)
    stem = name[: -len(_JSON_SUFFIX)] if name.endswith(_JSON_SUFFIX) else name
    bundled = list_workloads()
    if os.sep in name or stem not in bundled:
        raise UnknownNameError("workload", name, bundled)
    return workload_from_document(stem, read_cdf_json(cdfs_dir() / f"{stem}{_JSON_SUFFIX}"), input_fraction)
