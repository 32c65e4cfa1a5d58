"""MTP pools exported: ``optimize --mtp`` recommends DeepSeek-V3 with its MTP heads on, and ``fleetplan deploy``
writes the drafts in each engine's spelling at the version it targets (``deploy.engines.Speculation``):

* vLLM ``--speculative-config '{"method": "deepseek_mtp", "num_speculative_tokens": k}'`` (the model's MTP method;
  the acceptance rates stay the simulator's), SGLang ``--speculative-algorithm EAGLE --speculative-num-steps k
  --speculative-eagle-topk 1 --speculative-num-draft-tokens k+1``;
* in the launch scripts, the Kubernetes manifests (schema-valid, ``test_manifests``) and the Dynamo worker
  arguments, each parsing against the engine's own flag list; absent from a pool without MTP;
* the recommendation line and the export print the same MTP flags and the same per-rank limits;
* a model whose MTP the engine does not run, or a non-MTP speculative method under SGLang, is one line.
"""

from __future__ import annotations

import json
import re

import pytest

from fleetplan.deploy import Engine, deployment_files
from fleetplan.deploy.engines import (
    SGLANG_MTP_MODEL_TYPES,
    VLLM_MTP_METHODS,
    PoolServe,
    Speculation,
    launch_lines,
    speculation_of,
)
from fleetplan.deploy.export import model_type_of
from fleetplan.deploy.readme import MTP_NOTE
from fleetplan.errors import ConfigError
from fleetplan.models import load_model
from tests.deploy.conftest import load, mtp_doc
from tests.deploy.test_engine_flags import commands_of, engine_problems
from tests.deploy.test_manifests import manifests, schema_errors

yaml = pytest.importorskip("yaml", reason="dev extra: pip install -e '.[dev]'")

SPECULATIVE_FLAGS = {"--speculative-config", "--speculative-algorithm", "--speculative-num-steps",
                     "--speculative-eagle-topk", "--speculative-num-draft-tokens"}


def _value(argv, flag: str) -> str:
    return argv[list(argv).index(flag) + 1]


def _serve(k: int | None, model_type: str | None = "deepseek_v3", method: str = "mtp") -> PoolServe:
    spec = None if k is None else speculation_of(
        {"speculative_config": json.dumps({"method": method, "num_speculative_tokens": k,
                                           "acceptance_rates": [0.85] * k})}, model_type)
    return PoolServe(pool="p", served_model_name="m", tensor_parallel_size=8, pipeline_parallel_size=1,
                     expert_parallel=True, max_num_seqs=64, max_num_batched_tokens=2048, max_model_len_tokens=8192,
                     kv_blocks=1000, block_size_tokens=16, gpus_per_node=8, speculation=spec)


@pytest.mark.parametrize("k", [1, 3])
def test_mtp_flags_in_each_engines_spelling(k):
    (v,) = launch_lines(Engine.VLLM, _serve(k))
    assert json.loads(_value(v.argv, "--speculative-config")) == {"method": "deepseek_mtp",
                                                                   "num_speculative_tokens": k}
    (g,) = launch_lines(Engine.SGLANG, _serve(k))
    assert (_value(g.argv, "--speculative-algorithm"), _value(g.argv, "--speculative-num-steps"),
            _value(g.argv, "--speculative-eagle-topk"), _value(g.argv, "--speculative-num-draft-tokens")) == \
        ("EAGLE", str(k), "1", str(k + 1))
    for line in (v, g):
        assert engine_problems(list(line.argv)) == []


def test_no_speculative_flags_without_mtp():
    for engine in Engine:
        (line,) = launch_lines(engine, _serve(None))
        assert SPECULATIVE_FLAGS.isdisjoint(line.argv)


