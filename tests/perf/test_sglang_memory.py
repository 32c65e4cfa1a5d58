"""SGLang's memory accounting (``fleetplan.perf.sglang_memory``, ``kv_budget(engine="sglang")``).

The default ``mem_fraction_static`` is checked against the formulas of SGLang's ``ServerArgs`` worked by hand for
each release era (module docstring); the budget against its definition (the weights' and the KV pool's share, no
activation peak or graph pool taken off); the bench instance and the CLI against both.
"""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.bench import EngineArgs
from fleetplan.bench.instance import engine_parallelism, serving_fleet
from fleetplan.cli.main import cli
from fleetplan.errors import ConfigError
from fleetplan.hardware import load_catalog
from fleetplan.models import Dtype, load_model
from fleetplan.perf.kv_budget import DEFAULT_COMM_WORKSPACE_BYTES, kv_budget, resolved_memory_fraction
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.sglang_memory import (
    sglang_chunked_prefill_tokens,
    sglang_cuda_graph_max_bs,
    sglang_mem_fraction_static,
    sglang_reserved_mib,
)
from fleetplan.units import BYTES_PER_GIB

CATALOG = load_catalog()


def _dp_attention(model: str, tp: int, dp: int) -> Parallelism:
    par, copies = engine_parallelism("sglang", load_model(model), tp, data_parallel_size=dp, enable_dp_attention=True)
    assert copies == 1
    return par


def _by_hand(gpu_mib: float, chunk: int, graphs: int, tp_pp: int, dp_attention: int = 1) -> float:
    """PR #10975's reserve, written out: 512 + 1.5 max(chunk, 2048) + 2 graphs + 1024 tp pp / 8 (+ DP attention),
    at least 10 GiB above 60 GiB."""
    reserved = 512 + 1.5 * max(chunk, 2048) + 2 * graphs + 1024 * tp_pp / 8
    if dp_attention > 1:
        reserved += 3 * graphs * dp_attention + (1.5 * graphs * dp_attention if graphs > 300 else 0)
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((gpu_mib - reserved) / gpu_mib, 3)


@pytest.mark.parametrize(("gpu", "tp", "expected"), [
    ("H100-SXM", 1, 0.836),   # 512 + 12,288 + 512 + 128 = 13,440 MiB of 81,920
    ("H200", 8, 0.897),       # 512 + 12,288 + 1,024 + 1,024 = 14,848 of 144,384
    ("H200", 4, 0.901),       # 512 + 12,288 + 1,024 + 512 = 14,336
    ("B200", 8, 0.853),       # 512 + 24,576 + 1,024 + 1,024 = 27,136 of 184,320
    ("L4", 1, 0.847),         # 512 + 3,072 + 48 + 128 = 3,760 of 24,576 (no 10 GiB floor under 60 GiB)
    ("A100-80GB", 2, 0.834),  # 512 + 12,288 + 512 + 256 = 13,568 of 81,920
])
def test_current_default_matches_the_formula_by_hand(gpu: str, tp: int, expected: float) -> None:
    g = CATALOG.get(gpu)
    got = sglang_mem_fraction_static(g, Parallelism(tp=tp))
    assert got == expected
    assert got == _by_hand(g.hbm_gib * 1024, sglang_chunked_prefill_tokens(g), sglang_cuda_graph_max_bs(g, tp), tp)


def test_dp_attention_speculation_and_a_given_chunk_reserve_more() -> None:
    h200 = CATALOG.get("H200")
    par = _dp_attention("deepseek-v3", 8, 8)
    # 14,848 + 3 x 512 x 8 + 1.5 x 512 x 8 = 33,280 MiB
    assert sglang_reserved_mib(h200, par) == 33_280
    assert sglang_mem_fraction_static(h200, par) == 0.770
    assert sglang_reserved_mib(h200, Parallelism(tp=8), speculative=True) == 14_848 + 2048
    # the server's chunk, not a rank's: 16,384 tokens reserve 1.5 x 16,384 MiB
    assert sglang_reserved_mib(h200, Parallelism(tp=8), chunked_prefill_tokens=16384) == 512 + 24_576 + 2048


