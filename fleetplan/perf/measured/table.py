"""The measured step table: AIConfigurator's engine steps at a grid of batch shapes, and its interpolation.

Grid (``PREFILL_TOKENS``, ``PREFILL_BATCHES``, ``DECODE_BATCH``, ``DECODE_CONTEXT_TOKENS``): pure prefill
iterations of one prompt of 32-16,384 tokens and of several equal prompts; pure decode iterations of
1-512 sequences at 256-16,384 tokens of context each.  It spans the steps the simulator runs
(chunks up to vLLM's 8,192-token budget and longer whole prompts, batches up to ``max_num_seqs``).
``HELD_OUT_*`` shapes lie between the grid points: the fit never sees them, they measure its error.

Each row carries the simulator kernel's batch aggregates (``fleetplan.perf.batch``): ``n_seqs``,
``n_decode``, ``prefill_tokens``, ``decode_context_tokens`` and ``attn2 = sum c (2 o + c)`` (b prompts of
P tokens from offset 0: ``b P^2``).

Interpolation (``decode_step_s``, ``prefill_step_s``): piecewise linear in the logarithms of batch size,
context and prompt tokens between the grid rows (bilinear on the decode grid), exact at the grid points
and, where the table rises with each coordinate, rising between them.  Shapes outside the grid are
refused (no extrapolation).

Tables are cached as JSON (``cache_dir()``: ``$FLEETPLAN_CACHE_DIR`` or ``$XDG_CACHE_HOME/fleetplan``,
default ``~/.cache/fleetplan``, subfolder ``measured``), one file per package version, grid version and
``MeasuredKey``: the data ship inside the package, so they change only with its version.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fleetplan.atomic import atomic_write_text
from fleetplan.errors import ConfigError
from fleetplan.perf.calibrate import CalibrationData

__all__ = ["DECODE_BATCH", "DECODE_CONTEXT_TOKENS", "GRID_VERSION", "PREFILL_BATCHES", "PREFILL_TOKENS",
           "MeasuredTable", "cache_dir", "decode_step_s", "grid_shapes", "prefill_step_s"]

GRID_VERSION = 1
PREFILL_TOKENS = (32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
PREFILL_BATCHES = ((2, 1024), (4, 512), (8, 256), (4, 2048))  # (prompts, tokens each)
DECODE_BATCH = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
DECODE_CONTEXT_TOKENS = (256, 1024, 2048, 4096, 8192, 16384)
HELD_OUT_PREFILL_TOKENS = (384, 1536, 6144)
HELD_OUT_DECODE = tuple((n, c) for n in (3, 24, 96, 384) for c in (512, 3072, 12288))
_COLUMNS = ("n_seqs", "n_decode", "prefill_tokens", "decode_context_tokens", "attn2")


def grid_shapes() -> list[tuple[str, int, int, bool]]:
    """``(phase, batch, tokens, held_out)`` of every table row: ``prefill`` (batch prompts of ``tokens``)
    or ``decode`` (batch sequences at ``tokens`` of context)."""
    rows = [("prefill", 1, p, False) for p in PREFILL_TOKENS]
    rows += [("prefill", b, p, False) for b, p in PREFILL_BATCHES]
    rows += [("decode", n, c, False) for n in DECODE_BATCH for c in DECODE_CONTEXT_TOKENS]
    rows += [("prefill", 1, p, True) for p in HELD_OUT_PREFILL_TOKENS]
    rows += [("decode", n, c, True) for n, c in HELD_OUT_DECODE]
    return rows


def _aggregates(phase: str, batch: int, tokens: int) -> tuple[int, int, int, int, int]:
    if phase == "prefill":
        return batch, 0, batch * tokens, 0, batch * tokens * tokens
    return batch, batch, 0, batch * tokens, 0


@dataclass(frozen=True, eq=False)
class MeasuredTable:
    """Measured step times at the grid (module docstring) and where they come from."""

    label: str  # e.g. "aiconfigurator-core 0.12.0 SILICON, vllm 0.24.0 on h100_sxm"
    aic_model: str
    phase: tuple[str, ...]
    batch: np.ndarray
    tokens: np.ndarray
    held_out: np.ndarray  # bool
    step_s: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.phase)
        for name in ("batch", "tokens", "held_out", "step_s"):
            if np.shape(getattr(self, name)) != (n,):
                raise ConfigError(f"measured table {self.label}: column {name} has {np.size(getattr(self, name))} "
                                  f"rows, not {n}")
        if not np.all(np.isfinite(self.step_s)) or np.any(np.asarray(self.step_s) <= 0):
            raise ConfigError(f"measured table {self.label}: step times must be finite and > 0")

    @classmethod
    def from_rows(cls, label: str, aic_model: str, rows: list[tuple[str, int, int, bool]],
                  step_s: list[float]) -> MeasuredTable:
        return cls(label, aic_model, tuple(r[0] for r in rows), np.array([r[1] for r in rows], dtype=np.int64),
                   np.array([r[2] for r in rows], dtype=np.int64), np.array([r[3] for r in rows], dtype=bool),
                   np.asarray(step_s, dtype=np.float64))

    def calibration_data(self, held_out: bool = False) -> CalibrationData:
        """The fit rows (or the held-out rows) as ``perf.calibrate.CalibrationData``."""
        keep = [i for i in range(len(self.phase)) if bool(self.held_out[i]) == held_out]
        agg = np.array([_aggregates(self.phase[i], int(self.batch[i]), int(self.tokens[i])) for i in keep],
                       dtype=np.int64).reshape(-1, len(_COLUMNS))
        return CalibrationData(*(agg[:, j].copy() for j in range(len(_COLUMNS))), self.step_s[keep].copy(),
                               self.label)

    def to_json(self) -> str:
        return json.dumps({"grid_version": GRID_VERSION, "label": self.label, "aic_model": self.aic_model,
                           "phase": list(self.phase), "batch": self.batch.tolist(), "tokens": self.tokens.tolist(),
                           "held_out": self.held_out.tolist(), "step_s": self.step_s.tolist()})

    @classmethod
    def from_json(cls, text: str) -> MeasuredTable | None:
        """The table of a cache file; None when the file is from another grid version or unreadable."""
        try:
            doc = json.loads(text)
            if doc.get("grid_version") != GRID_VERSION:
                return None
            return cls(str(doc["label"]), str(doc["aic_model"]), tuple(doc["phase"]),
                       np.array(doc["batch"], dtype=np.int64), np.array(doc["tokens"], dtype=np.int64),
                       np.array(doc["held_out"], dtype=bool), np.array(doc["step_s"], dtype=np.float64))
        except (ValueError, KeyError, TypeError, ConfigError):
            return None


def cache_dir() -> Path:
    """Where measured tables are cached (module docstring)."""
    root = os.environ.get("FLEETPLAN_CACHE_DIR")
    if root:
        return Path(root) / "measured"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "fleetplan" / "measured"


def read_cached(path: Path) -> MeasuredTable | None:
    try:
        return MeasuredTable.from_json(path.read_text(encoding="utf-8"))
    except OSError:
        return None


def write_cached(path: Path, table: MeasuredTable) -> None:
    """Cache ``table`` at ``path`` (``write_text_cached``)."""
    write_text_cached(path, table.to_json())


def write_text_cached(path: Path, text: str) -> None:
    """Write a cache file atomically; a cache that cannot be written is skipped (it is recomputed next time)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)
    except (OSError, ConfigError):
        return


