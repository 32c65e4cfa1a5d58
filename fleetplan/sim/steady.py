"""One pool of a fleet simulated on its own, in steady state, with warm-up and drift statistics.

Why a pool can run alone: with a stateless between-pool router (``length``,
``compress_and_route``; ``fleetplan.sim.split``) a request's pool is a function of its own iid
lengths and routing draws, so the requests a pool receives are an iid *thinning* of the Poisson
stream: a Poisson stream of rate λ_p = λ·q (q = probability of being routed to the pool) whose
lengths follow the workload conditioned on that routing (the thinning/colouring theorem of
Poisson processes).  Sub-streams of different pools are independent, so each pool is simulated
with its own requests and its own length of run.

``pool_stream`` draws that sub-stream directly: lengths in chunks from the stream ``lengths`` of
the seed, routed by the fleet's own router (``compile_requests``, stream ``routing``) and kept
when they land in the pool; q is estimated by the kept share of every draw; arrival times are a
Poisson process of rate λ·q from the stream ``arrivals``.  ``simulate_pool`` runs the featureless
iteration kernel on the pool alone (``split``'s slicing) until every request finishes.

Statistics of one run (``PoolRun``), all on requests in arrival order:

* warm-up: MSER-5 (White, 1997; Hoad, Robinson & Davies, 2010): batch means of 5 consecutive
  TTFTs Z_1..Z_k; the truncation d* minimises MSER(d) = Σ_{i>d} (Z_i - Z̄_d)² / (k - d)² over
  d <= k/2; the first 5·d* requests are warm-up, or, when longer, the requests arriving before
  ``min_warmup_s`` (capped at half the run).  The floor matters for a pool filling up towards
  overload: its TTFT only rises, MSER-5 then cuts nothing, and the empty-fleet start would hide
  the growing queue.  ``warmup_at_limit`` is set when d* is the
  largest allowed (the series has not settled in the first half of the run);
* the SLO percentile of TTFT and TPOT over the measured requests (unfinished or rejected
  requests count as inf, as in ``fleetplan.sim.result``), and of TTFT over the first and second
  half of the measured requests (the drift test in ``fleetplan.plan.verify`` compares them);
* mean time in service (first scheduled to last token) and mean E2E of measured requests, and the
  completion rate while requests arrive (the pool's capacity when it is overloaded);
* a quantile grid of measured TTFT and TPOT (``GRID_LEVELS``) for fleet-wide percentiles of
  pools run apart: a mixture of pool distributions with weights q (``mixture_quantile``).
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace

import numpy as np

from fleetplan import rng as fp_rng
from fleetplan.errors import ConfigError
from fleetplan.metrics import percentiles
from fleetplan.sim._kernels import codes
from fleetplan.sim.api_server import through_api_servers
from fleetplan.sim.compile import CompiledRequests, CompiledRun, compile_fleet, compile_requests
from fleetplan.sim.engine import _run_kernel
from fleetplan.sim.features.compile import compile_features, features_on
from fleetplan.sim.spec import FleetSpec, Level, PoolRouter
from fleetplan.sim.split import STATELESS_POOL_ROUTERS, _pool_run

__all__ = ["GRID_LEVELS", "MSER_BATCH", "PoolRun", "mixture_quantile", "mser5_truncation", "pool_stream",
           "simulate_pool"]

MSER_BATCH = 5
#: Quantile levels of the returned grids: fine in the tail, where fleet-wide percentiles fall.
GRID_LEVELS = np.unique(np.concatenate([np.linspace(0.0, 0.9, 91), np.linspace(0.9, 0.99, 181),
                                        np.linspace(0.99, 1.0, 401)]))
CHUNK_DRAWS = 1 << 16  # length draws per routing chunk
_TOKEN_MARGIN = 2.0  # tokens: CDF quantiles are rounded up to whole tokens
_TOTAL_GRID = 1 << 16
MAX_DRAWS_WITHOUT_A_HIT = 10_000_000
#: Sub-streams kept per process (at most this many requests in all): a pool's search simulates the
#: same stream (same seed) at several counts, and drawing a small pool's stream means drawing the
#: whole fleet's.  A cache hit returns the very arrays a fresh draw would.
STREAM_CACHE_REQUESTS = 4_000_000
_STREAM_CACHE: OrderedDict[tuple, _Drawn] = OrderedDict()
_STREAM_LOCK = threading.Lock()  # tasks may run on threads (``fleetplan.exec.threads``); see pool_stream
#: ``_u1_region`` of a (workload fingerprint, a, b), shared by the pool's replications (their seeds differ, the
#: region does not); at most this many kept.
REGION_CACHE_ENTRIES = 256
_REGION_CACHE: OrderedDict[tuple, tuple[np.ndarray, np.ndarray] | None] = OrderedDict()


@dataclass(frozen=True)
class PoolRun:
    """One simulated run of one pool (times in seconds; see module docstring)."""

    n_requests: int
    n_warmup: int
    warmup_s: float  # arrival time of the first measured request
    duration_s: float  # arrival time of the last request
    warmup_at_limit: bool
    rate_per_s: float  # λ·q, the pool's sub-stream rate
    share: float  # q
    p_ttft_s: float  # at the SLO percentile, measured requests
    p_tpot_s: float
    p_ttft_first_half_s: float
    p_ttft_second_half_s: float
    mean_service_s: float  # first scheduled -> last token
    mean_e2e_s: float
    n_not_done: int  # measured requests unfinished or rejected
    throughput_per_s: float  # completions per second while requests arrive (after the warm-up cut)
    ttft_grid_s: tuple[float, ...]
    tpot_grid_s: tuple[float, ...]
    n_too_long: int = 0  # requests above the served model's limit (rejected, out of the percentiles)
    too_long_tokens: int = 0
    total_tokens: int = 0

    @property
    def n_measured(self) -> int:
        return self.n_requests - self.n_warmup


def mser5_truncation(series: np.ndarray, batch: int = MSER_BATCH) -> tuple[int, bool]:
    """MSER-``batch`` warm-up of ``series`` (arrival order): (requests to drop, d* at its limit).

    Non-finite values (unfinished requests) are capped at the largest finite value so that the
    statistic stays defined; they still count as inf in the percentiles.
    """
    x = np.asarray(series, dtype=np.float64)
    k = x.size // batch
    if k < 4:
        return 0, False
    finite = x[np.isfinite(x)]
    cap = float(finite.max()) if finite.size else 0.0
    z = np.where(np.isfinite(x[: k * batch]), x[: k * batch], cap).reshape(k, batch).mean(axis=1)
    # suffix sums give every d's mean and squared deviation in O(k)
    s1 = np.cumsum(z[::-1])[::-1]
    s2 = np.cumsum((z * z)[::-1])[::-1]
    d_max = k // 2
    d = np.arange(d_max + 1)
    m = (k - d).astype(np.float64)
    sse = s2[d] - s1[d] ** 2 / m
    d_star = int(np.argmin(sse / (m * m)))
    return d_star * batch, d_star == d_max


def _fingerprint(workload) -> str:
    prompt, output = workload.sample(np.random.default_rng(0), 64)
    return hashlib.sha256(np.concatenate([prompt, output]).astype(np.int64).tobytes()).hexdigest()


def _total_bounds(spec: FleetSpec, pool: int) -> tuple[float, float]:
    """Totals (prompt + output) outside ``(a, b]`` never route to ``pool`` (a superset of its traffic):
    ``length``: its own range, the largest pool also everything above it; compress-and-route: up to
    gamma x its context (squeezed requests); other routers: no bound."""
    ctx = sorted({p.max_context_tokens for p in spec.pools})
    own = spec.pools[pool].max_context_tokens
    below = [c for c in ctx if c < own]
    a = float(below[-1]) if below else 0.0
    if own == ctx[-1]:
        return a, math.inf
    if spec.pool_router is PoolRouter.LENGTH:
        return a, float(own)
    if spec.pool_router is PoolRouter.COMPRESS_AND_ROUTE:
        return a, float(own) * float(spec.compress_gamma)
    return 0.0, math.inf


#: Bins of a copula cell's position r that ``_u1_region`` checks (the region's resolution within a cell).
_CELL_BINS = 64


def _u1_region(workload, a: float, b: float) -> tuple[np.ndarray, np.ndarray] | None:
    """Intervals of the first uniform of ``Workload.lengths_at`` outside which the total is never in
    ``(a, b]`` (``None``: no such structure known, draw from the whole square).

    Prompt/output CDFs with a copula: u1 picks a copula cell (row, col) and a position r in it; the
    prompt grows with r and the output with u2, so a cell's totals lie between its corners' and a
    cell whose range misses ``(a, b]`` is skipped.  Totals only: the total grows with u1, so bins of
    a fine u1 grid are checked by their end points.  Sampling u1 uniformly on the kept intervals
    is the workload's distribution conditioned on them (exact; q is rescaled by their length)."""
    if not hasattr(workload, "lengths_at") or (a <= 0 and math.isinf(b)):
        return None
    lo, hi = a - _TOKEN_MARGIN, b + _TOKEN_MARGIN
    if getattr(workload, "input", None) is None or getattr(workload, "output", None) is None:
        grid = np.linspace(0.0, 1.0, _TOTAL_GRID + 1)
        prompt, output = workload.lengths_at(grid, np.full(grid.size, 0.5))
        total = (prompt + output).astype(np.float64)
        keep = (total[1:] >= lo) & (total[:-1] <= hi)
        return grid[:-1][keep], np.diff(grid)[keep]
    cells = np.ones((1, 1)) if workload.copula is None else np.asarray(workload.copula, dtype=np.float64)
    k = cells.shape[0]
    flat = cells.ravel()
    cum = np.cumsum(flat)
    cum[-1] = 1.0
    row, col = np.divmod(np.arange(flat.size), k)
    q_in = workload.input.quantile(np.arange(k + 1) / k)
    q_out = workload.output.quantile(np.arange(k + 1) / k)
    t_min, t_max = q_in[row] + q_out[col], q_in[row + 1] + q_out[col + 1]
    keep = (flat > 0) & (t_max >= lo) & (t_min <= hi)
    start = np.concatenate([[0.0], cum[:-1]])[keep]
    width = flat[keep]
    # Within a kept cell the prompt grows with the position r: keep only the r-bins whose totals can
    # reach (a, b] (a cell straddling a bound is mostly outside it; a pool of a tiny share then draws
    # from a region of about its own size, not of the cells').
    r = np.linspace(0.0, 1.0, _CELL_BINS + 1)
    q_r = workload.input.quantile(np.clip((row[keep][:, None] + r[None, :]) / k, 0.0, 1.0))  # (cells, bins + 1)
    most = q_r[:, 1:] + q_out[col[keep] + 1][:, None]  # a bin's largest total: its right end, the longest output
    least = q_r[:, :-1] + q_out[col[keep]][:, None]  # its smallest: its left end, the shortest output
    ok = (most >= lo) & (least <= hi)
    has = ok.any(axis=1)
    first = np.argmax(ok, axis=1)
    last = _CELL_BINS - 1 - np.argmax(ok[:, ::-1], axis=1)
    lo_r, hi_r = r[first], r[last + 1]
    return (start + width * lo_r)[has], (width * (hi_r - lo_r))[has]


