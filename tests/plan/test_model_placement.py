"""``--model``: placements (TP within a node, PP or DP attention + EP across nodes), GPU types left out,
GPU-counted costs, simulator step models."""

from __future__ import annotations

import dataclasses

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetplan.cli.main import cli
from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.models import Dtype, load_model
from fleetplan.perf.kv_budget import kv_budget
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.plan.optimize import OptimizeRequest, optimize
from fleetplan.plan.placement import instance_shardings, place_model, place_on_gpus
from fleetplan.plan.space import SizingRouter, Topology
from fleetplan.units import H_PER_YEAR
from fleetplan.workload import load_workload


def test_llama_70b_needs_a_tensor_parallel_group_on_a100():
    places = place_model(load_model("llama-3.1-70b"), load_catalog().get("a100"), timing_source="roofline")
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


# ---- the search across nodes, DP attention + EP, left-out GPU types ------------------------------------
WIDE = {"COLUMNS": "250"}


def test_deepseek_v3_fp8_spans_two_h100_nodes_and_one_h200_node():
    model = load_model("deepseek-v3")  # FP8 by default: its config.json quantization_config
    cat = load_catalog()
    h100 = place_model(model, cat.get("h100"))
    assert min(p.gpus_per_instance for p in h100) == 16 and h100[0].nodes_per_instance == 2
    flags = {p.parallelism.flags() for p in h100 if p.gpus_per_instance == 16}
    assert flags == {"--tensor-parallel-size 8 --pipeline-parallel-size 2 --enable-expert-parallel",
                     "--tensor-parallel-size 1 --data-parallel-size 16 --enable-expert-parallel"}
    assert all(p.predictor.weight_dtype is Dtype.FP8 for p in h100)
    h200 = place_model(model, cat.get("h200"))
    assert {p.gpu.name for p in h200} == {"H200 tp8", "H200 tp1 dp8"}  # one node: no multi-node size tried
    bf16 = place_model(model, cat.get("h200"), weight_dtype=Dtype.BF16)  # an explicit dtype overrides
    assert min(p.gpus_per_instance for p in bf16) == 16


def test_max_gpus_per_instance_bounds_the_search():
    model, h100 = load_model("deepseek-v3"), load_catalog().get("h100")
    assert max(p.gpus_per_instance for p in place_model(model, h100, max_gpus_per_instance=16)) == 16
    with pytest.raises(ConfigError, match="fits no instance of up to 8 H100-SXM GPUs \\(1 node of 8\\)"):
        place_model(model, h100, max_gpus_per_instance=8)
    with pytest.raises(ConfigError, match="max_gpus_per_instance"):
        place_model(model, h100, max_gpus_per_instance=0)


def test_dense_models_keep_every_one_node_size():
    tps = [p.parallelism.tp for p in place_model(load_model("llama-3.1-8b"), load_catalog().get("h100"))]
    assert tps == [1, 2, 4, 8]


def test_dp_attention_is_offered_for_mla_nodes_and_across_nodes():
    deepseek, qwen = load_model("deepseek-v3"), load_model("qwen3-235b-a22b")
    assert [p.flags() for p in instance_shardings(deepseek, 8, gpus_per_node=8)] == [
        "--tensor-parallel-size 8 --enable-expert-parallel",
        "--tensor-parallel-size 1 --data-parallel-size 8 --enable-expert-parallel"]
    assert len(instance_shardings(deepseek, 4, gpus_per_node=8)) == 1  # not below a whole node
    assert len(instance_shardings(qwen, 8, gpus_per_node=8)) == 1  # GQA within a node: TP + EP
    assert [p.flags() for p in instance_shardings(qwen, 16, gpus_per_node=8)] == [
        "--tensor-parallel-size 8 --pipeline-parallel-size 2 --enable-expert-parallel",
        "--tensor-parallel-size 1 --data-parallel-size 16 --enable-expert-parallel"]
    assert len(instance_shardings(load_model("llama-3.1-70b"), 8, gpus_per_node=8)) == 1  # dense: TP only
    assert [p.pp for p in instance_shardings(load_model("llama-3.1-405b"), 32, gpus_per_node=8)] == [4]


