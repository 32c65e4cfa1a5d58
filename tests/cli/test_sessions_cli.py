"""``fleetplan simulate sessions``: bad inputs exit 2 with one line; a good run prints and writes metrics."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fleetplan.cli.main import cli
from fleetplan.sim.session_metrics import ROUND_CSV_COLUMNS

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FLEET = str(EXAMPLES / "two_pool_a100.toml")
WIDE = {"COLUMNS": "250"}
RL = ("--rl-prompt-tokens", "256", "--rl-output-scale", "200", "--rl-output-shape", "1.0", "--rl-output-cap", "4000")


def run(*args: str):
    return CliRunner().invoke(cli, ["simulate", "sessions", *args], env=WIDE)


def bad_json(tmp_path: Path) -> str:
    path = tmp_path / "bad.json"
    path.write_text('{"templates": [{"name": "a", "rounds": [[100, 0]]}]}')
    return str(path)


BAD = [
    (("--fleet", FLEET, "--tool-delay-s", "1"), "--lam (sessions/s) is required"),
    (("--fleet", FLEET, "--lam", "1"), "template 'short' has no tool-call delay"),
    (("--fleet", FLEET, "--lam", "1", "--sessions", "frontier"), "unknown session workload 'frontier'"),
    (("--fleet", FLEET, "--lam", "1", "--tool-delay-s", "1", "--mix", "long=1"), "unknown session template 'long'"),
    (("--fleet", FLEET, "--lam", "1", "--tool-delay-s", "1", "--mix", "short"), "is not name=weight"),
    (("--fleet", FLEET, "--lam", "1", "--tool-delay-s", "-1"), "--tool-delay-s': -1.0 is not in the range x>=0"),
    (("--fleet", FLEET, "--lam", "1", "--tool-delay-s", "1", "--tool-delay-kind", "lognormal"), "needs sigma > 0"),
    (("--fleet", FLEET, "--gpu", "a100", "--lam", "1", "--tool-delay-s", "1"), "not both or neither"),
    (("--lam", "1", "--tool-delay-s", "1"), "not both or neither"),
    (("--gpu", "a100", "--lam", "1", "--tool-delay-s", "1"), "--gpu needs --instances"),
    (("--gpu", "b300x", "--instances", "2", "--lam", "1", "--tool-delay-s", "1"), "unknown GPU 'b300x'"),
    (("--gpu", "a100", "--instances", "2", "--rl-rollout", "10", "--rl-prompt-tokens", "10"),
     "--rl-rollout needs --rl-output-scale"),
    (("--gpu", "a100", "--instances", "2", "--rl-rollout", "10", "--rl-bursts", "2", *RL), "need burst_interval_s > 0"),
    (("--gpu", "a100", "--instances", "2", "--rl-rollout", "10", "--rl-rounds", "3", *RL), "need a tool_delay"),
    (("--gpu", "h100", "--instances", "2", "--lam", "1", "--tool-delay-s", "1", "--model", "llama-9"),
     "unknown model 'llama-9': valid model names are"),
    (("--gpu", "h100", "--instances", "2", "--lam", "1", "--tool-delay-s", "1", "-tp", "2"),
     "--tensor-parallel-size needs --model"),
    (("--gpu", "a10g", "--instances", "2", "--lam", "1", "--tool-delay-s", "1", "--model", "llama-3.1-70b",
      "-tp", "1"), "needs 131.4 GiB of weights per GPU at --tensor-parallel-size 1"),
]


@pytest.mark.parametrize(("args", "fragment"), BAD)
def test_bad_input_exits_2_with_one_line(args, fragment):
    res = run(*args)
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and fragment in lines[0], res.output


def test_malformed_session_file_exits_2_naming_the_file(tmp_path):
    path = bad_json(tmp_path)
    res = run("--fleet", FLEET, "--lam", "1", "--sessions", path)
    assert res.exit_code == 2
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and path in lines[0] and "is not an integer >= 1" in lines[0]


def test_help_lists_examples():
    res = run("--help")
    assert res.exit_code == 0 and "Examples:" in res.output and "--rl-rollout" in res.output


def test_sessions_run_prints_metrics_and_writes_files(tmp_path):
    out_json, out_csv = tmp_path / "s.json", tmp_path / "s.csv"
    res = run("--gpu", "a100", "--instances", "4", "--lam", "0.2", "--sim-sessions", "30", "--tool-delay-s", "0.5",
              "--mix", "short=1", "--json", str(out_json), "--csv", str(out_csv))
    assert res.exit_code == 0, res.output
    assert "aTTFT" in res.output and "round 5 TTFT" in res.output and "hidden planning throughput" in res.output
    doc = json.loads(out_json.read_text())
    assert doc["sessions"]["n_sessions"] == 30 and doc["sessions"]["attft"]["p99_s"] > 0
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == 150 and tuple(rows[0]) == ROUND_CSV_COLUMNS


def test_rollout_run_prints_bursts():
    res = run("--gpu", "a100", "--instances", "2", "--rl-rollout", "40", "--rl-bursts", "2", "--rl-interval-s", "600",
              *RL)
    assert res.exit_code == 0, res.output
    assert "RL bursts" in res.output and "tail share" in res.output


MODEL_RUN = ("--gpu", "h100", "--instances", "2", "--sessions", "frontier_agentic", "--mix", "heavy_tail=0.3,short=0.7",
             "--lam", "0.5", "--sim-sessions", "40", "--tool-delay-s", "1")


def model_run(tmp_path: Path, *args: str) -> tuple[dict, str]:
    out = tmp_path / "m.json"
    res = run(*MODEL_RUN, *args, "--json", str(out))
    assert res.exit_code == 0, res.output
    return json.loads(out.read_text()), res.output


def test_a_larger_model_gives_longer_round_ttft_on_the_same_sessions(tmp_path):
    small, printed = model_run(tmp_path, "--model", "llama-3.1-8b")
    assert "model Llama-3.1-8B: pool: H100-SXM tp1" in printed and "roofline predictor" in printed
    large, printed = model_run(tmp_path, "--model", "llama-3.1-70b")
    assert "H100-SXM tp4" in printed  # the smallest TP whose KV cache holds the longest session
    assert small["requests"]["pools"][0]["gpu"] == "H100-SXM tp1"
    assert large["requests"]["pools"][0]["gpu"] == "H100-SXM tp4"
    assert small["sessions"]["n_sessions"] == large["sessions"]["n_sessions"] == 40
    for a, b in zip(small["sessions"]["round_ttft"], large["sessions"]["round_ttft"], strict=True):
        assert b["ttft"]["mean_s"] > a["ttft"]["mean_s"], a["round_number"]


def test_model_pools_take_the_models_kv_budget_less_graph_capture_memory():
    from fleetplan.cli.feature_options import serving_fleet
    from fleetplan.hardware import load_catalog
    from fleetplan.models import load_model
    from fleetplan.plan.placement import place_model
    from fleetplan.sim.builders import build_pool
    from fleetplan.sim.compile import compile_fleet
    from fleetplan.sim.features.compile import graph_kv_blocks_lost
    from fleetplan.sim.fleet_toml import FleetFile, PoolEntry
    from fleetplan.sim.spec import PoolRouter

    catalog = load_catalog()
    fleet = FleetFile("test", (PoolEntry("pool", catalog.get("h100"), 2, 8192),), PoolRouter.LENGTH, 1.5, ())
    model_opts = {"model": "llama-3.1-8b", "tensor_parallel_size": None, "weight_dtype": "bf16",
                  "kv_cache_dtype": "bf16", "perf_profile": None, "allow_long_max_model_len": False}
    sixty_sizes = ",".join(str(n) for n in range(1, 61))  # 60 x 26 MiB exceed kv_budget's 1 GiB graph reserve
    spec, _ = serving_fleet(fleet, model_opts, {"cudagraph_mode": ("full_decode_only",),
                                                "cudagraph_capture_sizes": (sixty_sizes,)})
    placed = place_model(load_model("llama-3.1-8b"), catalog.get("h100"))[0]
    pool = spec.pools[0]
    calibrated = build_pool(catalog.get("h100"), "pool", 2, 8192)
    assert pool.limits.kv_blocks == placed.gpu.serving.kv_blocks != calibrated.limits.kv_blocks
    lost = graph_kv_blocks_lost(pool)
    assert lost > 0 and compile_fleet(spec).pool_kv_blocks[0] == pool.limits.kv_blocks - lost


def test_sessions_that_do_not_fit_the_context_limit_are_named_with_the_fix():
    res = run("--gpu", "h100", "--instances", "2", "--max-model-len", "8192",
              "--sessions", "frontier_agentic",
              "--mix", "heavy_tail=1", "--lam", "0.2", "--sim-sessions", "10", "--tool-delay-s", "1",
              "--warmup-fraction", "0")
    assert res.exit_code == 0, res.output
    line = next(x for x in res.output.splitlines() if x.startswith("unfinished sessions"))
    assert "with a rejected round" in line and "raise --max-model-len" in line
    assert "RuntimeWarning" not in res.output