def _region(workload, fingerprint: str, a: float, b: float) -> tuple[np.ndarray, np.ndarray] | None:
    """``_u1_region(workload, a, b)``, computed once per (workload, a, b) and shared by every seed's stream
    (the very arrays: the region is read, never written).  Called under ``_STREAM_LOCK``."""
    key = (fingerprint, float(a), float(b))
    if key in _REGION_CACHE:
        _REGION_CACHE.move_to_end(key)
        return _REGION_CACHE[key]
    region = _u1_region(workload, a, b)
    if region is not None:
        for arr in region:
            arr.setflags(write=False)
    _REGION_CACHE[key] = region
    while len(_REGION_CACHE) > REGION_CACHE_ENTRIES:
        _REGION_CACHE.popitem(last=False)
    return region


class SortedSearch:
    """``np.searchsorted(cum, u, side="right")`` for many ``u`` in ``[0, cum[-1]]`` over a non-decreasing
    ``cum``, the same indices in a few passes over ``u`` instead of a binary search each (about 2x faster for
    a region of 10^4-10^5 bins): ``u`` falls in one of 4 ``cum.size`` equal buckets of ``[0, cum[-1]]``; the
    answer for a bucket's left end, one bucket lower (a safe start under rounding), is a lower bound of
    every answer in it, from which each index steps up while ``cum[index] <= u``.  Indices still moving
    after ``STEPS`` passes (a bucket holding many points) take the binary search."""

    STEPS = 4
    BUCKETS_PER_POINT = 4

    def __init__(self, cum: np.ndarray) -> None:
        self.cum = np.asarray(cum, dtype=np.float64)
        self.n = self.cum.size
        total = float(self.cum[-1]) if self.n else 0.0
        self.n_buckets = self.BUCKETS_PER_POINT * self.n
        self.bucket = total / self.n_buckets if self.n and total > 0 else 0.0
        edges = np.arange(self.n_buckets + 1, dtype=np.float64) * self.bucket
        self.start = np.searchsorted(self.cum, edges, side="right")  # sorted keys: one cheap pass

    def __call__(self, u: np.ndarray) -> np.ndarray:
        u = np.asarray(u, dtype=np.float64)
        if self.bucket <= 0 or not np.all(u >= 0):  # no buckets (empty, or all mass at 0): the plain search
            return np.searchsorted(self.cum, u, side="right")
        j = np.minimum((u / self.bucket).astype(np.int64), self.n_buckets)
        idx = self.start[np.maximum(j - 1, 0)]
        todo = np.arange(u.size)
        for _ in range(self.STEPS):
            i = idx[todo]
            up = i < self.n
            up[up] = self.cum[i[up]] <= u[todo[up]]
            todo = todo[up]
            if not todo.size:
                return idx
            idx[todo] += 1
        idx[todo] = np.searchsorted(self.cum, u[todo], side="right")
        return idx


