"""Calibration: NNLS recovers known scales, profiles round-trip, CSV errors name file and row."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from fleetplan.cli.main import cli
from fleetplan.errors import DataFormatError
from fleetplan.perf.batch import BatchComposition
from fleetplan.perf.calibrate import FEATURES, CalibrationData, calibrate
from fleetplan.perf.linear import STEP_MODEL_ROOFLINE
from fleetplan.perf.overheads import PredictorOptions
from fleetplan.perf.parallelism import Parallelism
from fleetplan.perf.predictor import StepTimePredictor
from fleetplan.perf.profile_io import load_perf_profile, read_calibration_csv, save_perf_profile

EXAMPLE = "examples/calibration_example.csv"
HEADER = "n_seqs,n_decode,prefill_tokens,decode_context_tokens,prefill_attention_work,step_ms"


def _synthetic(p: StepTimePredictor, scales: dict[str, float], n: int, seed: int) -> CalibrationData:
    """Steps whose true time is the predictor's components times ``scales`` (no noise)."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        n_dec, n_pre = int(rng.integers(0, 200)), int(rng.integers(0, 3))
        n_pre = max(n_pre, 1 - min(n_dec, 1))
        b = BatchComposition(rng.integers(1, 2048, n_pre), rng.integers(0, 4096, n_pre), rng.integers(1, 8192, n_dec))
        s = p.predict(b).seconds
        t = (scales["fixed"] + scales["gemm"] * s["gemm"] + scales["attention_decode"] * s["attention_decode"]
             + scales["attention_prefill"] * s["attention_prefill"] + scales["per_seq"] * b.n_seqs)
        rows.append((b.n_seqs, b.n_decode, b.n_prefill_tokens, b.decode_context_sum, b.attn2, t))
    a = np.array(rows, dtype=np.float64)
    ints = [a[:, i].astype(np.int64) for i in range(5)]
    return CalibrationData(*ints, a[:, 5], "synthetic")


def test_nnls_recovers_known_scales(catalog, llama8b) -> None:
    p = StepTimePredictor(llama8b, catalog.get("H100-SXM"), Parallelism(tp=1))
    truth = {"fixed": 2.5e-3, "gemm": 1.3, "attention_prefill": 0.9, "attention_decode": 1.6, "per_seq": 2e-5}
    report = calibrate(p, _synthetic(p, truth, 120, seed=3))
    for name, value in truth.items():
        assert report.profile.scales[name] == pytest.approx(value, rel=1e-6, abs=1e-9)
    assert report.fit_mape < 1e-9 and report.base_mape > 0.2
    assert set(report.profile.scales) == set(FEATURES)


EXAMPLE_OPTIONS = PredictorOptions(gemm_efficiency=0.75, weight_bandwidth_efficiency=0.85, cpu_overhead_s=1e-3)


def test_example_csv_calibrates_and_round_trips(tmp_path, catalog, llama8b) -> None:
    data = read_calibration_csv(EXAMPLE)
    assert data.n_rows == 80 and data.step_s.min() > 0
    # the file was generated from the predictor with its pre-2026-11-25 defaults (EXAMPLE_OPTIONS)
    p = StepTimePredictor(llama8b, catalog.get("H100-SXM"), Parallelism(tp=1), options=EXAMPLE_OPTIONS)
    report = calibrate(p, data)
    assert report.fit_mape < 0.06 < report.base_mape  # 4 % noise in the synthetic file
    assert report.profile.scales["gemm"] == pytest.approx(1.3, rel=0.05)
    path = tmp_path / "profile.json"
    save_perf_profile(report.profile, path)
    loaded = load_perf_profile(path)
    assert loaded == report.profile
    code, coef = loaded.kernel_coefficients()
    assert code == STEP_MODEL_ROOFLINE
    row = (data.n_seqs[0], data.n_decode[0], data.prefill_tokens[0], data.decode_context_tokens[0], data.attn2[0])
    assert loaded.step_s(*map(int, row)) == pytest.approx(report.profile.step_s(*map(int, row)))
    assert float(loaded.t_iter_s(8, 1000.0)) > float(loaded.t_iter_s(8, 0.0))


@pytest.mark.parametrize("body, where", [
    (f"{HEADER}\n1,1,0,100,0,5.0\n1,2,0,100,0,5.0\n", "row 3"),
    (f"{HEADER}\n1,0,0,0,0,5.0\n", "row 2"),
    (f"{HEADER}\n1,1,0,100,0,abc\n", "row 2, column step_ms"),
    (f"{HEADER}\n1,1,0,100,0.25,5\n", "row 2, column prefill_attention_work"),
    (f"# comment\n{HEADER}\n1,1,0,100,0,-5\n", "row 3, column step_ms"),
    ("n_seqs,step_ms\n1,5\n", "row 1"),
])
def test_bad_csv_names_file_and_row(tmp_path, body, where) -> None:
    path = tmp_path / "steps.csv"
    path.write_text(body)
    with pytest.raises(DataFormatError) as err:
        read_calibration_csv(path)
    assert str(path) in str(err.value) and where in str(err.value)


def test_bad_profile_json_is_a_data_format_error(tmp_path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"format": "fleetplan-perf-profile", "version": 1, "coefficients": [1.0]}))
    with pytest.raises(DataFormatError, match="missing"):
        load_perf_profile(path)


def test_cli_explain_and_calibrate(tmp_path) -> None:
    runner = CliRunner()
    out = runner.invoke(cli, ["perf", "explain", "--model", "llama-3.1-70b", "--gpu", "h100", "--tp", "4",
                              "--batch", "prefill=2048@0,512@4096;decode=128x1024"])
    assert out.exit_code == 0, out.output
    assert "gemm" in out.output and "tp_all_reduce" in out.output and "KV budget" in out.output
    bad = runner.invoke(cli, ["perf", "explain", "--model", "llama-3.1-70b", "--gpu", "h100", "--tp", "4",
                              "--batch", "decode=12"])
    assert bad.exit_code == 2 and "NxM" in bad.output
    profile = tmp_path / "p.json"
    cal = runner.invoke(cli, ["perf", "calibrate", EXAMPLE, "--model", "llama-3.1-8b", "--gpu", "h100",
                              "--out", str(profile)])
    assert cal.exit_code == 0, cal.output
    assert "MAPE" in cal.output and profile.exists()
    assert load_perf_profile(profile).model == "Llama-3.1-8B"


def test_cli_takes_vllm_parallelism_and_dtype_spellings() -> None:
    """``-tp``/``--tensor-parallel-size``, ``-pp``, ``-dp`` and ``--kv-cache-dtype`` as vLLM spells them; the
    short ``--tp``/``--kv-dtype`` stay accepted and give the same breakdown."""
    runner = CliRunner()
    base = ["perf", "explain", "--model", "qwen3-30b-a3b", "--gpu", "h100", "--batch", "decode=64x2048"]
    outs = {
        spelling: runner.invoke(cli, base + list(spelling))
        for spelling in (("--tp", "2", "--dp", "2", "--ep", "4", "--kv-dtype", "fp8"),
                         ("-tp", "2", "-dp", "2", "-pp", "1", "--ep", "4", "--kv-cache-dtype", "fp8"),
                         ("--tensor-parallel-size", "2", "--data-parallel-size", "2", "--pipeline-parallel-size", "1",
                          "--ep", "4", "--kv-cache-dtype", "fp8"))
    }
    texts = {o.output for o in outs.values()}
    assert all(o.exit_code == 0 for o in outs.values()), [o.output for o in outs.values()]
    assert len(texts) == 1 and "tp_all_reduce" in texts.pop()
