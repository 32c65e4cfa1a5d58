"""`fleetplan deploy` and `optimize --deploy / --current-fleet` end to end (click's runner): what is written,
the one-line errors (exit 2), and that a folder is written whole or not at all."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest

from fleetplan.deploy import export
from tests.cli.cli_check import one_line_error, run
from tests.deploy.conftest import SMALL, load

FILES = {"README.md", "deployment.json", "fleet.toml", "router/semantic-router.yaml"}


def _tree(path: Path) -> set[str]:
    return {p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file()}


def test_deploy_writes_the_folder(small_run, tmp_path):
    out = tmp_path / "fleet"
    result = run("deploy", str(small_run), "--out", str(out))
    assert result.exit_code == 0, result.stderr
    assert "candidate 1, verified" in result.output
    tree = _tree(out)
    assert FILES <= tree and {"engines/pool1.sh", "kubernetes/pool1.yaml", "kubernetes/pool2.yaml"} <= tree
    assert os.access(out / "engines" / "pool1.sh", os.X_OK)
    readme = (out / "README.md").read_text()
    doc = load(small_run)
    assert f"{doc['recommendation']['verification']['p99_ttft_ms_sim']:,.1f} ms" in readme
    assert "No served model" in readme and "Semantic Router" in readme
    assert [p.name for p in tmp_path.iterdir()] == ["fleet"]  # no temporary folder left beside it


def test_readme_recheck_command_runs(small_run, fp8_run, tmp_path):
    """The README's `fleetplan simulate` command runs as written (shortened to 2,000 requests x 2 replications)."""
    for i, path in enumerate((small_run, fp8_run)):
        out = tmp_path / f"f{i}"
        assert run("deploy", str(path), "--out", str(out)).exit_code == 0
        text = (out / "README.md").read_text()
        block = text.split("## Re-check the exported fleet")[1].split("```sh\n")[1].split("```")[0]
        argv = shlex.split(block.replace("\\\n", " "))
        assert argv[:2] == ["fleetplan", "simulate"]
        argv = [a if a != "fleet.toml" else str(out / "fleet.toml") for a in argv[2:]]
        argv[argv.index("--sim-requests") + 1] = "2000"
        argv[argv.index("--replications") + 1] = "2"
        result = run("simulate", *argv)
        assert result.exit_code == 0, result.stderr
        assert "2 replications: P99 TTFT" in result.output


def test_sglang_engine(small_run, tmp_path):
    out = tmp_path / "s"
    assert run("deploy", str(small_run), "--out", str(out), "--engine", "sglang").exit_code == 0
    assert "sglang.launch_server" in (out / "engines" / "pool1.sh").read_text()
    assert json.loads((out / "deployment.json").read_text())["engine"] == "sglang"


def test_an_existing_folder_is_refused_unless_force(small_run, tmp_path):
    out = tmp_path / "fleet"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    one_line_error(run("deploy", str(small_run), "--out", str(out)), "--out", "not empty", "--force")
    assert _tree(out) == {"keep.txt"}
    assert run("deploy", str(small_run), "--out", str(out), "--force").exit_code == 0
    assert "keep.txt" not in _tree(out) and FILES <= _tree(out)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run("deploy", str(small_run), "--out", str(empty)).exit_code == 0


def test_a_failed_write_leaves_nothing(small_run, tmp_path, monkeypatch):
    calls = {"n": 0}
    real = Path.write_text

    def flaky(self, *a, **kw):
        calls["n"] += 1
        if calls["n"] == 4:
            raise OSError("disk full")
        return real(self, *a, **kw)

    monkeypatch.setattr(Path, "write_text", flaky)
    with pytest.raises(OSError):
        export.write_deployment(load(small_run), tmp_path / "fleet")
    assert list(tmp_path.iterdir()) == []


def test_bad_input_is_one_line(small_run, unverified_run, tmp_path):
    out = str(tmp_path / "x")
    one_line_error(run("deploy", str(small_run), "--out", out, "--engine", "trtllm"), "trtllm", "vllm, sglang")
    one_line_error(run("deploy", str(small_run), "--out", out, "--candidate", "999"), "--candidate 999")
    one_line_error(run("deploy", str(unverified_run), "--out", out), "unverified recommendation", "--candidate",
                   "--no-verify")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"kind": "whatif"}))
    one_line_error(run("deploy", str(bad), "--out", out), "bad.json", "optimize")
    bad.write_text("{")
    one_line_error(run("deploy", str(bad), "--out", out), "bad.json")
    assert not (tmp_path / "x").exists()


