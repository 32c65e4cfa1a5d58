"""``bench serve`` through vLLM's API server stage: tiny requests offered far above the ceiling are served
at ``api_server_count / E[t_api]`` (vLLM profile: 4.60 ms + 1.2 us x 32 tokens + 22.5 us x 16 chunks = 5.00 ms,
200.1 req/s per process); without the API server cost the same run is engine-bound, 6.5x faster (1,300 req/s)."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from click.testing import CliRunner

from fleetplan.bench.datasets import DatasetSpec
from fleetplan.bench.instance import EngineArgs
from fleetplan.bench.serve import BenchServeConfig, run_bench_serve
from fleetplan.cli.main import cli
from fleetplan.hardware import load_catalog
from fleetplan.models import load_model
from fleetplan.perf.api_server import api_server_max_request_rate_per_s
from fleetplan.perf.engine_profile import load_engine_profile

TINY = ["--random-input-len", "16", "--random-output-len", "16"]
BASE = ["bench", "serve", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", *TINY, "--percentile-metrics", "ttft"]
VLLM = load_engine_profile("vllm").options


def _ceiling_per_s(n_api_servers: int) -> float:
    return api_server_max_request_rate_per_s(VLLM, 16, 16, n_api_servers)


def test_cli_throughput_is_the_api_server_ceiling(tmp_path) -> None:
    """1000 requests at 2000 req/s (25x the ceiling) through one process: the run lasts 1000 E[t_api]
    plus the last request's engine time, so the throughput is the ceiling within 3 % (measured 0.9 %
    below)."""
    res = CliRunner().invoke(cli, [*BASE, "--num-prompts", "1000", "--request-rate", "2000", "--save-result",
                                   "--result-dir", str(tmp_path), "--result-filename", "r.json"])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["completed"] == 1000 and doc["fleetplan"]["api_server_count"] == 1
    assert doc["request_throughput"] == pytest.approx(_ceiling_per_s(1), rel=0.03)
    assert doc["request_throughput"] < _ceiling_per_s(1)


def _bench(options, api_server_count: int, num_prompts: int):
    args = EngineArgs(load_model("llama-3.1-8b"), load_catalog().get("H100-SXM"), options=options,
                      api_server_count=api_server_count)
    cfg = BenchServeConfig(DatasetSpec(random_input_len=16, random_output_len=16), num_prompts=num_prompts,
                           request_rate_per_s=math.inf, percentile_metrics=("ttft",))
    return run_bench_serve(args, cfg)


def test_two_api_servers_double_the_ceiling_and_no_api_cost_is_engine_bound() -> None:
    two = _bench(VLLM, 2, 2000).metrics["request_throughput"]
    assert two == pytest.approx(_ceiling_per_s(2), rel=0.03)
    engine_only = dataclasses.replace(VLLM, api_server_s_per_request=0.0, api_server_s_per_token=0.0,
                                      api_server_s_per_output_chunk=0.0)
    bare = _bench(engine_only, 1, 1000)
    assert bare.metrics["request_throughput"] > 5 * _ceiling_per_s(1)  # the engine's, not the API server's
    assert bare.metrics["completed"] == 1000


def test_api_server_count_below_one_is_one_line_exit_2() -> None:
    res = CliRunner().invoke(cli, [*BASE, "--num-prompts", "4", "--api-server-count", "0"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "--api-server-count" in res.output and len(res.output.strip().splitlines()) == 1
