"""Runtime-feature options of ``fleetplan simulate``: one-line errors, and the figures they report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fleetplan.cli.feature_options import apply_feature_options
from fleetplan.cli.main import cli
from fleetplan.errors import ConfigError, UnknownNameError
from fleetplan.sim.features import GraphMode, SchedulerPolicy
from fleetplan.sim.fleet_toml import load_fleet_toml
from tests.cli.test_simulate_cli import small_fleet

WIDE = {"COLUMNS": "250"}
MTP = '{"method": "mtp", "num_speculative_tokens": 2, "acceptance_rate": 0.7, "draft_cost_fraction": 0.05}'


def fleet(tmp_path: Path) -> Path:
    return small_fleet(tmp_path)


def run(tmp_path: Path, *args: str):
    base = ["simulate", "--fleet", str(fleet(tmp_path)), "--workload", "lmsys", "--sim-requests", "400", "--lam", "10"]
    return CliRunner().invoke(cli, [*base, *args], env=WIDE)


@pytest.mark.parametrize(("args", "fragment"), [
    (["--cudagraph-mode", "full"], "unknown cudagraph mode 'full'"),
    (["--cudagraph-mode", "shrt=piecewise"], "unknown pool 'shrt'"),
    (["--cudagraph-mode", "piecewise"], "give --model or --launch-overhead-ms"),
    (["--cudagraph-mode", "piecewise", "--cudagraph-capture-sizes", "1,x"], "comma-separated positive integers"),
    (["--cudagraph-capture-sizes", "1,2,4"], "the mode is not set"),
    (["--speculative-config", "{bad"], "not valid JSON"),
    (["--speculative-config", '{"method": "mtp", "num_speculative_tokens": 2}'], "exactly one of"),
    (["--scheduler-policy", "fifo"], "unknown scheduler policy 'fifo'"),
    (["--prefix-cache-entries", "10"], "prefix caching is off"),
    (["--enable-prefix-caching", "maybe=yes"], "unknown pool 'maybe'"),
    (["--launch-overhead-ms", "fast"], "is not a number"),
    (["--scheduler-policy", "sglang", "--level", "request"], "need level iteration"),
    (["--launch-overhead-ms", "2"], "launch overhead 2 ms is given but no step reads it"),
    (["--cudagraph-mode", "none", "--launch-overhead-ms", "2"], "set the mode or drop --launch-overhead-ms"),
])
def test_bad_feature_values_exit_2_with_one_line(tmp_path, args, fragment):
    res = run(tmp_path, *args)
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and fragment in lines[0], res.output


def test_apply_feature_options_per_pool_values_win(tmp_path):
    spec = load_fleet_toml(fleet(tmp_path))
    out = apply_feature_options(spec, cudagraph_mode=("piecewise", "long=full_decode_only"),
                                cudagraph_capture_sizes=("short=1,2,4",), speculative_config=(f"long={MTP}",),
                                enable_prefix_caching=("short",), prefix_cache_entries=("short=64",),
                                scheduler_policy=("h2q_br",), launch_overhead_ms=("2.5",))
    short, long = (p.features for p in out.pools)
    assert short.cudagraph.mode is GraphMode.PIECEWISE and short.cudagraph.capture_sizes_tokens == (1, 2, 4)
    assert long.cudagraph.mode is GraphMode.FULL_DECODE_ONLY and long.cudagraph.capture_sizes_tokens is None
    assert short.speculative is None and long.speculative.acceptance == (0.7, 0.7)
    assert short.prefix_cache.enabled and short.prefix_cache.entries_per_instance == 64
    assert not long.prefix_cache.enabled
    assert short.policy.policy is long.policy.policy is SchedulerPolicy.H2Q_BR
    assert short.launch_overhead_s == long.launch_overhead_s == pytest.approx(2.5e-3)
    assert apply_feature_options(spec) == spec
    every = apply_feature_options(spec, enable_prefix_caching=("*",))
    assert all(p.features.prefix_cache.enabled for p in every.pools)
    with pytest.raises(UnknownNameError):
        apply_feature_options(spec, scheduler_policy=("tiny=spf",))
    with pytest.raises(ConfigError, match="unknown runtime-feature option"):
        apply_feature_options(spec, cudagraph=("none",))


def test_simulate_reports_padding_acceptance_and_hit_ratio(tmp_path):
    out_json = tmp_path / "sum.json"
    res = run(tmp_path, "--cudagraph-mode", "full_decode_only", "--cudagraph-capture-sizes", "1,2,4,8,16,32,64",
              "--launch-overhead-ms", "2", "--speculative-config", MTP, "--enable-prefix-caching",
              "--scheduler-policy", "long=sglang", "--json", str(out_json))
    assert res.exit_code == 0, res.output
    assert "runtime features" in res.output and "padding inflation" in res.output
    summary = json.loads(out_json.read_text())
    for pool in summary["pools"]:
        assert pool["padding_inflation"] > 0 and 0 < pool["graph_step_share"] <= 1
        assert 0.5 < pool["spec_acceptance_rate"] < 0.7  # (0.7 + 0.49) / 2 drafted positions, capped by length
        assert pool["spec_acceptance_by_position"][0] == pytest.approx(0.7, abs=0.05)
        assert pool["prefix_hit_ratio"] == 0.0  # plain requests share no prefix
    assert summary["overall"]["padding_inflation"] > 0


def test_features_off_leave_the_output_unchanged(tmp_path):
    plain, off = tmp_path / "plain.json", tmp_path / "off.json"
    first = run(tmp_path, "--json", str(plain))
    second = run(tmp_path, "--cudagraph-mode", "none", "--scheduler-policy", "vllm_v1", "--json", str(off))
    assert first.exit_code == second.exit_code == 0
    a, b = json.loads(plain.read_text()), json.loads(off.read_text())
    assert a == b and a["pools"][0]["padding_inflation"] is None
    assert "runtime features" not in first.output


def test_eager_mode_with_a_model_pays_the_launch_overhead_on_every_step(tmp_path):
    """Decode-heavy (10 % of tokens are prompt) Llama-3.1-8B on one H100: --cudagraph-mode none times every
    step eagerly (the predictor plus 2.27 ms of launches), full_decode_only takes them off graphed decode
    steps, and no flag keeps the predictor's kernel-only steps (the timing before the flag existed)."""
    fleet = tmp_path / "h100.toml"
    fleet.write_text('[[pool]]\nname = "p"\ngpu = "h100"\ninstances = 1\nmax_context_tokens = 65536\n')

    def tpot(*args: str) -> tuple[float, str]:
        out = tmp_path / "t.json"
        res = CliRunner().invoke(cli, ["simulate", "--fleet", str(fleet), "--workload", "lmsys", "--input-fraction",
                                       "0.1", "--lam", "4", "--sim-requests", "300", "--model", "llama-3.1-8b", *args,
                                       "--json", str(out)], env=WIDE)
        assert res.exit_code == 0, res.output
        return json.loads(out.read_text())["overall"]["tpot"]["mean_s"], res.output

    eager, printed = tpot("--cudagraph-mode", "none")
    assert "p eager (--cudagraph-mode none: every step pays 2.27 ms of kernel launches)" in printed
    graphs, printed = tpot("--cudagraph-mode", "full_decode_only")
    assert "full_decode_only graphs" in printed
    unset, printed = tpot()
    assert "p kernel-only" in printed
    assert eager > graphs + 1e-3 and graphs >= unset
