"""An MTP candidate in both phases (issue #26 item 4, "MTP on or off"): the analytic engine model with the
speculative hook (``queueing.speculative.mtp_engine``: decode step per output token, the draft passes of
``StepTimePredictor.mtp_draft_coefficients``) and the simulator running the same pool with vLLM's
``speculative_config`` ``{"method": "mtp", "num_speculative_tokens": 1}`` agree on P99 TPOT within ±25 %.

Set-up: DeepSeek-V3's FP8 checkpoint on one H200 node (TP8 + EP), the roofline predictor, acceptance 0.85
(``perf.speculative.DEEPSEEK_V3_MTP_ACCEPTANCE``, DeepSeek-V3 report sec. 5.4.3), azure_conv requests up
to 16K tokens at two loads.  The simulated P99 is the mean over ``N_SEEDS`` replications; the tolerance is
the ±25 % band of the agreement grid (``benchmarks/bench_agreement.py``), widened by three standard errors
of the replications (Ciw-style: the test states its target, replicates, derives its slack).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fleetplan.hardware import load_catalog
from fleetplan.models import load_model
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.speculative import DEEPSEEK_V3_MTP_ACCEPTANCE
from fleetplan.plan.placement import place_model
from fleetplan.queueing.engine import EngineLimits, EngineModel, EngineProfile
from fleetplan.queueing.speculative import mtp_engine
from fleetplan.sim import build_pool
from fleetplan.sim.engine import simulate
from fleetplan.sim.features import RuntimeFeatures
from fleetplan.sim.features.speculative import SpeculativeConfig
from fleetplan.sim.spec import FleetSpec
from fleetplan.workload import load_workload

MAX_CONTEXT_TOKENS = 16384
N_SEEDS = 3
N_REQUESTS = 6000
N_POINTS = 20000  # request points of the analytic profile, drawn from the same workload
BAND = 0.25


@pytest.fixture(scope="module")
def placement():
    par = Parallelism.vllm(tensor_parallel_size=8, enable_expert_parallel=True)
    (p,) = place_model(load_model("deepseek-v3"), load_catalog().get("h200"), parallelism=par,
                       timing_source="roofline")
    return p


def _mtp_pool(placement, n_instances: int):
    mtp = SpeculativeConfig.from_json(
        f'{{"method": "mtp", "num_speculative_tokens": 1, "acceptance_rate": {DEEPSEEK_V3_MTP_ACCEPTANCE}}}')
    pool = build_pool(placement.gpu, "mtp", n_instances, MAX_CONTEXT_TOKENS)
    return dataclasses.replace(pool, step_model=placement.predictor, features=RuntimeFeatures(speculative=mtp))


def _analytic_p99_tpot_s(placement, pool, rate_per_s: float) -> tuple[float, float]:
    """(MTP, plain) analytic P99 TPOT of ``pool`` at ``rate_per_s``."""
    wl = load_workload("azure_conv")
    prompt, output = wl.sample(np.random.default_rng(0), N_POINTS)
    keep = prompt + output <= MAX_CONTEXT_TOKENS
    prompt, output = prompt[keep].astype(float), output[keep].astype(float)
    lim = pool.limits
    base = EngineModel.of(placement.predictor, EngineLimits(lim.max_num_seqs, lim.max_num_batched_tokens,
                                                            lim.kv_blocks, lim.block_size_tokens), pool.n_api_servers)
    out = []
    for engine in (mtp_engine(base, placement.predictor, (DEEPSEEK_V3_MTP_ACCEPTANCE,)), base):
        prof = EngineProfile(engine, prompt, output, np.ones(prompt.size))
        out.append(float(prof.tpot_quantile_s(prof.state(rate_per_s, [pool.n_instances]), 0.99)[0]))
    return out[0], out[1]


@pytest.mark.parametrize(("n_instances", "rate_per_s"), [(1, 4.0), (2, 12.0)])
def test_mtp_p99_tpot_agrees_between_the_phases(placement, n_instances, rate_per_s):
    pool = _mtp_pool(placement, n_instances)
    analytic_s, plain_s = _analytic_p99_tpot_s(placement, pool, rate_per_s)
    wl = load_workload("azure_conv")
    sims = np.array([simulate(FleetSpec(pools=(pool,)), wl, rate_per_s, n_requests=N_REQUESTS, seed=seed)
                     .summary.pool("mtp").tpot.p99_s for seed in range(N_SEEDS)])
    sim_s = float(sims.mean())
    slack = 3.0 * float(sims.std(ddof=1)) / np.sqrt(N_SEEDS) / sim_s
    ratio = sim_s / analytic_s
    assert 1.0 - BAND - slack <= ratio <= 1.0 + BAND + slack, (sim_s, analytic_s, sims)
    # MTP pays at this acceptance: the analytic P99 TPOT is below the plain engine's (unstable at 12 req/s)
    assert analytic_s < plain_s
