"""Arrival options of optimize / whatif and the burstiness ``workloads fit`` saves."""

from __future__ import annotations

import json

import numpy as np

from fleetplan.workload import load_workload
from tests.cli.cli_check import one_line_error, run

TRACE = ("traces", "azure2023", "AzureLLMInferenceTrace_conv.csv")  # under ../shared


BASE = ("optimize", "--workload", "azure_conv", "--lam", "100", "--slo-ttft", "500", "--gpus", "h100",
        "--topology", "homo", "--no-verify")


def _gpus(output: str) -> int:
    line = next(ln for ln in output.splitlines() if "│ 1 │" in ln)
    return int([c.strip() for c in line.split("│")][5])


def test_gamma_arrivals_state_ca2_and_need_more_gpus():
    tight = tuple("150" if a == "500" else a for a in BASE)  # Poisson: 2 GPUs at P99 68 ms, bursty: 309 ms
    poisson, bursty = run(*tight), run(*tight, "--arrival", "gamma", "--cv", "4")
    assert poisson.exit_code == 0 and bursty.exit_code == 0, bursty.stderr
    assert "Poisson arrivals (Ca² 1)" in poisson.output
    assert "gamma CV 4 arrivals (Ca² 16)" in bursty.output
    assert _gpus(bursty.output) > _gpus(poisson.output)


def test_cv_without_gamma_is_one_line_error():
    one_line_error(run(*BASE, "--cv", "2"), "--cv", "--arrival gamma")


def test_window_without_replay_is_one_line_error():
    one_line_error(run(*BASE, "--ca2-window-s", "5"), "--ca2-window-s", "--arrival replay")


def test_replay_needs_a_trace():
    one_line_error(run(*BASE, "--arrival", "replay"), "replay", "trace")


def test_replay_of_a_trace_gets_its_dispersion(shared_dir):
    res = run("optimize", "--workload", str(shared_dir.joinpath(*TRACE)), "--lam", "100", "--slo-ttft", "500",
              "--gpus", "h100", "--topology", "homo", "--no-verify", "--arrival", "replay")
    assert res.exit_code == 0, res.stderr
    assert "trace replay (Ca² at 1 s) arrivals (Ca² 6.08)" in res.output


def test_fit_reports_and_saves_burstiness(tmp_path, shared_dir):
    out = tmp_path / "conv.json"
    res = run("workloads", "fit", str(shared_dir.joinpath(*TRACE)), "--out", str(out))
    assert res.exit_code == 0, res.output
    assert "index of dispersion of counts 1 s: 1.39, 10 s: 3.87, 60 s: 16.4" in res.output
    assert "hourly rates from the first arrival" in res.output
    doc = json.loads(out.read_text())
    assert [d["window_s"] for d in doc["arrivals"]["index_of_dispersion"]] == [1.0, 10.0, 60.0]
    wl = load_workload(str(out))
    assert wl.arrival_stats is not None and wl.arrival_stats.interarrival_cv > 1.0
    assert np.isclose(wl.arrival_stats.hourly_rates_per_s[0], 5.53, rtol=0.01)


def test_grid_flex_takes_the_arrival_process():
    base = ("grid-flex", "--workload", "azure_conv", "--lam", "330", "--gpus", "h100", "--n-gpus", "6", "--no-sim",
            "--levels", "0")
    poisson, bursty = run(*base), run(*base, "--arrival", "gamma", "--cv", "3")
    assert poisson.exit_code == 0 and bursty.exit_code == 0, bursty.stderr

    def p99(out: str) -> float:
        return float(next(ln for ln in out.splitlines() if "│      0 │" in ln).split("│")[6].replace(",", ""))

    assert p99(bursty.output) > 2 * p99(poisson.output)
    one_line_error(run(*base, "--cv", "3"), "--cv", "--arrival gamma")
