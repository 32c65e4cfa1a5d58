"""A prefill-decode plan exported as NVIDIA Dynamo's DynamoGraphDeployment: the graph validates (Dynamo's
service fields, transcribed in ``data/dynamo_dgd_v1alpha1.schema.json``; each worker's pod against Kubernetes'
own schema), the workers' arguments parse against vLLM's flag list, and the exported roles re-simulated
with the PDD simulator reproduce verification's P99 TTFT within the two runs' intervals."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from fleetplan.deploy import deployment_files
from fleetplan.hardware import load_catalog
from fleetplan.metrics import student_t_interval
from fleetplan.sim import build_pool
from fleetplan.sim.pdd import AssignPolicy, Binding, KvTransferSpec, PddSpec, simulate_pdd
from fleetplan.units import s_to_ms
from fleetplan.workload import load_workload
from tests.cli.cli_check import one_line_error, run
from tests.deploy.conftest import DATA, load
from tests.deploy.test_engine_flags import FLAGS

yaml = pytest.importorskip("yaml", reason="dev extra: pip install -e '.[dev]'")
kv = pytest.importorskip("kubernetes_validate", reason="dev extra: pip install -e '.[dev]'")
jsonschema = pytest.importorskip("jsonschema")
VALIDATOR = jsonschema.Draft202012Validator(json.loads((DATA / "dynamo_dgd_v1alpha1.schema.json").read_text()))
DYNAMO_FLAGS = {**FLAGS["vllm"], "--is-prefill-worker": False}  # Dynamo's example disagg.yaml (commit in the schema)


def _graph(doc: dict) -> dict:
    _, files = deployment_files(doc)
    assert set(files) == {"README.md", "deployment.json", "engines/prefill.sh", "engines/decode.sh",
                          "kubernetes/dynamo-graph.yaml"}
    (graph,) = [d for d in yaml.safe_load_all(files["kubernetes/dynamo-graph.yaml"]) if d]
    return graph


def _pod_errors(service: dict) -> list[str]:
    extra = dict(service["extraPodSpec"])
    main = {"name": "main", **extra.pop("mainContainer")}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {**extra, "containers": [main]}}
    try:
        kv.validate(pod, "1.37", strict=True)
    except kv.ValidationError as exc:
        return [str(exc)]
    return []


def _arg_problems(args: list[str]) -> list[str]:
    problems, i = [], 0
    while i < len(args):
        flag = args[i]
        if flag not in DYNAMO_FLAGS:
            problems.append(f"unknown {flag!r}")
            i += 1
        elif DYNAMO_FLAGS[flag]:
            i += 2
        else:
            i += 1
    return problems


def test_dynamo_graph_validates_and_carries_the_verified_roles(pdd_run):
    doc = load(pdd_run)
    rec = doc["recommendation"]
    graph = _graph(doc)
    errors = [e.message for e in VALIDATOR.iter_errors(graph)]
    services = graph["spec"]["services"]
    errors += [e for s in services.values() for e in _pod_errors(s)]
    assert errors == [], errors
    counts = dict(zip(rec["roles"], rec["verification"]["verified_counts"], strict=True))
    pools = {t["name"]: t for t in rec["deployment"]["fleet"]["pool"]}
    for role in ("prefill", "decode"):
        s = services[f"Vllm{role.capitalize()}Worker"]
        assert (s["componentType"], s["subComponentType"], s["replicas"]) == ("worker", role, counts[role])
        args = s["extraPodSpec"]["mainContainer"]["args"]
        assert _arg_problems(args) == []
        assert args[args.index("--max-num-seqs") + 1] == str(pools[role]["max_num_seqs"])
        assert ("--is-prefill-worker" in args) == (role == "prefill")
    assert pools["decode"]["max_num_seqs"] == rec["decode_batch"]
    assert services["Frontend"]["componentType"] == "frontend"


def test_the_dynamo_schema_catches_mistakes(pdd_run):
    graph = _graph(load(pdd_run))
    graph["spec"]["services"]["VllmDecodeWorker"]["replica"] = 2
    assert list(VALIDATOR.iter_errors(graph))


def test_pdd_needs_the_vllm_engine(pdd_run, tmp_path):
    one_line_error(run("deploy", str(pdd_run), "--out", str(tmp_path / "x"), "--engine", "sglang"), "Dynamo",
                   "--engine")


def test_exported_roles_reproduce_verification(pdd_run):
    """Rebuilt from the deployment block alone (catalog GPU, counts, limits, KV blocks, transfer, assignment),
    the PDD fleet simulated with new seeds agrees with verification at the verified (= analytic) counts."""
    doc = load(pdd_run)
    rec = doc["recommendation"]
    v = rec["verification"]
    if v["verified_counts"] != v["analytic_counts"]:
        pytest.skip("verification moved the counts: its mean at the verified counts is not in the run")
    dep = rec["deployment"]
    d = dep["disaggregated"]
    catalog = load_catalog()
    gpus = {p["name"]: p["gpu"] for p in dep["pools"]}
    roles = {}
    for t in dep["fleet"]["pool"]:
        roles[t["name"]] = build_pool(catalog.get(gpus[t["name"]]), t["name"], t["instances"], t["max_context_tokens"],
                                      max_num_seqs=t["max_num_seqs"], kv_blocks=t["kv_blocks"],
                                      max_num_batched_tokens=t["max_num_batched_tokens"])
    bandwidth = math.inf if d["kv_bandwidth_gb_per_s"] is None else d["kv_bandwidth_gb_per_s"] * 1e9
    spec = PddSpec(roles["prefill"], roles["decode"], KvTransferSpec(d["kv_latency_ms"] / 1e3, bandwidth,
                                                                     d["kv_bytes_per_token"]),
                   policy=AssignPolicy(d["policy"]), binding=Binding(d["binding"]))
    wl = load_workload(doc["inputs"]["workload"], doc["inputs"]["input_fraction"])
    p99 = [s_to_ms(simulate_pdd(spec, wl, doc["inputs"]["lam_per_s"], 2000, seed=1000 + i).summary.ttft.p99_s)
           for i in range(3)]
    mean, _, hi = student_t_interval(np.array(p99))
    ver_mean, ver_hi = v["at_analytic"]["p99_ttft_ms_sim"], v["p99_ttft_ms_sim"]
    tol = math.hypot(hi - mean, ver_hi - ver_mean)
    assert abs(mean - ver_mean) <= tol, (mean, ver_mean, tol)
    assert hi <= doc["inputs"]["slo_ttft_ms"]


def test_readme_recheck_command_reproduces_verification(pdd_run):
    """The README's `fleetplan simulate pdd` command (the prefill role's verified token budget, each role's
    `max_num_seqs`, transfer, assignment, verification's replications) runs and its P99 TTFT agrees with
    verification within the two intervals; it holds the budget the fleet file does."""
    import re
    import shlex

    doc = load(pdd_run)
    rec = doc["recommendation"]
    v = rec["verification"]
    readme = deployment_files(doc)[1]["README.md"]
    command = readme.split("## Re-check the exported fleet")[1].split("```sh\n")[1].split("\n```")[0]
    argv = shlex.split(command.replace("\\\n", " "))
    assert argv[:3] == ["fleetplan", "simulate", "pdd"]
    budget = next(t["max_num_batched_tokens"] for t in rec["deployment"]["fleet"]["pool"] if t["name"] == "prefill")
    assert argv[argv.index("--prefill-max-num-batched-tokens") + 1] == str(budget)
    reps = doc["verification"]["run_length"]["replications"]
    assert argv[argv.index("--replications") + 1] == str(reps)
    argv[argv.index("--sim-requests") + 1] = "2000"  # verification's run length in this fixture
    result = run(*argv[1:])
    assert result.exit_code == 0, result.output + result.stderr
    m = re.search(rf"{reps} replications: P99 TTFT ([\d,.]+) ms \(95% upper ([\d,.]+) ms\)", result.output)
    assert m, result.output
    mean, hi = (float(x.replace(",", "")) for x in m.groups())
    if v["verified_counts"] != v["analytic_counts"]:
        pytest.skip("verification moved the counts: its mean at the verified counts is not in the run")
    ver_mean, ver_hi = v["at_analytic"]["p99_ttft_ms_sim"], v["p99_ttft_ms_sim"]
    tol = math.hypot(hi - mean, ver_hi - ver_mean)
    assert abs(mean - ver_mean) <= tol, (mean, ver_mean, tol)


def test_simulate_pdd_prefill_budget_is_the_prefill_roles():
    """A smaller prefill budget (more steps per long prompt) never shortens the prefill time."""
    import re

    def p99_prefill(budget: str) -> float:
        result = run("simulate", "pdd", "--workload", "lmsys", "--lam", "10", "--sim-requests", "1500",
                     "--prefill-max-num-batched-tokens", budget)
        assert result.exit_code == 0, result.output + result.stderr
        row = next(ln for ln in result.output.splitlines() if re.search(r"\bprefill\b", ln) and "│" in ln)
        return float(row.split("│")[-2].strip().replace(",", ""))

    assert p99_prefill("512") > p99_prefill("8192")
