"""Small PDD specs and request streams for the tests."""

from __future__ import annotations

import dataclasses

import numpy as np

from fleetplan.perf.linear import LinearStepModel
from fleetplan.sim.network import LeafSpineFabric
from fleetplan.sim.pdd import FabricSpec, KvTransferSpec, PddSpec
from fleetplan.sim.pdd.spec import SibylParams
from fleetplan.sim.spec import InstanceRouter, PoolSpec, SchedulerLimits


def pool(name: str, n: int, *, seqs: int = 8, budget: int = 512, blocks: int = 256, block: int = 16,
         ctx: int = 4096, router: str = "round_robin", base_s: float = 0.01, per_seq_s: float = 0.0005,
         prefill_s_per_token: float = 2e-5, ref_ctx: float | None = 2048.0) -> PoolSpec:
    step = LinearStepModel(base_s, per_seq_s, prefill_s_per_token, ref_ctx)
    return PoolSpec(name, "h100", n, ctx, step, SchedulerLimits(seqs, budget, blocks, block),
                    router=InstanceRouter.parse(router))


def random_fabric(rng: np.random.Generator, n_prefill: int, n_decode: int) -> FabricSpec:
    """A small random leaf-spine fabric (slow links, so transfers contend) and host layout."""
    n_leaves = int(rng.integers(1, 4))
    per_leaf = -(-(n_prefill + n_decode) // n_leaves) + int(rng.integers(0, 2))
    fabric = LeafSpineFabric(n_leaves, per_leaf, int(rng.integers(1, 4)), float(rng.uniform(0.5, 8.0)),
                             float(rng.uniform(0.5, 8.0)))
    hosts = rng.permutation(fabric.n_hosts)
    pf, dec = tuple(int(h) for h in hosts[:n_prefill]), tuple(int(h) for h in hosts[n_prefill:n_prefill + n_decode])
    if rng.integers(2):  # two instances may share a host
        pf = pf[:1] * n_prefill
    return FabricSpec(fabric, ["ecmp", "reservation"][rng.integers(2)], pf, dec)


def random_case(rng: np.random.Generator, n_requests: int = 60, network: bool = False, policy: str | None = None):
    """A random small spec (every option drawn) and request stream; ``network`` adds a fabric;
    ``policy`` replaces the drawn assignment policy."""
    ps = bool(rng.integers(2))
    drawn = ["round_robin", "ils", "ils_requests", "sibyl", "oracle"][rng.integers(5)]
    policy = drawn if policy is None else policy
    binding = "late" if policy == "oracle" or rng.integers(2) else "early"
    pf = pool("prefill", int(rng.integers(1, 4)), seqs=int(rng.integers(1, 5)), budget=int(rng.integers(32, 300)),
              blocks=int(rng.integers(40, 120)), ctx=600, router=["round_robin", "least_outstanding"][rng.integers(2)])
    dec = pool("decode", int(rng.integers(1, 5)), seqs=int(rng.integers(1, 9)), budget=int(rng.integers(16, 200)),
               blocks=int(rng.integers(70, 200)), ctx=int(rng.integers(600, 1000)))
    transfer = KvTransferSpec(float(rng.uniform(0, 0.01)), float(rng.uniform(1e8, 1e9)),
                              float(rng.uniform(1e3, 1e5)), bool(rng.integers(2)), int(rng.integers(1, 40)))
    spec = PddSpec(pf, dec, transfer, policy, binding, "processor_sharing" if ps else "steps")
    arrival = np.cumsum(rng.exponential(0.01, n_requests))
    prompt = rng.integers(1, 500, n_requests)
    output = rng.integers(1, 400, n_requests)
    if network:
        fabric = random_fabric(rng, pf.n_instances, dec.n_instances)
        if rng.integers(2):
            transfer = KvTransferSpec(0.0, transfer.bandwidth_bytes_per_s, transfer.kv_bytes_per_token,
                                      transfer.layerwise, transfer.n_layers)
        spec = PddSpec(pf, dec, transfer, policy, binding, spec.decode_model, network=fabric)
    if policy == "sibyl":  # drawn last: the draws above stay as they were
        spec = dataclasses.replace(spec, sibyl=SibylParams(pressure=["tokens", "tasks"][rng.integers(2)]))
    return spec, arrival, prompt, output