class _Drawn:
    """A pool's sub-stream drawn so far from one seed (extended on demand; prefix-consistent)."""

    def __init__(self, seed: int, region: tuple[np.ndarray, np.ndarray] | None, cv: float = 1.0) -> None:
        self.cv = float(cv)  # gamma gaps' CV of the fleet's stream (1: Poisson)
        self.region = region
        self.cum = None if region is None else np.cumsum(region[1])  # the region's bins, end to end
        self.search = None if region is None else SortedSearch(self.cum)
        self.lengths_rng = fp_rng.stream(seed, "lengths")
        self.routing_rng = fp_rng.stream(seed, "routing")
        self.arrivals_rng = fp_rng.stream(seed, "arrivals")
        self.parts: list[CompiledRequests] = []
        self.kept_per_chunk: list[int] = []
        self.gaps = np.zeros(0)
        self.lock = threading.Lock()  # one thread draws or reads a stream at a time

    @property
    def n_kept(self) -> int:
        return sum(self.kept_per_chunk)

    def extend(self, spec: FleetSpec, pool: int, workload, n_requests: int) -> None:
        while self.n_kept < n_requests:
            prompt, output = self._sample(workload)
            routed = compile_requests(spec, np.zeros(CHUNK_DRAWS), prompt, output, self.routing_rng)
            mine = routed.req_pool == pool
            self.kept_per_chunk.append(int(mine.sum()))
            self.parts.append(CompiledRequests(
                arrival_s=routed.arrival_s[mine], prompt_tokens=routed.prompt_tokens[mine],
                original_prompt_tokens=routed.original_prompt_tokens[mine],
                output_tokens=routed.output_tokens[mine], req_pool=routed.req_pool[mine],
                route_u=routed.route_u[mine]))
            if self.n_kept == 0 and len(self.kept_per_chunk) * CHUNK_DRAWS >= MAX_DRAWS_WITHOUT_A_HIT:
                raise ConfigError(f"no request of {len(self.kept_per_chunk) * CHUNK_DRAWS:,} drawn routes to pool "
                                  f"{spec.pools[pool].name!r}; leave the empty pool out of the fleet")
        if self.gaps.size < n_requests:
            more = n_requests - self.gaps.size
            if self.cv == 1.0:
                new = self.arrivals_rng.standard_exponential(more)
            else:
                # The pool keeps each arrival of the fleet's gamma renewal stream with probability q
                # (an independent length mark): its gap is the sum of a Geometric(q) number of the
                # fleet's gaps, Gamma(G s, 1/s) with s = 1/CV², in units of 1/λ; times q so that
                # ``take``'s division by λ q gives seconds.  q is the first chunk's kept share.
                q = min(max(self._first_share(), 1e-12), 1.0)
                shape = 1.0 / (self.cv * self.cv)
                g = self.arrivals_rng.geometric(q, more)
                new = q * self.arrivals_rng.gamma(g * shape, 1.0 / shape)
            self.gaps = np.concatenate([self.gaps, new])

    def _first_share(self) -> float:
        return self.region_share * self.kept_per_chunk[0] / CHUNK_DRAWS if self.kept_per_chunk else 1.0

    def _sample(self, workload) -> tuple[np.ndarray, np.ndarray]:
        if self.region is None:
            return workload.sample(self.lengths_rng, CHUNK_DRAWS)
        starts, widths = self.region
        cum = self.cum
        u = self.lengths_rng.random(CHUNK_DRAWS) * cum[-1]
        u2 = self.lengths_rng.random(CHUNK_DRAWS)
        idx = np.minimum(self.search(u), cum.size - 1)  # np.searchsorted(cum, u, side="right"), faster
        u1 = np.clip(starts[idx] + (u - (cum[idx] - widths[idx])), 0.0, 1.0)
        return workload.lengths_at(u1, u2)

    @property
    def region_share(self) -> float:
        return 1.0 if self.region is None else float(np.sum(self.region[1]))

    def take(self, rate_per_s: float, n_requests: int) -> tuple[CompiledRequests, float]:
        """The first ``n_requests`` and q: kept / drawn over the chunks up to the one holding the last."""
        kept = np.cumsum(self.kept_per_chunk)
        n_chunks = int(np.searchsorted(kept, n_requests)) + 1
        share = self.region_share * float(kept[n_chunks - 1]) / (n_chunks * CHUNK_DRAWS)

        def cat(name: str) -> np.ndarray:
            return np.ascontiguousarray(np.concatenate([getattr(k, name) for k in self.parts[:n_chunks]])[:n_requests])

        arrival = np.cumsum(self.gaps[:n_requests]) / (float(rate_per_s) * share)
        return CompiledRequests(arrival_s=arrival, prompt_tokens=cat("prompt_tokens"),
                                original_prompt_tokens=cat("original_prompt_tokens"),
                                output_tokens=cat("output_tokens"), req_pool=cat("req_pool"),
                                route_u=cat("route_u")), share


