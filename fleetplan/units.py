"""Unit conversions.  Inside the library time is in seconds and sizes in tokens
or bytes; milliseconds appear only at the edges (CLI options, reports)."""

from __future__ import annotations

MS_PER_S = 1000.0
S_PER_H = 3600.0
H_PER_YEAR = 8760.0  # 365 days; the core paper's $/yr figures use 24 x 365 hours
S_PER_DAY = 86400.0
BYTES_PER_GIB = 1024.0**3
BYTES_PER_GB = 1e9


def ms_to_s(value_ms: float) -> float:
    """Milliseconds to seconds."""
    return value_ms / MS_PER_S


def s_to_ms(value_s: float) -> float:
    """Seconds to milliseconds."""
    return value_s * MS_PER_S


def fmt_ms(value_s: float, spec: str = "g") -> str:
    """``value_s`` seconds as milliseconds in a message: ``"500 ms"`` (``spec``: the number's format)."""
    return f"{s_to_ms(value_s):{spec}} ms"


def usd_per_year(usd_per_h: float, n_gpus: float = 1.0) -> float:
    """Annual cost of ``n_gpus`` rented at ``usd_per_h`` each, running all year."""
    return usd_per_h * n_gpus * H_PER_YEAR
