"""Every Kubernetes manifest `fleetplan deploy` writes validates offline, and says what was verified.

Core objects (Deployment, Service, and the LeaderWorkerSet's pod templates as v1 PodTemplates) against the
Kubernetes 1.37 schemas of ``kubernetes-validate`` in strict mode (unknown fields are errors); the
LeaderWorkerSet against its CRD's openAPIV3Schema (``data/lws_v1_openapi.json``, from kubernetes-sigs/lws
at the commit it names) with ``jsonschema``, every object closed to unknown fields as the API server's
strict field validation does.
"""

from __future__ import annotations

import json

import pytest

from fleetplan.deploy import Engine, deployment_files
from fleetplan.deploy.gpus import gpu_node
from tests.deploy.conftest import DATA, WHICH, load, multi_node_doc, recommended_doc

yaml = pytest.importorskip("yaml", reason="dev extra: pip install -e '.[dev]'")

kv = pytest.importorskip("kubernetes_validate", reason="dev extra: pip install -e '.[dev]'")
jsonschema = pytest.importorskip("jsonschema")
K8S_VERSION = "1.37"


def _closed(schema):
    """``schema`` with every object that lists its properties closed to others (strict field validation)."""
    if isinstance(schema, dict):
        out = {k: _closed(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out and "x-kubernetes-preserve-unknown-fields" \
                not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_closed(x) for x in schema]
    return schema


LWS = json.loads((DATA / "lws_v1_openapi.json").read_text())
LWS_VALIDATOR = jsonschema.Draft7Validator(_closed(LWS["schema"]))


def _pod_template(template: dict) -> dict:
    return {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}, "template": template}


def schema_errors(doc: dict) -> list[str]:
    if doc["kind"] == "LeaderWorkerSet":
        errors = [e.message for e in LWS_VALIDATOR.iter_errors(doc)]
        lwt = doc["spec"]["leaderWorkerTemplate"]
        for t in (lwt["leaderTemplate"], lwt["workerTemplate"]):
            errors += schema_errors(_pod_template(t))
        return errors
    try:
        kv.validate(doc, K8S_VERSION, strict=True)
    except (kv.ValidationError, kv.SchemaNotFoundError) as exc:
        return [str(exc)]
    return []


def manifests(files: dict[str, str]) -> list[dict]:
    return [d for rel, text in files.items() if rel.startswith("kubernetes/") for d in yaml.safe_load_all(text) if d]


@pytest.mark.parametrize("engine", list(Engine))
@pytest.mark.parametrize("which", WHICH)
def test_zero_schema_errors(engine, which, small_run, fp8_run, dp_run):
    doc = recommended_doc(which, small_run, fp8_run, dp_run)
    _, files = deployment_files(doc, engine=engine)
    docs = manifests(files)
    kinds = sorted(d["kind"] for d in docs)
    pools = len(doc["recommendation"]["deployment"]["pools"])
    assert kinds.count("Service") == pools
    assert kinds.count("Deployment") + kinds.count("LeaderWorkerSet") == pools
    if which == "multi_node":
        assert "LeaderWorkerSet" in kinds
    errors = [e for d in docs for e in schema_errors(d)]
    assert errors == [], errors


def test_the_validators_catch_mistakes(small_run):
    _, files = deployment_files(load(small_run))
    deployment = next(d for d in manifests(files) if d["kind"] == "Deployment")
    bad = json.loads(json.dumps(deployment))
    bad["spec"]["template"]["spec"]["containers"][0]["resource"] = {}  # misspelt field
    assert schema_errors(bad)
    _, files = deployment_files(multi_node_doc(load(small_run)))
    lws = next(d for d in manifests(files) if d["kind"] == "LeaderWorkerSet")
    bad = json.loads(json.dumps(lws))
    bad["spec"]["leaderWorkerTemplate"]["sizes"] = 2
    assert schema_errors(bad)
    bad = json.loads(json.dumps(lws))
    bad["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "Always"  # not in the CRD's enum
    assert schema_errors(bad)


def test_manifests_carry_the_verified_fleet(fp8_run):
    doc = load(fp8_run)
    rec = doc["recommendation"]
    dep = rec["deployment"]
    _, files = deployment_files(doc)
    by_name = {d["metadata"]["name"]: d for d in manifests(files) if d["kind"] == "Deployment"}
    for pool, table, count in zip(dep["pools"], dep["fleet"]["pool"], rec["verification"]["verified_counts"],
                                  strict=True):
        d = by_name[f"fleet-{pool['name']}"]
        assert d["spec"]["replicas"] == table["instances"] == count
        pod = d["spec"]["template"]["spec"]
        node = gpu_node(pool["gpu"])
        assert pod["nodeSelector"] == {node.label_key: node.label_value}
        (c,) = pod["containers"]
        gpus = str(pool["gpus_per_instance"])
        assert c["resources"]["limits"] == {node.resource: gpus} == c["resources"]["requests"]
        assert pool["gpus_per_instance"] == pool["parallelism"]["tensor_parallel_size"] > 1
        for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
            assert c[probe]["httpGet"] == {"path": "/health", "port": "http"}
        assert c["env"][0] == {"name": "MODEL", "value": "meta-llama/Llama-3.1-70B"}
    services = [d for d in manifests(files) if d["kind"] == "Service"]
    for s in services:
        target = by_name[s["metadata"]["name"]]
        assert s["spec"]["selector"] == target["spec"]["template"]["metadata"]["labels"]


def test_amd_gpus_request_their_own_resource():
    node = gpu_node("mi300x")
    assert (node.resource, node.label_key) == ("amd.com/gpu", "amd.com/gpu.product-name")
    assert gpu_node("H100-SXM").label_value == "NVIDIA-H100-80GB-HBM3"


def test_every_catalog_gpu_has_a_kubernetes_view():
    """``fleetplan deploy`` can place a pool of any bundled GPU type (a new catalog GPU needs its node entry),
    and each view's GPUs per node is the catalog's."""
    from fleetplan.hardware import load_catalog

    catalog = load_catalog()
    for name in catalog.names():
        node = gpu_node(name)
        assert node.gpus_per_node == catalog.get(name).gpus_per_node, name
    assert gpu_node("h20-3e").label_value == "NVIDIA-H20-3e"
