"""``--scheduler-config``: scheduler-policy parameters from the command line (``simulate``,
``simulate-sessions``), the same as the fleet TOML's ``[pool.features]`` keys and the API's
``PolicyConfig`` fields, bit for bit; bad ones are one line, exit 2."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fleetplan.cli.feature_options import apply_feature_options, policy_label
from fleetplan.cli.main import cli
from fleetplan.errors import ConfigError, DataFormatError
from fleetplan.sim.engine import simulate
from fleetplan.sim.features import PolicyConfig, RuntimeFeatures, SchedulerPolicy
from fleetplan.sim.features.compile import compile_features
from fleetplan.sim.fleet_toml import load_fleet_toml
from fleetplan.workload import load_workload

WIDE = {"COLUMNS": "250"}
MLFQ_FAST = '{"mlfq_quantum0_ms": 5, "mlfq_levels": 3}'
SESSIONS = ("--sessions", "frontier_agentic", "--mix", "heavy_tail=0.3,short=0.7", "--lam", "0.5",
            "--sim-sessions", "40", "--tool-delay-s", "1")


def one_pool(tmp_path: Path, features: str = "", name: str = "fleet.toml") -> Path:
    """One A100 instance up to 65,536 tokens: LMSYS at 12 req/s queues, so the batch order matters."""
    path = tmp_path / name
    path.write_text(f'[[pool]]\nname = "p"\ngpu = "a100"\ninstances = 1\nmax_context_tokens = 65536\n{features}')
    return path


def simulate_json(tmp_path: Path, fleet: Path, *args: str) -> dict:
    out = tmp_path / "out.json"
    res = CliRunner().invoke(cli, ["simulate", "--fleet", str(fleet), "--workload", "lmsys", "--sim-requests", "400",
                                   "--lam", "12", *args, "--json", str(out)], env=WIDE)
    assert res.exit_code == 0, res.output
    return json.loads(out.read_text())


def test_mlfq_parameters_reach_the_kernel_and_equal_the_toml_and_api_paths(tmp_path):
    fleet = one_pool(tmp_path)
    spec = apply_feature_options(load_fleet_toml(fleet), scheduler_policy=("mlfq",), scheduler_config=(MLFQ_FAST,))
    assert compile_features(spec, 0).policy_param[0].tolist() == [0.005, 3.0, 0.0, 0.0]
    cli_doc = simulate_json(tmp_path, fleet, "--scheduler-policy", "mlfq", "--scheduler-config", MLFQ_FAST)
    default_doc = simulate_json(tmp_path, fleet, "--scheduler-policy", "mlfq")
    toml = one_pool(tmp_path, '[pool.features]\nscheduler_policy = "mlfq"\nmlfq_quantum0_ms = 5\nmlfq_levels = 3\n',
                    "mlfq.toml")
    toml_doc = simulate_json(tmp_path, toml)
    assert cli_doc == toml_doc  # bit for bit: every figure of the summary
    assert cli_doc["overall"]["ttft"] != default_doc["overall"]["ttft"]  # the quantum changes the order
    pool = load_fleet_toml(fleet).pools[0]
    api_pool = dataclasses.replace(pool, features=RuntimeFeatures(
        policy=PolicyConfig("mlfq", mlfq_quantum0_s=0.005, mlfq_levels=3)))
    api = simulate(dataclasses.replace(spec, pools=(api_pool,)), load_workload("lmsys"), 12.0, 400)
    assert api.summary.overall.ttft.p99_s == cli_doc["overall"]["ttft"]["p99_s"]
    assert api.summary.overall.tpot.mean_s == cli_doc["overall"]["tpot"]["mean_s"]


def test_h2q_parameters_on_sessions_change_the_run_and_equal_the_toml(tmp_path):
    def sessions(fleet: Path, *args: str) -> tuple[dict, str]:
        out = tmp_path / "s.json"
        res = CliRunner().invoke(cli, ["simulate", "sessions", "--fleet", str(fleet), *SESSIONS, *args,
                                       "--json", str(out)], env=WIDE)
        assert res.exit_code == 0, res.output
        return json.loads(out.read_text()), res.output

    config = '{"h2q_long_round_tokens": 1024, "h2q_short_streak": 2}'
    fleet = one_pool(tmp_path)
    cli_doc, printed = sessions(fleet, "--scheduler-policy", "h2q_br", "--scheduler-config", config)
    assert "h2q_br (L 1024, C 16384, B 2)" in printed
    default_doc, printed = sessions(fleet, "--scheduler-policy", "h2q_br")
    assert "h2q_br (L 8192, C 16384, B 8)" in printed
    toml = one_pool(tmp_path, '[pool.features]\nscheduler_policy = "h2q_br"\nh2q_long_round_tokens = 1024\n'
                    "h2q_short_streak = 2\n", "h2q.toml")
    assert cli_doc == sessions(toml)[0]
    assert cli_doc["sessions"] != default_doc["sessions"]


def test_cli_parameters_merge_with_the_toml_ones(tmp_path):
    toml = one_pool(tmp_path, '[pool.features]\nscheduler_policy = "mlfq"\nmlfq_quantum0_ms = 20\n')
    spec = load_fleet_toml(toml)
    merged = apply_feature_options(spec, scheduler_config=('p={"mlfq_levels": 4}',)).pools[0].features.policy
    assert merged == PolicyConfig("mlfq", mlfq_quantum0_s=0.02, mlfq_levels=4)
    assert policy_label(merged) == "mlfq (q0 20 ms, 4 levels)"
    # another policy from the command line starts from its own defaults
    other = apply_feature_options(spec, scheduler_policy=("spf",)).pools[0].features.policy
    assert other == PolicyConfig(SchedulerPolicy.SPF)


BAD = [
    (("--scheduler-policy", "spf", "--scheduler-config", '{"mlfq_levels": 4}'),
     "mlfq_levels is a parameter of scheduler policy mlfq, not of spf; set the policy to mlfq or drop mlfq_levels"),
    (("--scheduler-config", '{"h2q_short_streak": 4}'), "not of vllm_v1"),
    (("--scheduler-policy", "mlfq", "--scheduler-config", '{"quantum_ms": 5}'),
     "unknown scheduler parameter 'quantum_ms'; valid are mlfq_quantum0_ms (mlfq), mlfq_levels (mlfq)"),
    (("--scheduler-policy", "mlfq", "--scheduler-config", '{"mlfq_quantum0_ms": -5}'),
     "mlfq_quantum0_ms = -5 must be a number of milliseconds > 0"),
    (("--scheduler-policy", "mlfq", "--scheduler-config", '{"mlfq_quantum0_ms": "fast"}'), "number of milliseconds"),
    (("--scheduler-policy", "mlfq", "--scheduler-config", '{"mlfq_levels": 2.5}'),
     "mlfq_levels = 2.5 must be an integer >= 1"),
    (("--scheduler-policy", "h2q_br", "--scheduler-config", '{"h2q_short_streak": 0}'), "must be an integer >= 1"),
    (("--scheduler-policy", "h2q_br", "--scheduler-config", '{"h2q_long_round_tokens": true}'), "an integer >= 1"),
    (("--scheduler-policy", "mlfq", "--scheduler-config", "{bad"), "is not valid JSON"),
    (("--scheduler-policy", "mlfq", "--scheduler-config", "[1, 2]"), "must be a JSON object of parameters"),
    (("--scheduler-config", 'nope={"mlfq_levels": 4}'), "unknown pool 'nope'"),
]


@pytest.mark.parametrize(("args", "fragment"), BAD)
def test_bad_scheduler_config_is_one_line_exit_2(tmp_path, args, fragment):
    res = CliRunner().invoke(cli, ["simulate", "--fleet", str(one_pool(tmp_path)), "--workload", "lmsys",
                                   "--sim-requests", "50", *args], env=WIDE)
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and fragment in lines[0], res.output
    if "pool" not in fragment:
        assert "--scheduler-config for pool 'p'" in lines[0]


def test_sessions_refuse_a_parameter_of_another_policy(tmp_path):
    res = CliRunner().invoke(cli, ["simulate", "sessions", "--gpu", "a100", "--instances", "1", *SESSIONS,
                                   "--scheduler-policy", "h2q_br", "--scheduler-config", '{"mlfq_levels": 4}'],
                             env=WIDE)
    assert res.exit_code == 2
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and "mlfq_levels is a parameter of scheduler policy mlfq, not of h2q_br" in lines[0]


def test_toml_and_api_refuse_parameters_of_another_policy(tmp_path):
    toml = one_pool(tmp_path, '[pool.features]\nscheduler_policy = "spf"\nmlfq_levels = 4\n')
    with pytest.raises(DataFormatError, match="mlfq_levels is a parameter of scheduler policy mlfq, not of spf"):
        load_fleet_toml(toml)
    with pytest.raises(ConfigError, match="scheduler policy spf does not read mlfq_levels = 4"):
        PolicyConfig("spf", mlfq_levels=4)
    with pytest.raises(ConfigError, match="does not read mlfq_quantum0_ms = 20"):
        PolicyConfig("h2q_br", mlfq_quantum0_s=0.02)
