"""Between-pool routing, decided before the kernel runs (vectorised over the request stream).

Rules (core paper §3.4):

* length: pools sorted by ``max_context_tokens``; a request goes to the smallest pool with
  ``max_context >= prompt + output``.  A request that fits no pool goes to the largest one,
  where the kernel rejects it (it is counted, never dropped).
* compress_and_route (Chen et al., 2026): the first pool, in order of context ``B``, that
  accepts the request takes it, where a pool accepts totals ``<= B`` and, unless it is the
  largest, also totals in ``(B, gamma * B]`` whose output alone is below ``B``; those have
  their prompt cut to ``B - output``.  With two pools this is the paper's rule; with more
  it applies at every boundary, as the analytical planner sizes it
  (``fleetplan.plan.points``).  A request longer than the fleet's ``max_model_len_tokens`` is
  never squeezed: the gateway rejects it as vLLM does, so it goes to the largest pool, where the
  kernel rejects it.
* random / round_robin: uniform over pools / pool ``i mod P`` in arrival order.
* model_tag: a tag is drawn per request from ``tag_shares`` (routing stream); among the
  pools serving the tag the length rule applies.
* least_loaded: decided inside the kernel at arrival (``POOL_LEAST_LOADED``).
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim._kernels import codes
from fleetplan.sim.spec import FleetSpec, PoolRouter


def _length_route(total_tokens: np.ndarray, contexts: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Smallest candidate pool whose context fits each total; the largest if none fits."""
    order = candidates[np.argsort(contexts[candidates], kind="stable")]
    sorted_ctx = contexts[order]
    slot = np.searchsorted(sorted_ctx, total_tokens, side="left")
    return order[np.minimum(slot, order.size - 1)]


def _compress_route(
    prompt: np.ndarray, output: np.ndarray, contexts: np.ndarray, gamma: float, limit_tokens: float = np.inf
) -> tuple[np.ndarray, np.ndarray]:
    """(pool, served prompt) under compress-and-route; see the module docstring."""
    order = np.argsort(contexts, kind="stable")
    total = prompt + output
    squeezable = total <= limit_tokens
    pool = np.full(total.size, -1, dtype=np.int64)
    served = prompt.copy()
    for rank, p in enumerate(order):
        b = int(contexts[p])
        last = rank == order.size - 1
        fits = total <= b
        squeeze = np.zeros_like(fits) if last else (total > b) & (total <= gamma * b) & (output < b) & squeezable
        take = (pool < 0) & (fits | squeeze | last)
        pool[take] = p
        cut = take & squeeze
        served[cut] = b - output[cut]
    return pool, served


def route_pools(
    spec: FleetSpec,
    prompt_tokens: np.ndarray,
    output_tokens: np.ndarray,
    routing_rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Between-pool routing of requests in arrival order.

    Returns ``(req_pool i4[N], served_prompt_tokens i8[N])``; prompts change only
    under ``compress_and_route``.
    """
    prompt = np.asarray(prompt_tokens, dtype=np.int64).copy()
    output = np.asarray(output_tokens, dtype=np.int64)
    n = prompt.size
    contexts = np.array([p.max_context_tokens for p in spec.pools], dtype=np.int64)
    all_pools = np.arange(contexts.size)
    router = spec.pool_router
    if router is PoolRouter.LEAST_LOADED:
        return np.full(n, codes.POOL_LEAST_LOADED, dtype=np.int32), prompt
    if router is PoolRouter.RANDOM:
        pick = np.minimum((routing_rng.random(n) * contexts.size).astype(np.int64), contexts.size - 1)
        return pick.astype(np.int32), prompt
    if router is PoolRouter.ROUND_ROBIN:
        return (np.arange(n) % contexts.size).astype(np.int32), prompt
    if router is PoolRouter.COMPRESS_AND_ROUTE:
        limit = np.inf if spec.max_model_len_tokens is None else spec.max_model_len_tokens
        pool, served = _compress_route(prompt, output, contexts, spec.compress_gamma, limit)
        return pool.astype(np.int32), served
    total = prompt + output
    if router is PoolRouter.LENGTH:
        return _length_route(total, contexts, all_pools).astype(np.int32), prompt
    if router is PoolRouter.MODEL_TAG:
        tags = np.array([p.model_tag for p in spec.pools])
        if spec.tag_shares:
            names = [t for t, _ in spec.tag_shares]
            cum = np.cumsum([s for _, s in spec.tag_shares])
            idx = np.minimum(np.searchsorted(cum, routing_rng.random(n), side="right"), len(names) - 1)
            req_tag = np.array(names)[idx]
        else:
            req_tag = np.full(n, tags[0])
        req_pool = np.empty(n, dtype=np.int32)
        for tag in np.unique(req_tag):
            mask = req_tag == tag
            req_pool[mask] = _length_route(total[mask], contexts, all_pools[tags == tag])
        return req_pool, prompt
    raise AssertionError(f"pool router {router} has no compile rule")  # every member handled above