def test_the_method_follows_the_models_architecture():
    assert model_type_of("deepseek-v3") == "deepseek_v3" and model_type_of("DeepSeek-R1") == "deepseek_v3"
    assert model_type_of("glm-4.6") == "glm4_moe" and model_type_of("no-such-model") is None
    (v,) = launch_lines(Engine.VLLM, _serve(1, "glm4_moe"))
    assert json.loads(_value(v.argv, "--speculative-config"))["method"] == "glm4_moe_mtp"
    assert VLLM_MTP_METHODS["deepseek_v32"] == "deepseek_mtp" and "glm4_moe" in SGLANG_MTP_MODEL_TYPES
    # every bundled model that ships MTP heads and that vLLM runs MTP for is named by its own config
    for name in ("deepseek-v3", "deepseek-r1", "deepseek-v3.2", "glm-4.5", "glm-4.5-air", "glm-4.6"):
        assert load_model(name).n_mtp_layers and model_type_of(name) in VLLM_MTP_METHODS


@pytest.mark.parametrize("engine", list(Engine))
def test_an_engine_without_the_models_mtp_is_one_line(engine):
    for model_type in ("minimax_m2", None):
        with pytest.raises(ConfigError) as err:
            launch_lines(engine, _serve(1, model_type))
        text = str(err.value)
        assert "\n" not in text and "runs MTP" in text and "MTP off" in text
    assert model_type_of("minimax-m2.5") == "minimax_m2" and load_model("minimax-m2.5").n_mtp_layers


def test_other_speculative_methods():
    s = _serve(2, None, method="ngram")
    (v,) = launch_lines(Engine.VLLM, s)
    assert json.loads(_value(v.argv, "--speculative-config")) == {"method": "ngram", "num_speculative_tokens": 2}
    with pytest.raises(ConfigError, match="MTP only"):
        launch_lines(Engine.SGLANG, s)
    assert not Speculation((("method", "draft_model"),)).is_mtp


@pytest.mark.parametrize("engine", list(Engine))
def test_multi_node_dp_mtp_fleet_writes_the_drafts_everywhere(engine, dp_run):
    """The DP run (two H100 nodes, 16 ranks) with two MTP drafts: every launch line of every node, the script and
    the LeaderWorkerSet carry them and parse; without MTP none does."""
    for doc, k in ((mtp_doc(load(dp_run), 2), 2), (load(dp_run), None)):
        _, files = deployment_files(doc, engine=engine)
        commands = commands_of(files)
        assert len(commands) >= 4  # two nodes, script and manifest
        assert [p for argv in commands for p in engine_problems(argv)] == []
        assert [e for d in manifests(files) for e in schema_errors(d)] == []
        for argv in commands:
            if k is None:
                assert SPECULATIVE_FLAGS.isdisjoint(argv)
            elif engine is Engine.VLLM:
                assert json.loads(_value(argv, "--speculative-config")) == {"method": "deepseek_mtp",
                                                                            "num_speculative_tokens": 2}
            else:
                assert _value(argv, "--speculative-num-steps") == "2"
                assert _value(argv, "--speculative-num-draft-tokens") == "3"
        assert (MTP_NOTE[engine] in files["README.md"]) == (k is not None)


def _recommendation(mtp_run) -> str:
    out = mtp_run.with_suffix(".out").read_text(encoding="utf-8")
    return next(ln for ln in out.splitlines() if ln.startswith("Recommendation:"))


