"""Request points of a pool: the workload's length distribution integrated per length range.

``LengthPoints`` turns a workload into weighted (prompt, output) points for any range of
total tokens (Gauss-Legendre nodes per CDF bin, so service-time moments, which grow like
L², are integrated exactly per bin); ``pool_points`` applies a sizing router's rule
(length, or compress-and-route with its band factor gamma) to pick and squeeze the
requests one pool serves.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from fleetplan.plan.space import PoolRange, SizingRouter
from fleetplan.workload import Workload


@dataclass(frozen=True)
class RequestPoints:
    """Weighted request points: prompt/output tokens and probability weights."""

    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    weight: np.ndarray

    @property
    def total_tokens(self) -> np.ndarray:
        return self.prompt_tokens + self.output_tokens

    def masked(self, mask: np.ndarray) -> RequestPoints:
        return RequestPoints(self.prompt_tokens[mask], self.output_tokens[mask], self.weight[mask])


#: Gauss-Legendre nodes per CDF bin (a bin is uniform in tokens, so the nodes integrate the
#: service-time moments, quadratic in L, exactly up to token rounding).
MAX_GAUSS_NODES_PER_BIN = 8
#: Equal-count bins of total length over which split workloads' prompt share is taken.
PROMPT_SHARE_BINS = 64
#: Strata of the prompt share per total (split workloads): each total point becomes this many
#: (prompt, output) points, so a pool sees the spread of outputs at a given request size.
PROMPT_SHARE_LEVELS = 4


@functools.cache
def _gauss_legendre(k: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes and weights on [-1, 1] (computed once per order)."""
    return np.polynomial.legendre.leggauss(k)


