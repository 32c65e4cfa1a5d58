"""The served model's max_model_len in every command: honoured (pools capped, longer requests
rejected, counted and reported in the table, JSON and CSV) or refused with the fix (exit 2)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fleetplan.cli.main import cli

WIDE = {"COLUMNS": "250"}
AGENTS = ["--workload", "agent_heavy", "--slo-ttft", "5000", "--gpus", "h100", "--topology", "homo,two-pool",
          "--quiet"]


def run(*args: str):
    return CliRunner().invoke(cli, list(args), env=WIDE)


def one_line_error(res, *fragments: str) -> str:
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in res.output, res.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def model_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("ctx")
    res = run("optimize", *AGENTS, "--model", "llama-3.1-8b", "--no-verify", "--json", str(out / "run.json"),
              "--csv", str(out / "fleet.csv"))
    assert res.exit_code == 0, res.output
    return res.output, json.loads((out / "run.json").read_text()), list(csv.DictReader((out / "fleet.csv").open()))


def test_optimize_with_model_caps_every_pool_at_its_context_window(model_run):
    printed, doc, _ = model_run
    assert "max_model_len 131,072 tokens (llama-3.1-8b's max_position_embeddings)" in printed
    assert "-131072" in printed and "300000" not in printed
    assert doc["inputs"]["max_model_len_tokens"] == 131072
    for c in doc["candidates"]:
        assert max(p["max_tokens"] for p in c["pools"]) == 131072
        assert sum(p["traffic_share"] for p in c["pools"]) == pytest.approx(1 - doc["rejected"]["request_share"],
                                                                           abs=1e-5)


def test_rejected_traffic_is_reported_in_table_json_and_csv(model_run):
    printed, doc, rows = model_run
    rej = doc["rejected"]
    assert 0 < rej["request_share"] < rej["token_share"] < 1
    assert f"{rej['request_share']:.2%} of requests ({rej['token_share']:.2%} of tokens)" in " ".join(printed.split())
    last = rows[-1]
    assert last["pool"] == "rejected" and last["total_gpus"] == "0" and last["min_tokens"] == "131072"
    assert float(last["traffic_share"]) == pytest.approx(rej["request_share"], abs=1e-6)
    assert float(last["rejected_token_share"]) == pytest.approx(rej["token_share"], abs=1e-6)
    total = next(r for r in rows if r["pool"] == "total")
    assert float(total["traffic_share"]) + float(last["traffic_share"]) == pytest.approx(1.0, abs=1e-5)


def test_without_model_or_limit_there_is_no_limit():
    res = run("optimize", *AGENTS, "--no-verify")
    assert res.exit_code == 0, res.output
    assert "Context limit: none" in res.output and "-300000" in res.output


def test_max_model_len_alone_caps_the_pools():
    res = run("optimize", *AGENTS, "--no-verify", "--max-model-len", "32768")
    assert res.exit_code == 0, res.output
    assert "max_model_len 32,768 tokens (--max-model-len)" in " ".join(res.output.split())
    assert "-32768" in res.output and "-300000" not in res.output


def test_max_model_len_above_the_window_is_refused_unless_allowed():
    one_line_error(run("optimize", *AGENTS, "--no-verify", "--model", "llama-3.1-8b", "--max-model-len", "200000"),
                   "--max-model-len 200,000", "131,072", "--allow-long-max-model-len")
    res = run("optimize", *AGENTS, "--no-verify", "--model", "llama-3.1-8b", "--max-model-len", "200000",
              "--allow-long-max-model-len")
    assert res.exit_code == 0, res.output
    assert "-200000" in res.output and "-300000" not in res.output


def test_allow_long_without_a_longer_limit_is_refused():
    one_line_error(run("optimize", *AGENTS, "--no-verify", "--model", "llama-3.1-8b", "--allow-long-max-model-len"),
                   "--allow-long-max-model-len needs", "--max-model-len")


def test_verification_simulates_the_limit_and_reports_the_simulated_shares(tmp_path):
    res = run("optimize", *AGENTS, "--model", "llama-3.1-8b", "--sim-requests", "2000", "--replications", "2",
              "--verify-top", "1", "--json", str(tmp_path / "run.json"))
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "run.json").read_text())
    v = doc["verification_results"][0]
    # about 0.2 % of agent_heavy is longer than 131,072 tokens: rejected in the simulator too, counted, and
    # (the fleet passes) not pushed into the P99 as infinite latencies
    assert 0 < v["too_long_share_sim"] < 0.01 and v["too_long_token_share_sim"] > v["too_long_share_sim"]
    assert v["p99_ttft_ms_sim"] is not None
    assert "the recommendation's simulation rejected" in " ".join(res.output.split())


def fleet(tmp_path: Path, context: int, gpu: str = "h100") -> Path:
    path = tmp_path / "fleet.toml"
    path.write_text(f'[[pool]]\nname = "p"\ngpu = "{gpu}"\ninstances = 2\nmax_context_tokens = {context}\n')
    return path


def test_simulate_refuses_a_pool_longer_than_the_models_window(tmp_path):
    one_line_error(run("simulate", "--fleet", str(fleet(tmp_path, 200_000)), "--workload", "lmsys", "--sim-requests",
                       "200", "--model", "llama-3.1-8b"),
                   "pool 'p'", "200,000", "max_model_len 131,072")


def test_simulate_max_model_len_below_a_pool_is_refused(tmp_path):
    one_line_error(run("simulate", "--fleet", str(fleet(tmp_path, 8192)), "--workload", "lmsys", "--sim-requests",
                       "200", "--max-model-len", "4096"),
                   "pool 'p'", "max_model_len 4,096")


def test_simulate_counts_too_long_requests_and_keeps_them_out_of_the_percentiles(tmp_path):
    res = run("simulate", "--fleet", str(fleet(tmp_path, 2048)), "--workload", "lmsys", "--lam", "5",
              "--sim-requests", "400", "--max-model-len", "2048")
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "max_model_len 2,048 tokens (--max-model-len)" in text
    assert "too long for max_model_len:" in text and "left out of the latency percentiles" in text


def test_sessions_and_pdd_refuse_a_context_above_the_window():
    one_line_error(run("simulate", "sessions", "--gpu", "h100", "--instances", "2", "--max-model-len", "200000",
                       "--model", "llama-3.1-8b", "--sessions", "frontier_agentic", "--lam", "0.5"),
                   "--max-model-len 200,000", "131,072")
    one_line_error(run("simulate", "pdd", "--workload", "lmsys", "--lam", "5", "--max-model-len", "200000"),
                   "--max-model-len 200,000", "Llama-3.1-70B", "--allow-long-max-model-len")


def test_whatif_caps_pools_and_reports_the_limit(tmp_path):
    res = run("whatif", "--workload", "agent_heavy", "--slo-ttft", "5000", "--gpus", "h100", "--topology", "homo",
              "--model", "llama-3.1-8b", "--lam-range", "10:20:10", "--no-verify", "--quiet", "--json",
              str(tmp_path / "w.json"))
    assert res.exit_code == 0, res.output
    assert "max_model_len 131,072 tokens" in " ".join(res.output.split())
    inputs = json.loads((tmp_path / "w.json").read_text())["inputs"]
    assert inputs["max_model_len_tokens"] == 131072 and 0 < inputs["rejected_request_share"] < 0.01
