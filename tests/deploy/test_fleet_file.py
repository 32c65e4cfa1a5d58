"""The exported fleet.toml rebuilds the verified fleet exactly: pools, GPU, instances, context, engine
limits, KV cache, routers, parallelism and the step model the simulator ran."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest

from fleetplan.cli.model_options import serving_setup
from fleetplan.deploy import deployment_files
from fleetplan.deploy.text import toml_text
from fleetplan.hardware import load_catalog
from fleetplan.models import Dtype, load_model
from fleetplan.plan.deployment import deployment_of, fleet_delta, owned_gpus
from fleetplan.plan.model_fleet import ModelServing, fleet_for_serving
from fleetplan.plan.optimize import OptimizeRequest, optimize
from fleetplan.plan.space import SizingRouter, Topology
from fleetplan.plan.verify import fleet_spec
from fleetplan.sim.fleet_toml import build_fleet, fleet_document, load_fleet_toml, parse_fleet_file
from fleetplan.workload import load_workload
from tests.deploy.conftest import load

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.toml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_fleet_document_round_trips_the_examples(path):
    spec = load_fleet_toml(path)
    text = toml_text(fleet_document(spec))
    assert build_fleet(parse_fleet_file(tomllib.loads(text))) == spec


def _request(model: str | None, **kw) -> OptimizeRequest:
    catalog = load_catalog()
    opts = {"model": model, "gpus": ("h100",), "tensor_parallel_size": None, "weight_dtype": kw.pop("weight", None),
            "kv_cache_dtype": kw.pop("kv", None), "perf_profile": None}
    gpus, per_instance, step_models, _ = serving_setup(catalog, opts)
    return OptimizeRequest(workload=load_workload("lmsys"), gpus=gpus, gpus_per_instance=per_instance,
                           step_models=step_models, slo_ttft_s=kw.pop("slo_s", 2.0), rate_per_s=kw.pop("rate", 5.0),
                           topologies=(Topology.HOMO, Topology.TWO_POOL), thresholds_tokens=(4096, 8192),
                           routers=(SizingRouter.LENGTH, SizingRouter.COMPRESS), **kw)


def _same_fleet(built, expected) -> None:
    assert built.pool_router == expected.pool_router and built.compress_gamma == expected.compress_gamma
    assert built.max_model_len_tokens == expected.max_model_len_tokens
    for b, e in zip(built.pools, expected.pools, strict=True):
        assert dataclasses.replace(b, price_usd_per_h=None) == dataclasses.replace(e, price_usd_per_h=None)


def test_calibrated_constants_fleet_is_rebuilt_exactly():
    request = _request(None, slo_s=0.5, rate=100.0)
    result = optimize(request)
    gpus = {g.name: g for g in request.gpus}
    for c in result.candidates[:6]:
        d = deployment_of(c, request)
        counts = [p.count for p in c.pools]
        expected = fleet_spec(c, gpus, counts, {}, None, 0.0)
        built = build_fleet(parse_fleet_file(tomllib.loads(toml_text(d.fleet))))
        assert built == expected  # prices included: the calibrated GPU's own


def test_served_model_fleet_is_rebuilt_exactly_with_per_pool_parallelism():
    """Llama-3.1-70B FP8 on H100: the sweep places pools at different TP sizes; the file keeps each."""
    request = _request("llama-3.1-70b", weight="fp8", kv="fp8", max_model_len_tokens=131072)
    result = optimize(request)
    gpus = {g.name: g for g in request.gpus}
    serving = ModelServing(load_model("llama-3.1-70b"), None, Dtype.FP8, Dtype.FP8)
    tps = set()
    for c in result.candidates[:8]:
        d = deployment_of(c, request)
        counts = [p.count for p in c.pools]
        expected = fleet_spec(c, gpus, counts, dict(request.step_models), 131072, 0.0)
        fleet = parse_fleet_file(tomllib.loads(toml_text(d.fleet)))
        served = fleet_for_serving(fleet, serving, 131072)
        _same_fleet(served.spec, expected)
        for pool, placed in zip(d.pools, served.pools, strict=True):
            assert placed.placement.gpus_per_instance == pool.gpus_per_instance
            tps.add(placed.placement.parallelism.tp)
        for built, placed in zip(served.spec.pools, served.pools, strict=True):  # GPU price x GPUs per instance
            price = load_catalog().get("h100").price_usd_per_h
            assert built.price_usd_per_h == pytest.approx(price * placed.placement.gpus_per_instance)
    assert len(tps) > 1  # the check saw pools at different tensor-parallel sizes


def test_exported_fp8_fleet_matches_its_run(fp8_run):
    doc = load(fp8_run)
    rec = doc["recommendation"]
    _, files = deployment_files(doc)
    fleet = parse_fleet_file(tomllib.loads(files["fleet.toml"]))
    assert [e.n_instances for e in fleet.pools] == [n for n in rec["verification"]["verified_counts"] if n]
    limits = [dict(e.limits) for e in fleet.pools]
    assert [x["max_num_seqs"] for x in limits] == [p["max_num_seqs"] for p in rec["pools"]]
    assert [x["max_num_batched_tokens"] for x in limits] == [p["max_num_batched_tokens"] for p in rec["pools"]]
    assert [e.max_context_tokens for e in fleet.pools][:-1] == [p["max_tokens"] for p in rec["pools"]][:-1]
    assert [dict(e.parallelism)["tensor_parallel_size"] for e in fleet.pools] == \
        [p["gpus_per_instance"] for p in rec["deployment"]["pools"]]


def test_owned_gpus_count_gpus_per_instance_and_the_delta(fp8_run, tmp_path):
    doc = load(fp8_run)
    _, files = deployment_files(doc)
    path = tmp_path / "fleet.toml"
    path.write_text(files["fleet.toml"])
    from fleetplan.sim.fleet_toml import read_fleet_toml

    owned = owned_gpus(read_fleet_toml(path).pools)
    dep = doc["recommendation"]["deployment"]
    assert owned == {"H100-SXM": sum(t["instances"] * p["gpus_per_instance"]
                                     for t, p in zip(dep["fleet"]["pool"], dep["pools"], strict=True))}
    request = _request(None, slo_s=0.5, rate=100.0)
    rec = optimize(request).recommendation
    d = deployment_of(rec, request)
    same = fleet_delta(dict(fleet_delta({}, d).needed), d)
    assert same.buy == () and same.retire == ()
    delta = fleet_delta({"A10G": 6, "H100-SXM": 1}, d)
    needed = dict(delta.needed)
    assert dict(delta.retire)["A10G"] == 6 - needed.get("A10G", 0)
    assert dict(delta.buy).get("H100-SXM", 0) == max(needed.get("H100-SXM", 0) - 1, 0)