def test_an_unverified_candidate_exports_and_says_so(unverified_run, tmp_path):
    out = tmp_path / "u"
    result = run("deploy", str(unverified_run), "--out", str(out), "--candidate", "1")
    assert result.exit_code == 0, result.stderr
    assert "NOT verified" in result.output and "NOT VERIFIED" in (out / "README.md").read_text()
    assert json.loads((out / "deployment.json").read_text())["counts"] == "analytic"


def test_optimize_deploy_and_current_fleet(small_run, tmp_path):
    """--deploy writes the same folder as `deploy`; --current-fleet reads an exported fleet.toml back."""
    out = tmp_path / "dep"
    owned = tmp_path / "owned.toml"
    owned.write_text('[[pool]]\nname = "old"\ngpu = "a10g"\ninstances = 3\nmax_context_tokens = 2048\n\n'
                     '[[pool]]\nname = "h"\ngpu = "h100"\ninstances = 1\nmax_context_tokens = 65536\n')
    path = tmp_path / "run.json"
    result = run("optimize", *SMALL, "--json", str(path), "--deploy", str(out), "--current-fleet", str(owned))
    assert result.exit_code == 0, result.stderr
    assert FILES <= _tree(out)
    doc = load(path)
    delta = doc["current_fleet"]
    needed = delta["recommended_gpus"]["H100-SXM"]
    assert delta["owned_gpus"] == {"A10G": 3, "H100-SXM": 1}
    assert delta["buy_gpus"] == ({"H100-SXM": needed - 1} if needed > 1 else {})
    assert delta["retire_gpus"] == {"A10G": 3}
    assert "Against the current fleet" in result.output and "retire 3x A10G" in result.output
    again = run("optimize", *SMALL, "--current-fleet", str(out / "fleet.toml"))  # the exported file, read back
    assert again.exit_code == 0, again.stderr
    assert "buy nothing; retire nothing" in again.output


def test_whatif_deploy_and_plan_from_the_exported_fleet(fp8_run, tmp_path):
    """whatif --deploy writes the first rate's fleet; whatif --plan --current-fleet starts from an exported
    fleet.toml, counting each instance's GPUs (TP 2 + TP 4 instances of the 70B FP8 plan)."""
    out = tmp_path / "w"
    result = run("whatif", "--workload", "lmsys", "--slo-ttft", "500", "--lam-range", "10:20:10", "--gpus", "h100",
                 "--topology", "two-pool", "--b-short", "4096", "--sim-requests", "2000", "--deploy", str(out), "-q")
    assert result.exit_code == 0, result.stderr
    assert FILES <= _tree(out) and "λ = 10 req/s" in (out / "README.md").read_text()
    exported = tmp_path / "e"
    assert run("deploy", str(fp8_run), "--out", str(exported)).exit_code == 0
    dep = load(fp8_run)["recommendation"]["deployment"]
    gpus = sum(t["instances"] * p["gpus_per_instance"] for t, p in zip(dep["fleet"]["pool"], dep["pools"], strict=True))
    plan = tmp_path / "plan.json"
    result = run("whatif", "--workload", "lmsys", "--slo-ttft", "500", "--plan", "--growth", "10%/month", "--months",
                 "3", "--start-lam", "10", "--gpus", "h100", "--topology", "two-pool", "--b-short", "4096",
                 "--sim-requests", "2000", "--current-fleet", str(exported / "fleet.toml"), "-q", "--json", str(plan))
    assert result.exit_code == 0, result.stderr
    assert load(plan)["initial_fleet"] == {"H100-SXM": gpus}


def test_a_prefill_decode_fleet_exports_as_a_dynamo_graph(pdd_run, tmp_path):
    out = tmp_path / "pdd"
    result = run("deploy", str(pdd_run), "--out", str(out))
    assert result.exit_code == 0, result.stderr
    assert _tree(out) == {"README.md", "deployment.json", "engines/prefill.sh", "engines/decode.sh",
                          "kubernetes/dynamo-graph.yaml"}
    assert "simulate pdd" in (out / "README.md").read_text()