class LengthPoints:
    """Quadrature of a workload's length distribution, refined per pool range.

    For totals-only workloads each pool range (lo, hi] gets its own quadrature of
    the conditional distribution: totals are ceil(Q(u)), so lo < T <= hi exactly
    when F(lo) < u <= F(hi); that u-interval is cut at the CDF's breakpoints (L is
    uniform within a bin) and each piece gets Gauss-Legendre nodes (up to
    ``MAX_GAUSS_NODES_PER_BIN``, at most about ``n_points`` in all).  Moments of
    S, which grows like L², are then integrated exactly per bin, the heavy tail
    included; uniform strata in u would under-weight the longest requests.  For
    workloads with separate prompt/output CDFs (joined by a copula) the totals come
    from the same quadrature of their total CDF, split into prompt and output by
    the mean prompt share of requests of that size (from a global quadrature of
    ``n_global`` points of the joint distribution), so every length range with
    traffic gets points and an exact share.
    """

    def __init__(self, workload: Workload, n_points: int, n_global: int,
                 max_model_len_tokens: int | None = None) -> None:
        self.workload = workload
        self.n_points = int(n_points)
        self.global_points = RequestPoints(*workload.quadrature(n_global))
        self.max_tokens = int(max(np.ceil(self.global_points.total_tokens.max()), np.ceil(workload.total.max_tokens)))
        served = self.global_points.total_tokens <= self.max_tokens
        if max_model_len_tokens is not None:
            # The served model's limit (fleetplan.models.context): no pool range reaches past it and
            # longer requests are served by no pool (``plan.context_limit`` reports them).
            self.max_tokens = min(self.max_tokens, int(max_model_len_tokens))
            served = self.global_points.total_tokens <= self.max_tokens
        #: Mean prompt + output tokens served per arriving request (rejected requests count 0).
        self.mean_total_tokens = float(self.global_points.weight[served] @ self.global_points.total_tokens[served])
        self._cache: dict[tuple[float, float], RequestPoints] = {}
        order = np.argsort(self.global_points.total_tokens, kind="stable")
        self._sorted_global = self.global_points.masked(order)
        self._global_mass = float(self.global_points.weight.sum())

    @functools.cached_property
    def _share_table(self) -> tuple[np.ndarray, np.ndarray]:
        """(bin centres (B,), prompt-share quantiles (B, Q)) of split workloads: the global joint
        quadrature sorted by total in ``PROMPT_SHARE_BINS`` equal-count bins, and in each the
        weighted means of prompt / total within each of ``PROMPT_SHARE_LEVELS`` equal-probability
        strata of the share.  Stratum means (not quantiles at the strata's mid-points) keep the
        conditional mean share, hence E[output | total], exact: with the share's quantile function
        Q(u), stratum [a, b] has mean (G(b) - G(a)) / (b - a), G(x) = ∫_0^x Q(u) du, piecewise linear
        through the sorted points' cumulative weights.  (Mid-point quantiles lost the rare long
        outputs of prompt-heavy traces: azure_code's mean output came out 20.5 tokens, not 27.9.)"""
        g = self._sorted_global
        edges = np.linspace(0, g.weight.size, PROMPT_SHARE_BINS + 1).astype(np.int64)
        bounds = np.arange(PROMPT_SHARE_LEVELS + 1) / PROMPT_SHARE_LEVELS
        table = np.empty((PROMPT_SHARE_BINS, PROMPT_SHARE_LEVELS))
        for b in range(PROMPT_SHARE_BINS):
            share = g.prompt_tokens[edges[b]:edges[b + 1]] / g.total_tokens[edges[b]:edges[b + 1]]
            w = g.weight[edges[b]:edges[b + 1]]
            order = np.argsort(share, kind="stable")
            cum = np.concatenate([[0.0], np.cumsum(w[order])])
            cum /= cum[-1]
            integral = np.concatenate([[0.0], np.cumsum(share[order] * np.diff(cum))])
            table[b] = np.diff(np.interp(bounds, cum, integral)) / np.diff(bounds)
        centre = g.total_tokens[(edges[:-1] + edges[1:]) // 2]
        return centre, table

    def _prompt_shares(self, total_tokens: np.ndarray) -> np.ndarray:
        """Prompt shares (N, Q) of requests of about ``total_tokens``: the strata of the joint
        distribution's share at that total, interpolated between bin centres."""
        centre, table = self._share_table
        return np.stack([np.interp(total_tokens, centre, table[:, q]) for q in range(table.shape[1])], axis=1)

    def _range_cells(self, lo_tokens: float, hi_tokens: float):
        """The global joint points with lo < total <= hi (prompt, output, weight, sorted by total) and their
        cells' start and end indices (``_cell_edges``), or None when the range holds fewer than
        ``MIN_JOINT_POINTS`` points or no mass."""
        g = self._sorted_global
        total = g.total_tokens
        a, b = np.searchsorted(total, lo_tokens, side="right"), np.searchsorted(total, hi_tokens, side="right")
        if b - a < MIN_JOINT_POINTS:
            return None
        p, o, w = g.prompt_tokens[a:b], g.output_tokens[a:b], g.weight[a:b]
        if w.sum() <= 0:
            return None
        starts = _cell_edges(np.cumsum(w) / w.sum())
        return p, o, w, starts, np.append(starts[1:], w.size)

    def _joint_cells(self, lo_tokens: float, hi_tokens: float) -> RequestPoints | None:
        """Split workloads: a range's points straight from the global joint quadrature, which keeps
        E[prompt | range] and E[output | range] exact (interpolating the prompt share across a
        range's edges does not where the output mix changes sharply with the total, as azure_conv's
        at 2,048 tokens).  The range's joint points are cut by total into cells (equal mass, then
        geometric in the tail) and each cell into ``PROMPT_SHARE_LEVELS`` strata of the prompt share;
        a stratum is one point at its weighted mean prompt and output.  Weights are the joint's own
        mass (the distribution the simulator samples; a split workload's separate total CDF can
        differ from it by a few per cent in a range).  None when the range holds fewer than
        ``MIN_JOINT_POINTS`` points."""
        cells = self._range_cells(lo_tokens, hi_tokens)
        if cells is None:
            return None
        p, o, w, starts, ends = cells
        # each cell's points by prompt share (stable): one sort by (cell, share) of all of them
        cell = np.repeat(np.arange(starts.size), ends - starts)
        order = np.lexsort((p / (p + o), cell))
        p, o, w = p[order], o[order], w[order]
        out_p, out_o, out_w = [], [], []
        for s0, s1 in zip(starts.tolist(), ends.tolist(), strict=True):
            cp, co, cw = p[s0:s1], o[s0:s1], w[s0:s1]
            k = min(PROMPT_SHARE_LEVELS, cw.size)
            cuts = np.searchsorted(np.cumsum(cw) / cw.sum(), _LEVEL_BOUNDS[k], side="right").tolist()
            for lo_i, hi_i in zip([0, *cuts], [*cuts, cw.size], strict=True):
                ww = cw[lo_i:hi_i]
                mass = ww.sum() if ww.size else 0.0  # (one sum, read four times)
                if mass <= 0:
                    continue
                out_w.append(mass)
                out_p.append(float(ww @ cp[lo_i:hi_i]) / mass)
                out_o.append(float(ww @ co[lo_i:hi_i]) / mass)
        weight = np.array(out_w)
        return RequestPoints(np.round(np.array(out_p)), np.round(np.array(out_o)), weight / self._global_mass)

    def between(self, lo_tokens: float, hi_tokens: float) -> RequestPoints:
        """Points with lo < prompt + output <= hi (weights are probabilities; cached per range)."""
        key = (float(lo_tokens), float(hi_tokens))
        if key not in self._cache:
            self._cache[key] = self._between(*key)
        return self._cache[key]

    def _between(self, lo_tokens: float, hi_tokens: float) -> RequestPoints:
        cdf = self.workload.total
        u_lo, u_hi = float(cdf.cdf(lo_tokens)), float(cdf.cdf(min(hi_tokens, self.max_tokens)))
        if not u_hi > u_lo:
            empty = np.zeros(0)
            return RequestPoints(empty, empty, empty)
        knots = np.unique(
            np.concatenate(([u_lo, u_hi], cdf.fractions[(cdf.fractions > u_lo) & (cdf.fractions < u_hi)]))
        )
        left, width = knots[:-1], np.diff(knots)
        budget = self.n_points // (PROMPT_SHARE_LEVELS if self.workload.has_split else 1)  # points per range
        k = int(np.clip(budget // left.size, 1, MAX_GAUSS_NODES_PER_BIN))
        nodes, gw = _gauss_legendre(k)
        u = (left[:, None] + width[:, None] * (nodes[None, :] + 1.0) / 2.0).ravel()
        w = (width[:, None] * gw[None, :] / 2.0).ravel()
        if self.workload.has_split:
            joint = self._joint_cells(lo_tokens, min(hi_tokens, self.max_tokens))
            if joint is not None:
                return joint
            # each total gets PROMPT_SHARE_LEVELS (prompt, output) splits: the joint distribution's
            # spread of outputs at a given size (short outputs set the TPOT tail), equal weights
            total = np.maximum(1.0, np.ceil(cdf.quantile(u)))
            shares = self._prompt_shares(total)
            prompt = np.clip(np.round(shares * total[:, None]), 1.0, np.maximum(total - 1.0, 1.0)[:, None])
            output = np.maximum(1.0, total[:, None] - prompt)
            weight = np.repeat(w / shares.shape[1], shares.shape[1])
            return RequestPoints(prompt.ravel(), output.ravel(), weight)
        prompt, output = self.workload.lengths_at(u, np.zeros_like(u))
        return RequestPoints(prompt.astype(np.float64), output.astype(np.float64), w)


#: The inner bounds of k equal-probability strata, i / k for i = 1..k-1 (``_joint_cells``), by k.
_LEVEL_BOUNDS = {k: np.arange(1, k) / k for k in range(1, PROMPT_SHARE_LEVELS + 1)}
#: Fewest global joint points a range needs to be built from them directly (``_joint_cells``).
MIN_JOINT_POINTS = 256
#: Cells by total of a range built from joint points: equal mass up to the tail, then geometric.
JOINT_BODY_CELLS, JOINT_TAIL_CELLS, JOINT_TAIL_MASS = 96, 32, 0.1


def _cell_edges(cum: np.ndarray) -> np.ndarray:
    """Start indices of cells over points with cumulative mass ``cum`` (normalised to end at 1):
    equal mass over the body, geometric in the tail probability over the last ``JOINT_TAIL_MASS``."""
    body = np.linspace(0.0, 1.0 - JOINT_TAIL_MASS, JOINT_BODY_CELLS, endpoint=False)
    tail = 1.0 - np.geomspace(JOINT_TAIL_MASS, JOINT_TAIL_MASS * 1e-3, JOINT_TAIL_CELLS)
    starts = np.searchsorted(cum, np.concatenate([body, tail]), side="right")
    return np.unique(np.concatenate([[0], starts[starts < cum.size]]))


def _fits(total: np.ndarray, output: np.ndarray, bound: float, squeeze: bool, gamma: float) -> np.ndarray:
    """Requests a pool ending at ``bound`` accepts: L <= bound, or (compress-and-route)
    L <= gamma*bound when the output alone fits (only the prompt can be compressed)."""
    ok = total <= bound
    if squeeze:
        ok |= (total <= gamma * bound) & (output < bound)
    return ok


def pool_points(points: LengthPoints, rng_: PoolRange, router: SizingRouter, gamma: float) -> RequestPoints:
    """The request points a pool serves (compressed where the router squeezes them).

    A request goes to the first pool that accepts it, so pool (lo, hi] serves the
    requests its own bound accepts and the previous pool's bound (lo) rejects.
    """
    squeeze = router is SizingRouter.COMPRESS
    hi_eff = np.inf if rng_.last else (gamma * rng_.hi_tokens if squeeze else rng_.hi_tokens)
    if squeeze and rng_.lo_tokens > 0:
        # (lo, gamma*lo] belongs to the previous pool unless the output alone is too long to squeeze.
        lo_eff = min(gamma * rng_.lo_tokens, hi_eff)
        band = points.between(rng_.lo_tokens, lo_eff)
        band = band.masked(band.output_tokens >= rng_.lo_tokens)
        rest = points.between(lo_eff, hi_eff)
        cand = RequestPoints(
            *(
                np.concatenate([x, y])
                for x, y in zip(
                    (band.prompt_tokens, band.output_tokens, band.weight),
                    (rest.prompt_tokens, rest.output_tokens, rest.weight),
                    strict=True,
                )
            )
        )
    else:
        cand = points.between(rng_.lo_tokens, hi_eff)
    total, output = cand.total_tokens, cand.output_tokens
    mask = np.ones(total.shape, dtype=bool) if rng_.last else _fits(total, output, rng_.hi_tokens, squeeze, gamma)
    sub = cand.masked(mask)
    if not rng_.last:
        excess = np.maximum(sub.total_tokens - rng_.hi_tokens, 0.0)
        sub = RequestPoints(sub.prompt_tokens - excess, sub.output_tokens, sub.weight)
    return sub
