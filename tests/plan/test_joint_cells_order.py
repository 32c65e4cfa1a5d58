"""A range's joint cells (``plan.points.LengthPoints._joint_cells``) ordered by one sort of all their points hold
the points the per-cell sorts gave, bit for bit (the per-cell form written out here, as the code had it)."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.plan.points import PROMPT_SHARE_LEVELS, LengthPoints
from fleetplan.workload import load_workload


def _old_joint_cells(points, lo_tokens: float, hi_tokens: float):
    """``LengthPoints._joint_cells`` as it was written: each cell sorted by its own argsort."""
    cells = points._range_cells(lo_tokens, hi_tokens)  # (the range's points and cells: unchanged code)
    if cells is None:
        return None
    p, o, w, starts, ends = cells
    out_p, out_o, out_w = [], [], []
    for s0, s1 in zip(starts, ends, strict=True):
        cp, co, cw = p[s0:s1], o[s0:s1], w[s0:s1]
        order = np.argsort(cp / (cp + co), kind="stable")
        cp, co, cw = cp[order], co[order], cw[order]
        k = min(PROMPT_SHARE_LEVELS, cw.size)
        cuts = np.searchsorted(np.cumsum(cw) / cw.sum(), np.arange(1, k) / k, side="right")
        for lo_i, hi_i in zip(np.concatenate([[0], cuts]), np.concatenate([cuts, [cw.size]]), strict=True):
            ww = cw[lo_i:hi_i]
            if ww.size == 0 or ww.sum() <= 0:
                continue
            out_w.append(ww.sum())
            out_p.append(float(ww @ cp[lo_i:hi_i]) / ww.sum())
            out_o.append(float(ww @ co[lo_i:hi_i]) / ww.sum())
    return np.round(np.array(out_p)), np.round(np.array(out_o)), np.array(out_w) / points._global_mass


@pytest.mark.parametrize("workload", ["azure_conv", "lmsys"])
def test_joint_cells_are_the_old_loops(workload: str) -> None:
    points = LengthPoints(load_workload(workload), 512, 16384)
    checked = 0
    for lo, hi in ((0, 512), (512, 2048), (2048, 8192), (0, 65536), (1024, 4096)):
        got, want = points._joint_cells(lo, hi), _old_joint_cells(points, lo, hi)
        assert (got is None) == (want is None)
        if got is not None:
            checked += 1
            for a, b in zip((got.prompt_tokens, got.output_tokens, got.weight), want, strict=True):
                assert np.array_equal(a, b)
    assert checked > 0
