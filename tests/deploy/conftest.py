"""Runs to export: small verified plans made once per session through the CLI (seconds each).

* ``small_run``: the README command's shape at λ = 20 (two H100 pools, compress-and-route, the paper's
  calibrated constants, no served model);
* ``fp8_run``: Llama-3.1-70B with FP8 weights and KV cache on H100, two length pools (the swept
  placements give the pools different tensor-parallel sizes);
* ``pdd_run``: a prefill-decode plan (H100 prefill and decode roles, λ = 20);
* ``unverified_run``: the small plan with ``--no-verify``;
* ``dp_run``: DeepSeek-V3 (its FP8 checkpoint) on H100 at λ = 5: one instance of ``tp1 dp16 ep16`` over two
  8-GPU nodes (data-parallel attention with expert parallelism), verified;
* ``mtp_run``: DeepSeek-V3 on H200 at λ = 20 with ``--mtp`` (MTP on and off swept, acceptance 0.85) and a 35 ms
  TPOT: the recommendation runs MTP (``H200 tp1 dp8 mtp1``), verified; its stdout is saved beside it
  (``mtp_run.with_suffix(".out")``) for the recommendation line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.cli_check import run

DATA = Path(__file__).parent / "data"

SMALL = ("--workload", "lmsys", "--slo-ttft", "500", "--lam", "20", "--gpus", "h100", "--topology", "two-pool",
         "--b-short", "4096", "--router", "compress", "--sim-requests", "3000", "--replications", "3", "--no-headroom",
         "-q")
FP8 = ("--workload", "lmsys", "--slo-ttft", "2000", "--lam", "5", "--model", "llama-3.1-70b", "--weight-dtype", "fp8",
       "--kv-cache-dtype", "fp8", "--gpus", "h100", "--topology", "two-pool", "--b-short", "8192", "--router", "length",
       "--sim-requests", "2000", "--replications", "3", "--no-headroom", "-q")


def _optimize(tmp: Path, name: str, *args: str) -> Path:
    path = tmp / f"{name}.json"
    result = run("optimize", *args, "--json", str(path))
    assert result.exit_code == 0, result.output + result.stderr
    return path


@pytest.fixture(scope="session")
def small_run(tmp_path_factory) -> Path:
    return _optimize(tmp_path_factory.mktemp("runs"), "small", *SMALL)


@pytest.fixture(scope="session")
def fp8_run(tmp_path_factory) -> Path:
    return _optimize(tmp_path_factory.mktemp("runs"), "fp8", *FP8)


PDD = ("--workload", "lmsys", "--slo-ttft", "1000", "--slo-tpot", "100", "--topology", "pdd", "--lam", "20", "--gpus",
       "h100", "--sim-requests", "2000", "--replications", "3", "--no-headroom", "-q")


@pytest.fixture(scope="session")
def pdd_run(tmp_path_factory) -> Path:
    return _optimize(tmp_path_factory.mktemp("runs"), "pdd", *PDD)


DP = ("--workload", "lmsys", "--slo-ttft", "2000", "--lam", "5", "--model", "deepseek-v3", "--gpus", "h100",
      "--topology", "homo", "--sim-requests", "2000", "--replications", "3", "--no-headroom", "-q")


@pytest.fixture(scope="session")
def dp_run(tmp_path_factory) -> Path:
    return _optimize(tmp_path_factory.mktemp("runs"), "dp", *DP)


MTP = ("--workload", "lmsys", "--slo-ttft", "2000", "--slo-tpot", "35", "--lam", "20", "--model", "deepseek-v3",
       "--gpus", "h200", "--topology", "homo", "--timing-source", "roofline", "--mtp", "--sim-requests", "2000",
       "--replications", "3", "--no-headroom")


@pytest.fixture(scope="session")
def mtp_run(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("runs") / "mtp.json"
    result = run("optimize", *MTP, "--json", str(path))
    assert result.exit_code == 0, result.output + result.stderr
    path.with_suffix(".out").write_text(result.output, encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def unverified_run(tmp_path_factory) -> Path:
    return _optimize(tmp_path_factory.mktemp("runs"), "unverified", *SMALL, "--no-verify")


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def multi_node_doc(doc: dict) -> dict:
    """``doc`` with its recommendation's largest pool served at TP 8 x PP 2 (16 GPUs: two 8-GPU nodes), a
    parallelism optimize does not sweep but a fleet file may give: exercises the multi-node writers."""
    out = json.loads(json.dumps(doc))
    dep = out["recommendation"]["deployment"]
    dep["pools"][-1]["gpus_per_instance"] = 16
    dep["pools"][-1]["parallelism"] = {"tensor_parallel_size": 8, "pipeline_parallel_size": 2}
    dep["fleet"]["pool"][-1].update(tensor_parallel_size=8, pipeline_parallel_size=2)
    return out


def one_node_dp_doc(doc: dict) -> dict:
    """The DP run ``doc`` with its pool at ``tp1 dp8`` on one 8-GPU node (the single-node DP writers)."""
    out = json.loads(json.dumps(doc))
    dep = out["recommendation"]["deployment"]
    for info, table in zip(dep["pools"], dep["fleet"]["pool"], strict=True):
        info["gpus_per_instance"] = 8
        info["parallelism"]["data_parallel_size"] = 8
        table["data_parallel_size"] = 8
    return out


def mtp_doc(doc: dict, k: int = 2) -> dict:
    """The DP run ``doc`` (DeepSeek-V3, two H100 nodes) with its pools running ``k`` MTP drafts, as ``optimize
    --mtp`` writes an "MTP on" pool (``[pool.features] speculative_config``): the multi-node MTP writers."""
    out = json.loads(json.dumps(doc))
    spec = json.dumps({"method": "mtp", "num_speculative_tokens": k, "acceptance_rates": [0.85] * k})
    for table in out["recommendation"]["deployment"]["fleet"]["pool"]:
        table.setdefault("features", {})["speculative_config"] = spec
    return out


WHICH = ["small", "fp8", "multi_node", "dp_two_nodes", "dp_one_node", "mtp_dp_two_nodes"]


def recommended_doc(which: str, small_run: Path, fp8_run: Path, dp_run: Path) -> dict:
    """The run document of ``which`` (``WHICH``): the small plan, the FP8 plan, the small plan made multi-node,
    the DP plan (two nodes), the DP plan on one node, or the DP plan with two MTP drafts."""
    if which == "multi_node":
        return multi_node_doc(load(small_run))
    if which == "mtp_dp_two_nodes":
        return mtp_doc(load(dp_run))
    if which.startswith("dp"):
        return load(dp_run) if which == "dp_two_nodes" else one_node_dp_doc(load(dp_run))
    return load(small_run if which == "small" else fp8_run)
