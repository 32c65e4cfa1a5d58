"""vLLM engine limits in both phases: ``max_num_seqs`` / ``max_num_batched_tokens`` given by the user, and
the token budget the sweep picks for a served model's pools (``plan.pools.token_budget_choices``)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from click.testing import CliRunner

from fleetplan.cli.main import cli
from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.models.catalog import load_model
from fleetplan.perf.kv_budget import vllm_batch_defaults
from fleetplan.plan.optimize import OptimizeRequest, optimize, resolve_gpus
from fleetplan.plan.placement import place_model
from fleetplan.plan.points import LengthPoints
from fleetplan.plan.pools import size_one_pool, token_budget_choices
from fleetplan.plan.space import PoolRange, SizingRouter, Topology
from fleetplan.plan.verify import fleet_spec, pool_key
from fleetplan.workload import load_workload


def _request(**kw) -> OptimizeRequest:
    cat = load_catalog()
    base = dict(workload=load_workload("lmsys"), gpus=resolve_gpus(cat, ["h100"]), slo_ttft_s=0.5, rate_per_s=50.0,
                topologies=(Topology.HOMO, Topology.TWO_POOL))
    return OptimizeRequest(**{**base, **kw})


def test_vllm_batch_defaults_follow_vllms_rule():
    cat = load_catalog()
    assert vllm_batch_defaults(cat.get("h100")) == (1024, 8192)
    assert vllm_batch_defaults(cat.get("a100")) == (256, 2048)  # A100s keep the small defaults
    assert vllm_batch_defaults(cat.get("l40s")) == (256, 2048)  # under 70 GiB


@pytest.mark.parametrize("kw, match", [
    (dict(max_num_seqs=0), "max_num_seqs"),
    (dict(max_num_batched_tokens=2.5), "max_num_batched_tokens"),
    (dict(max_num_seqs=64, service_model="paper"), "paper's service model"),
    (dict(max_num_batched_tokens=4096, topologies=(Topology.HOMO, Topology.PDD), slo_tpot_s=0.05), "co-located"),
])
def test_bad_engine_limits_are_refused(kw, match):
    with pytest.raises(ConfigError, match=match):
        _request(**kw)


def test_given_limits_serve_every_pool_in_both_phases():
    req = _request(max_num_seqs=48, max_num_batched_tokens=4096)
    result = optimize(req)
    gpus = {g.name: g for g in req.gpus}
    for c in result.candidates[:20]:
        live = [p for p in c.pools if p.count > 0]
        assert all((p.max_num_seqs, p.max_num_batched_tokens) == (48, 4096) for p in live)
        spec = fleet_spec(c, gpus, [p.count for p in c.pools])
        assert all((q.limits.max_num_seqs, q.limits.max_num_batched_tokens) == (48, 4096) for q in spec.pools)
    # a pool's search is keyed by its limits too (other limits: another search), but simulated on the same
    # streams (the seeds come from its traffic alone: common random numbers)
    c = result.candidates[0]
    i = next(k for k, p in enumerate(c.pools) if p.count > 0)
    other = replace(c, pools=tuple(replace(p, max_num_seqs=96) if k == i else p for k, p in enumerate(c.pools)))
    assert pool_key(c, i) != pool_key(other, i) and pool_key(c, i).max_num_seqs == 48
    assert pool_key(c, i).traffic() == pool_key(other, i).traffic()


def test_budget_choices():
    cat = load_catalog()
    h100 = cat.get("h100")
    plain = _request().settings()
    assert token_budget_choices(h100, plain) == (None,)  # the paper's constants: their own chunk
    assert token_budget_choices(h100, _request(max_num_batched_tokens=3000).settings()) == (3000,)
    placed = place_model(load_model("llama-3.1-8b"), h100)[0]
    served = _request(gpus=(placed.gpu,), step_models=((placed.gpu.name, placed.predictor),)).settings()
    assert token_budget_choices(placed.gpu, served) == (None, 8192)


def test_a_served_models_long_prompts_take_vllms_budget_when_it_needs_fewer_gpus():
    """agent_heavy on llama-3.1-8b, 8 H100s per instance timed with the vLLM engine profile (its fitted
    efficiencies, step overhead and API server), P99 TTFT 600 ms: with the derived chunk (about 1k tokens)
    more than the 1 % a P99 allows miss the SLO alone; vLLM's 8192-token budget prefills them in fewer,
    fuller steps, so the pool is feasible only with it (at 500 ms neither budget is, at 700 ms both are)."""
    cat = load_catalog()
    placed = place_model(load_model("llama-3.1-8b"), cat.get("h100"))[-1]
    assert placed.gpus_per_instance == 8
    wl = load_workload("agent_heavy")
    req = OptimizeRequest(workload=wl, gpus=(placed.gpu,), gpus_per_instance=((placed.gpu.name, 8),),
                          step_models=((placed.gpu.name, placed.step_model),), slo_ttft_s=0.6, rate_per_s=20.0,
                          max_model_len_tokens=131072, topologies=(Topology.HOMO,))
    settings = req.settings()
    points = LengthPoints(wl, 512, 131072)
    pool = size_one_pool(points, PoolRange(0, 131072, True), placed.gpu, SizingRouter.LENGTH, settings, 1.0)
    assert pool.feasible and pool.max_num_batched_tokens == 8192
    fixed = size_one_pool(points, PoolRange(0, 131072, True), placed.gpu, SizingRouter.LENGTH,
                          replace(settings, max_num_batched_tokens=pool.max_num_seqs + 1024), 1.0)
    assert not fixed.feasible and fixed.reason_code == "prefill-alone"


def test_cli_names_the_limits_in_json_and_refuses_them_for_the_paper_model(tmp_path):
    out = tmp_path / "run.json"
    res = CliRunner().invoke(cli, ["optimize", "--workload", "lmsys", "--slo-ttft", "500", "--gpus", "h100",
                                   "--topology", "homo", "--no-verify", "--max-num-seqs", "64", "--json", str(out),
                                   "--quiet"])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    pools = [p for c in doc["candidates"] for p in c["pools"] if p["count"] > 0]
    assert pools and all(p["max_num_seqs"] == 64 for p in pools)
    assert "--max-num-seqs 64" in res.output  # the recommendation names the engine it was sized for
    bad = CliRunner().invoke(cli, ["optimize", "--workload", "lmsys", "--slo-ttft", "500", "--no-verify",
                                   "--max-num-seqs", "64", "--service-model", "paper"])
    assert bad.exit_code == 2
    assert "--max-num-seqs" in bad.output and "Traceback" not in bad.output
