"""A synthetic measured source for tests: a table of steps the fit's coefficient form expresses, installed in place
of aiconfigurator-core (shared by the measured-source, MTP and data-parallel tests)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fleetplan.perf.measured import aic, source
from fleetplan.perf.measured.fit import GROUPS, step_s_of
from fleetplan.perf.measured.table import MeasuredTable, grid_shapes


def slowed_truth(predictor, gemm_factor: float, fixed_s: float) -> np.ndarray:
    """The predictor's roofline coefficients with every GEMM term ``gemm_factor`` slower and ``fixed_s`` a step."""
    _, base = predictor.kernel_coefficients()
    truth = base.copy()
    truth[list(GROUPS["gemm_compute"] + GROUPS["gemm_memory"])] *= gemm_factor
    truth[0] = fixed_s
    return truth


def synthetic_table(label: str, aic_model: str, truth: np.ndarray) -> MeasuredTable:
    """The grid's steps (held-out shapes included) of the roofline coefficients ``truth``: what the fit recovers."""
    rows = grid_shapes()
    blank = MeasuredTable.from_rows(label, aic_model, rows, [1.0] * len(rows))
    step = np.empty(len(rows))
    for held in (False, True):
        idx = [i for i in range(len(rows)) if rows[i][3] == held]
        step[idx] = step_s_of(truth, blank.calibration_data(held_out=held))
    return MeasuredTable.from_rows(label, aic_model, rows, list(step))


def install(monkeypatch, tmp_path, coverage: Callable, table: Callable) -> None:
    """The measured source as if aiconfigurator-core 9.9.9 were installed: ``coverage(model, gpu, engine, par, ...)``
    gives a pool's key or the reason, ``table(key, version)`` its table; caches in ``tmp_path``, timing ``auto``."""
    monkeypatch.setenv("FLEETPLAN_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(source.TIMING_SOURCE_ENV, "auto")
    monkeypatch.setattr(aic, "package_version", lambda: "9.9.9")
    monkeypatch.setattr(aic, "configs_dir", lambda: tmp_path)
    monkeypatch.setattr(source, "coverage", coverage)
    monkeypatch.setattr(source, "_table", table)
