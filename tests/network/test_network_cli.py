"""``fleetplan simulate network``: exit codes, the table and the per-flow CSV."""

from __future__ import annotations

import pandas as pd
import pytest
from click.testing import CliRunner

from fleetplan.cli.main import cli
from fleetplan.sim.network import KvTransferSetting, compare_policies


def run(*args: str):
    return CliRunner().invoke(cli, ["simulate", "network", *args], terminal_width=160)


def test_default_run_prints_both_policies(tmp_path):
    out = tmp_path / "flows.csv"
    res = run("--sim-flows", "300", "--csv", str(out))
    assert res.exit_code == 0, res.output
    assert "ecmp" in res.output and "reservation" in res.output and "2.276 GB" in res.output
    df = pd.read_csv(out)
    assert len(df) == 600 and set(df.policy) == {"ecmp", "reservation"}
    assert (df.slowdown >= 1 - 1e-12).all()
    assert df.loc[df.policy == "ecmp", "fct_ms"].mean() >= df.loc[df.policy == "reservation", "fct_ms"].mean()


@pytest.mark.parametrize(("args", "message"), [
    (("--path-policy", "random"), "unknown path policy 'random'"),
    (("--prefill-hosts", "16"), "no decode host"),
    (("--lam", "-1"), "must be a finite number > 0"),
])
def test_bad_input_exits_2_with_one_line(args, message):
    res = run(*args)
    assert res.exit_code == 2
    assert message in res.output


def test_help_ends_with_examples():
    res = run("--help")
    assert res.exit_code == 0 and "Examples:" in res.output


def test_compare_policies_is_paired_and_reproducible():
    setting = KvTransferSetting()
    a, first = compare_policies(setting, 200, ("ecmp", "reservation"), seed=3, n_replications=2)
    b, _ = compare_policies(setting, 200, ("reservation", "ecmp"), seed=3, n_replications=2)
    key = ["replication", "policy"]
    pd.testing.assert_frame_equal(a.sort_values(key).reset_index(drop=True), b.sort_values(key).reset_index(drop=True))
    assert (first["ecmp"].flows.start_at_s == first["reservation"].flows.start_at_s).all()
    assert list(a.columns)[:2] == key and len(a) == 4