def test_nodes_follow_the_gpu_profile():
    """A 4-GPU node (as a 4x H100 PCIe server): TP stops at 4, Llama-3.1-405B in FP8 (~380 GiB) needs
    pipeline stages across nodes (tp4 pp2 on 8 H100s, two nodes), where 8-GPU nodes run tp8 in one."""
    h100 = load_catalog().get("h100")
    model = load_model("llama-3.1-405b")
    eight = place_model(model, h100, weight_dtype=Dtype.FP8, max_gpus_per_instance=16)
    four = place_model(model, dataclasses.replace(h100, gpus_per_node=4), weight_dtype=Dtype.FP8,
                       max_gpus_per_instance=16)
    assert [(p.parallelism.tp, p.parallelism.pp, p.nodes_per_instance) for p in eight] == [(8, 1, 1)]
    assert [(p.parallelism.tp, p.parallelism.pp, p.nodes_per_instance) for p in four] == [(4, 2, 2)]
    assert [p.flags() for p in instance_shardings(load_model("deepseek-v3"), 4, gpus_per_node=4)] == [
        "--tensor-parallel-size 4 --enable-expert-parallel",
        "--tensor-parallel-size 1 --data-parallel-size 4 --enable-expert-parallel"]
    with pytest.raises(ConfigError, match="gpus_per_node"):
        instance_shardings(model, 8, gpus_per_node=0)


def test_a_gpu_type_that_cannot_hold_the_model_is_left_out_with_one_line():
    cat = load_catalog()
    search = place_on_gpus(load_model("qwen3-235b-a22b"), [cat.get("h200"), cat.get("l4")], max_gpus_per_instance=8)
    assert {p.gpu.name.split()[0] for p in search.placements} == {"H200"}
    (line,) = search.notes()
    assert line.startswith("L4 left out: Qwen3-235B-A22B in bf16 fits no instance of up to 8 L4 GPUs")
    assert "GiB of weights per GPU" in line and "\n" not in line
    with pytest.raises(ConfigError, match="fits on no GPU type given \\(L4: fits no instance"):
        place_on_gpus(load_model("qwen3-235b-a22b"), [cat.get("l4")], max_gpus_per_instance=8)


MODELS = ("llama-3.1-8b", "llama-3.1-70b", "qwen3-30b-a3b", "qwen3-235b-a22b-fp8", "deepseek-v3", "gpt-oss-120b",
          "glm-4.5-air", "mixtral-8x7b", "llama-4-scout")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(MODELS), gpu=st.sampled_from(("h100", "h200", "b200", "a100", "l40s", "mi300x")),
       max_gpus=st.sampled_from((4, 8, 16, 64)))
