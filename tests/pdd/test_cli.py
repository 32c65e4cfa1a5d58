"""``fleetplan simulate pdd``: the TTFT breakdown, exports, fabric and SIBYL options, one-line errors."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from fleetplan.cli.main import cli
from fleetplan.hardware import load_catalog
from fleetplan.models.catalog import load_model
from fleetplan.sim.builders import build_pool
from fleetplan.sim.pdd import KvTransferSpec, PddSpec, PsThroughputCurve, SibylParams, simulate_pdd
from fleetplan.workload import load_workload


def _invoke(args: list[str]):
    return CliRunner().invoke(cli, args)


def test_simulate_pdd_prints_the_ttft_breakdown_and_writes_exports(tmp_path):
    summary, rows = tmp_path / "s.json", tmp_path / "r.csv"
    res = _invoke(["simulate", "pdd", "--workload", "lmsys", "--lam", "5", "--sim-requests", "400",
                                    "--policy", "sibyl", "--layerwise", "--latency-ms", "0.5",
                                    "--json", str(summary), "--requests-csv", str(rows)])
    assert res.exit_code == 0, res.output
    for word in ("queue", "prefill", "transfer", "first_decode", "ttft", "tpot", "optimal-assignment"):
        assert word in res.output
    assert "TTFT = queue + prefill + transfer + first decode step" in res.output
    data = json.loads(summary.read_text())
    assert data["policy"] == "sibyl" and data["n_requests"] == 400
    header = rows.read_text().splitlines()[0].split(",")
    assert {"queue_ms", "prefill_ms", "transfer_ms", "first_decode_ms", "ttft_ms"} <= set(header)


def test_simulate_pdd_bad_combination_is_one_line_exit_2():
    res = _invoke(["simulate", "pdd", "--workload", "lmsys", "--policy", "oracle"])
    assert res.exit_code == 2
    assert "binding = late" in res.output and len(res.output.strip().splitlines()) == 1


def test_simulate_pdd_unknown_policy_is_exit_2():
    res = _invoke(["simulate", "pdd", "--workload", "lmsys", "--policy", "magic"])
    assert res.exit_code == 2 and "magic" in res.output


def test_help_ends_with_examples():
    res = _invoke(["simulate", "pdd", "--help"])
    assert res.exit_code == 0 and "Examples:" in res.output


def test_simulate_pdd_on_a_fabric_reports_flows(tmp_path):
    summary = tmp_path / "s.json"
    res = _invoke(["simulate", "pdd", "--workload", "lmsys", "--lam", "5", "--sim-requests", "300",
                                    "--prefill-instances", "2", "--decode-instances", "2", "--fabric", "2x2x2",
                                    "--link-gbps", "25", "--path-policy", "reservation", "--json", str(summary)])
    assert res.exit_code == 0, res.output
    assert "KV flows" in res.output and "reservation" in res.output and "slowdown" in res.output
    data = json.loads(summary.read_text())
    assert data["network"]["path_policy"] == "reservation" and data["network"]["n_flows_done"] > 0


def test_simulate_pdd_bad_fabric_is_exit_2():
    res = _invoke(["simulate", "pdd", "--workload", "lmsys", "--fabric", "1x2x1"])
    assert res.exit_code == 2 and "host" in res.output
    res = _invoke(["simulate", "pdd", "--workload", "lmsys", "--fabric", "nonsense"])
    assert res.exit_code == 2 and "LEAVESxHOSTSxSPINES" in res.output


PS_ARGS = ["simulate", "pdd", "--workload", "lmsys", "--lam", "30", "--sim-requests", "600", "--max-model-len",
           "16384", "--decode-model", "processor_sharing", "--decode-instances", "4", "--decode-max-num-seqs", "100",
           "--policy", "sibyl"]


def _ps_args_summary(sibyl: SibylParams):
    """The API's summary for the spec ``PS_ARGS`` describes, with ``sibyl``."""
    pool = build_pool(load_catalog().get("h100"), "decode", 4, 16384, max_num_seqs=100)
    prefill = build_pool(load_catalog().get("h100"), "prefill", 4, 16384)
    transfer = KvTransferSpec.from_model(load_model("llama-3.1-70b"), 0.0, 50e9)
    spec = PddSpec(prefill, pool, transfer, "sibyl", "early", "processor_sharing", sibyl=sibyl)
    return simulate_pdd(spec, load_workload("lmsys"), 30.0, 600, 0).summary


