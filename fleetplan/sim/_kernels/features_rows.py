"""Request rows of the feature kernel: taken at release, given back at completion.

A request in the system owns one row of ``rq`` (layout in ``features_layout``).  Rows come
from a free list (``row_free[:glob[G_NFREE]]``, last freed first) or, when it is empty, the
next never-used row (``glob[G_ROWS]``), so the rows in use stay few and packed whatever the
number of requests: ``rq`` is allocated uninitialised for every request, and a row's memory is
first touched when it is first taken.  A row is reset when taken: every column a request reads
before writing it starts as it would in a table of fresh rows (0, links and prefix-cache
entries -1, the output tokens, the draw key of request r).  Per-request counters kept in the row
(drafts proposed and accepted) are copied to the outputs when the row is given back, and for
the requests still in the system at the end by ``rows_flush``.
"""

from __future__ import annotations

from fleetplan.sim._kernels.features_layout import (
    ACCEPTED,
    DKEY,
    DRAFTED,
    E0,
    E1,
    G_NFREE,
    G_ROWS,
    G_SEED,
    HCHILD,
    HSIB,
    N_RQ,
    OUT,
    REQ,
)
from fleetplan.sim._kernels.features_rng import request_key
from fleetplan.sim._kernels.jit import njit_borrowed, njit_inline


@njit_inline
def row_open(r, rq, row_free, glob, output_tokens):
    """A fresh row for request r (released now); returns its index."""
    n_free = glob[G_NFREE]
    if n_free > 0:
        x = row_free[n_free - 1]
        glob[G_NFREE] = n_free - 1
    else:
        x = glob[G_ROWS]
        glob[G_ROWS] = x + 1
    for c in range(N_RQ):
        rq[x, c] = 0
    rq[x, OUT] = output_tokens[r]
    rq[x, E0] = -1
    rq[x, E1] = -1
    rq[x, HCHILD] = -1
    rq[x, HSIB] = -1
    rq[x, REQ] = r
    rq[x, DKEY] = request_key(glob[G_SEED], r)
    return x


@njit_inline
def row_close(x, rq, row_free, glob, out_drafted, out_accepted):
    """Row x's request completed: its draft counts go out, the row back to the free list."""
    if rq[x, DRAFTED] > 0:  # (the outputs start at 0)
        out_drafted[rq[x, REQ]] = rq[x, DRAFTED]
        out_accepted[rq[x, REQ]] = rq[x, ACCEPTED]
    rq[x, REQ] = -1
    row_free[glob[G_NFREE]] = x
    glob[G_NFREE] += 1


@njit_borrowed
def rows_flush(rq, glob, out_drafted, out_accepted):
    """At the end of the run: the draft counts of the requests still in the system go out."""
    for x in range(glob[G_ROWS]):
        r = rq[x, REQ]
        if r >= 0:
            out_drafted[r] = rq[x, DRAFTED]
            out_accepted[r] = rq[x, ACCEPTED]
