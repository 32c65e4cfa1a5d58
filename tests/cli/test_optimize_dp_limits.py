"""``fleetplan optimize`` with a data-parallel-attention placement: the recommendation line and the JSON give
the engine limits as vLLM reads them, per DP rank (``--max-num-seqs``, ``--max-num-batched-tokens``)."""

from __future__ import annotations

import json
import math

import pytest

from fleetplan.hardware import load_catalog
from fleetplan.models import load_model
from fleetplan.perf.dp_instance import per_rank_limit
from fleetplan.plan.placement import place_model
from fleetplan.sim import build_pool
from tests.cli.cli_check import run

MAX_TOKENS = 65536  # the homogeneous pool's context (lmsys's longest request bucket)


def test_a_dp_instance_gets_vllms_per_rank_limits(tmp_path):
    out = tmp_path / "run.json"
    res = run("optimize", "--workload", "lmsys", "--model", "deepseek-v3", "--gpus", "h200", "--slo-ttft", "2000",
              "--topology", "homo", "--no-verify", "--lam", "20", "--json", str(out))
    assert res.exit_code == 0, res.stderr
    place = next(p for p in place_model(load_model("deepseek-v3"), load_catalog().get("h200"))
                 if p.parallelism.attn_dp == 8)
    limits = build_pool(place.gpu, "pool", 1, MAX_TOKENS).limits  # the instance's, over its 8 KV caches
    seqs = per_rank_limit(limits.max_num_seqs, 8)
    # floor(floor(8 b / c) / 8) = floor(b / c): one rank's own KV cache holds exactly that many requests
    per_seq_blocks = math.ceil(MAX_TOKENS / limits.block_size_tokens)
    assert seqs == (limits.kv_blocks // 8) // per_seq_blocks >= 1
    doc = json.loads(out.read_text())
    pools = [p for c in doc["candidates"] for p in c["pools"] if p["gpu"] == place.gpu.name]
    assert pools and all(p["data_parallel_size"] == 8 and p["max_num_seqs"] == seqs for p in pools)
    tokens = pools[0]["max_num_batched_tokens"]
    line = next(ln for ln in res.output.splitlines() if ln.startswith("Recommendation:"))
    assert place.gpu.name in line
    assert f"(vLLM per DP rank: --max-num-seqs {seqs} --max-num-batched-tokens {tokens}, 8 ranks)" in line
    others = [p for c in doc["candidates"] for p in c["pools"] if p["gpu"] != place.gpu.name]
    assert others and all(p["data_parallel_size"] == 1 for p in others)


@pytest.mark.parametrize(("instance", "ranks", "want"), [(59, 8, 7), (8251, 8, 1031), (256, 1, 256), (7, 8, 0)])
def test_per_rank_limit_is_the_floor(instance, ranks, want):
    assert per_rank_limit(instance, ranks) == want
