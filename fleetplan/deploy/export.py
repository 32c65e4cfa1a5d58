"""A saved ``optimize`` run's fleet as files a platform engineer applies (the package's entry point).

``deployment_files(doc, candidate, engine)`` picks the recommended fleet (or the candidate of rank
``candidate``) from a run document (``report.run_json``, kind ``optimize-run``) and returns the folder's
files by relative path:

=================================  ==================================================================
``fleet.toml``                     the verified fleet as the simulator's fleet-file reader reads it
                                   (``deployment.fleet`` of the candidate, written as it was built)
``engines/<pool>.sh``              the engine launch lines of one instance, one per node
``kubernetes/<pool>.yaml``         Deployment (or LeaderWorkerSet) + Service (``deploy.kubernetes``)
``router/semantic-router.yaml``    vLLM Semantic Router's configuration of the bands (``deploy.router``)
``deployment.json``                what was exported: run, candidate, engine, versions of every format
``README.md``                      what was verified, how to apply it, the command that re-checks it
=================================  ==================================================================

``write_deployment`` writes them into a temporary folder beside ``out_dir`` and renames it into place, so
the folder is complete or absent; an existing non-empty ``out_dir`` is refused unless ``force`` (then it
is replaced the same way).  Nothing is computed here that the run did not carry: every number comes from
the candidate's ``deployment`` block (``plan.deployment``) and its verification.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleetplan.deploy.dynamo import DYNAMO_COMMIT, dynamo_graph, worker_args
from fleetplan.deploy.engines import ENGINE_SOURCES, PORT, Engine, PoolServe, launch_lines, speculation_of
from fleetplan.deploy.gpus import gpu_node
from fleetplan.deploy.kubernetes import k8s_name, pool_manifests
from fleetplan.deploy.readme import AFD_NOTE, pdd_readme_text, readme_text
from fleetplan.deploy.router import SEMANTIC_ROUTER_COMMIT, Band, prompt_edges, semantic_router_config
from fleetplan.deploy.text import toml_text, yaml_text
from fleetplan.errors import ConfigError, DataFormatError
from fleetplan.paths import data_dir

__all__ = ["DeployResult", "ExportedPool", "deployment_files", "model_type_of", "read_run", "select_candidate",
           "write_deployment"]

#: How a pool's timing source names an "MTP on" step model (``perf.measured.source.timing_source``: "..., MTP k
#: draft(s) at acceptance a"), spelt here so the export does not import the perf package to read a run.
MTP_TIMING_MARK = ", MTP "
#: Placeholder model when the plan had no served model (the paper's calibrated per-GPU constants).
MODEL_PLACEHOLDER = "REPLACE-WITH-MODEL"
#: Kubernetes namespace the router's endpoints assume (Service DNS ``<name>.<namespace>.svc``).
NAMESPACE = "default"
#: Most requests the README's re-check command simulates (the smallest pool's share sets the rest).
MAX_RECHECK_REQUESTS = 200_000
MIN_RECHECK_REQUESTS = 20_000


@dataclass(frozen=True)
class ExportedPool:
    """One pool as exported: its serving settings, instance count, band and launch lines."""

    serve: PoolServe
    gpu: str
    instances: int
    min_tokens: int
    max_tokens: int
    traffic_share: float
    lam_per_s: float
    launch: tuple  # engines.LaunchLine per node
    manifest_kind: str
    prompt_band: tuple[int, int]
    timing_source: str  # what timed the pool's steps (run JSON; perf.measured.timing_source)


@dataclass(frozen=True)
class DeployResult:
    """What ``write_deployment`` wrote: the folder, its files, the candidate and whether it was verified."""

    out_dir: Path
    files: tuple[str, ...]
    rank: int
    verified: bool


def read_run(path: str | os.PathLike) -> dict[str, Any]:
    """The run document at ``path`` (an optimize run saved as JSON), read without the report package (the
    export starts in a fraction of a second); ``DataFormatError`` naming the file when it is not one."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DataFormatError(str(p), None, f"not a readable JSON file ({exc})",
                              "give the JSON an optimize run wrote") from exc
    if not isinstance(doc, dict) or doc.get("kind") != "optimize-run":
        kind = doc.get("kind") if isinstance(doc, dict) else None
        raise DataFormatError(str(p), None, f"is a {kind!r} document, not an optimize run",
                              "give the JSON file an optimize run wrote")
    return doc


