"""The deployment folder's README: what was verified, how to apply it, how to re-check it (text only)."""

from __future__ import annotations

import math
from typing import Any

from fleetplan.deploy.dynamo import DYNAMO_COMMIT
from fleetplan.deploy.engines import ENGINE_SOURCES, GPU_MEMORY_UTILIZATION, Engine
from fleetplan.deploy.gpus import gpu_node
from fleetplan.deploy.kubernetes import k8s_name
from fleetplan.deploy.router import SEMANTIC_ROUTER_COMMIT

__all__ = ["AFD_NOTE", "DP_NOTE", "MTP_NOTE", "pdd_readme_text", "pdd_recheck_command", "readme_text",
           "recheck_command"]

LWS_SOURCE = "kubernetes-sigs/lws@060ab4da17eea1f0865fcbd3236bb1075e2cea32:config/crd/bases/" \
             "leaderworkerset.x-k8s.io_leaderworkersets.yaml"
KUBERNETES_VERSION = "1.37"  # kubernetes-validate 1.37.0's schemas, the version the tests validate against


#: Data-parallel-attention instances in each engine's terms (``deploy.engines`` module docstring).
DP_NOTE = {
    Engine.VLLM: "**Data-parallel attention.** A pool with `--data-parallel-size D` runs D attention ranks per "
                 "instance behind one API endpoint (vLLM balances requests over the ranks), experts spread over all "
                 "its GPUs (`--enable-expert-parallel`). vLLM applies `--max-num-seqs`, `--max-num-batched-tokens` "
                 "and `--num-gpu-blocks-override` per rank, so they are the verified instance limits per rank: "
                 "`--max-num-seqs` the instance's divided by D rounded down (a rank's own KV cache holds no more), "
                 "`--max-num-batched-tokens` a rank's sequences plus one whole prefill chunk, the KV blocks divided "
                 "by D (the table shows the instance's; the recommendation line prints the same per-rank values). "
                 "Across nodes node 0 runs the API server and its local ranks "
                 "(`--data-parallel-size-local`, `--data-parallel-address`, `--data-parallel-rpc-port`), the other "
                 "nodes `--headless` from `--data-parallel-start-rank` (vLLM's data-parallel deployment guide).",
    Engine.SGLANG: "**Data-parallel attention.** A pool with `--dp-size D --enable-dp-attention` runs D attention "
                   "ranks per instance over `--tp-size` GPUs, experts over `--ep-size`. SGLang divides "
                   "`--max-running-requests` and `--chunked-prefill-size` by D itself, so they are the verified "
                   "instance limits; `--max-prefill-tokens` and `--max-total-tokens` are one rank's (the verified "
                   "limits divided by D).",
}
#: MTP pools in each engine's terms (``deploy.engines`` module docstring, ``Speculation``).
MTP_NOTE = {
    Engine.VLLM: "**MTP speculative decoding.** A pool with `--speculative-config` runs the model's own "
                 "multi-token-prediction heads, k draft tokens per step (`num_speculative_tokens`), as verified; "
                 "`method` is the model's MTP method (e.g. `deepseek_mtp`; vLLM releases after #25232 accept it as "
                 "an alias of `mtp`). The fleet was simulated at the draft acceptance of `fleet.toml`'s "
                 "`speculative_config` (an assumption, not an engine setting): compare it with the engine's "
                 "`vllm:spec_decode_num_accepted_tokens_total` / `vllm:spec_decode_num_draft_tokens_total` and "
                 "re-plan with `optimize --mtp-acceptance` if it differs.",
    Engine.SGLANG: "**MTP speculative decoding.** A pool with `--speculative-algorithm EAGLE` runs the model's "
                   "own MTP (NextN) heads through SGLang's EAGLE path: `--speculative-num-steps` k drafts, top-1 "
                   "(`--speculative-eagle-topk 1`), k + 1 tokens verified per step, as verified. The fleet was "
                   "simulated at the draft acceptance of `fleet.toml`'s `speculative_config` (an assumption, not an "
                   "engine setting): compare it with the accept length SGLang logs and re-plan with "
                   "`optimize --mtp-acceptance` if it differs.",
}
#: ``perf.measured.source.MEASURED_PREFIX`` (the label of measured tables), spelt here so the export does not
#: import numpy and the perf package to read a run (tests/deploy/test_data_parallel.py::test_timing_source_labels_agree
#: holds them equal).
MEASURED_PREFIX = "aiconfigurator-core"
#: Why attention-FFN disaggregated fleets have no export (checked 2026-11-28; see the deploy docs).
AFD_NOTE = (
    "attention-FFN disaggregated (afd) fleets are not exported: no serving framework deploys them from a public "
    "manifest format. SGLang merged an experimental AFD mode for Ascend NPUs and Qwen3-MoE only "
    "(sgl-project/sglang#36258, `--afd-role`), vLLM has it as the experimental external afd-plugin "
    "(vllm-project/afd-plugin), and NVIDIA Dynamo's AFD pull request (ai-dynamo/dynamo#6570) was closed with "
    "placeholders; llm-d tracks it (llm-d/llm-d#449). Exporting vLLM afd-plugin launch lines is left as follow-up")


