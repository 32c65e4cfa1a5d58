"""Data-parallel-attention instances exported: DeepSeek-V3 on H100 at ``tp1 dp16 ep16`` over two nodes.

* the engine lines hold the verified instance limits in each engine's own unit (vLLM: per DP rank, its
  data-parallel deployment guide; SGLang: the instance's, which it divides by ``--dp-size`` itself), and
  multi-node vLLM runs node 0 with its local ranks and the others ``--headless`` from their first rank;
* the LeaderWorkerSet's worker pods compute their first rank from ``LWS_WORKER_INDEX``;
* ``fleet.toml`` rebuilds the simulated fleet exactly, the instance timed as one engine whose batch is split
  over its 16 ranks (``perf.dp_instance``, as ``plan.verify.fleet_spec`` builds it), and re-simulated it
  agrees with verification;
* each pool's timing source reaches the run JSON, ``deployment.json`` and the README.
(Command parsing and manifest schemas for these runs: ``test_engine_flags`` / ``test_manifests``, ``WHICH``.)
"""

from __future__ import annotations

import json
import tomllib

import pytest

from fleetplan.deploy import Engine, deployment_files
from fleetplan.deploy.engines import DP_RPC_PORT, PoolServe, launch_lines
from fleetplan.deploy.export import select_candidate
from fleetplan.deploy.readme import AFD_NOTE, DP_NOTE, MEASURED_PREFIX
from fleetplan.deploy.text import toml_text
from fleetplan.errors import ConfigError
from fleetplan.models import load_model
from fleetplan.perf.dp_instance import (
    DataParallelInstance,
    per_rank_limit,
    per_rank_token_budget,
    sglang_chunked_prefill_total,
)
from fleetplan.perf.measured import ROOFLINE_SOURCE, timing_source
from fleetplan.perf.measured.source import MEASURED_PREFIX as SOURCE_MEASURED_PREFIX
from fleetplan.plan.deployment import deployment_of
from fleetplan.plan.model_fleet import ModelServing, fleet_for_serving
from fleetplan.plan.optimize import optimize
from fleetplan.plan.verify import fleet_spec
from fleetplan.sim.fleet_toml import parse_fleet_file
from fleetplan.units import s_to_ms
from tests.deploy.conftest import load
from tests.deploy.test_fleet_file import _request, _same_fleet
from tests.deploy.test_round_trip import _agrees

yaml = pytest.importorskip("yaml", reason="dev extra: pip install -e '.[dev]'")

RANKS = 16


def _value(argv, flag: str) -> str:
    return argv[argv.index(flag) + 1]


def _dp_serve() -> PoolServe:
    return PoolServe(pool="p", served_model_name="m", tensor_parallel_size=1, pipeline_parallel_size=1,
                     expert_parallel=True, max_num_seqs=54, max_num_batched_tokens=54 + 1024, max_model_len_tokens=8192,
                     kv_blocks=16 * 1000 + 3, block_size_tokens=64, gpus_per_node=8, data_parallel_size=RANKS)


def test_vllm_limits_are_per_rank_and_nodes_join_headless():
    s = _dp_serve()
    assert (s.gpus_per_instance, s.n_nodes, s.gpus_per_pod, s.ranks_per_node) == (16, 2, 8, 8)
    head, worker = launch_lines(Engine.VLLM, s)
    for line in (head, worker):
        v = line.argv
        assert _value(v, "--data-parallel-size") == "16" and "--enable-expert-parallel" in v
        assert _value(v, "--tensor-parallel-size") == "1" and _value(v, "--data-parallel-size-local") == "8"
        # vLLM applies these per DP rank: floor(54 / 16) sequences (perf.dp_instance.per_rank_limit, the
        # recommendation line's), and a rank's own decodes plus one whole chunk (the instance's budget is n_max +
        # one rank's chunk: perf.dp_instance.per_rank_token_budget)
        assert _value(v, "--max-num-seqs") == "3" and _value(v, "--max-num-batched-tokens") == "1027"
        assert _value(v, "--num-gpu-blocks-override") == "1001"
        assert _value(v, "--data-parallel-address") == "{leader}"
        assert _value(v, "--data-parallel-rpc-port") == str(DP_RPC_PORT)
        assert "--distributed-executor-backend" not in v and line.then == ()
    assert "--headless" not in head.argv and "--data-parallel-start-rank" not in head.argv
    assert "--headless" in worker.argv and _value(worker.argv, "--data-parallel-start-rank") == "8"


def test_sglang_takes_instance_limits_with_dp_attention():
    s = _dp_serve()
    lines = launch_lines(Engine.SGLANG, s)
    assert [_value(ln.argv, "--node-rank") for ln in lines] == ["0", "1"]
    g = lines[0].argv
    assert _value(g, "--tp-size") == "16" and _value(g, "--dp-size") == "16" and "--enable-dp-attention" in g
    assert _value(g, "--ep-size") == "16"
    # SGLang divides these two by --dp-size itself (16 ranks x a 1,024-token chunk); the prefill batch and KV
    # pool are one rank's
    assert _value(g, "--max-running-requests") == "54" and _value(g, "--chunked-prefill-size") == "16384"
    assert _value(g, "--max-prefill-tokens") == "1027" and _value(g, "--max-total-tokens") == str(1001 * 64)