def select_candidate(doc: dict[str, Any], candidate: int | None = None) -> dict[str, Any]:
    """The candidate to export: the recommendation (``candidate`` None) or the candidate of rank
    ``candidate``; ``ConfigError`` naming the parameter when the run has none to export."""
    if doc.get("kind") != "optimize-run":
        raise ConfigError(f"a {doc.get('kind')!r} run carries no fleet to deploy; give the JSON an optimize run wrote",
                          param="run_json")
    if candidate is None:
        rec = doc.get("recommendation")
        if rec is None or not rec.get("verified"):
            state = "no recommendation" if rec is None else "a recommendation that was not verified by simulation"
            raise ConfigError(f"the run has {state}, so there is no verified fleet to deploy; give `candidate` (a rank "
                              "of the run's table) to export that fleet unverified, or re-run the plan with "
                              "verification", param="candidate")
        chosen = rec
    else:
        ranks = [c["rank"] for c in doc.get("candidates", [])]
        found = [c for c in doc.get("candidates", []) if c["rank"] == candidate]
        if not found:
            shown = f"{min(ranks)}-{max(ranks)}" if ranks else "none"
            raise ConfigError(f"`candidate` {candidate} is not in the run (ranks in the file: {shown})",
                              param="candidate", value=candidate)
        chosen = found[0]
    if chosen.get("deployment") is None:
        why = (f"an afd fleet: {AFD_NOTE}" if chosen["topology"] == "afd"
               else "neither among the cheapest, simulated nor feasible candidates the run keeps a fleet for")
        raise ConfigError(f"candidate {chosen['rank']} is {why}; pick another `candidate`", param="candidate",
                          value=chosen["rank"])
    return chosen


def _bundled_config(model: str) -> dict[str, Any] | None:
    """The bundled config.json of a model's display name (its ``_source`` repository's last part, or the
    file's stem), or None for a model not bundled."""
    for path in sorted(data_dir("models").glob("*.json")):
        cfg = json.loads(path.read_text(encoding="utf-8"))
        source = cfg.get("_source", "")
        if source.split("/")[-1].lower() == model.lower() or path.stem == model.lower():
            return cfg
    return None


def _hf_repository(model: str) -> str:
    """The HuggingFace repository of a bundled model's display name (its config's ``_source``), else the name."""
    cfg = _bundled_config(model)
    return (cfg.get("_source") or model) if cfg is not None else model


def model_type_of(model: str | None) -> str | None:
    """The HuggingFace ``model_type`` of a bundled model (its text config's for a wrapper), else None: it names
    the engines' MTP method (``engines.Speculation``)."""
    cfg = None if model is None else _bundled_config(model)
    if cfg is None:
        return None
    return (cfg.get("text_config") or {}).get("model_type") or cfg.get("model_type")


def _prompt_share_edges(doc: dict[str, Any], edges: list[int]) -> tuple[list[int], str]:
    """Prompt edges of the total-token ``edges`` (``router.prompt_edges``) and how they were found."""
    inputs = doc["inputs"]
    if inputs.get("input_fraction") is not None:
        f = float(inputs["input_fraction"])
        return prompt_edges(edges, prompt_share=f), f"prompt = {f:g} x total (the workload gives totals only)"
    from fleetplan.workload import load_workload

    wl = load_workload(inputs["workload"])
    return (prompt_edges(edges, wl.total, wl.input),
            "quantile matching on the workload's prompt and total CDFs (each pool keeps its traffic share)")


def _engine_context(pool: dict[str, Any], info: dict[str, Any], dep: dict[str, Any]) -> int:
    """The engine's ``max_model_len``: the pool's context as verified, which for the largest pool is what its
    KV cache holds; without a served model's limit that can exceed any model's window, so the band's top
    (the workload's longest request) is the engine's limit then."""
    if dep.get("max_model_len_tokens") is not None:
        return int(pool["max_context_tokens"])
    return int(min(pool["max_context_tokens"], info["max_tokens"]))


def _timing_source(info: dict[str, Any]) -> str:
    """The pool's timing source as the run recorded it (runs written before it was recorded say so)."""
    return info.get("timing_source") or "not recorded in this run (written before timing sources were)"


