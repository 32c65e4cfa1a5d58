"""``fleetplan bench serve``: vLLM's result block and JSON keys; bad input is one line, exit 2."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from fleetplan.cli.main import cli

BASE = ["bench", "serve", "--model", "llama-3.1-8b", "--gpu", "h100", "--num-prompts", "20",
        "--random-input-len", "256", "--random-output-len", "16"]


def _run(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False, standalone_mode=True)


def test_block_and_result_json(tmp_path) -> None:
    res = _run([*BASE, "--max-concurrency", "4", "--save-result", "--result-dir", str(tmp_path),
                "--result-filename", "r.json", "--metric-percentiles", "50,99"])
    assert res.exit_code == 0, res.output
    assert "============ Serving Benchmark Result ============" in res.output
    assert "Maximum request concurrency:             4" in res.output
    assert "P99 TTFT (ms):" in res.output
    doc = json.loads((tmp_path / "r.json").read_text())
    for key in ("completed", "duration", "total_input_tokens", "total_output_tokens", "request_throughput",
                "output_throughput", "total_token_throughput", "mean_ttft_ms", "median_tpot_ms", "std_itl_ms",
                "p99_itl_ms", "p50_ttft_ms", "max_concurrency", "request_rate", "num_prompts"):
        assert key in doc, key
    assert doc["completed"] == 20 and doc["max_concurrency"] == 4 and doc["request_rate"] == "inf"
    assert doc["fleetplan"]["gpu"] == "H100-SXM" and doc["fleetplan"]["engine"] == "vllm"


@pytest.mark.parametrize("extra, words", [
    (["--dataset-name", "lmsys"], "unknown dataset 'lmsys'"),
    (["--engine", "tgi"], "unknown engine 'tgi'"),
    (["--dataset-name", "custom"], "needs --dataset-path"),
    (["--quantization", "bnb"], "unknown quantization 'bnb'"),
    (["--request-rate", "fast"], "'--request-rate': 'fast' is not a number"),
])
def test_bad_input_is_one_line_exit_2(extra, words) -> None:
    res = CliRunner().invoke(cli, [*BASE, *extra])
    assert res.exit_code == 2
    assert words in res.output and "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_dataset_file_that_does_not_parse(tmp_path) -> None:
    bad = tmp_path / "share.json"
    bad.write_text("{not json")
    res = CliRunner().invoke(cli, [*BASE, "--dataset-name", "sharegpt", "--dataset-path", str(bad)])
    assert res.exit_code == 2 and "is not JSON" in res.output
    rows = tmp_path / "custom.jsonl"
    rows.write_text('{"prompt_tokens": 100, "output_tokens": 10}\n{"text": "x"}\n')
    res = CliRunner().invoke(cli, [*BASE, "--num-prompts", "2", "--dataset-name", "custom", "--dataset-path",
                                   str(rows)])
    assert res.exit_code == 2 and "line 2" in res.output


def test_perf_calibrate_on_bench_results_round_trip(tmp_path) -> None:
    """Results simulated with the sglang profile (0.3 ms host time) in mixed batches (--enable-mixed-chunk, the
    batches perf calibrate replays), fitted from the vllm profile's start."""
    for conc, n_in, n_out in ((1, 1024, 128), (16, 1024, 128), (4, 2048, 16)):
        res = _run(["bench", "serve", "--model", "llama-3.1-8b", "--gpu", "h100", "--num-prompts", "32",
                    "--random-input-len", str(n_in), "--random-output-len", str(n_out), "--max-concurrency", str(conc),
                    "--engine", "sglang", "--enable-mixed-chunk", "--result-dir", str(tmp_path),
                    "--result-filename", f"c{conc}.json"])
        assert res.exit_code == 0, res.output
    out = tmp_path / "profile.json"
    args = ["perf", "calibrate", "--model", "llama-3.1-8b", "--gpu", "h100", "--out", str(out)]
    for conc in (1, 16, 4):
        args += ["--bench-result", str(tmp_path / f"c{conc}.json")]
    res = _run(args)
    assert res.exit_code == 0, res.output
    assert "cpu_overhead_s=0.3 ms" in res.output and "mean |error|" in res.output
    res = _run([*BASE, "--perf-profile", str(out)])
    assert res.exit_code == 0 and "perf profile" in res.output


def test_perf_calibrate_needs_input() -> None:
    res = CliRunner().invoke(cli, ["perf", "calibrate", "--model", "llama-3.1-8b", "--gpu", "h100", "--out", "x.json"])
    assert res.exit_code == 2 and "needs a step CSV or --bench-result" in res.output


def test_perf_calibrate_metrics_without_histograms(tmp_path) -> None:
    dump = tmp_path / "metrics.txt"
    dump.write_text("vllm:num_requests_running 1\n")
    res = CliRunner().invoke(cli, ["perf", "calibrate", "--model", "llama-3.1-8b", "--gpu", "h100", "--out",
                                   str(tmp_path / "p.json"), "--metrics", str(dump), "--input-len", "100",
                                   "--output-len", "10", "--num-prompts", "10"])
    assert res.exit_code == 2 and "vllm:time_to_first_token_seconds" in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_backend_openai_chat_halves_mean_itl_of_two_token_outputs(tmp_path) -> None:
    """``--backend openai-chat`` (vllm bench serve's spelling) reaches the client model: with 2-token outputs one
    request at a time each request's ITL list is [role chunk ~0, one decode step], so vLLM's mean ITL halves
    while TTFT and TPOT stay (a template of 0 tokens); the choices are the library's ``CLIENT_BACKENDS``."""
    from fleetplan.bench.serve import CLIENT_BACKENDS

    args = [*BASE[:-4], "--num-prompts", "6", "--random-input-len", "256", "--random-output-len", "2",
            "--max-concurrency", "1", "--save-result", "--result-dir", str(tmp_path)]
    docs = {}
    for backend, template in (("vllm", []), ("openai-chat", ["--chat-template-tokens", "0"])):
        res = _run([*args, "--backend", backend, *template, "--result-filename", f"{backend}.json"])
        assert res.exit_code == 0, res.output
        docs[backend] = json.loads((tmp_path / f"{backend}.json").read_text())
    plain, chat = docs["vllm"], docs["openai-chat"]
    assert chat["mean_ttft_ms"] == plain["mean_ttft_ms"] and chat["mean_tpot_ms"] == plain["mean_tpot_ms"]
    assert chat["mean_itl_ms"] == pytest.approx(plain["mean_itl_ms"] / 2, rel=1e-9)
    res = CliRunner().invoke(cli, [*BASE, "--backend", "sglang-oai"])
    assert res.exit_code == 2 and "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1
    assert "'sglang-oai' is not one of " + ", ".join(f"'{b}'" for b in CLIENT_BACKENDS) in res.output


