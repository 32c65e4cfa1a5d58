"""``ServingConstants.n_max`` of a plain integer count (a pool's token bound) is the array path's figure."""

from __future__ import annotations

import numpy as np

from fleetplan.hardware import load_catalog


def test_a_plain_count_gives_the_array_figure() -> None:
    cat = load_catalog()
    checked = 0
    for name in ("H100-SXM", "A100", "A10G"):
        serving = cat.get(name).serving
        for ctx in (1, 15, 16, 17, 100, 4096, 4097, 65536, 10**7):
            got = serving.n_max(ctx)
            assert type(got) is int
            assert got == serving.n_max(np.int64(ctx)) == serving.n_max(float(ctx))
            assert got == int(serving.n_max(np.array([ctx]))[0])
            checked += 1
    assert checked == 27