def _ms(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.1f} ms"


def _replications(doc: dict[str, Any]) -> int:
    """Verification's replications (3 when the run does not say)."""
    return ((doc.get("verification") or {}).get("run_length") or {}).get("replications") or 3


def recheck_command(doc: dict[str, Any], model: str | None, n_requests: int, dep: dict[str, Any]) -> str:
    """The ``fleetplan simulate`` command that re-checks ``fleet.toml`` on the run's workload and rate."""
    inputs = doc["inputs"]
    parts = ["fleetplan simulate --fleet fleet.toml", f"--workload {inputs['workload']}",
             f"--lam {inputs['lam_per_s']:g}", f"--replications {_replications(doc)}", f"--sim-requests {n_requests}",
             f"--slo-ttft {inputs['slo_ttft_ms']:g}", f"--seed {doc.get('seed', 0)}"]
    if inputs.get("slo_tpot_ms") is not None:
        parts.append(f"--slo-tpot {inputs['slo_tpot_ms']:g}")
    if inputs.get("input_fraction") is not None:
        parts.append(f"--input-fraction {inputs['input_fraction']:g}")
    cv2 = inputs.get("arrival_cv2", 1.0)
    if cv2 is not None and abs(cv2 - 1.0) > 1e-9:
        parts.append(f"--arrival gamma --cv {math.sqrt(cv2):.4g}")
    if model is not None:
        parts.append(f"--model {model.lower()}")
        if dep.get("weight_dtype") not in (None, "bf16"):
            parts.append(f"--weight-dtype {dep['weight_dtype']}")
        if dep.get("kv_cache_dtype") not in (None, "bf16"):
            parts.append(f"--kv-cache-dtype {dep['kv_cache_dtype']}")
    if dep.get("max_model_len_tokens") is not None:
        parts.append(f"--max-model-len {dep['max_model_len_tokens']}")
    if dep.get("calibrated_gpus"):
        parts.append("--perf-profile PROFILE.json")
    return " \\\n    ".join(parts)


def _verified_lines(doc: dict[str, Any], chosen: dict[str, Any]) -> list[str]:
    inputs, v = doc["inputs"], chosen.get("verification") or {}
    pct = inputs.get("percentile", 99.0)
    slo = f"P{pct:g} TTFT <= {inputs['slo_ttft_ms']:g} ms" + (
        "" if inputs.get("slo_tpot_ms") is None else f", P{pct:g} TPOT <= {inputs['slo_tpot_ms']:g} ms")
    lines = [
        f"- Workload **{inputs['workload']}** ({inputs.get('workload_source') or 'no source recorded'}) at "
        f"λ = {inputs['lam_per_s']:g} req/s ({inputs.get('lam_source', '')}), arrival Ca² "
        f"{inputs.get('arrival_cv2', 1):g}.",
        f"- SLO: {slo}.",
        f"- Fleet: {chosen['topology']}, {chosen['router']} router, thresholds "
        f"{', '.join(str(b) for b in chosen['thresholds_tokens']) or 'none'} tokens; "
        f"{(v.get('total_gpus') or chosen['total_gpus_needed'])} GPUs, "
        f"${(v.get('cost_usd_per_year') or chosen['cost_usd_per_year']):,.0f}/year.",
    ]
    if chosen.get("verified"):
        reps = ((doc.get("verification") or {}).get("run_length") or {}).get("replications", "?")
        lines.append(f"- **Verified by simulation** (iteration level, each pool in steady state, {reps} replications): "
                     f"P{pct:g} TTFT {_ms(v.get('p99_ttft_ms_sim_mean'))} (mean over replications), upper end of the "
                     f"95 % interval {_ms(v.get('p99_ttft_ms_sim'))}; P{pct:g} TPOT upper end "
                     f"{_ms(v.get('p99_tpot_ms_sim'))}; analytic P{pct:g} TTFT {_ms(v.get('p99_ttft_ms_analytic'))}.")
    else:
        lines.append("- **NOT VERIFIED**: this candidate's counts are the analytic sizing's; simulate it (below) "
                     "before you buy or deploy it.")
    h = doc.get("headroom")
    if h is not None and doc.get("recommendation") is not None and doc["recommendation"]["rank"] == chosen["rank"]:
        lines.append(f"- Headroom: engine steps may be {h['step_slowdown_max']:.0%} slower, or traffic "
                     f"{h['rate_multiplier_max'] - 1:.0%} higher, with the SLOs still met (simulated).")
    spares = v.get("verified_spares") or []
    if any(spares):
        lines.append(f"- Spares for node availability (not in the manifests' replicas): {spares} per pool.")
    return lines