def test_one_node_dp_needs_no_node_flags():
    s = PoolServe(**{**_dp_serve().__dict__, "data_parallel_size": 8})
    (line,) = launch_lines(Engine.VLLM, s)
    assert _value(line.argv, "--data-parallel-size") == "8" and "--data-parallel-size-local" not in line.argv
    (sgl,) = launch_lines(Engine.SGLANG, s)
    assert "--nnodes" not in sgl.argv and _value(sgl.argv, "--tp-size") == "8"


def test_dp_with_pipeline_stages_is_one_error_line():
    with pytest.raises(ConfigError, match="pipeline parallelism is not exported"):
        PoolServe(**{**_dp_serve().__dict__, "pipeline_parallel_size": 2})


def test_exported_dp_run(dp_run):
    doc = load(dp_run)
    dep = doc["recommendation"]["deployment"]
    (info,) = dep["pools"]
    assert info["parallelism"] == {"tensor_parallel_size": 1, "data_parallel_size": RANKS,
                                   "enable_expert_parallel": True}
    assert info["timing_source"] == f"{ROOFLINE_SOURCE}, the batch split over {RANKS} attention ranks"
    _, files = deployment_files(doc)
    name = info["name"]
    lws, _service = yaml.safe_load_all(files[f"kubernetes/{name}.yaml"])
    assert lws["kind"] == "LeaderWorkerSet" and lws["spec"]["leaderWorkerTemplate"]["size"] == 2
    worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    assert worker["command"][:2] == ["sh", "-c"] and '"$((LWS_WORKER_INDEX * 8))"' in worker["command"][2]
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert json.loads(files["deployment.json"])["timing_sources"] == {name: info["timing_source"]}
    readme = files["README.md"]
    assert f"- {name}: {info['timing_source']}" in readme and DP_NOTE[Engine.VLLM] in readme


def test_dp_fleet_file_rebuilds_the_simulated_fleet():
    """Through the library: each DeepSeek-V3 candidate's fleet.toml, read back with the served model, is the
    fleet ``plan.verify.fleet_spec`` simulates, the DP instance timed by its split-batch step model."""
    request = _request("deepseek-v3", slo_s=2.0, rate=5.0)
    result = optimize(request)
    gpus = {g.name: g for g in request.gpus}
    serving = ModelServing(load_model("deepseek-v3"))
    seen = 0
    for c in result.candidates[:6]:
        d = deployment_of(c, request)
        expected = fleet_spec(c, gpus, [p.count for p in c.pools], dict(request.step_models), None, 0.0)
        fleet = parse_fleet_file(tomllib.loads(toml_text(d.fleet)))
        built = fleet_for_serving(fleet, serving).spec
        _same_fleet(built, expected)
        for pool, dep_pool in zip(built.pools, d.pools, strict=True):
            if dict(dep_pool.parallelism).get("data_parallel_size", 1) > 1:
                seen += 1
                assert isinstance(pool.step_model, DataParallelInstance) and pool.step_model.ranks == RANKS
            assert dep_pool.timing_source == timing_source(pool.step_model)
    assert seen  # the check saw data-parallel pools


def test_exported_dp_fleet_re_simulates_within_verification(dp_run):
    doc = load(dp_run)
    serving = ModelServing(load_model("deepseek-v3"))
    sim, ver, tol, rep = _agrees(doc, serving, 4_000, doc["inputs"].get("max_model_len_tokens"))
    assert abs(sim - ver) <= tol, (sim, ver, tol)
    assert s_to_ms(rep.upper_p99_ttft_s) <= doc["inputs"]["slo_ttft_ms"]


def test_timing_source_labels_agree():
    assert MEASURED_PREFIX == SOURCE_MEASURED_PREFIX  # readme spells it to avoid importing the perf package


def test_afd_candidate_says_why_it_is_not_exported():
    doc = {"kind": "optimize-run", "candidates": [{"rank": 1, "topology": "afd", "deployment": None}]}
    with pytest.raises(ConfigError) as err:
        select_candidate(doc, 1)
    text = str(err.value)
    assert AFD_NOTE in text and "\n" not in text
    assert all(ref in text for ref in ("sgl-project/sglang#36258", "vllm-project/afd-plugin",
                                       "ai-dynamo/dynamo#6570"))


def test_per_rank_limits_are_perf_dp_instance_rules():
    """One rule for the recommendation line and the export: ``perf.dp_instance``'s functions."""
    s = _dp_serve()
    for n, budget in ((16, 1040), (17, 1041), (31, 1055), (54, 1078), (16438, 17462)):
        s = PoolServe(**{**s.__dict__, "max_num_seqs": n, "max_num_batched_tokens": budget})
        assert s.rank_max_num_seqs() == per_rank_limit(n, RANKS) == n // RANKS
        assert s.rank_token_budget() == per_rank_token_budget(budget, n, RANKS) == n // RANKS + 1024
        assert s.server_chunked_prefill() == sglang_chunked_prefill_total(budget, n, RANKS) == 1024 * RANKS
    assert s.rank_kv_blocks() * RANKS >= s.kv_blocks > (s.rank_kv_blocks() - 1) * RANKS  # a rank never holds less
    with pytest.raises(ConfigError, match="below its 16 data-parallel ranks"):
        PoolServe(**{**s.__dict__, "max_num_seqs": RANKS - 1})