def pool_stream(spec: FleetSpec, pool: int, workload, rate_per_s: float, n_requests: int,
                seed: int, arrival: str = "poisson", cv: float = 1.0) -> tuple[CompiledRequests, float]:
    """The first ``n_requests`` requests routed to pool ``pool`` of ``spec`` when ``workload``
    arrives at ``rate_per_s``, as the pool's own stream, and its share q (module docstring).

    Lengths are drawn in chunks of ``CHUNK_DRAWS`` and q is the kept share of the chunks drawn up
    to the ``n_requests``-th kept request, so a shorter stream of the same seed is a prefix of a
    longer one (and a per-process cache extends streams instead of redrawing them)."""
    if spec.pool_router not in STATELESS_POOL_ROUTERS:
        raise ConfigError(f"pool router {spec.pool_router.value!r} decides pools from live load; a pool cannot "
                          "be simulated on its own: simulate the whole fleet")
    if not 0 <= pool < len(spec.pools):
        raise ConfigError(f"pool index {pool} is not one of the fleet's {len(spec.pools)} pools")
    if arrival not in ("poisson", "gamma"):
        raise ConfigError(f"arrival process {arrival!r} cannot be split into one pool's stream (poisson and gamma "
                          "can); verify replayed traces with `arrival` gamma and `arrival_cv` at the trace's "
                          "burstiness")
    cv = 1.0 if arrival == "poisson" else float(cv)
    routing = (spec.pool_router, spec.compress_gamma, spec.tag_shares,
               tuple((p.max_context_tokens, p.model_tag) for p in spec.pools))
    fingerprint = _fingerprint(workload)
    key = (routing, pool, fingerprint, int(seed), cv)
    with _STREAM_LOCK:  # threads: the cache's order and membership change under this lock only
        drawn = _STREAM_CACHE.get(key)
        if drawn is None:
            drawn = _STREAM_CACHE[key] = _Drawn(int(seed), _region(workload, fingerprint, *_total_bounds(spec, pool)),
                                                cv)
        _STREAM_CACHE.move_to_end(key)
    with drawn.lock:  # a stream is drawn by one thread at a time (others drawing other streams)
        drawn.extend(spec, pool, workload, int(n_requests))
        out = drawn.take(rate_per_s, int(n_requests))
    with _STREAM_LOCK:
        while len(_STREAM_CACHE) > 1 and sum(d.n_kept for d in _STREAM_CACHE.values()) > STREAM_CACHE_REQUESTS:
            _STREAM_CACHE.popitem(last=False)
    return out


