"""Demand forecast: one planned rate per period (req/s), dated.

Two sources:

* compound growth (``compound_forecast``): λ_t = λ0 (1 + g)^t for months t = 0..T-1, P50 = P90;
* a CSV of dated rates (``read_forecast_csv``): header ``date`` and ``rate`` and/or ``p50``, ``p90``
  (req/s, ISO dates strictly increasing, one row per period).  The plan meets ``p90`` where given,
  else ``rate``; P50 (else ``rate``, else P90) is kept for the report's band.

A period runs from its date to the next row's; the last one lasts a calendar month when the rows
are monthly (or there is one row), else as long as the one before it.
"""

from __future__ import annotations

import csv
import datetime as dt
import math
import os
from dataclasses import dataclass

from fleetplan.errors import ConfigError, DataFormatError

DAYS_PER_MONTH = 365.25 / 12.0
H_PER_DAY = 24.0
#: Gaps (days) between rows read as calendar months, so the last period lasts a calendar month too.
MONTH_DAYS = (28, 31)


def add_months(start: dt.date, months: int) -> dt.date:
    """``start`` plus whole calendar months (day clamped to the month's length)."""
    y, m = divmod(start.month - 1 + months, 12)
    year, month = start.year + y, m + 1
    for day in (start.day, 30, 29, 28):
        try:
            return dt.date(year, month, min(start.day, day))
        except ValueError:
            continue
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class Forecast:
    """Per period: start date, P50 and planned (P90) rate in req/s; ``end_date`` closes the last one."""

    dates: tuple[dt.date, ...]
    p50_per_s: tuple[float, ...]
    p90_per_s: tuple[float, ...]
    end_date: dt.date
    source: str

    def __post_init__(self) -> None:
        n = len(self.dates)
        if n == 0 or len(self.p50_per_s) != n or len(self.p90_per_s) != n:
            raise ConfigError("a forecast needs one date, P50 and P90 per period, at least one period")
        for a, b in zip(self.dates, (*self.dates[1:], self.end_date), strict=True):
            if b <= a:
                raise ConfigError(f"forecast {self.source}: date {b.isoformat()} is not after {a.isoformat()}; "
                                  "dates must be strictly increasing")

    @property
    def n_periods(self) -> int:
        return len(self.dates)

    def period_h(self, t: int) -> float:
        """Length of period ``t`` in hours."""
        nxt = self.dates[t + 1] if t + 1 < self.n_periods else self.end_date
        return (nxt - self.dates[t]).days * H_PER_DAY


def compound_forecast(start_rate_per_s: float, growth_per_month: float, months: int,
                      start_date: dt.date) -> Forecast:
    """λ0 (1 + g)^t for ``months`` monthly periods from ``start_date``."""
    if not (math.isfinite(start_rate_per_s) and start_rate_per_s > 0):
        raise ConfigError(f"start rate {start_rate_per_s!r} req/s is invalid: give a rate > 0")
    if not (math.isfinite(growth_per_month) and growth_per_month > -1):
        raise ConfigError(f"growth {growth_per_month!r} per month is invalid: give a growth > -100%")
    if int(months) != months or months < 1:
        raise ConfigError(f"months {months!r} is invalid: give a whole number of months >= 1")
    rates = tuple(start_rate_per_s * (1.0 + growth_per_month) ** t for t in range(int(months)))
    dates = tuple(add_months(start_date, t) for t in range(int(months)))
    return Forecast(dates, rates, rates, add_months(start_date, int(months)),
                    f"{growth_per_month:.1%}/month from {start_rate_per_s:g} req/s")


def _rate(path: str, row: int, column: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError as exc:
        raise DataFormatError(path, f"row {row}, column {column}", f"{text!r} is not a number",
                              "give the rate in req/s") from exc
    if not (math.isfinite(value) and value > 0):
        raise DataFormatError(path, f"row {row}, column {column}", f"rate {text} req/s must be > 0",
                              "give a positive rate (a period with no traffic needs no plan row)")
    return value


def read_forecast_csv(path: str | os.PathLike) -> Forecast:
    """A forecast from ``date,rate[,p50][,p90]`` rows (see module docstring)."""
    p = str(path)
    try:
        with open(p, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
            header = [h.strip().lower() for h in (rows[0].keys() if rows else [])]
    except OSError as exc:
        raise DataFormatError(p, None, f"cannot read the forecast ({exc})", "give a CSV file") from exc
    if not rows or "date" not in header or not ({"rate", "p90"} & set(header)):
        raise DataFormatError(p, "header", "needs a date column and a rate or p90 column (req/s)",
                              "write e.g. date,p50,p90 then one row per period")
    dates, p50, p90 = [], [], []
    for i, raw in enumerate(rows, start=2):
        r = {k.strip().lower(): (v or "").strip() for k, v in raw.items() if k is not None}
        try:
            d = dt.date.fromisoformat(r["date"])
        except ValueError as exc:
            raise DataFormatError(p, f"row {i}, column date", f"{r['date']!r} is not a date",
                                  "write YYYY-MM-DD") from exc
        if dates and d <= dates[-1]:
            raise DataFormatError(p, f"row {i}, column date", f"{d.isoformat()} is not after {dates[-1].isoformat()}",
                                  "sort the rows by date, one row per period")
        rate = _rate(p, i, "rate", r["rate"]) if r.get("rate") else None
        hi = _rate(p, i, "p90", r["p90"]) if r.get("p90") else rate
        lo = _rate(p, i, "p50", r["p50"]) if r.get("p50") else (rate if rate is not None else hi)
        if hi is None:
            raise DataFormatError(p, f"row {i}", "no rate or p90 value", "fill the rate or p90 column")
        if lo > hi:
            raise DataFormatError(p, f"row {i}", f"p50 {lo:g} exceeds p90 {hi:g}", "swap or correct the columns")
        dates.append(d)
        p50.append(lo)
        p90.append(hi)
    gap = None if len(dates) == 1 else dates[-1] - dates[-2]
    monthly = gap is None or MONTH_DAYS[0] <= gap.days <= MONTH_DAYS[1]
    end = add_months(dates[-1], 1) if monthly else dates[-1] + gap
    return Forecast(tuple(dates), tuple(p50), tuple(p90), end, p)
