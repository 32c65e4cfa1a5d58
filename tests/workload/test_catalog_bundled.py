"""Workload resolution and the bundled cdfs/: each reproduces the figures it was built from."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.paths import cdfs_dir
from fleetplan.workload import SPLIT_THRESHOLDS_TOKENS, list_workloads, load_workload, read_trace

BUNDLED = ("agent_heavy", "azure_code", "azure_conv", "lmsys")


def test_bundled_names():
    assert list_workloads() == BUNDLED


@pytest.mark.parametrize("name", ["lmsys", "lmsys.json"])
def test_bundled_name_resolves(name):
    w = load_workload(name)
    assert w.name == "lmsys" and w.input_fraction == 0.8 and w.input is None


def test_unknown_name_lists_bundled():
    with pytest.raises(
        UnknownNameError, match="valid workload names are agent_heavy, azure_code, azure_conv"
    ):
        load_workload("sharegpt")


def test_path_wins_over_bundled_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lmsys.json").write_text("[[10, 0.5], [20, 1.0]]")
    assert load_workload("lmsys.json").total.max_tokens == 20


def test_input_fraction_resolution(tmp_path):
    assert load_workload("lmsys", input_fraction=0.6).input_fraction == 0.6
    p = tmp_path / "own.json"
    p.write_text('{"cdf": [[10, 0.5], [20, 1.0]], "input_fraction": 0.3}')
    assert load_workload(p).input_fraction == 0.3
    assert load_workload(p, input_fraction=0.5).input_fraction == 0.5
    with pytest.raises(ConfigError, match="has no effect"):
        load_workload("azure_conv", input_fraction=0.5)
    with pytest.raises(ConfigError):
        load_workload("lmsys", input_fraction=1.0)


def test_trace_path_loads_with_rate_and_trace(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,10\n2,200,20\n4,300,30\n")
    w = load_workload(p)
    assert w.trace is not None and w.trace.n_requests == 3
    assert w.arrival_rate_per_s == pytest.approx(0.5)
    assert w.has_split and w.total.max_tokens == 330


@pytest.mark.parametrize("name", BUNDLED)
def test_every_bundled_file_records_provenance(name):
    raw = json.loads((cdfs_dir() / f"{name}.json").read_text())
    for key in ("source", "license", "generated_by", "provenance"):
        assert raw[key], key
    w = load_workload(name)
    for t in SPLIT_THRESHOLDS_TOKENS:  # thresholds within range are breakpoints
        if t <= w.total.max_tokens and t > w.total.tokens[0]:
            assert t in w.total.tokens, (name, t)


def test_lmsys_reproduces_published_figures():
    w = load_workload("lmsys")
    assert w.total.cdf(4096) == pytest.approx(0.984, abs=0.005)
    assert w.total.max_tokens == 65536
    # inference-fleet-sim Table 1 short-pool shares alpha_s = F(B_short)
    for t, f in {512: 0.638, 1024: 0.831, 2048: 0.948, 8192: 0.997, 12288: 0.999}.items():
        assert w.total.cdf(t) == pytest.approx(f, abs=0.01), t


def test_agent_heavy_reproduces_published_figures():
    w = load_workload("agent_heavy")
    assert w.total.prob(4096) == pytest.approx(0.46, abs=0.02)
    assert w.total.max_tokens >= 300_000
    assert w.total.prob(65536) > 0.005  # a real tail, not an empty last bin


@pytest.mark.parametrize("kind", ["conv", "code"])
def test_azure_cdfs_match_their_trace(shared_dir, kind):
    trace = read_trace(shared_dir / "traces" / "azure2023" / f"AzureLLMInferenceTrace_{kind}.csv")
    w = load_workload(f"azure_{kind}")
    assert w.total.mean() == pytest.approx(trace.total_tokens.mean(), rel=0.02)
    assert w.arrival_rate_per_s == pytest.approx(trace.arrival_rate_per_s, rel=1e-9)
    assert w.license == "CC-BY-4.0"
    assert w.generated_by == (
        f"fleetplan workloads fit ../shared/traces/azure2023/"
        f"AzureLLMInferenceTrace_{kind}.csv --out cdfs/azure_{kind}.json"
    )
    prompt, output, weight = w.quadrature(8192)
    assert weight @ prompt == pytest.approx(trace.prompt_tokens.mean(), rel=0.02)
    assert weight @ output == pytest.approx(trace.output_tokens.mean(), rel=0.05)
    assert np.all(prompt >= 1) and np.all(output >= 1)


def test_extensionless_files_are_sniffed(tmp_path):
    cdf = tmp_path / "cdf_noext"
    cdf.write_text('{"cdf": [[10, 0.5], [20, 1.0]]}')
    assert load_workload(cdf).trace is None
    trace = tmp_path / "trace_noext"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,1,1\n1,2,2\n")
    assert load_workload(trace).trace.n_requests == 2
    jsonl = tmp_path / "mooncake.log"
    jsonl.write_text(
        '{"timestamp": 0, "input_length": 5, "output_length": 2}\n'
        '{"timestamp": 2000, "input_length": 6, "output_length": 3}\n'
    )
    w = load_workload(jsonl)
    assert w.arrival_rate_per_s == pytest.approx(0.5)
