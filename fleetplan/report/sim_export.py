"""Files of a simulation run: the per-request CSV and the summary JSON (``fleetplan simulate`` and
``simulate pdd``: ``SimResult`` or ``PddResult``), the per-round CSV and the sessions JSON
(``simulate sessions``).

Both are written atomically (a temporary file in the target's directory, then a rename).  The
tables come from the result (``SimResult.csv_table``: ``CSV_COLUMNS``, latencies in ms, ``inf``
where unfinished or rejected; ``SimResult.to_json_dict``: strict JSON, inf/NaN as ``null``).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from fleetplan.report.atomic import atomic_write_text

if TYPE_CHECKING:
    from fleetplan.sim.pdd.result import PddResult
    from fleetplan.sim.result import SimResult
    from fleetplan.sim.sessions import SessionResult


def write_requests_csv(result: SimResult | PddResult, path: str | os.PathLike) -> None:
    """One row per simulated request (the result's ``csv_table``), atomically."""
    atomic_write_text(path, result.csv_table().to_csv(index=False, lineterminator="\n"))


def write_summary_json(result: SimResult | PddResult, path: str | os.PathLike) -> None:
    """The summary (``SimResult.to_json_dict``) as strict JSON (no NaN/Infinity), atomically."""
    atomic_write_text(path, json.dumps(result.to_json_dict(), indent=2, allow_nan=False) + "\n")


def write_sessions_json(result: SessionResult, path: str | os.PathLike) -> None:
    """``SessionResult.to_json_dict`` (session metrics and the per-round summary) as strict JSON, atomically."""
    atomic_write_text(path, json.dumps(result.to_json_dict(), indent=2, allow_nan=False) + "\n")


def write_rounds_csv(result: SessionResult, path: str | os.PathLike) -> None:
    """One row per round (``SessionResult.round_table``), atomically."""
    atomic_write_text(path, result.round_table().to_csv(index=False, lineterminator="\n"))
