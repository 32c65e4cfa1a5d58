"""``bench serve``'s parallelism flags in each engine's spelling, and ``--bench-result`` files with bad values.

The flags build ``perf.parallelism.Parallelism`` (``bench.instance.engine_parallelism``) and reach the step
model: the instance's predictor is the perf predictor of that sharding, data-parallel ranks become their own
schedulers.  A sharding the model cannot take, a flag of the other engine, or a result file with a missing or
negative measured value ends in one line, exit 2 (CliRunner).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from fleetplan.bench import BenchServeConfig, DatasetSpec, EngineArgs, run_bench_serve, serving_fleet
from fleetplan.bench.calibrate import read_bench_result
from fleetplan.bench.instance import engine_parallelism
from fleetplan.cli.main import cli
from fleetplan.errors import ConfigError, DataFormatError
from fleetplan.hardware import load_catalog
from fleetplan.models import Dtype, load_model
from fleetplan.perf.batch import BatchComposition
from fleetplan.perf.kv_budget import kv_budget
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.sim.spec import DEFAULT_BLOCK_SIZE_TOKENS

BASE = ["bench", "serve", "--gpu", "h100", "--num-prompts", "8", "--random-input-len", "256",
        "--random-output-len", "16"]


def _one_line_error(res, *needles: str) -> str:
    assert res.exit_code == 2, (res.exit_code, res.output)
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in res.output, res.output
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


@pytest.mark.parametrize("args, needles", [
    # a parallelism the model cannot take: experts, heads, dense + EP
    (["--model", "qwen3-30b-a3b", "--engine", "sglang", "--tp", "4", "--ep-size", "8"],
     ["--ep-size 8", "must divide --tensor-parallel-size 4"]),
    (["--model", "qwen3-30b-a3b", "-tp", "8", "-dp", "32", "--enable-expert-parallel"],
     ["128 routed experts are not divisible by expert parallel size 256"]),
    (["--model", "llama-3.1-8b", "-tp", "3"], ["32 attention heads are not divisible by tensor parallel size 3"]),
    (["--model", "llama-3.1-8b", "-tp", "2", "--enable-expert-parallel"], ["needs an MoE model", "drop"]),
    (["--model", "qwen3-30b-a3b", "--engine", "sglang", "--tp", "4", "--dp", "3", "--enable-dp-attention"],
     ["--data-parallel-size 3 must divide --tensor-parallel-size 4"]),
    # a flag of the other engine
    (["--model", "qwen3-30b-a3b", "-tp", "2", "--ep-size", "2"], ["--ep-size is SGLang's flag"]),
    (["--model", "qwen3-30b-a3b", "--engine", "sglang", "--tp", "2", "--enable-expert-parallel"],
     ["--enable-expert-parallel is vLLM's flag"]),
    (["--model", "qwen3-30b-a3b", "--tp-size", "2"], ["--tp-size 2 is SGLang's spelling", "--tensor-parallel-size"]),
    (["--model", "qwen3-30b-a3b", "--engine", "sglang", "--tp-size", "2", "-tp", "4"], ["disagree"]),
    # nodes
    (["--model", "llama-3.1-70b", "-tp", "8", "--nnodes", "2"], ["--nnodes 2", "give --nnodes 1"]),
])
def test_a_parallelism_the_model_or_engine_cannot_take_is_one_line(args, needles) -> None:
    _one_line_error(CliRunner().invoke(cli, [*BASE, *args]), *needles)


def test_flags_build_the_parallelism_in_each_engines_meaning() -> None:
    moe = load_model("qwen3-30b-a3b")
    assert engine_parallelism("vllm", moe, 2, 1, 4, True) == (Parallelism.vllm(2, 1, 4, True), 1)
    par, copies = engine_parallelism("sglang", moe, 8, expert_parallel_size=8, data_parallel_size=4,
                                     enable_dp_attention=True)
    assert copies == 1 and (par.attn_tp, par.attn_dp, par.ffn_tp, par.ffn_ep) == (2, 4, 1, 8)
    par, copies = engine_parallelism("sglang", moe, 4, data_parallel_size=2)  # SGLang dp without dp-attention
    assert copies == 2 and par == Parallelism(tp=4) and par.gpus_per_replica == 4
    par, _ = engine_parallelism("vllm", load_model("llama-3.1-70b"), 8, 2, nnodes=2)
    assert par.gpus_per_replica == 16
    with pytest.raises(ConfigError, match="expert_parallel_size"):
        engine_parallelism("trtllm", moe, 4, expert_parallel_size=4)


def test_tp8_and_tp4_steps_differ_as_perf_predicts() -> None:
    """The CLI's -tp reaches the instance's step model: each instance predicts exactly what perf's
    predictor predicts for that sharding, and TP8 decodes a 70B batch faster than TP4."""
    model, gpu = load_model("llama-3.1-70b"), load_catalog().get("H100-SXM")
    batch = BatchComposition.uniform(n_decode=32, context_tokens=2048)
    steps = {}
    for tp in (4, 8):
        par, _ = engine_parallelism("vllm", model, tp)
        args = EngineArgs(model, gpu, tp, parallelism_spec=par)
        expected = StepTimePredictor(model, gpu, Parallelism.vllm(tp), Dtype.BF16, Dtype.BF16, args.options)
        steps[tp] = args.predictor().predict(batch).total_s
        assert steps[tp] == pytest.approx(expected.predict(batch).total_s, rel=1e-12)
        code, coefs = serving_fleet(args).pools[0].step_model.kernel_coefficients()
        assert code == expected.kernel_coefficients()[0]
        np.testing.assert_allclose(coefs, expected.kernel_coefficients()[1], rtol=1e-12)
    assert steps[8] < steps[4]


def test_cli_tp8_vs_tp4_tpot(tmp_path) -> None:
    """Through the CLI: the saved result names the sharding, and TP8's TPOT is below TP4's."""
    tpot = {}
    for tp in ("4", "8"):
        res = CliRunner().invoke(cli, [*BASE, "--model", "llama-3.1-70b", "-tp", tp, "--max-concurrency", "1",
                                       "--save-result", "--result-dir", str(tmp_path),
                                       "--result-filename", f"{tp}.json"])
        assert res.exit_code == 0, res.output
        doc = json.loads((tmp_path / f"{tp}.json").read_text())
        assert doc["fleetplan"]["parallelism"] == f"--tensor-parallel-size {tp}"
        assert doc["fleetplan"]["gpus_per_instance"] == int(tp)
        tpot[tp] = doc["mean_tpot_ms"]
    assert tpot["8"] < tpot["4"]


def test_data_parallel_ranks_are_schedulers_with_their_share_of_the_cache() -> None:
    model, gpu = load_model("deepseek-v3"), load_catalog().get("H200")
    par, _ = engine_parallelism("vllm", model, 1, data_parallel_size=8, enable_expert_parallel=True)
    args = EngineArgs(model, gpu, 1, Dtype.FP8, parallelism_spec=par)
    pool = serving_fleet(args).pools[0]
    budget = kv_budget(model, gpu, par, weight_dtype=Dtype.FP8, kv_dtype=Dtype.BF16, gpu_memory_utilization=0.9,
                       block_size_tokens=DEFAULT_BLOCK_SIZE_TOKENS, max_num_seqs=pool.limits.max_num_seqs,
                       max_num_batched_tokens=pool.limits.max_num_batched_tokens)
    assert pool.n_instances == 8 and pool.limits.kv_blocks == budget.kv_blocks_per_replica // 8
    cfg = BenchServeConfig(DatasetSpec(random_input_len=512, random_output_len=32), num_prompts=64, max_concurrency=64)
    m = run_bench_serve(args, cfg).metrics
    assert m["completed"] == 64 and m["mean_tpot_ms"] > 0


BENCH_RESULT = {"completed": 10, "duration": 5.0, "total_input_tokens": 2560, "total_output_tokens": 160,
                "num_prompts": 10, "request_rate": "inf", "max_concurrency": 2, "mean_ttft_ms": 40.0,
                "mean_tpot_ms": 8.0, "output_throughput": 32.0}


@pytest.mark.parametrize("change, needles", [
    ({"mean_ttft_ms": -3.0}, ["(mean_ttft_ms)", "-3.0 must be above 0"]),
    ({"output_throughput": None}, ["(output_throughput)", "is null"]),
    ({"mean_tpot_ms": "fast"}, ["(mean_tpot_ms)", "'fast' is not a finite number"]),
    ({"duration": 0}, ["(duration)", "must be above 0"]),
    ({"output_throughput": "drop"}, ["(output_throughput)", "`output_throughput` is missing"]),
])
def test_bench_result_with_missing_or_negative_values_is_one_line(tmp_path, change, needles) -> None:
    doc = dict(BENCH_RESULT)
    for key, value in change.items():
        if value == "drop":
            del doc[key]
        else:
            doc[key] = value
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(DataFormatError):
        read_bench_result(path)
    res = CliRunner().invoke(cli, ["perf", "calibrate", "--bench-result", str(path), "--model", "llama-3.1-8b",
                                   "--gpu", "h100", "--out", str(tmp_path / "p.json")])
    line = _one_line_error(res, str(path), *needles)
    assert "result JSON" in line and not (tmp_path / "p.json").exists()


def test_a_complete_bench_result_reads_its_means(tmp_path) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps({**BENCH_RESULT, "mean_tpot_ms": None, "mean_itl_ms": 7.5} | {"mean_tpot_ms": 8.0}))
    m = read_bench_result(path)
    assert dict(m.measured) == {"mean_ttft_ms": 40.0, "output_throughput": 32.0, "mean_tpot_ms": 8.0}
    assert (m.dataset.random_input_len, m.dataset.random_output_len, m.max_concurrency) == (256, 16, 2)
    itl_only = {k: v for k, v in BENCH_RESULT.items() if k != "mean_tpot_ms"} | {"mean_itl_ms": 7.5}
    path.write_text(json.dumps(itl_only))
    assert read_bench_result(path).measured["mean_tpot_ms"] == 7.5


def test_perf_calibrate_fits_a_data_and_expert_parallel_instance(tmp_path) -> None:
    """``perf calibrate --bench-result`` takes -dp/--ep now: a run simulated with 2 DP ranks of TP2 and the
    experts over the 4 GPUs is fitted back to itself, and the profile names that sharding."""
    res = CliRunner().invoke(cli, [*BASE, "--model", "qwen3-30b-a3b", "-tp", "2", "-dp", "2",
                                   "--enable-expert-parallel", "--num-prompts", "16", "--max-concurrency", "4",
                                   "--save-result", "--result-dir", str(tmp_path), "--result-filename", "r.json"])
    assert res.exit_code == 0, res.output
    out = tmp_path / "p.json"
    res = CliRunner().invoke(cli, ["perf", "calibrate", "--bench-result", str(tmp_path / "r.json"), "--model",
                                   "qwen3-30b-a3b", "--gpu", "h100", "-tp", "2", "-dp", "2", "--ep", "4",
                                   "--out", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert doc["parallelism"] == "--tensor-parallel-size 2 --data-parallel-size 2 --enable-expert-parallel"
    assert doc["holdout_mape"] < 0.02
