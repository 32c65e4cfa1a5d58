"""The router configuration: vLLM Semantic Router's v0.3 schema, and bands that send each pool its share.

``data/semantic_router_v0_3.schema.json`` is transcribed from Semantic Router's Go config structs at the
commit it names (context signals, decisions, providers, the context-compression plugin); every object is
closed, so a misspelt key fails as it would in Semantic Router's strict decoder.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from fleetplan.deploy import deployment_files
from fleetplan.deploy.router import prompt_edges
from fleetplan.workload import load_workload
from tests.deploy.conftest import DATA, load

yaml = pytest.importorskip("yaml", reason="dev extra: pip install -e '.[dev]'")

jsonschema = pytest.importorskip("jsonschema")
SCHEMA = json.loads((DATA / "semantic_router_v0_3.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def router_doc(doc: dict) -> dict:
    _, files = deployment_files(doc)
    return yaml.safe_load(files["router/semantic-router.yaml"])


def _value(count: str) -> int:
    return int(count)


@pytest.mark.parametrize("which", ["small", "fp8"])
def test_router_config_validates_and_covers_every_prompt(which, small_run, fp8_run):
    doc = load({"small": small_run, "fp8": fp8_run}[which])
    cfg = router_doc(doc)
    errors = [e.message for e in VALIDATOR.iter_errors(cfg)]
    assert errors == [], errors
    signals = cfg["routing"]["signals"]["context"]
    ranges = sorted((_value(s["min_tokens"]), _value(s["max_tokens"])) for s in signals)
    assert ranges[0][0] == 0
    for (_, hi), (lo, _) in zip(ranges, ranges[1:], strict=False):
        assert lo == hi + 1  # contiguous, no overlap
    dep = doc["recommendation"]["deployment"]
    assert ranges[-1][1] >= dep["pools"][-1]["max_tokens"] * 0.8  # the largest pool takes the long tail
    models = {m["name"]: m for m in cfg["providers"]["models"]}
    decisions = cfg["routing"]["decisions"]
    signal_names = {s["name"] for s in signals}
    for d in decisions:
        assert d["rules"]["conditions"][0]["name"] in signal_names
        assert d["modelRefs"][0]["model"] in models
    endpoints = {m["backend_refs"][0]["endpoint"] for m in models.values()}
    assert endpoints == {f"fleet-{p['name']}.default.svc.cluster.local:8000" for p in dep["pools"]}
    compress = [d for d in decisions if d.get("plugins")]
    assert bool(compress) == (doc["recommendation"]["router"] == "compress")
    for d in compress:
        budget = d["plugins"][0]["configuration"]["budget"]
        assert budget["target_tokens"] + budget["reserve_output_tokens"] == dep["pools"][0]["max_tokens"]


def test_the_schema_catches_mistakes(small_run):
    cfg = router_doc(load(small_run))
    cfg["routing"]["signals"]["context"][0]["min_token"] = cfg["routing"]["signals"]["context"][0].pop("min_tokens")
    assert list(VALIDATOR.iter_errors(cfg))
    cfg = router_doc(load(small_run))
    cfg["routing"]["signals"]["context"][0]["max_tokens"] = "lots"
    assert list(VALIDATOR.iter_errors(cfg))


def test_totals_only_bands_scale_by_the_prompt_share():
    assert prompt_edges([4096, 65536], prompt_share=0.8) == [3276, 52428]


def test_split_workload_bands_keep_each_pools_traffic_share():
    """Quantile matching: the share of prompts below the translated edge equals the share of totals below B."""
    wl = load_workload("azure_conv")
    edges = [1024, 4096]
    prompts = prompt_edges(edges, wl.total, wl.input)
    for b, p in zip(edges, prompts, strict=True):
        assert abs(float(wl.input.cdf(float(p))) - float(wl.total.cdf(float(b)))) < 0.01
        assert p <= b
    assert np.all(np.diff(prompts) > 0)