def _grid(table: MeasuredTable, phase: str, batch: int | None = None) -> list[int]:
    return [i for i in range(len(table.phase)) if table.phase[i] == phase and not table.held_out[i]
            and (batch is None or table.batch[i] == batch)]


def _check_inside(name: str, value: float, lo: float, hi: float) -> float:
    """``log(value)`` for a value within [lo, hi] (up to a relative 1e-9: rounding of exp(log x))."""
    if lo * (1 - 1e-9) <= value < lo:
        value = lo
    elif hi < value <= hi * (1 + 1e-9):
        value = hi
    if not lo <= value <= hi:
        raise ConfigError(f"`{name}` {value:g} is outside the measured grid [{lo:g}, {hi:g}]; the table is not "
                          "extrapolated: stay within it or use the fitted step model", param=name, value=value)
    return math.log(value)


def prefill_step_s(table: MeasuredTable, prompt_tokens: float) -> float:
    """One prefill of one prompt of ``prompt_tokens`` (s), interpolated in log tokens (module docstring)."""
    rows = sorted(_grid(table, "prefill", 1), key=lambda i: table.tokens[i])
    x = np.log(table.tokens[rows].astype(np.float64))
    at = _check_inside("prompt_tokens", float(prompt_tokens), float(table.tokens[rows[0]]),
                       float(table.tokens[rows[-1]]))
    return float(np.interp(at, x, table.step_s[rows]))


def decode_step_s(table: MeasuredTable, n_seqs: float, context_tokens: float) -> float:
    """One decode of ``n_seqs`` sequences at ``context_tokens`` each (s): bilinear in (log n, log context)."""
    rows = _grid(table, "decode")
    ns = np.unique(table.batch[rows]).astype(np.float64)
    cs = np.unique(table.tokens[rows]).astype(np.float64)
    grid = np.full((ns.size, cs.size), np.nan)
    for i in rows:
        grid[np.searchsorted(ns, table.batch[i]), np.searchsorted(cs, table.tokens[i])] = table.step_s[i]
    if np.isnan(grid).any():
        raise ConfigError(f"measured table {table.label}: the decode grid is incomplete")
    x = _check_inside("n_seqs", float(n_seqs), ns[0], ns[-1])
    y = _check_inside("context_tokens", float(context_tokens), cs[0], cs[-1])
    lx, ly = np.log(ns), np.log(cs)
    i = int(np.clip(np.searchsorted(lx, x, side="right") - 1, 0, lx.size - 2))
    j = int(np.clip(np.searchsorted(ly, y, side="right") - 1, 0, ly.size - 2))
    u = (x - lx[i]) / (lx[i + 1] - lx[i])
    v = (y - ly[j]) / (ly[j + 1] - ly[j])
    return float((1 - u) * (1 - v) * grid[i, j] + u * (1 - v) * grid[i + 1, j] + (1 - u) * v * grid[i, j + 1]
                 + u * v * grid[i + 1, j + 1])