@pytest.mark.parametrize(("version", "tp", "expected"), [
    ("0.5.2", 8, 0.887),     # PR #7054: (12 + 8 / 2) GiB of 141
    ("0.5.2", 1, 0.911),     # (12 + 0.5) GiB
    ("0.4.7", 8, 0.887),
    ("0.4.6", 8, 0.81),      # before PR #7054: by TP alone
    ("0.4.6", 4, 0.85),
    ("0.4.6", 1, 0.88),
    ("0.5.3", 8, 0.897),     # PR #10975
])
def test_each_release_era_has_its_own_default(version: str, tp: int, expected: float) -> None:
    assert sglang_mem_fraction_static(CATALOG.get("H200"), Parallelism(tp=tp), version=version) == expected


def test_older_dp_attention_reserve_and_bad_versions() -> None:
    par = _dp_attention("deepseek-v3", 8, 8)
    assert sglang_reserved_mib(CATALOG.get("H200"), par, version="0.5.2") == (12 + 4 + 4) * 1024
    with pytest.raises(ConfigError, match="not a release number"):
        sglang_mem_fraction_static(CATALOG.get("H200"), par, version="nightly")


@settings(max_examples=60, deadline=None)
@given(gpu=st.sampled_from(["L4", "A10G", "L40S", "A100-80GB", "H100-SXM", "H200", "B200", "MI300X"]),
       tp=st.sampled_from([1, 2, 4, 8]), chunk=st.integers(1, 65_536), more=st.integers(1, 65_536))
def test_the_fraction_is_a_share_and_falls_as_the_chunk_grows(gpu: str, tp: int, chunk: int, more: int) -> None:
    """The reserve grows with the chunk; the fraction is a share in (0, 1) while the reserve leaves memory, and a
    reserve that leaves none is one line asking for the fraction (e.g. a 65,536-token chunk on an L4)."""
    g, par = CATALOG.get(gpu), Parallelism(tp=tp)
    small_mib = sglang_reserved_mib(g, par, chunked_prefill_tokens=chunk)
    large_mib = sglang_reserved_mib(g, par, chunked_prefill_tokens=chunk + more)
    assert 0 < small_mib <= large_mib
    fractions = []
    for mib, tokens in ((small_mib, chunk), (large_mib, chunk + more)):
        if round((g.hbm_gib * 1024 - mib) / (g.hbm_gib * 1024), 3) <= 0:
            with pytest.raises(ConfigError, match="give `gpu_memory_utilization`"):
                sglang_mem_fraction_static(g, par, chunked_prefill_tokens=tokens)
        else:
            fractions.append(sglang_mem_fraction_static(g, par, chunked_prefill_tokens=tokens))
    assert all(0 < f < 1 for f in fractions) and fractions == sorted(fractions, reverse=True)


def test_budget_keeps_activations_and_graphs_outside_the_fraction() -> None:
    """SGLang's pool is ``hbm x fraction - weights - comm buffers``: nothing of the activation peak or the graph pool
    comes off it; vLLM's budget at the same fraction takes both off."""
    model, h200, par = load_model("deepseek-v3"), CATALOG.get("H200"), Parallelism(tp=8)
    sg = kv_budget(model, h200, par, weight_dtype="fp8", kv_dtype="bf16", gpu_memory_utilization=0.85,
                   engine="sglang")
    vl = kv_budget(model, h200, par, weight_dtype="fp8", kv_dtype="bf16", gpu_memory_utilization=0.85)
    assert (sg.activation_peak_bytes, sg.cudagraph_pool_bytes) == (0, 0)
    assert sg.usable_bytes == int(h200.hbm_gib * BYTES_PER_GIB * 0.85) == vl.usable_bytes
    assert sg.kv_available_bytes == sg.usable_bytes - sg.weight_bytes - DEFAULT_COMM_WORKSPACE_BYTES
    assert vl.kv_available_bytes == sg.kv_available_bytes - vl.activation_peak_bytes - vl.cudagraph_pool_bytes
    assert vl.activation_peak_bytes > 0 and vl.cudagraph_pool_bytes > 0
    assert sg.kv_blocks_per_gpu == sg.kv_available_bytes // (sg.kv_bytes_per_token * sg.block_size_tokens)


