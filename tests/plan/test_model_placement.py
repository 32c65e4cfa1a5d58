"""``--model``: placements per tensor-parallel size, GPU-counted costs, simulator step models."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from fleetplan.cli.main import cli
from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.models import load_model
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.plan.optimize import OptimizeRequest, optimize
from fleetplan.plan.placement import place_model
from fleetplan.plan.space import SizingRouter, Topology
from fleetplan.units import H_PER_YEAR
from fleetplan.workload import load_workload


def test_llama_70b_needs_a_tensor_parallel_group_on_a100():
    places = place_model(load_model("llama-3.1-70b"), load_catalog().get("a100"))
    tps = [p.parallelism.tp for p in places]
    assert tps == sorted(tps) and 1 not in tps and tps[0] == 2  # 131 GiB of BF16 weights need >= 2 x 80 GB
    blocks = [p.gpu.serving.kv_blocks for p in places]
    assert blocks == sorted(blocks) and blocks[-1] > blocks[0]  # more GPUs per replica, more KV cache
    for p in places:
        assert p.gpu.name == f"A100-80GB tp{p.parallelism.tp}" and p.gpus_per_instance == p.parallelism.tp
        assert isinstance(p.predictor, StepTimePredictor)
        assert "derived" in p.gpu.sources["serving"]


def test_a_model_that_fits_nowhere_is_refused_with_the_reason():
    with pytest.raises(ConfigError, match="fits no instance of up to 8 A10G GPUs"):
        place_model(load_model("deepseek-v3"), load_catalog().get("a10g"), max_gpus_per_instance=8)


def test_costs_count_every_gpu_of_an_instance():
    places = place_model(load_model("llama-3.1-70b"), load_catalog().get("h100"))
    req = OptimizeRequest(
        workload=load_workload("azure_conv"), gpus=tuple(p.gpu for p in places), slo_ttft_s=2.0, rate_per_s=5.0,
        topologies=(Topology.HOMO,), routers=(SizingRouter.LENGTH,),
        gpus_per_instance=tuple((p.gpu.name, p.gpus_per_instance) for p in places),
    )
    result = optimize(req)
    for c in result.candidates:
        (pool,) = c.pools
        tp = int(pool.gpu.rsplit("tp", 1)[1])
        assert pool.gpus_per_instance == tp
        assert c.total_gpus_needed == (pool.count + pool.spares) * tp
        assert c.cost_usd_per_year == pytest.approx(c.total_gpus_needed * pool.price_usd_per_h * H_PER_YEAR)


def test_optimize_with_model_through_the_cli():
    res = CliRunner().invoke(cli, ["optimize", "--workload", "azure_conv", "--slo-ttft", "2000", "--model",
                                   "llama-3.1-8b", "--gpus", "h100,l4", "--topology", "homo", "--no-verify"])
    assert res.exit_code == 0, res.stderr
    assert "H100-SXM tp1" in res.output and "L4 tp1" in res.output
    bad = CliRunner().invoke(cli, ["optimize", "--workload", "lmsys", "--slo-ttft", "500", "--model", "llama-3.1-70b",
                                   "--tensor-parallel-size", "3", "--gpus", "h100", "--no-verify"])
    assert bad.exit_code == 2 and bad.stderr.startswith("error:") and "3" in bad.stderr
    unknown = CliRunner().invoke(cli, ["optimize", "--workload", "lmsys", "--slo-ttft", "500", "--model", "gpt-9"])
    assert unknown.exit_code == 2 and "llama-3.1-70b" in unknown.stderr