def test_chat_template_tokens_flag_reaches_the_engine_and_the_result_json(tmp_path) -> None:
    """``--backend openai-chat`` on gpt-oss prefills the bundled 65 template tokens (the JSON says so, the client's
    input total stays 128 a request) and is slower to first token than the same run with
    ``--chat-template-tokens 0``; a model without a known count, a count with a completions backend, and a negative
    count each end in one line, exit 2, naming the flag."""
    args = ["bench", "serve", "--model", "gpt-oss-20b", "--gpu", "h100", "--num-prompts", "30", "--random-input-len",
            "128", "--random-output-len", "4", "--backend", "openai-chat", "--save-result", "--result-dir",
            str(tmp_path)]
    docs = {}
    for name, extra in (("model", []), ("zero", ["--chat-template-tokens", "0"])):
        res = _run([*args, *extra, "--result-filename", f"{name}.json"])
        assert res.exit_code == 0, res.output
        docs[name] = json.loads((tmp_path / f"{name}.json").read_text())
    assert docs["model"]["fleetplan"]["chat_template_tokens"] == 65
    assert docs["zero"]["fleetplan"]["chat_template_tokens"] == 0
    assert docs["model"]["total_input_tokens"] == docs["zero"]["total_input_tokens"] == 30 * 128
    assert docs["model"]["mean_ttft_ms"] > docs["zero"]["mean_ttft_ms"]
    for bad, words in (([*BASE, "--backend", "openai-chat"], "--chat-template-tokens is not known for the model "
                        "Llama-3.1-8B"),
                       ([*BASE, "--chat-template-tokens", "8"], "--chat-template-tokens 8 applies to the chat "
                        "endpoint only; the --backend vllm"),
                       ([*BASE, "--backend", "openai-chat", "--chat-template-tokens", "-2"],
                        "--chat-template-tokens -2 must be an integer >= 0")):
        res = CliRunner().invoke(cli, bad)
        assert res.exit_code == 2 and "Traceback" not in res.output, res.output
        assert len(res.output.strip().splitlines()) == 1 and words in res.output, res.output


def test_perf_calibrate_replays_a_chat_run_as_one(tmp_path) -> None:
    """A chat run's result file (``--backend openai-chat``, Qwen3's 8 template tokens) fitted from the profile it was
    simulated with starts at no error: perf calibrate replays it through the chat endpoint. ``--chat-template-tokens``
    without any chat run, and with a model whose count is unknown, end in one line, exit 2."""
    run = ["bench", "serve", "--model", "qwen3-30b-a3b", "--gpu", "h100", "--num-prompts", "16", "--random-input-len",
           "512", "--random-output-len", "8", "--max-concurrency", "4", "--save-result", "--result-dir",
           str(tmp_path)]
    for backend in ("openai-chat", "vllm"):
        res = _run([*run, "--backend", backend, "--result-filename", f"{backend}.json"])
        assert res.exit_code == 0, res.output
    base = ["perf", "calibrate", "--model", "qwen3-30b-a3b", "--gpu", "h100", "--out", str(tmp_path / "p.json")]
    res = _run([*base, "--bench-result", str(tmp_path / "openai-chat.json")])
    assert res.exit_code == 0, res.output
    mean_row = next(line for line in res.output.splitlines() if "mean |error|" in line)
    assert [c.strip() for c in mean_row.split("│")[2:4]] == ["0.0%", "0.0%"], res.output  # before, after
    res = CliRunner().invoke(cli, [*base, "--bench-result", str(tmp_path / "vllm.json"), "--chat-template-tokens",
                                   "8"])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1
    assert "--chat-template-tokens 8 applies to chat endpoint runs only" in res.output
    res = CliRunner().invoke(cli, [*base, "--bench-result", str(tmp_path / "vllm.json"), "--backend", "openai-chat"])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1
    assert "--backend openai-chat is the client of --metrics runs" in res.output
    dump = tmp_path / "metrics.txt"
    dump.write_text("vllm:time_to_first_token_seconds_sum 2.5\nvllm:time_to_first_token_seconds_count 20\n"
                    "vllm:time_per_output_token_seconds_sum 1.2\nvllm:time_per_output_token_seconds_count 100\n")
    res = CliRunner().invoke(cli, ["perf", "calibrate", "--model", "llama-3.1-8b", "--gpu", "h100", "--out",
                                   str(tmp_path / "q.json"), "--metrics", str(dump), "--metrics", str(dump),
                                   "--input-len", "100", "--output-len", "10", "--num-prompts", "10", "--backend",
                                   "openai-chat"])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1
    assert "--chat-template-tokens is not known for the model Llama-3.1-8B" in res.output