def _quantile(values: np.ndarray, q: float) -> float:
    return percentiles(values, (q,))[q] if values.size else float("nan")


def simulate_pool(spec: FleetSpec, pool: int, workload, rate_per_s: float, n_requests: int, seed: int,
                  percentile: float = 99.0, min_warmup_s: float = 0.0, *, arrival: str = "poisson",
                  cv: float = 1.0) -> PoolRun:
    """Pool ``pool`` of ``spec`` alone on its sub-stream of ``n_requests`` requests (module
    docstring); the fleet's other pools only route.  Iteration level, runs until all finish.
    The warm-up cut is MSER-5's or every request arriving before ``min_warmup_s``, whichever is
    longer (MSER-5 keeps a rising series whole, so a pool still filling needs the floor)."""
    drawn, share = pool_stream(spec, pool, workload, rate_per_s, n_requests, seed, arrival, cv)
    # the API server stage where the pool's step model carries its cost (``sim.api_server``): the kernel
    # sees each request at its release, latencies count from its drawn arrival
    requests, stage = through_api_servers(spec, drawn)
    full = CompiledRun(fleet=compile_fleet(spec), requests=requests, horizon_s=float("inf"))
    run = _pool_run(full, pool)
    if features_on(spec):  # the pool's runtime features (e.g. an MTP candidate's speculative decoding)
        run = replace(run, features=compile_features(FleetSpec(pools=(spec.pools[pool],)), int(seed)))
    out = _run_kernel(run, Level.ITERATION)
    r = run.requests
    done = out["status"] == codes.STATUS_DONE
    arrival = r.arrival_s if stage is None else stage.arrival_s[requests.req_pool == pool]
    ttft = np.where(done, out["first_token_s"] - arrival, np.inf)
    e2e = np.where(done, out["done_s"] - arrival, np.inf)
    multi = r.output_tokens > 1
    with np.errstate(invalid="ignore"):  # inf - inf of requests that never ran
        service = np.where(done, out["done_s"] - out["first_sched_s"], np.inf)
        tpot = np.where(done, (e2e - ttft) / np.maximum(r.output_tokens - 1, 1), np.inf)
    tokens = r.original_prompt_tokens + r.output_tokens
    limit = spec.max_model_len_tokens
    too_long = tokens > limit if limit is not None else np.zeros(tokens.shape, dtype=bool)
    if too_long.any():  # rejected as vLLM rejects them: counted, out of the latency series
        keep = ~too_long
        arrival, ttft, e2e, service, tpot, multi, done = (x[keep] for x in (arrival, ttft, e2e, service, tpot, multi,
                                                                              done))
        out = {**out, "done_s": out["done_s"][keep]}
    n_warm, at_limit = mser5_truncation(ttft)
    n_warm = max(n_warm, min(int(np.searchsorted(arrival, min_warmup_s)), arrival.size // 2))
    measured = slice(n_warm, None)
    t_meas, tpot_meas = ttft[measured], tpot[measured][multi[measured]]
    half = t_meas.size // 2
    finite = np.isfinite(service[measured])
    grid_t = np.quantile(t_meas, GRID_LEVELS, method="inverted_cdf") if t_meas.size else np.full(GRID_LEVELS.size,
                                                                                                 np.nan)
    grid_p = np.quantile(tpot_meas, GRID_LEVELS, method="inverted_cdf") if tpot_meas.size else np.full(
        GRID_LEVELS.size, np.nan)
    return PoolRun(
        n_requests=int(arrival.size),
        n_warmup=int(n_warm),
        warmup_s=float(arrival[n_warm]) if n_warm < arrival.size else float("nan"),
        duration_s=float(arrival[-1]) if arrival.size else 0.0,
        warmup_at_limit=bool(at_limit),
        rate_per_s=float(rate_per_s) * share,
        share=float(share),
        p_ttft_s=_quantile(t_meas, percentile),
        p_tpot_s=_quantile(tpot_meas, percentile),
        p_ttft_first_half_s=_quantile(t_meas[:half], percentile),
        p_ttft_second_half_s=_quantile(t_meas[half:], percentile),
        mean_service_s=float(service[measured][finite].mean()) if finite.any() else float("inf"),
        mean_e2e_s=float(e2e[measured][finite].mean()) if finite.any() else float("inf"),
        n_not_done=int((~done[measured]).sum()),
        throughput_per_s=_throughput(out["done_s"], float(arrival[n_warm]) if n_warm < arrival.size else 0.0,
                                     float(arrival[-1]) if arrival.size else 0.0),
        ttft_grid_s=tuple(float(x) for x in grid_t),
        tpot_grid_s=tuple(float(x) for x in grid_p),
        n_too_long=int(too_long.sum()),
        too_long_tokens=int(tokens[too_long].sum()),
        total_tokens=int(tokens.sum()),
    )


def _throughput(done_s: np.ndarray, start_s: float, end_s: float) -> float:
    """Completions per second in ``[start_s, end_s]``: the arrival rate when the pool keeps up, its
    capacity when it is overloaded (the queue then grows and the servers never idle)."""
    if end_s <= start_s:
        return float("nan")
    return float(np.count_nonzero((done_s >= start_s) & (done_s <= end_s))) / (end_s - start_s)


def mixture_quantile(grids: list[np.ndarray], weights: list[float], q: float) -> float:
    """The ``q``-quantile (0..1) of a mixture of distributions given by quantile grids at
    ``GRID_LEVELS`` with ``weights`` (normalised here): the smallest x on the union of grid points
    with Σ w_i F_i(x) >= q, each F_i the step function of its grid."""
    w = np.asarray(weights, dtype=np.float64)
    w = w / w.sum()
    pts = np.unique(np.concatenate([np.asarray(g, dtype=np.float64) for g in grids]))
    if not np.all(np.isfinite(pts)) and q >= 1.0 - 1e-12:
        return float("inf")
    pts = pts[np.isfinite(pts)]
    cdf = np.zeros(pts.size)
    for g, wi in zip(grids, w, strict=True):
        g = np.asarray(g, dtype=np.float64)
        fin = np.isfinite(g)
        if not fin.any():
            continue
        # F_i(x): the largest level whose grid value is <= x (the grid is a non-decreasing step function)
        idx = np.searchsorted(g[fin], pts, side="right")
        levels = GRID_LEVELS[fin]
        cdf += wi * np.where(idx > 0, levels[np.maximum(idx - 1, 0)], 0.0)
    hit = np.flatnonzero(cdf >= q - 1e-12)
    return float(pts[hit[0]]) if hit.size else float("inf")