def test_every_placement_fits_memory_and_passes_the_model_rules(name, gpu, max_gpus):
    model, profile = load_model(name), load_catalog().get(gpu)
    try:
        placed = place_model(model, profile, max_gpus_per_instance=max_gpus)
    except ConfigError as exc:
        assert "fits no instance" in str(exc)
        return
    sizes = [p.gpus_per_instance for p in placed]
    assert sizes == sorted(sizes) and max(sizes) <= max_gpus
    for p in placed:
        p.parallelism.check_model(model)  # raises on a broken rule
        budget = kv_budget(model, profile, p.parallelism, weight_dtype=model.default_weight_dtype,
                           kv_dtype=Dtype.BF16)
        assert budget.kv_blocks_per_gpu >= 1 and budget.weight_bytes < budget.usable_bytes
        assert p.gpu.serving.kv_blocks == budget.kv_blocks_per_replica
        assert p.parallelism.attn_tp <= profile.gpus_per_node  # tensor parallelism never crosses a node
        assert p.nodes_per_instance == -(-p.gpus_per_instance // profile.gpus_per_node)
        if p.parallelism.dp > 1:
            assert model.is_moe and p.parallelism.ep == p.gpus_per_instance


def test_optimize_plans_deepseek_v3_on_the_gpus_that_hold_it():
    """The issue's command: H100 needs two nodes; it is planned, not refused."""
    res = CliRunner().invoke(cli, ["optimize", "--workload", "azure_conv", "--slo-ttft", "2000", "--lam", "20",
                                   "--gpus", "h200,b200,h100", "--model", "deepseek-v3", "--weight-dtype", "fp8",
                                   "--topology", "homo", "--router", "length", "--no-verify", "--top", "20"], env=WIDE)
    assert res.exit_code == 0, res.stderr
    assert "H100-SXM tp8 pp2" in res.stdout and "H200 tp8" in res.stdout and "B200 tp8" in res.stdout


def test_left_out_gpu_and_all_gpus_failing_through_the_cli():
    base = ["optimize", "--workload", "lmsys", "--slo-ttft", "2000", "--topology", "homo", "--no-verify",
            "--max-gpus-per-instance", "8"]
    res = CliRunner().invoke(cli, [*base, "--gpus", "h200,l4", "--model", "qwen3-235b-a22b"], env=WIDE)
    assert res.exit_code == 0, res.stderr
    notes = [line for line in res.stderr.splitlines() if line.startswith("note: L4 left out:")]
    assert len(notes) == 1 and "--max-gpus-per-instance" in notes[0] and "--weight-dtype" in notes[0]
    assert "H200 tp" in res.stdout
    bad = CliRunner().invoke(cli, [*base, "--gpus", "h100,l4", "--model", "deepseek-v3", "--weight-dtype", "bf16"])
    lines = bad.stderr.strip().splitlines()
    assert bad.exit_code == 2 and len(lines) == 1
    assert lines[0].startswith("error: DeepSeek-V3 in bf16 fits on no GPU type given (H100-SXM: fits no instance")
    assert "L4: fits no instance" in lines[0] and "--max-gpus-per-instance" in lines[0]


@pytest.mark.parametrize(("args", "fragment"), [
    (["--model", "mixtral-8x7b", "-tp", "16"], "8 routed experts are not divisible by expert parallel size 16"),
    (["--model", "llama-3.1-70b", "-tp", "3"], "64 attention heads are not divisible by tensor parallel size 3"),
    (["--max-gpus-per-instance", "16"], "--max-gpus-per-instance needs --model"),
])
def test_a_parallelism_the_model_cannot_take_is_one_line_exit_2(args, fragment):
    res = CliRunner().invoke(cli, ["optimize", "--workload", "lmsys", "--slo-ttft", "500", "--gpus", "h100",
                                   "--no-verify", *args])
    lines = res.stderr.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error:") and fragment in lines[0]


def test_block_scaled_checkpoints_are_timed_block_scaled():
    """DeepSeek-V3 and Qwen3-235B-FP8 ship 128x128 block-scaled FP8: their placements' step models (simulator)
    and the W, H, chunk of their serving constants (analytic) come from the block-scaled predictor; FP8 chosen
    for a BF16 checkpoint is vLLM's online per-tensor quantization."""
    from fleetplan.perf.derive import chunk_tokens_for, linear_constants
    from fleetplan.perf.quant import Fp8Scaling, checkpoint_fp8_scaling

    h200 = load_catalog().get("h200")
    for name in ("deepseek-v3", "qwen3-235b-a22b-fp8"):
        for p in place_model(load_model(name), h200, timing_source="roofline"):
            assert p.predictor.block_fp8 and getattr(p.step_model, "base", p.step_model) is p.predictor
            s = p.gpu.serving
            n_ref = min(s.n_max(s.ref_context_tokens), 256)
            assert (s.iter_base_s, s.iter_per_seq_s) == linear_constants(p.step_model, n_ref, s.ref_context_tokens)
            assert s.chunk_tokens == chunk_tokens_for(p.predictor)  # one rank's chunk per step (perf.dp_instance)
    qwen32 = load_model("qwen3-32b")
    assert all(p.predictor.fp8_scaling is Fp8Scaling.PER_TENSOR
               for p in place_model(qwen32, h200, weight_dtype=Dtype.FP8))
    assert checkpoint_fp8_scaling(load_model("qwen3-32b-fp8"), Dtype.FP8) is Fp8Scaling.BLOCK  # [128, 128] scales
    assert checkpoint_fp8_scaling(load_model("deepseek-v3"), Dtype.BF16) is Fp8Scaling.PER_TENSOR


def test_dp_attention_placements_time_the_instance_batch_split_over_the_ranks():
    """DeepSeek-V3 tp1 dp8 on H200: the sweep's and simulator's step model is the predictor (one rank's batch)
    at the instance's batch / 8, and W, H of the serving constants come from it."""
    from fleetplan.perf.derive import linear_constants
    from fleetplan.perf.dp_instance import DataParallelInstance

    (dp,) = [p for p in place_model(load_model("deepseek-v3"), load_catalog().get("h200")) if p.parallelism.dp > 1]
    assert isinstance(dp.step_model, DataParallelInstance) and dp.step_model.ranks == 8
    assert dp.step_model.t_iter_s(128, 8192.0) == pytest.approx(dp.predictor.t_iter_s(16, 8192.0), rel=1e-9)
    s = dp.gpu.serving
    n_ref = min(s.n_max(s.ref_context_tokens), 256)
    assert (s.iter_base_s, s.iter_per_seq_s) == linear_constants(dp.step_model, n_ref, s.ref_context_tokens)