def readme_text(doc: dict[str, Any], chosen: dict[str, Any], pools: list, engine: Engine, model: str | None,
                hf: str | None, translation: str, recheck_n: int, compress: bool) -> str:
    dep = chosen["deployment"]
    which = "the recommended fleet" if doc.get("recommendation") and doc["recommendation"]["rank"] == chosen["rank"] \
        else f"candidate {chosen['rank']}"
    src = ENGINE_SOURCES[engine]
    out = [f"# Deployment of {which} (rank {chosen['rank']})", "",
           f"Written by `fleetplan deploy` (fleetplan {doc.get('version')}) from an `optimize` run (seed "
           f"{doc.get('seed')}); engine **{engine.value}** ({src['version']}, image `{src['image']}`).", "",
           "## What was verified", "", *_verified_lines(doc, chosen), ""]
    if model is None:
        out += ["**No served model.** The plan was sized on the core paper's calibrated per-GPU serving constants "
                "(its Llama-3-70B figures), not on a model you named, so the engine commands and manifests carry the "
                "placeholder `$MODEL` (`REPLACE-WITH-MODEL` in the manifests): set it to your model, and check that "
                "one instance of it fits the GPU count below. Re-running `optimize` with `--model` derives the "
                "parallelism and KV cache from the model itself.", ""]
    else:
        out += [f"Served model: **{model}** (`{hf}`), weights {dep.get('weight_dtype')}, KV cache "
                f"{dep.get('kv_cache_dtype')}.", ""]
    out += ["## Pools", "",
            "| pool | GPU | instances | GPUs / instance | band: prompt + output tokens | router band: prompt tokens "
            "| traffic | λ req/s | max_num_seqs | max_num_batched_tokens | max_model_len | KV blocks | manifest |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in pools:
        s = p.serve
        out.append(f"| {s.pool} | {p.gpu} | {p.instances} | {s.gpus_per_instance} | "
                   f"{p.min_tokens + 1}-{p.max_tokens} | "
                   f"{p.prompt_band[0]}-{p.prompt_band[1]} | {p.traffic_share:.2%} | {p.lam_per_s:.4g} | "
                   f"{s.max_num_seqs} | {s.max_num_batched_tokens} | {s.max_model_len_tokens} | {s.kv_blocks} | "
                   f"{p.manifest_kind} |")
    out += ["", "The largest pool takes every request above the others up to what its KV cache (or the model's "
            "context) holds, as verification simulated it; its `max_model_len` is that limit. The limits are an "
            "instance's; a data-parallel-attention instance's are its ranks' together (see Engine commands).", "",
            "**Timing source of each pool** (what timed its engine steps in planning and verification, "
            "`fleetplan.perf.measured.timing_source`):", "",
            *[f"- {p.serve.pool}: {p.timing_source}" for p in pools], "",
            "## Folder", "", "```",
            "fleet.toml                    the verified fleet (fleetplan simulate --fleet reads it)",
            *[f"engines/{k8s_name(p.serve.pool)}.sh{' ' * max(1, 18 - len(k8s_name(p.serve.pool)))}launch lines of one "
              f"instance ({p.serve.n_nodes} node(s))" for p in pools],
            *[f"kubernetes/{k8s_name(p.serve.pool)}.yaml{' ' * max(1, 14 - len(k8s_name(p.serve.pool)))}"
              f"{p.manifest_kind} + Service" for p in pools],
            "router/semantic-router.yaml   vLLM Semantic Router configuration of the length bands",
            "deployment.json               what was exported and the versions of every format", "```", "",
            "## Apply", "",
            "1. Check the GPU product labels the manifests select on (`deploy.gpus`; they differ by board and driver):"]
    for label in sorted({(gpu_node(p.gpu).label_key, gpu_node(p.gpu).label_value) for p in pools}):
        out.append(f"   `kubectl get nodes -L {label[0]}` should show `{label[1]}` on the nodes to use.")
    out += ["2. Optionally store a HuggingFace token: "
            "`kubectl create secret generic hf-token --from-literal=token=...`.",
            "3. `kubectl apply -f kubernetes/` (a LeaderWorkerSet needs the LWS controller installed).",
            "   Each pod requests exactly its GPUs, mounts a memory `/dev/shm`, and is probed on `/health`: a startup "
            "probe allows 30 minutes for loading weights, readiness takes a loading or stuck engine out of its "
            "Service, liveness restarts it after 3 failures.",
            "4. Run vLLM Semantic Router with `router/semantic-router.yaml` (it routes to each pool's Service "
            "`fleet-<pool>.default.svc.cluster.local:8000`; edit the namespace if you deploy elsewhere).",
            "5. Without Kubernetes: run `engines/<pool>.sh` on each instance's node(s) "
            "(`MODEL`, and for multi-node instances `LEADER_ADDRESS` and `NODE_RANK`, from the environment).", "",
            "## Engine commands", "",
            f"Flags in {engine.value}'s spelling, checked against its argument parser ({'; '.join(src['files'])}). "
            f"The KV cache is pinned to the verified block count at a memory share of {GPU_MEMORY_UTILIZATION}, "
            "prefix caching is off as simulated, and the per-step token budget is the verified one.", ""]
    if any(p.serve.data_parallel_size > 1 for p in pools):
        out += [DP_NOTE[engine], ""]
    if any(p.serve.speculation is not None and p.serve.speculation.is_mtp for p in pools):
        out += [MTP_NOTE[engine], ""]
    for p in pools:
        out += [f"### Pool {p.serve.pool}", "", "```sh"]
        for line in p.launch:
            for part in (line.argv, *([line.then] if line.then else [])):
                text = " ".join(part).replace("{model}", hf or "$MODEL").replace("{leader}", "$LEADER_ADDRESS")
                out.append(("" if p.serve.n_nodes == 1 else f"# node {line.node_rank}\n") + text)
        out += ["```", ""]
    out += ["## Router", "",
            "`router/semantic-router.yaml` configures [vLLM Semantic Router](https://github.com/vllm-project/"
            f"semantic-router) (v0.3 config, read at commit `{SEMANTIC_ROUTER_COMMIT}` and validated against its "
            "config structs in the tests): one `routing.signals.context` rule per pool (`min_tokens`/`max_tokens`), "
            "one decision per rule sending the request to the pool's Service, the largest pool as the default model.",
            "",
            f"**How the bands were translated.** fleetplan splits by prompt + output tokens; the router sees only the "
            f"prompt (estimated as bytes / 4). Edges: {translation}. Each pool therefore gets the traffic share it was "
            "verified with, but a short prompt with a long answer may land in a smaller pool, whose `max_model_len` "
            "then caps the answer; the re-check below simulates the split by total length, as verified."]
    if compress:
        out += ["", "**Compress-and-route.** Prompts just above a pool's edge (up to gamma x the edge) go to that pool "
                "through Semantic Router's `context_compression` decision plugin (target = the pool's prompt edge, "
                "mode `always`); the simulator squeezes them exactly, the plugin compresses extractively."]
    out += ["", "Other gateways: the Gateway API Inference Extension (InferencePool and its endpoint picker) and the "
            "llm-d scheduler choose an endpoint *within* a pool (queue depth, KV-cache use, prefix affinity): they can "
            "replace each pool's Service but not the length split. Envoy AI Gateway routes on headers and model names, "
            "with no prompt-length match. Semantic Router is the one that matches on prompt length, so it carries "
            "the bands; a home-made router is not needed.", "",
            "## Re-check the exported fleet", "", "```sh", recheck_command(doc, model, recheck_n, dep), "```", ""]
    v = chosen.get("verification") or {}
    if chosen.get("verified"):
        out.append(f"Verification's fleet-wide P{doc['inputs'].get('percentile', 99):g} TTFT: mean "
                   f"{_ms(v.get('p99_ttft_ms_sim_mean'))}, 95 % upper bound {_ms(v.get('p99_ttft_ms_sim'))}. The "
                   "command simulates the whole fleet behind its router (verification simulated each pool apart on "
                   "its own sub-stream, the same traffic for a stateless router), so its P99 should agree within "
                   "the two runs' intervals.")
    if dep.get("step_time_margin"):
        out.append(f"The plan sized for steps {dep['step_time_margin']:.0%} slower than modelled; the file has no "
                   "margin, so the re-check runs the modelled steps (lower latencies).")
    if dep.get("calibrated_gpus"):
        out.append(f"Pools on {', '.join(dep['calibrated_gpus'])} were timed by a calibrated profile: pass the "
                   "same `--perf-profile`.")
    if any(p.timing_source.startswith(MEASURED_PREFIX) for p in pools):
        out.append(f"Pools timed by {MEASURED_PREFIX}'s measured tables are re-timed by them only where the same "
                   "package is installed (`pip install 'fleetplan[aiconfigurator]'`, `FLEETPLAN_TIMING_SOURCE` not "
                   "`roofline`); elsewhere the re-check runs the roofline and its figures differ.")
    out += ["", "## Formats and versions", "",
            f"- Engine flags: {src['repository']} {'; '.join(src['files'])}.",
            f"- Kubernetes: core/v1 and apps/v1 schemas of Kubernetes {KUBERNETES_VERSION} (kubernetes-validate); "
            f"LeaderWorkerSet: {LWS_SOURCE}.",
            f"- Router: vllm-project/semantic-router@{SEMANTIC_ROUTER_COMMIT} (v0.3 CanonicalConfig).",
            "- GPU labels: NVIDIA GPU feature discovery `nvidia.com/gpu.product`, AMD node labeller "
            "`amd.com/gpu.product-name` (`fleetplan.deploy.gpus`)."]
    return "\n".join(out) + "\n"


def pdd_recheck_command(doc: dict[str, Any], dep: dict[str, Any], model: str | None) -> str:
    """``fleetplan simulate pdd`` on the run's workload and rate with the exported roles (one run)."""
    inputs, d = doc["inputs"], dep["disaggregated"]
    pools = {t["name"]: t for t in dep["fleet"]["pool"]}
    gpus = {p["name"]: p["gpu"] for p in dep["pools"]}
    parts = ["fleetplan simulate pdd", f"--workload {inputs['workload']}", f"--lam {inputs['lam_per_s']:g}",
             "--sim-requests 20000", f"--replications {_replications(doc)}", f"--seed {doc.get('seed', 0)}"]
    for role in ("prefill", "decode"):
        parts += [f"--{role}-gpu {gpus[role]}", f"--{role}-instances {pools[role]['instances']}",
                  f"--{role}-max-num-seqs {pools[role]['max_num_seqs']}"]
    parts.append(f"--prefill-max-num-batched-tokens {pools['prefill']['max_num_batched_tokens']}")
    parts += [f"--policy {d['policy']}", f"--binding {d['binding']}", f"--latency-ms {d['kv_latency_ms']:g}",
              f"--max-model-len {pools['prefill']['max_context_tokens']}"]
    if d.get("kv_bandwidth_gb_per_s") is not None:
        parts.append(f"--bandwidth-gb-per-s {d['kv_bandwidth_gb_per_s']:g}")
    if inputs.get("input_fraction") is not None:
        parts.append(f"--input-fraction {inputs['input_fraction']:g}")
    if model is not None:
        parts.append(f"--model {model.lower()}")
    return " \\\n    ".join(parts)


def pdd_readme_text(doc: dict[str, Any], chosen: dict[str, Any], worker_args: dict[str, list[str]],
                    model: str | None, hf: str | None) -> str:
    """The README of a prefill-decode fleet exported as NVIDIA Dynamo's graph (``deploy.dynamo``)."""
    dep, d = chosen["deployment"], chosen["deployment"]["disaggregated"]
    pools = {t["name"]: t for t in dep["fleet"]["pool"]}
    infos = {p["name"]: p for p in dep["pools"]}
    v = chosen.get("verification") or {}
    out = [f"# Deployment of candidate {chosen['rank']}: prefill-decode fleet on NVIDIA Dynamo", "",
           f"Written by `fleetplan deploy` (fleetplan {doc.get('version')}) from an `optimize` run (seed "
           f"{doc.get('seed')}).", "", "## What was verified", "", *_verified_lines(doc, chosen),
           f"- Simulated with the PDD simulator: prefill and decode roles, KV transfer {d['kv_latency_ms']:g} ms + "
           f"prompt x {d['kv_bytes_per_token']:,.0f} B / {d['kv_bandwidth_gb_per_s'] or 'inf'} GB/s, decode instance "
           f"chosen by {d['policy']} at prefill start ({d['binding']} binding); at the analytic counts the simulated "
           f"P99 TTFT was {_ms((v.get('at_analytic') or {}).get('p99_ttft_ms_sim'))} (mean over replications).", "",
           "| role | GPU | instances | GPUs / instance | max_num_seqs | max_num_batched_tokens | max_model_len | "
           "KV blocks |", "|---|---|---|---|---|---|---|---|"]
    for role in ("prefill", "decode"):
        t, info = pools[role], infos[role]
        out.append(f"| {role} | {info['gpu']} | {t['instances']} | {info['gpus_per_instance']} | {t['max_num_seqs']} | "
                   f"{t['max_num_batched_tokens']} | {t['max_context_tokens']} | {t['kv_blocks']} |")
    if model is None:
        out += ["", "**No served model**: the plan used the core paper's calibrated per-GPU constants; the workers "
                "carry the placeholder `REPLACE-WITH-MODEL` (`$MODEL` in the scripts): set your model."]
    else:
        out += ["", f"Served model: **{model}** (`{hf}`)."]
    out += ["", "## Why Dynamo", "",
            "NVIDIA Dynamo's `DynamoGraphDeployment` names the roles as this plan does (a frontend that routes each "
            "request through a prefill worker and then a decode worker, KV moved by NIXL), gives each role its "
            "replicas and GPUs, and runs vLLM workers that take vLLM's engine flags, so the verified limits keep "
            "their vLLM spelling. llm-d splits the same roles over Helm values of two deployments plus its "
            "scheduler. The frontend is the router here: no length bands, every request is prefilled then decoded.",
            "", "## Apply", "",
            "1. Install the Dynamo platform (its operator and CRDs); check the GPU product labels in "
            "`kubernetes/dynamo-graph.yaml` against `kubectl get nodes -L nvidia.com/gpu.product`.",
            "2. `kubectl create secret generic hf-token --from-literal=HF_TOKEN=...` (the workers read it), then "
            "`kubectl apply -f kubernetes/dynamo-graph.yaml`.",
            "3. Without Kubernetes: start Dynamo's frontend (`python3 -m dynamo.frontend`) and run "
            "`engines/prefill.sh` and `engines/decode.sh` on each worker's node.", "", "## Worker arguments", ""]
    for role, args in worker_args.items():
        out += [f"### {role}", "", "```sh", "python3 -m dynamo.vllm " + " ".join(args), "```", ""]
    out += ["## Re-check the exported fleet", "", "```sh", pdd_recheck_command(doc, dep, model), "```", "",
            "`simulate pdd` runs the exported roles with verification's limits (the prefill role's "
            f"{pools['prefill']['max_num_batched_tokens']}-token budget per step, each role's `max_num_seqs`), "
            "transfer and assignment, and verification's replications; its random streams are its own (verification "
            "seeds each candidate apart), so compare its mean and 95 % upper bound of P99 TTFT with the figures "
            "above within the two intervals"
            + (", and it times both roles with the GPU's calibrated constants, not the served model's step model "
               "(the tests re-simulate the exported roles with it through the Python API)." if model else "."), "",
            "## Formats and versions", "",
            f"- Dynamo graph: ai-dynamo/dynamo@{DYNAMO_COMMIT} "
            "(components/backends/vllm/deploy/disagg.yaml layout; DynamoComponentDeploymentSharedSpec fields).",
            f"- vLLM flags: {'; '.join(ENGINE_SOURCES[Engine.VLLM]['files'])}."]
    return "\n".join(out) + "\n"
