"""Request traces: arrival times and prompt/output token counts.

Recognised by header (CSV) or keys (JSONL):

=============  ==============================================================  ==============
format         columns                                                         arrival unit
=============  ==============================================================  ==============
azure2023      ``TIMESTAMP,ContextTokens,GeneratedTokens`` (Patel et al.,      date-time
               Splitwise, ISCA 2024; e.g. ``2023-11-16 18:17:03.9799600``)
burstgpt       ``Timestamp,Model,Request tokens,Response tokens,...``          seconds
               (Wang et al., BurstGPT, 2024)
mooncake       JSONL ``{"timestamp", "input_length", "output_length", ...}``    milliseconds
               (Qin et al., Mooncake, FAST 2025)
vidur          ``arrived_at,num_prefill_tokens,num_decode_tokens`` (vidur)      seconds
plain          ``arrival_s,prompt_tokens,output_tokens``                       seconds
=============  ==============================================================  ==============

``arrival_s`` is relative to the first row and must be non-decreasing (traces are
replayed in file order).  Token counts must be integers >= 0.  A zero count (BurstGPT
logs failed requests with 0 response tokens; the two Azure 2023 traces have none) is
raised to 1 token, because every served request prefills and emits at least one token,
and the number of such rows is kept in ``Trace.n_zero_clamped`` and in fitted
provenance.  Anything else malformed is a ``DataFormatError`` naming file and line.
"""

from __future__ import annotations

import enum
import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from fleetplan.errors import ConfigError, DataFormatError
from fleetplan.units import MS_PER_S

if TYPE_CHECKING:
    import pandas as pd  # imported where a table is built (start-up time)

__all__ = ["Trace", "TraceFormat", "read_trace", "TRACE_SUFFIXES"]

TRACE_SUFFIXES = (".csv", ".jsonl")


class TraceFormat(enum.Enum):
    """Known trace layouts."""

    AZURE_2023 = "azure2023"
    BURSTGPT = "burstgpt"
    MOONCAKE = "mooncake"
    VIDUR = "vidur"
    PLAIN = "plain"


@dataclass(frozen=True)
class _Columns:
    arrival: str
    prompt: str
    output: str
    arrival_scale_s: float | None  # seconds per unit; None = calendar date-time


_COLUMNS: dict[TraceFormat, _Columns] = {
    TraceFormat.AZURE_2023: _Columns("TIMESTAMP", "ContextTokens", "GeneratedTokens", None),
    TraceFormat.BURSTGPT: _Columns("Timestamp", "Request tokens", "Response tokens", 1.0),
    TraceFormat.MOONCAKE: _Columns("timestamp", "input_length", "output_length", 1.0 / MS_PER_S),
    TraceFormat.VIDUR: _Columns("arrived_at", "num_prefill_tokens", "num_decode_tokens", 1.0),
    TraceFormat.PLAIN: _Columns("arrival_s", "prompt_tokens", "output_tokens", 1.0),
}


