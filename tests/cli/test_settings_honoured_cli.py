"""Every engine setting a user gives is honoured or refused with a reason (issue "[First run & CLI]" 7):
simulate / simulate-sessions with --model keep a fleet file's explicit vLLM limits, serve GPUs without
calibrated constants, read --gpu-profiles; perf explain says when a batch cannot fit the KV cache."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from fleetplan.cli.main import cli
from fleetplan.hardware import load_catalog
from fleetplan.models import load_model
from fleetplan.plan.model_fleet import ModelServing, serve_model
from fleetplan.sim.fleet_toml import read_fleet_toml

WIDE = {"COLUMNS": "250"}
SIM = ["--workload", "lmsys", "--lam", "20", "--sim-requests", "600", "--model", "llama-3.1-8b", "--seed", "3"]


def run(*args: str):
    return CliRunner().invoke(cli, list(args), env=WIDE)


def fleet(tmp_path: Path, name: str, gpu: str = "h100", extra: str = "") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(f'[[pool]]\nname = "p"\ngpu = "{gpu}"\ninstances = 1\nmax_context_tokens = 8192\n{extra}')
    return path


def p99_ttft_ms(output: str) -> float:
    row = next(ln for ln in output.splitlines() if ln.startswith("│ (fleet total)"))
    return float(row.split("│")[4].replace(",", ""))


def test_serve_model_keeps_every_explicit_limit_of_the_file(tmp_path):
    path = fleet(tmp_path, "f", extra="max_num_seqs = 4\nmax_num_batched_tokens = 1024\nkv_blocks = 5000\n"
                                      "price_usd_per_h = 9.5\nrouter = \"round_robin\"\n")
    served = serve_model(read_fleet_toml(path, load_catalog()), ModelServing(load_model("llama-3.1-8b")))
    pool = served.spec.pools[0]
    assert (pool.limits.max_num_seqs, pool.limits.max_num_batched_tokens, pool.limits.kv_blocks) == (4, 1024, 5000)
    assert pool.price_usd_per_h == 9.5 and pool.router.value == "round_robin" and pool.gpu == "H100-SXM tp1"
    derived = serve_model(read_fleet_toml(fleet(tmp_path, "g"), load_catalog()),
                          ModelServing(load_model("llama-3.1-8b"))).spec.pools[0]
    assert derived.limits.max_num_seqs > 4 and derived.limits.kv_blocks != 5000  # from the placement


def test_simulate_with_model_honours_the_files_max_num_seqs(tmp_path):
    four = run("simulate", "--fleet", str(fleet(tmp_path, "four", extra="max_num_seqs = 4\n")), *SIM)
    many = run("simulate", "--fleet", str(fleet(tmp_path, "many", extra="max_num_seqs = 48\n")), *SIM)
    assert four.exit_code == 0, four.output
    assert many.exit_code == 0, many.output
    assert "max_num_seqs 4," in four.output and "max_num_seqs 48," in many.output
    # 4 running sequences queue the rest: P99 TTFT grows by far more than noise (same seed, same requests)
    assert p99_ttft_ms(four.output) > 2 * p99_ttft_ms(many.output)


def test_simulate_with_model_honours_max_num_batched_tokens(tmp_path):
    res = run("simulate", "--fleet", str(fleet(tmp_path, "b", extra="max_num_batched_tokens = 1536\n")), *SIM)
    assert res.exit_code == 0, res.output
    assert re.search(r"max_num_batched_tokens 1,536\b", res.output)


def test_simulate_serves_a_gpu_without_calibrated_constants_with_model_and_refuses_it_without(tmp_path):
    path = str(fleet(tmp_path, "h200", gpu="h200"))
    res = run("simulate", "--fleet", path, *SIM)
    assert res.exit_code == 0, res.output
    assert "H200 tp1" in res.output
    bare = run("simulate", "--fleet", path, "--workload", "lmsys", "--sim-requests", "200")
    assert bare.exit_code == 2 and "no calibrated serving constants" in bare.output and "Traceback" not in bare.output


def test_simulate_reads_gpu_profiles(tmp_path):
    mine = tmp_path / "mine.toml"
    mine.write_text('[gpu.H100-SXM]\nprice_usd_per_h = 2.49\n')
    path = str(fleet(tmp_path, "priced"))
    base = run("simulate", "--fleet", path, "--workload", "lmsys", "--sim-requests", "200")
    own = run("simulate", "--fleet", path, "--workload", "lmsys", "--sim-requests", "200", "--gpu-profiles", str(mine))
    assert base.exit_code == own.exit_code == 0, own.output
    assert "2.49 USD/h" in own.output and "2.49 USD/h" not in base.output


def test_sessions_with_model_honour_the_files_max_num_seqs(tmp_path):
    res = run("simulate", "sessions", "--fleet", str(fleet(tmp_path, "s", extra="max_num_seqs = 3\n")), "--model",
              "llama-3.1-8b", "--sessions", "frontier_agentic", "--lam", "0.5", "--sim-sessions", "20",
              "--tool-delay-s", "1")
    assert res.exit_code == 0, res.output
    assert "max_num_seqs 3," in res.output


def test_perf_explain_says_when_the_batch_exceeds_the_kv_cache():
    big = run("perf", "explain", "--model", "llama-3.1-70b", "--gpu", "h100", "-tp", "2", "--batch", "decode=80x4250")
    assert big.exit_code == 0, big.output
    text = " ".join(big.output.split())
    assert "note: this batch holds 21,280 KV blocks (340,480 tokens), more than the replica's" in text
    assert "vLLM never runs it" in text
    small = run("perf", "explain", "--model", "llama-3.1-70b", "--gpu", "h100", "-tp", "2", "--batch", "decode=4x1024")
    assert small.exit_code == 0 and "note:" not in small.output


@pytest.mark.parametrize("args, fragment", [
    (("--cv", "3"), "--cv applies to --arrival gamma only"),
    (("--weight-dtype", "fp8"), "--weight-dtype needs --model"),
    (("--kv-cache-dtype", "fp8"), "--kv-cache-dtype needs --model"),
    (("-tp", "2"), "--tensor-parallel-size needs --model"),
])
def test_simulate_refuses_settings_it_would_not_read(tmp_path, args, fragment):
    res = run("simulate", "--fleet", str(fleet(tmp_path, "r")), "--workload", "lmsys", "--sim-requests", "200", *args)
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert res.output.startswith("error: ") and fragment in res.output and len(res.output.strip().splitlines()) == 1


def test_simulate_gamma_arrivals_read_cv(tmp_path):
    path = str(fleet(tmp_path, "g"))
    calm = run("simulate", "--fleet", path, "--workload", "lmsys", "--lam", "20", "--sim-requests", "600",
               "--arrival", "gamma")
    bursty = run("simulate", "--fleet", path, "--workload", "lmsys", "--lam", "20", "--sim-requests", "600",
                 "--arrival", "gamma", "--cv", "4")
    assert calm.exit_code == bursty.exit_code == 0, bursty.output
    assert p99_ttft_ms(bursty.output) > p99_ttft_ms(calm.output)


def test_optimize_refuses_a_dtype_without_model():
    res = run("optimize", "--workload", "lmsys", "--slo-ttft", "500", "--gpus", "h100", "--no-verify",
              "--weight-dtype", "fp8")
    assert res.exit_code == 2 and "--weight-dtype needs --model" in res.output