def _serve(pool: dict[str, Any], info: dict[str, Any], dep: dict[str, Any], served: str) -> PoolServe:
    par = info["parallelism"]
    features = pool.get("features", {})
    kv = dep.get("kv_cache_dtype") or ""
    return PoolServe(
        pool=pool["name"], served_model_name=served,
        tensor_parallel_size=int(par.get("tensor_parallel_size", info["gpus_per_instance"])),
        pipeline_parallel_size=int(par.get("pipeline_parallel_size", 1)),
        data_parallel_size=int(par.get("data_parallel_size", 1)),
        expert_parallel=bool(par.get("enable_expert_parallel", False)),
        max_num_seqs=pool["max_num_seqs"], max_num_batched_tokens=pool["max_num_batched_tokens"],
        max_model_len_tokens=_engine_context(pool, info, dep), kv_blocks=pool["kv_blocks"],
        block_size_tokens=pool.get("block_size", 16), gpus_per_node=gpu_node(info["gpu"]).gpus_per_node,
        weight_fp8=dep.get("weight_dtype") == "fp8", kv_cache_fp8=kv.startswith("fp8"),
        prefix_caching=bool(features.get("enable_prefix_caching", False)),
        speculation=speculation_of(features, model_type_of(dep.get("model"))),
    )


def _sh(argv: tuple[str, ...], model_arg: str) -> str:
    """One shell command line; arguments holding a ``$VARIABLE`` are double-quoted so the shell expands it."""
    import shlex

    words = [a.replace("{model}", model_arg).replace("{leader}", "${LEADER_ADDRESS}") for a in argv]
    return " ".join(f'"{w}"' if "$" in w else shlex.quote(w) for w in words)


def _shell(pool: ExportedPool, model_arg: str) -> str:
    lines = ["#!/bin/sh", f"# Pool {pool.serve.pool}: one instance of {pool.instances} "
             f"({pool.serve.gpus_per_instance} x {pool.gpu}, {pool.serve.n_nodes} node(s)).",
             "# Written by fleetplan deploy; every flag is a limit the simulator verified (README.md).", "set -e"]
    if model_arg.startswith("$"):
        lines.append(': "${MODEL:?set MODEL to the served model (HuggingFace repository or path)}"')
    if pool.serve.n_nodes > 1:
        lines.append(': "${LEADER_ADDRESS:?set LEADER_ADDRESS to node 0 of this instance}"')
        lines.append('case "${NODE_RANK:?set NODE_RANK to this node (0 = leader)}" in')
    for line in pool.launch:
        cmds = [_sh(p, model_arg) for p in (line.argv, *([line.then] if line.then else []))]
        if pool.serve.n_nodes > 1:
            lines.append(f"  {line.node_rank}) " + " && ".join(cmds) + " ;;")
        else:
            lines += cmds
    if pool.serve.n_nodes > 1:
        lines += ["  *) echo \"NODE_RANK must be 0..$(( " + str(pool.serve.n_nodes) + " - 1 ))\" >&2; exit 2 ;;",
                  "esac"]
    return "\n".join(lines) + "\n"


def _recheck_requests(pools: list[ExportedPool]) -> int:
    smallest = min(p.traffic_share for p in pools if p.traffic_share > 0) if any(p.traffic_share > 0 for p in pools) \
        else 1.0
    return int(min(MAX_RECHECK_REQUESTS, max(MIN_RECHECK_REQUESTS, math.ceil(2_000 / smallest))))