@dataclass(frozen=True, eq=False)
class Trace:
    """A request trace (arrival seconds from the first request; token counts >= 1)."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    source: str
    format: TraceFormat
    n_zero_clamped: int = 0

    def __post_init__(self) -> None:
        arr = np.array(self.arrival_s, dtype=np.float64)
        pt = np.array(self.prompt_tokens, dtype=np.int64)
        ot = np.array(self.output_tokens, dtype=np.int64)
        if arr.ndim != 1 or arr.size == 0 or pt.shape != arr.shape or ot.shape != arr.shape:
            raise ConfigError(f"trace {self.source}: needs equal-length, non-empty columns")
        if arr[0] != 0.0 or np.any(np.diff(arr) < 0) or not np.all(np.isfinite(arr)):
            raise ConfigError(f"trace {self.source}: arrival_s must start at 0 and be non-decreasing")
        if np.any(pt < 1) or np.any(ot < 1):
            raise ConfigError(f"trace {self.source}: token counts must be >= 1")
        for a in (arr, pt, ot):
            a.setflags(write=False)
        object.__setattr__(self, "arrival_s", arr)
        object.__setattr__(self, "prompt_tokens", pt)
        object.__setattr__(self, "output_tokens", ot)

    @property
    def n_requests(self) -> int:
        return int(self.arrival_s.size)

    @property
    def duration_s(self) -> float:
        """Time from the first to the last arrival."""
        return float(self.arrival_s[-1])

    @property
    def arrival_rate_per_s(self) -> float | None:
        """Mean rate ``(n - 1) / duration`` (n - 1 gaps), or ``None`` if every arrival is simultaneous."""
        if self.n_requests < 2 or self.duration_s <= 0:
            return None
        return (self.n_requests - 1) / self.duration_s

    @property
    def total_tokens(self) -> np.ndarray:
        return self.prompt_tokens + self.output_tokens


def _detect(path: str, columns: list[str]) -> TraceFormat:
    present = set(columns)
    for fmt, cols in _COLUMNS.items():
        if {cols.arrival, cols.prompt, cols.output} <= present:
            return fmt
    known = "; ".join(f"{f.value}: {c.arrival},{c.prompt},{c.output}" for f, c in _COLUMNS.items())
    raise DataFormatError(
        path, "header", f"columns {columns} match no known trace format", f"use one of {known}"
    )


def _read_csv(path: str) -> tuple[pd.DataFrame, TraceFormat]:
    import pandas as pd

    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True)
    except pd.errors.EmptyDataError:
        raise DataFormatError(
            path, None, "the trace is empty", "give a header line and at least 1 row"
        ) from None
    except pd.errors.ParserError as exc:
        msg = str(exc).strip().splitlines()[-1]
        raise DataFormatError(
            path, None, f"malformed CSV: {msg}", "every row needs the header's fields"
        ) from None
    return df, _detect(path, [str(c) for c in df.columns])


def _read_jsonl(path: str) -> tuple[pd.DataFrame, TraceFormat]:
    import pandas as pd

    rows = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataFormatError(
                    path,
                    f"line {lineno}, column {exc.colno}",
                    f"malformed JSON: {exc.msg}",
                    "give one JSON object per line",
                ) from None
            if not isinstance(rec, dict):
                raise DataFormatError(
                    path, f"line {lineno}", "line is not a JSON object", "give one object per line"
                )
            rows.append((lineno, rec))
    if not rows:
        raise DataFormatError(path, None, "the trace is empty", "give at least 1 JSON line")
    fmt = _detect(path, list(rows[0][1]))
    cols = _COLUMNS[fmt]
    data = {
        c: ["" if rec.get(c) is None else str(rec[c]) for _, rec in rows]  # absent -> "not a number"
        for c in (cols.arrival, cols.prompt, cols.output)
    }
    return pd.DataFrame(data, index=[ln for ln, _ in rows]), fmt


def _first_bad(
    path: str, df: pd.DataFrame, bad: np.ndarray, column: str, rule: str, fix: str, line_of: np.ndarray
) -> None:
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise DataFormatError(
            path, f"line {int(line_of[i])}", f"{column} is {df[column].iloc[i]!r} ({rule})", fix
        )


def _first_line(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                return line.strip()
    return ""


def read_trace(path: str | os.PathLike) -> Trace:
    """Read a trace file: JSON lines (``.jsonl`` or a first line starting with ``{``) or CSV.

    The layout is recognised by the CSV header or the first JSON object's keys.

    Raises ``DataFormatError`` naming the file and line of the first malformed row.
    """
    import pandas as pd

    p = str(path)
    is_jsonl = p.lower().endswith(".jsonl") or _first_line(p).startswith("{")
    df, fmt = _read_jsonl(p) if is_jsonl else _read_csv(p)
    if len(df) == 0:
        raise DataFormatError(p, None, "the trace has a header but no rows", "give at least 1 request row")
    cols = _COLUMNS[fmt]
    # CSV: header is line 1, data row i is line i + 2; JSONL keeps its own line numbers.
    line_of = np.asarray(df.index, dtype=np.int64) if is_jsonl else np.arange(len(df), dtype=np.int64) + 2
    counts = []
    for col in (cols.prompt, cols.output):
        num = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=np.float64)
        _first_bad(p, df, ~np.isfinite(num), col, "not a number", "token counts must be integers", line_of)
        _first_bad(
            p, df, num != np.round(num), col, "not an integer", "token counts must be integers", line_of
        )
        _first_bad(p, df, num < 0, col, "negative", "token counts must be >= 0", line_of)
        counts.append(num.astype(np.int64))
    if cols.arrival_scale_s is None:
        stamps = pd.to_datetime(df[cols.arrival], format="ISO8601", errors="coerce")
        _first_bad(
            p,
            df,
            stamps.isna().to_numpy(),
            cols.arrival,
            "not a date-time",
            "timestamps look like 2023-11-16 18:17:03.9799600",
            line_of,
        )
        t_s = ((stamps - stamps.iloc[0]) / pd.Timedelta(seconds=1)).to_numpy(dtype=np.float64)
    else:
        raw = pd.to_numeric(df[cols.arrival], errors="coerce").to_numpy(dtype=np.float64)
        _first_bad(
            p, df, ~np.isfinite(raw), cols.arrival, "not a number", "arrival times must be numbers", line_of
        )
        t_s = (raw - raw[0]) * cols.arrival_scale_s
    back = np.concatenate(([False], np.diff(t_s) < 0))
    _first_bad(
        p, df, back, cols.arrival, "earlier than the previous row", "sort the trace by arrival time", line_of
    )
    prompt, output = counts
    zero = (prompt == 0) | (output == 0)
    return Trace(
        arrival_s=t_s,
        prompt_tokens=np.maximum(prompt, 1),
        output_tokens=np.maximum(output, 1),
        source=os.path.basename(p),
        format=fmt,
        n_zero_clamped=int(np.count_nonzero(zero)),
    )