def test_default_fraction_by_engine() -> None:
    model, h200, par = load_model("deepseek-v3"), CATALOG.get("H200"), Parallelism(tp=8)
    sg = kv_budget(model, h200, par, weight_dtype="fp8", kv_dtype="bf16", gpu_memory_utilization=None,
                   engine="sglang", engine_version="0.4.6")
    assert sg.gpu_memory_utilization == 0.81
    vl = kv_budget(model, h200, par, weight_dtype="fp8", kv_dtype="bf16", gpu_memory_utilization=None)
    assert vl.gpu_memory_utilization == 0.9
    assert resolved_memory_fraction(h200, par, 0.7, engine="sglang") == 0.7
    assert resolved_memory_fraction(h200, par, None, engine="sglang", server_chunked_prefill_tokens=16384) == \
        sglang_mem_fraction_static(h200, par, chunked_prefill_tokens=16384)
    with pytest.raises(ConfigError, match="mem_fraction_static"):
        kv_budget(model, h200, par, weight_dtype="fp8", kv_dtype="bf16", gpu_memory_utilization=1.2, engine="sglang")


def test_bench_instance_uses_the_servers_chunk_for_the_default() -> None:
    """The instance's fraction: SGLang's default from the server's chunk (a rank's budget times the DP attention
    ranks when given), the given fraction as is, vLLM's 0.9; the pool's KV blocks are that budget's."""
    model, h200 = load_model("deepseek-v3"), CATALOG.get("H200")
    par = _dp_attention("deepseek-v3", 8, 8)
    args = EngineArgs(model, h200, 8, Dtype.FP8, engine="sglang", parallelism_spec=par)
    assert args.memory_fraction == 0.770
    chunked = EngineArgs(model, h200, 8, Dtype.FP8, engine="sglang", parallelism_spec=par, max_num_batched_tokens=2048)
    assert chunked.memory_fraction == sglang_mem_fraction_static(h200, par, chunked_prefill_tokens=16384)
    given_args = EngineArgs(model, h200, 8, Dtype.FP8, engine="sglang", parallelism_spec=par,
                            gpu_memory_utilization=0.8)
    assert given_args.memory_fraction == 0.8
    assert EngineArgs(model, h200, 8, Dtype.FP8).memory_fraction == 0.9
    pool = serving_fleet(args).pools[0]
    budget = kv_budget(model, h200, par, weight_dtype=Dtype.FP8, kv_dtype=Dtype.BF16, gpu_memory_utilization=0.770,
                       max_num_seqs=1024, max_num_batched_tokens=1024, engine="sglang")
    assert pool.limits.kv_blocks == budget.kv_blocks_per_replica // 8
    assert pool.limits.kv_blocks < serving_fleet(given_args).pools[0].limits.kv_blocks
    with pytest.raises(ConfigError, match="gpu_memory_utilization"):
        EngineArgs(model, h200, 8, Dtype.FP8, gpu_memory_utilization=0.0)


def test_cli_reports_the_fraction_it_applied(tmp_path) -> None:
    base = ["bench", "serve", "--model", "llama-3.1-8b", "--gpu", "h100", "--num-prompts", "8",
            "--random-input-len", "256", "--random-output-len", "8", "--result-dir", str(tmp_path)]
    for extra, name, expected in ((["--engine", "sglang"], "d.json", 0.836),
                                  (["--engine", "sglang", "--mem-fraction-static", "0.8"], "m.json", 0.8),
                                  ([], "v.json", 0.9)):
        res = CliRunner().invoke(cli, [*base, *extra, "--result-filename", name])
        assert res.exit_code == 0, res.output
        doc = json.loads((tmp_path / name).read_text())["fleetplan"]
        assert math.isclose(doc["gpu_memory_utilization"], expected), extra


def test_a_reserve_that_leaves_nothing_is_one_line() -> None:
    """A server chunk whose reserve exceeds the GPU (65,536 tokens on an L4: 98,992 MiB of 24,576): one line naming
    the derived value and asking for the fraction, exit 2, no traceback."""
    res = CliRunner().invoke(cli, ["bench", "serve", "--model", "llama-3.1-8b", "--gpu", "l4", "--engine", "sglang",
                                   "--chunked-prefill-size", "65536", "--num-prompts", "4"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and "mem_fraction_static on L4" in lines[0] and "98992 MiB" in lines[0]
    assert "--gpu-memory-utilization" in lines[0]
    with pytest.raises(ConfigError) as err:
        sglang_mem_fraction_static(CATALOG.get("L4"), Parallelism(tp=1), chunked_prefill_tokens=65536)
    assert err.value.param == "gpu_memory_utilization"