def deployment_files(doc: dict[str, Any], candidate: int | None = None,
                     engine: Engine | str = Engine.VLLM) -> tuple[dict[str, Any], dict[str, str]]:
    """(the exported candidate, {relative path: text}) of the run ``doc`` (module docstring)."""
    engine = Engine.parse(engine)
    chosen = select_candidate(doc, candidate)
    dep = chosen["deployment"]
    if dep.get("disaggregated"):
        return chosen, _pdd_files(doc, chosen, engine)
    fleet_doc = dep["fleet"]
    model = dep.get("model")
    hf = None if model is None else _hf_repository(model)
    served = hf or "fleet-model"
    model_arg = hf if hf is not None else "${MODEL}"
    image = ENGINE_SOURCES[engine]["image"]
    infos = {p["name"]: p for p in dep["pools"]}
    tables = fleet_doc["pool"]
    edges = [infos[t["name"]]["max_tokens"] for t in tables]
    prompt, translation = _prompt_share_edges(doc, edges)
    compress = chosen["router"] == "compress"
    gamma = float(fleet_doc.get("compress_gamma", doc["inputs"].get("compress_gamma", 1.5)))
    compress_prompt = _prompt_share_edges(doc, [int(gamma * e) for e in edges])[0] if compress else None
    pools: list[ExportedPool] = []
    files: dict[str, str] = {}
    bands: list[Band] = []
    lo = 0
    for i, t in enumerate(tables):
        info = infos[t["name"]]
        serve = _serve(t, info, dep, served)
        top = i == len(tables) - 1
        hi = serve.max_model_len_tokens if top else prompt[i]
        node = gpu_node(info["gpu"])
        manifests = pool_manifests(serve, t["instances"], engine, node, hf or MODEL_PLACEHOLDER, image)
        pool = ExportedPool(serve, info["gpu"], t["instances"], info["min_tokens"], info["max_tokens"],
                            info["traffic_share"], info["lam_per_s"], launch_lines(engine, serve), manifests.kind,
                            (lo, hi), _timing_source(info))
        pools.append(pool)
        name = k8s_name(t["name"])
        files[f"engines/{name}.sh"] = _shell(pool, model_arg)
        files[f"kubernetes/{name}.yaml"] = yaml_text(*manifests.documents, header=(
            f"Pool {t['name']}: {t['instances']} instance(s) of {serve.gpus_per_instance} x {info['gpu']} "
            f"({manifests.kind}); written by fleetplan deploy."))
        squeeze = {}
        if compress and not top:
            squeeze = {"compress_to_tokens": hi, "compress_max_prompt_tokens": max(compress_prompt[i], hi + 1),
                       "compress_reserve_tokens": max(info["max_tokens"] - hi, 1)}
        bands.append(Band(t["name"], lo, hi, f"{k8s_name('fleet-' + t['name'])}.{NAMESPACE}.svc.cluster.local:{PORT}",
                          serve.max_model_len_tokens, **squeeze))
        lo = (squeeze["compress_max_prompt_tokens"] if squeeze else hi) + 1
    router_doc = semantic_router_config(bands, served)
    header = (f"Written by fleetplan {doc.get('version')} deploy from run seed {doc.get('seed')}, candidate "
              f"{chosen['rank']}\nvLLM Semantic Router configuration (v0.3 schema at "
              f"vllm-project/semantic-router@{SEMANTIC_ROUTER_COMMIT})")
    files["router/semantic-router.yaml"] = yaml_text(router_doc, header=header)
    files["fleet.toml"] = toml_text(fleet_doc, header=(
        f"The fleet of candidate {chosen['rank']} ({chosen['topology']}, {chosen['router']} router) as phase 2 "
        "simulated "
        f"it ({dep['counts']} counts).\nRe-check: the simulate command in README.md."))
    recheck_n = _recheck_requests(pools)
    summary = {
        "fleetplan_version": doc.get("version"), "seed": doc.get("seed"), "rank": chosen["rank"],
        "recommended": candidate is None, "verified": bool(chosen.get("verified")), "counts": dep["counts"],
        "engine": engine.value, "engine_source": ENGINE_SOURCES[engine],
        "model": model, "model_repository": hf,
        "kubernetes": {"workloads": sorted({p.manifest_kind for p in pools}), "namespace": NAMESPACE},
        "router": {"gateway": "vllm-project/semantic-router", "schema": "v0.3 CanonicalConfig",
                   "commit": SEMANTIC_ROUTER_COMMIT, "band_translation": translation,
                   "bands": [{"pool": p.serve.pool, "total_tokens": [p.min_tokens + 1, p.max_tokens],
                              "prompt_tokens": list(p.prompt_band)} for p in pools]},
        "recheck_requests": recheck_n,
        "timing_sources": {p.serve.pool: p.timing_source for p in pools},
    }
    files["deployment.json"] = json.dumps(summary, indent=2) + "\n"
    files["README.md"] = readme_text(doc, chosen, pools, engine, model, hf, translation, recheck_n, compress)
    return chosen, files