def test_simulate_pdd_sibyl_options_reach_the_spec(tmp_path):
    """--sibyl-pressure / --sibyl-bucket-tokens / --sibyl-ema-alpha and --decode-max-num-seqs give
    the API's result for the same spec."""
    out = tmp_path / "s.json"
    res = _invoke([*PS_ARGS, "--sibyl-pressure", "tasks", "--sibyl-bucket-tokens", "128",
                                    "--sibyl-ema-alpha", "0.9", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "policy sibyl (pressure tasks)" in res.output
    want = _ps_args_summary(SibylParams(128, 0.9, pressure="tasks"))
    got = json.loads(out.read_text())
    assert got["tpot"]["p99_s"] == pytest.approx(want.tpot.p99_s, rel=1e-12)
    assert got["optimal_assignment_ratio"] == pytest.approx(want.optimal_assignment_ratio, rel=1e-12)
    tokens = _invoke([*PS_ARGS, "--json", str(out)])
    assert tokens.exit_code == 0 and "pressure tokens" in tokens.output
    assert json.loads(out.read_text())["optimal_assignment_ratio"] != got["optimal_assignment_ratio"]


def test_simulate_pdd_sibyl_option_without_sibyl_is_one_line_exit_2():
    res = _invoke(["simulate", "pdd", "--workload", "lmsys", "--sibyl-pressure", "tasks"])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1
    assert "--policy sibyl" in res.output


def test_processor_sharing_beyond_the_curve_names_the_flag():
    res = _invoke(["simulate", "pdd", "--workload", "lmsys", "--decode-model", "processor_sharing"])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1
    assert "--decode-max-num-seqs" in res.output and "105" in res.output


def test_ps_curve_reaches_the_decode_model(tmp_path):
    """A slower curve (half the H20 fit) gives a longer P99 TPOT, and equals the API's run."""
    out = tmp_path / "s.json"
    half = "-0.2115,22.383,-3.8765"
    res = _invoke([*PS_ARGS, "--ps-curve", half, "--json", str(out)])
    assert res.exit_code == 0, res.output
    slow = json.loads(out.read_text())["tpot"]["p99_s"]
    pool = build_pool(load_catalog().get("h100"), "decode", 4, 16384, max_num_seqs=100)
    prefill = build_pool(load_catalog().get("h100"), "prefill", 4, 16384)
    transfer = KvTransferSpec.from_model(load_model("llama-3.1-70b"), 0.0, 50e9)
    spec = PddSpec(prefill, pool, transfer, "sibyl", "early", "processor_sharing",
                   ps_curve=PsThroughputCurve(-0.2115, 22.383, -3.8765))
    assert slow == pytest.approx(simulate_pdd(spec, load_workload("lmsys"), 30.0, 600, 0).summary.tpot.p99_s,
                                 rel=1e-12)
    _invoke([*PS_ARGS, "--json", str(out)])
    assert slow > 1.5 * json.loads(out.read_text())["tpot"]["p99_s"]


def test_bad_ps_curve_is_one_line_exit_2():
    for args, words in ((["--ps-curve", "1,2"], "three numbers"), (["--ps-curve", "1,2,nan"], "finite")):
        res = _invoke([*PS_ARGS, *args])
        assert res.exit_code == 2 and words in res.output and len(res.output.strip().splitlines()) == 1
    res = _invoke(["simulate", "pdd", "--workload", "lmsys", "--ps-curve", "-0.4,40,0"])
    assert res.exit_code == 2 and "processor_sharing only" in res.output


def test_tensor_parallel_size_in_vllm_spelling_splits_the_kv_transfer(tmp_path):
    """``-tp``/``--tensor-parallel-size`` (and ``--tp``) give the same run; more ranks move the KV faster."""
    def transfer_s(*tp: str) -> float:
        out = tmp_path / "s.json"
        res = _invoke(["simulate", "pdd", "--workload", "lmsys", "--lam", "2", "--sim-requests", "200",
                                        "--model", "llama-3.1-8b", "--bandwidth-gb-per-s", "5", *tp,
                                        "--json", str(out)])
        assert res.exit_code == 0, res.output
        return json.loads(out.read_text())["transfer"]["mean_s"]

    assert transfer_s("-tp", "4") == transfer_s("--tensor-parallel-size", "4") == transfer_s("--tp", "4")
    assert transfer_s("-tp", "4") < transfer_s()


def test_sibyl_ablations_and_req_level_reach_the_spec(tmp_path):
    """--sibyl-ablate gives the API's result for the same ablated spec; --policy req_level runs."""
    out = tmp_path / "s.json"
    res = _invoke([*PS_ARGS, "--sibyl-pressure", "tasks", "--sibyl-ablate", "type3,prob",
                                    "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "policy sibyl (pressure tasks, without type3, prob)" in res.output
    want = _ps_args_summary(SibylParams(pressure="tasks", ablate=("type3", "prob")))
    assert json.loads(out.read_text())["tpot"]["p99_s"] == pytest.approx(want.tpot.p99_s, rel=1e-12)
    req_level = [a if a != "sibyl" else "req_level" for a in PS_ARGS]
    res = _invoke([*req_level, "--json", str(out)])
    assert res.exit_code == 0 and json.loads(out.read_text())["policy"] == "req_level"


@pytest.mark.parametrize(("value", "fragment"), [("type4", "unknown SIBYL ablation 'type4'"),
                                                 ("prob,prob", "names a term twice")])
def test_bad_sibyl_ablation_is_one_line_exit_2(value, fragment):
    res = _invoke([*PS_ARGS, "--sibyl-ablate", value])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1 and fragment in res.output