def test_optimize_mtp_to_deploy_end_to_end(mtp_run):
    """The recommended MTP pool (DeepSeek-V3, H200 dp8, one draft) keeps its catalog GPU, parallelism and model in
    the run JSON, its fleet file runs MTP, and both engines' files carry the drafts the recommendation line
    printed, with the same per-rank limits."""
    doc = load(mtp_run)
    dep = doc["recommendation"]["deployment"]
    (info,) = dep["pools"]
    assert dep["model"] == "DeepSeek-V3" and info["gpu"] == "H200"
    assert info["parallelism"] == {"tensor_parallel_size": 1, "data_parallel_size": 8, "enable_expert_parallel": True}
    (table,) = dep["fleet"]["pool"]
    assert json.loads(table["features"]["speculative_config"])["method"] == "mtp"
    line = _recommendation(mtp_run)
    assert " mtp1 " in line
    _, files = deployment_files(doc, engine=Engine.VLLM)
    script = files[f"engines/{table['name']}.sh"]
    flag = """--speculative-config '{"method":"deepseek_mtp","num_speculative_tokens":1}'"""
    assert flag in script and f"MTP on: {flag}" in line
    seqs = re.search(r"--max-num-seqs (\d+) --max-num-batched-tokens (\d+)", line).groups()
    assert f"--max-num-seqs {seqs[0]} --max-num-batched-tokens {seqs[1]}" in script
    assert int(seqs[0]) == table["max_num_seqs"] // 8
    assert "[pool.features]" in files["fleet.toml"] and "speculative_config" in files["fleet.toml"]
    _, sgl = deployment_files(doc, engine=Engine.SGLANG)
    assert ("--speculative-algorithm EAGLE --speculative-num-steps 1 --speculative-eagle-topk 1 "
            "--speculative-num-draft-tokens 2") in sgl[f"engines/{table['name']}.sh"]
    for files_ in (files, sgl):
        assert [p for argv in commands_of(files_) for p in engine_problems(argv)] == []
        assert [e for d in manifests(files_) for e in schema_errors(d)] == []


def test_dynamo_decode_workers_carry_the_drafts(pdd_run):
    """A prefill-decode fleet whose decode role runs MTP (the pdd run's roles, served as DeepSeek-V3): the Dynamo
    graph validates, the decode worker's arguments carry vLLM's MTP config and parse, the prefill worker's do
    not (drafts are a decode step's)."""
    from tests.deploy.test_pdd import VALIDATOR, _arg_problems, _graph, _pod_errors

    doc = load(pdd_run)
    dep = doc["recommendation"]["deployment"]
    dep["model"] = "deepseek-v3"
    for table in dep["fleet"]["pool"]:
        if table["name"] == "decode":
            table.setdefault("features", {})["speculative_config"] = json.dumps(
                {"method": "mtp", "num_speculative_tokens": 1, "acceptance_rate": 0.85})
    graph = _graph(doc)
    services = graph["spec"]["services"]
    assert [e.message for e in VALIDATOR.iter_errors(graph)] == []
    assert [e for s in services.values() for e in _pod_errors(s)] == []
    decode = services["VllmDecodeWorker"]["extraPodSpec"]["mainContainer"]["args"]
    prefill = services["VllmPrefillWorker"]["extraPodSpec"]["mainContainer"]["args"]
    assert _arg_problems(decode) == [] and _arg_problems(prefill) == []
    assert json.loads(_value(decode, "--speculative-config")) == {"method": "deepseek_mtp", "num_speculative_tokens": 1}
    assert "--speculative-config" not in prefill


def test_a_pdd_role_screened_with_mtp_is_one_line(pdd_run):
    """The prefill-decode simulator runs no speculative decoding: a role the screen timed with MTP was verified
    without it, so the export refuses it (one line) instead of writing a fleet nobody simulated."""
    from fleetplan.deploy.export import MTP_TIMING_MARK
    from fleetplan.hardware import load_catalog
    from fleetplan.perf.measured import timing_source
    from fleetplan.plan.placement import place_model

    par_twin = [p for p in place_model(load_model("deepseek-v3"), load_catalog().get("H200"), timing_source="roofline",
                                       mtp_acceptance=0.85) if p.mtp is not None][0]
    label = timing_source(par_twin.step_model)
    assert MTP_TIMING_MARK in label  # the mark the export reads is the label's
    doc = load(pdd_run)
    for info in doc["recommendation"]["deployment"]["pools"]:
        if info["name"] == "decode":
            info["timing_source"] = label
    with pytest.raises(ConfigError) as err:
        deployment_files(doc)
    text = str(err.value)
    assert "\n" not in text and "decode role was screened with MTP" in text and "MTP off" in text
