"""Validation of the runtime features against the Frontier paper's observations (issue #5, section 6).

* CUDA-graph padding inflation (Frontier Table 2, co-location rows: 22.6-45.8 % measured on vLLM).
  64 requests of fixed ISL/OSL (2048/256, 256/2048, 512/512, 1024/1024) on one instance
  (``max_num_seqs`` 64), decode batches padded to
  {1, 2, 4, ..., 64}.  The paper does not state the arrival pattern; a burst at t = 0 has almost
  no padding in a continuous-batching engine (the requests decode nearly in lock step and
  finish together), so the requests arrive as a Poisson stream at 4 requests/s, which spreads
  their completions over the run (measured over seeds 0-3: 0.26-0.47 for the four workloads; at
  16 requests/s the decode-heavy rows drop to 0.06-0.11).  Llama-3.1-8B on one H100 with the
  operator-level predictor.  Asserted: inflation = padding / useful decode tokens in [0.20, 0.60]
  for every workload and seed.
* CUDA graphs lower decode TPOT on a decode-heavy workload (256/2048) against the same predictor in
  eager execution: graphs remove the launch overhead of ``(14 * 32 + 6)`` kernels (5 us each;
  ``fleetplan.perf.overheads``) from every graphed decode step and add padding.  The core paper's
  calibrated H100 constants (W = 4 ms) were measured with graphs on: a 70B eager launch overhead
  (5.6 ms) cannot be taken out of them, which is refused with one line.
* MTP (Frontier Fig. 3's model, Qwen3-30B-A3B, on one H100 with the operator-level predictor):
  mean TPOT speed-up > 1 at acceptance 0.8 with k = 2 and < 1 at acceptance 0.2 with k = 8 on a
  batch of 64; the speed-up emerges from the simulated draft/verify/commit steps.
* Prefix caching on a synthetic multi-turn workload: the hit ratio equals its exact expectation.
* Scheduler policies on agentic sessions (Frontier appendix B): H2Q-BR lowers p95 answer-visible
  TTFT against vLLM-v1 FCFS, and skip-join MLFQ changes it by less than H2Q-BR does.
* Features off give the featureless simulator's numbers (same seed) through the public API.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.models.catalog import load_model
from fleetplan.perf.overheads import DEFAULT_LAUNCH_OVERHEAD_S, KERNELS_PER_LAYER, KERNELS_PER_STEP, ExecutionMode
from fleetplan.plan.placement import place_model
from fleetplan.sim.builders import build_pool
from fleetplan.sim.engine import simulate
from fleetplan.sim.features import (
    FRONTIER_CAPTURE_SIZES,
    CudaGraphConfig,
    PolicyConfig,
    PrefixCacheConfig,
    RuntimeFeatures,
    SpeculativeConfig,
)
from fleetplan.sim.sessions import simulate_sessions
from fleetplan.sim.spec import FleetSpec
from fleetplan.workload.session_io import load_session_workload
from fleetplan.workload.session_table import ToolDelay
from fleetplan.workload.sessions import SessionTemplate, SessionWorkload

LLAMA8B_LAUNCH_S = (KERNELS_PER_LAYER * 32 + KERNELS_PER_STEP) * DEFAULT_LAUNCH_OVERHEAD_S


class FixedLengths:
    """A workload whose every request has the same prompt and output length."""

    name = "fixed"

    def __init__(self, prompt_tokens: int, output_tokens: int) -> None:
        self.prompt_tokens, self.output_tokens = prompt_tokens, output_tokens

    def sample(self, rng, n):
        return np.full(n, self.prompt_tokens, dtype=np.int64), np.full(n, self.output_tokens, dtype=np.int64)


def _h100_pool(features: RuntimeFeatures, max_num_seqs: int = 64):
    pool = build_pool(load_catalog().get("h100"), "p", 1, 8192)
    limits = dataclasses.replace(pool.limits, max_num_seqs=max_num_seqs)
    return dataclasses.replace(pool, limits=limits, features=features)


def _llama8b_pool(features: RuntimeFeatures, eager: bool = False, max_num_seqs: int = 64):
    """Llama-3.1-8B on one H100 with the operator-level predictor (CUDA-graph execution unless ``eager``)."""
    place = place_model(load_model("llama-3.1-8b"), load_catalog().get("h100"))[0]
    step = place.predictor
    if eager:
        step = dataclasses.replace(step, options=dataclasses.replace(step.options, execution=ExecutionMode.EAGER))
    pool = build_pool(place.gpu, "p", 1, 8192)
    limits = dataclasses.replace(pool.limits, max_num_seqs=max_num_seqs)
    return dataclasses.replace(pool, gpu=place.gpu.name, step_model=step, limits=limits, features=features)


def _graphs(sizes=FRONTIER_CAPTURE_SIZES) -> RuntimeFeatures:
    return RuntimeFeatures(cudagraph=CudaGraphConfig("full_decode_only", sizes))


@pytest.mark.slow
@pytest.mark.parametrize("isl,osl", [(2048, 256), (256, 2048), (512, 512), (1024, 1024)])
def test_padding_inflation_of_table2_workloads_is_in_the_papers_band(isl, osl):
    for seed in range(3):
        result = simulate(FleetSpec((_llama8b_pool(_graphs()),)), FixedLengths(isl, osl), 4.0, 64, seed=seed,
                          warmup_fraction=0.0)
        pool = result.summary.pools[0]
        assert result.summary.overall.n_done == 64
        assert 0.20 <= pool.padding_inflation <= 0.60, (isl, osl, seed, pool.padding_inflation)
        assert pool.graph_step_share > 0.8  # decode-only steps dominate once the prompts are in


def test_burst_of_identical_requests_needs_almost_no_padding():
    """64 requests arriving together decode nearly in lock step (admission is staggered only by the
    prefill budget), so almost every decode batch is exactly 64 (measured 0.9 %)."""
    result = simulate(FleetSpec((_llama8b_pool(_graphs()),)), FixedLengths(512, 512), 1e9, 64, seed=0,
                      warmup_fraction=0.0)
    assert 0.0 <= result.summary.pools[0].padding_inflation < 0.05


def test_launch_overhead_above_the_fixed_step_cost_is_refused():
    """The core paper's W = 4 ms (H100) was measured with vLLM's graphs on: a Llama-70B eager launch
    overhead (5.6 ms) cannot be removed from it."""
    launch_s = (KERNELS_PER_LAYER * 80 + KERNELS_PER_STEP) * DEFAULT_LAUNCH_OVERHEAD_S
    features = RuntimeFeatures(cudagraph=CudaGraphConfig("full_decode_only"), launch_overhead_s=launch_s)
    with pytest.raises(ConfigError, match="launch overhead .* not below"):
        simulate(FleetSpec((_h100_pool(features),)), FixedLengths(256, 256), 1.0, 10, seed=0)


def test_cuda_graphs_lower_decode_tpot_on_a_decode_heavy_workload():
    eager = simulate(FleetSpec((_llama8b_pool(RuntimeFeatures(), eager=True),)), FixedLengths(256, 2048), 16.0, 64,
                     seed=1, warmup_fraction=0.0)
    graphs = simulate(FleetSpec((_llama8b_pool(_graphs()),)), FixedLengths(256, 2048), 16.0, 64, seed=1,
                      warmup_fraction=0.0)
    tpot_eager, tpot_graph = eager.summary.overall.tpot.mean_s, graphs.summary.overall.tpot.mean_s
    assert graphs.summary.pools[0].padding_inflation > 0
    # each graphed decode step saves the launch overhead (~2.3 ms) but pays for its padding slots
    assert tpot_graph < tpot_eager - 0.5 * LLAMA8B_LAUNCH_S, (tpot_eager, tpot_graph)


def _qwen_pool(features: RuntimeFeatures, max_num_seqs: int):
    place = place_model(load_model("qwen3-30b-a3b"), load_catalog().get("h100"))[0]
    pool = build_pool(place.gpu, "p", 1, 8192)
    limits = dataclasses.replace(pool.limits, max_num_seqs=max_num_seqs, max_num_batched_tokens=2048)
    return dataclasses.replace(pool, gpu=place.gpu.name, step_model=place.predictor, limits=limits, features=features)


def _mean_tpot_s(features: RuntimeFeatures, batch: int) -> float:
    spec = FleetSpec((_qwen_pool(features, batch),))
    result = simulate(spec, FixedLengths(512, 512), 1e9, batch, seed=3, warmup_fraction=0.0)
    assert result.summary.overall.n_done == batch
    return result.summary.overall.tpot.mean_s


@pytest.mark.slow
@pytest.mark.parametrize("acceptance,k,faster", [(0.8, 2, True), (0.2, 8, False)])
def test_mtp_speedup_sign_follows_acceptance_and_verify_length(acceptance, k, faster):
    batch = 64
    mtp = SpeculativeConfig.from_json(
        f'{{"method": "mtp", "num_speculative_tokens": {k}, "acceptance_rate": {acceptance}}}')
    speedup = _mean_tpot_s(RuntimeFeatures(), batch) / _mean_tpot_s(RuntimeFeatures(speculative=mtp), batch)
    assert (speedup > 1.0) is faster, speedup
    # and not by a hair: the regimes are well separated (draft passes from the step model's
    # mtp_draft_coefficients, one decoder layer + eh_proj + LM head: 2.24x and 0.93x measured)
    assert (speedup > 1.2) if faster else (speedup < 0.95), speedup


def test_prefix_hit_ratio_of_a_multi_turn_workload_matches_its_expectation():
    """Sessions of 4 rounds with session affinity and a cache large enough never to evict.

    Round r (0-based) prefills ``prompt_r = sum_{j<r}(new_j + out_j) + new_r`` tokens; the previous
    round left ``c = prompt_{r-1} + out_{r-1} - 1`` tokens of KV (the last emitted token has none),
    of which ``floor(c / B) * B`` sit in full blocks and are hit.  Hit ratio = hits / prompt tokens."""
    rounds = ((700, 90), (300, 60), (500, 40), (200, 120))
    template = SessionTemplate("multi", rounds)
    workload = SessionWorkload("multi_turn", (template,), (1.0,), tool_delay=ToolDelay("fixed", 0.5))
    features = RuntimeFeatures(prefix_cache=PrefixCacheConfig(True))
    pool = _h100_pool(features, max_num_seqs=64)
    result = simulate_sessions(FleetSpec((pool,)), workload, 2.0, 200, seed=5, warmup_fraction=0.0)
    block = pool.limits.block_size_tokens
    prompt, hit, context = 0, 0, 0
    for r, (new, out) in enumerate(rounds):
        p = context + new
        if r > 0:
            hit += ((context - 1) // block) * block
        prompt += p
        context = p + out
    expected = hit / prompt
    assert result.sim.summary.pools[0].prefix_hit_ratio == pytest.approx(expected, rel=1e-12)
    assert result.metrics.n_finished == 200


def test_features_off_reproduce_the_featureless_simulator():
    plain = build_pool(load_catalog().get("h100"), "p", 2, 8192)
    off = dataclasses.replace(plain, features=RuntimeFeatures())
    a = simulate(FleetSpec((plain,)), FixedLengths(700, 300), 30.0, 3000, seed=9)
    b = simulate(FleetSpec((off,)), FixedLengths(700, 300), 30.0, 3000, seed=9)
    for column in ("first_token_s", "done_s", "instance", "preemptions"):
        np.testing.assert_array_equal(a.requests[column].to_numpy(), b.requests[column].to_numpy())


def _session_p95_attft_s(policy: str, seed: int) -> float:
    """p95 aTTFT of 1,500 Frontier-template sessions (4 % heavy-tail, 96 % short; 0.1 s tool calls)
    at 4.5 sessions/s on two H100 instances (the core paper's constants) with prefix caching,
    ``max_num_seqs`` 8 and an 8,192-token step budget (vLLM's default for online serving)."""
    pool = build_pool(load_catalog().get("h100"), "p", 2, 65536)
    limits = dataclasses.replace(pool.limits, max_num_batched_tokens=8192, max_num_seqs=8)
    features = RuntimeFeatures(prefix_cache=PrefixCacheConfig(True), policy=PolicyConfig(policy))
    workload = (load_session_workload("frontier_agentic").with_tool_delay(ToolDelay("fixed", 0.1))
                .with_mix("heavy_tail=0.04,short=0.96"))
    spec = FleetSpec((dataclasses.replace(pool, limits=limits, features=features),))
    return simulate_sessions(spec, workload, 4.5, 1500, seed=seed).metrics.attft.p95_s


@pytest.mark.slow
def test_h2q_br_lowers_p95_answer_visible_ttft_more_than_skip_join_mlfq_changes_it():
    """Paired over replications (same sessions for the three policies); one-sided 95 % Student-t
    bounds on the mean paired differences.  Measured (10 seeds): vLLM-v1 3.7-5.5 s; H2Q-BR lower
    in every seed (by 0.13-0.57 s); MLFQ -0.03 to +0.33 s.  In busier settings (6 sessions/s,
    10 % heavy, ``max_num_seqs`` 16) H2Q-BR gains 1-3 s but single seeds reverse.  Where H2Q-BR
    gains: short sessions' small rounds overtake the heavy sessions' 32K/16K hidden prefills waiting
    for a slot; MLFQ's skip-join levels come from the current round's prefill estimate alone, so
    heavy sessions' later small rounds compete as short ones."""
    reps = 10
    fcfs = np.array([_session_p95_attft_s("vllm_v1", s) for s in range(reps)])
    mlfq = np.array([_session_p95_attft_s("mlfq", s) for s in range(reps)])
    h2q = np.array([_session_p95_attft_s("h2q_br", s) for s in range(reps)])
    t95 = 1.833  # one-sided 95 % Student-t quantile, 9 degrees of freedom

    def upper(x):
        return x.mean() + t95 * x.std(ddof=1) / np.sqrt(x.size)

    assert upper(h2q - fcfs) < 0, (fcfs, h2q)  # H2Q-BR lowers p95 aTTFT
    assert upper(np.abs(mlfq - fcfs) - np.abs(h2q - fcfs)) < 0, (fcfs, mlfq, h2q)