def _pdd_files(doc: dict[str, Any], chosen: dict[str, Any], engine: Engine) -> dict[str, str]:
    """A prefill-decode fleet: Dynamo's graph, each role's worker line, the README (``deploy.dynamo``)."""
    if engine is not Engine.VLLM:
        raise ConfigError(f"candidate {chosen['rank']} is a prefill-decode fleet, exported as NVIDIA Dynamo's graph of "
                          "vLLM workers; give `engine` 'vllm'", param="engine", value=engine.value)
    dep = chosen["deployment"]
    model = dep.get("model")
    hf = None if model is None else _hf_repository(model)
    infos = {p["name"]: p for p in dep["pools"]}
    roles, nodes, lines = [], {}, {}
    for t in dep["fleet"]["pool"]:
        info = infos[t["name"]]
        if MTP_TIMING_MARK in _timing_source(info) and "speculative_config" not in t.get("features", {}):
            raise ConfigError(f"candidate {chosen['rank']}: the {t['name']} role was screened with MTP "
                              f"({info['timing_source']}), but the prefill-decode simulator runs no speculative "
                              "decoding, so the verified fleet has none to export; pick a candidate without 'mtp' "
                              "in its GPU types, or re-plan with MTP off", param="candidate",
                              value=chosen["rank"])
        serve = _serve(t, info, dep, hf or "fleet-model")
        if serve.n_nodes > 1:
            raise ConfigError(f"candidate {chosen['rank']}: the {t['name']} role spans {serve.n_nodes} nodes per "
                              "instance; multi-node Dynamo workers are not exported: pick a candidate whose roles fit "
                              "one node", param="candidate", value=chosen["rank"])
        (line,) = launch_lines(Engine.VLLM, serve)
        args = worker_args(line, hf or "$(MODEL)", t["name"] == "prefill")
        roles.append((t["name"], t["instances"], args, serve.gpus_per_instance))
        nodes[t["name"]] = gpu_node(info["gpu"])
        lines[t["name"]] = args
    graph = dynamo_graph(k8s_name(f"fleet-pdd-{chosen['rank']}"), roles, nodes)
    if hf is None:
        for svc in graph["spec"]["services"].values():
            if svc["componentType"] == "worker":
                svc["envs"] = [{"name": "MODEL", "value": MODEL_PLACEHOLDER}]
    files = {"kubernetes/dynamo-graph.yaml": yaml_text(graph, header=(
        f"Prefill-decode fleet of candidate {chosen['rank']} as NVIDIA Dynamo's DynamoGraphDeployment "
        f"(ai-dynamo/dynamo@{DYNAMO_COMMIT} layout); written by fleetplan deploy."))}
    for role, args in lines.items():
        model_sh = hf or "${MODEL}"
        words = [a.replace("$(MODEL)", model_sh) for a in args]
        guard = [] if hf else [': "${MODEL:?set MODEL to the served model (HuggingFace repository or path)}"']
        files[f"engines/{role}.sh"] = "\n".join([
            "#!/bin/sh", f"# Role {role}: one Dynamo vLLM worker (python3 -m dynamo.vllm; Dynamo's frontend and "
            "etcd/NATS run beside it, see README.md).", "set -e", *guard,
            _sh(("python3", "-m", "dynamo.vllm", *words), model_sh)]) + "\n"
    files["deployment.json"] = json.dumps({
        "fleetplan_version": doc.get("version"), "seed": doc.get("seed"), "rank": chosen["rank"],
        "verified": bool(chosen.get("verified")), "counts": dep["counts"], "topology": "pdd",
        "framework": {"name": "NVIDIA Dynamo", "kind": "DynamoGraphDeployment", "apiVersion": "nvidia.com/v1alpha1",
                      "commit": DYNAMO_COMMIT}, "engine_source": ENGINE_SOURCES[Engine.VLLM], "model": model,
        "model_repository": hf, "disaggregated": dep["disaggregated"]}, indent=2) + "\n"
    files["README.md"] = pdd_readme_text(doc, chosen, lines, model, hf)
    return files


def write_deployment(doc: dict[str, Any], out_dir: str | os.PathLike, candidate: int | None = None,
                     engine: Engine | str = Engine.VLLM, force: bool = False) -> DeployResult:
    """Write the folder (module docstring); complete or not at all."""
    chosen, files = deployment_files(doc, candidate, engine)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"`out_dir` {out} is a file; give a folder path", param="out_dir", value=str(out))
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ConfigError(f"`out_dir` {out} exists and is not empty; give a new folder, or `force` to replace it",
                          param="out_dir", value=str(out))
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise ConfigError(f"cannot write {out}: folder {parent} does not exist; create it first", param="out_dir",
                          value=str(out))
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=parent))
    try:
        for rel, text in files.items():
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            if rel.endswith(".sh"):
                path.chmod(0o755)
        tmp.chmod(0o755)
        old = None
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=parent))
            os.replace(out, old / out.name)
        os.replace(tmp, out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return DeployResult(out, tuple(sorted(files)), chosen["rank"], bool(chosen.get("verified")))
