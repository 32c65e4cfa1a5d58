"""Kubernetes manifests of one pool: its engines and a Service in front of them.

* An instance on one node is a pod of an ``apps/v1`` **Deployment** (``replicas`` = the pool's verified
  instances).  An instance spanning nodes is a group of a **LeaderWorkerSet**
  (``leaderworkerset.x-k8s.io/v1``, kubernetes-sigs/lws: one leader pod and ``size - 1`` workers per
  replica, restarted as a group; ``LWS_LEADER_ADDRESS`` and ``LWS_WORKER_INDEX`` are set by its
  controller), as in LWS's own vLLM example (``docs/examples/vllm/GPU/lws.yaml``).  A vLLM
  data-parallel instance's worker pods run ``vllm serve --headless`` with their first rank
  ``LWS_WORKER_INDEX x`` the ranks per node (``deploy.engines``), computed by ``sh``.
* Each engine container requests and is limited to its GPUs (``nvidia.com/gpu`` or ``amd.com/gpu``), is
  pinned by ``nodeSelector`` to its GPU product label (``deploy.gpus``), mounts a memory-backed
  ``/dev/shm`` (NCCL between tensor-parallel ranks), and is probed on the engine's ``/health``: a
  startup probe allowing ``STARTUP_BUDGET_S`` for loading weights, then readiness (taken out of the
  Service while failing) and liveness (restarted after ``LIVENESS_FAILURES`` failures).
* A ``v1`` **Service** (ClusterIP, port ``engines.PORT``) selects the pool's serving pods (LWS: the
  leaders); the router sends each pool's band to its Service.

The model reaches the container as the environment variable ``MODEL`` (``$(MODEL)`` in the arguments,
expanded by the kubelet): the served model's HuggingFace repository, or a placeholder the user
replaces when the plan had none.  ``HF_TOKEN`` comes from the Secret ``hf-token`` when it exists.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

from fleetplan.deploy.engines import HEALTH_PATH, PORT, Engine, LaunchLine, PoolServe, launch_lines
from fleetplan.deploy.gpus import GpuNode

__all__ = ["LIVENESS_FAILURES", "STARTUP_BUDGET_S", "PoolManifests", "k8s_name", "pool_manifests"]

STARTUP_BUDGET_S = 1800  # weights of a 400B model over a slow link; the probe retries every 10 s
LIVENESS_FAILURES = 3
APP_LABEL = "app.kubernetes.io/name"
POOL_LABEL = "fleetplan.io/pool"
SHM_GIB = 16


def k8s_name(text: str) -> str:
    """``text`` as a DNS-1123 label (lower case, ``-``, at most 63 characters)."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return (name or "pool")[:63].rstrip("-")


@dataclass(frozen=True)
class PoolManifests:
    """One pool's manifests, in apply order (workload, then Service), and the workload's kind."""

    kind: str  # "Deployment" or "LeaderWorkerSet"
    documents: tuple[dict[str, Any], ...]


def _probe(period_s: int, failures: int) -> dict[str, Any]:
    return {"httpGet": {"path": HEALTH_PATH, "port": "http"}, "periodSeconds": period_s,
            "failureThreshold": failures, "timeoutSeconds": 5}


def _k8s_argv(argv: tuple[str, ...]) -> list[str]:
    return [a.replace("{model}", "$(MODEL)").replace("{leader}", "$(LWS_LEADER_ADDRESS)") for a in argv]


def _command(line: LaunchLine, engine: Engine) -> tuple[list[str], bool]:
    """(container command, serves HTTP) of a launch line."""
    serves = line.node_rank == 0  # the leader serves HTTP; workers only join its process group
    if not line.then:
        argv = _k8s_argv(line.argv)
        if engine is Engine.SGLANG and "--node-rank" in argv:  # the rank LWS gives this pod
            argv[argv.index("--node-rank") + 1] = "$(LWS_WORKER_INDEX)"
        if "--data-parallel-start-rank" in argv:  # vLLM DP worker pod: its first rank from LWS's index, in sh
            at = argv.index("--data-parallel-start-rank")
            local = int(argv[at + 1]) // line.node_rank
            script = f'exec {shlex.join(argv[:at + 1])} "$((LWS_WORKER_INDEX * {local}))" {shlex.join(argv[at + 2:])}'
            return ["sh", "-c", script.rstrip()], serves
        return argv, serves
    script = " && ".join(shlex.join(_k8s_argv(part)) for part in (line.argv, line.then))
    return ["sh", "-c", script], serves


def _container(name: str, command: list[str], serves: bool, node: GpuNode, gpus: int, model: str,
               image: str) -> dict[str, Any]:
    c: dict[str, Any] = {
        "name": name,
        "image": image,
        "command": command,
        "env": [{"name": "MODEL", "value": model},
                {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token",
                                                                     "optional": True}}}],
        "resources": {"requests": {node.resource: str(gpus)}, "limits": {node.resource: str(gpus)}},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    if serves:
        c["ports"] = [{"name": "http", "containerPort": PORT, "protocol": "TCP"}]
        c["startupProbe"] = _probe(10, STARTUP_BUDGET_S // 10)
        c["readinessProbe"] = _probe(10, 3)
        c["livenessProbe"] = _probe(30, LIVENESS_FAILURES)
    return c


def _pod_spec(containers: list[dict[str, Any]], node: GpuNode) -> dict[str, Any]:
    return {"nodeSelector": {node.label_key: node.label_value}, "containers": containers,
            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{SHM_GIB}Gi"}}]}


def pool_manifests(s: PoolServe, instances: int, engine: Engine | str, node: GpuNode, model: str,
                   image: str) -> PoolManifests:
    """The manifests of pool ``s`` with ``instances`` engines (module docstring)."""
    engine = Engine.parse(engine)
    name = k8s_name(f"fleet-{s.pool}")
    labels = {APP_LABEL: "fleetplan", POOL_LABEL: k8s_name(s.pool)}
    lines = launch_lines(engine, s)
    service_selector = dict(labels)
    if len(lines) == 1:
        command, serves = _command(lines[0], engine)
        workload = {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "labels": labels},
            "spec": {"replicas": instances, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": _pod_spec([_container(engine.value, command, serves, node, s.gpus_per_pod,
                                                                model, image)], node)}},
        }
        kind = "Deployment"
    else:
        leader_cmd, _ = _command(lines[0], engine)
        worker_cmd, _ = _command(lines[1], engine)
        workload = {
            "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "labels": labels},
            "spec": {"replicas": instances, "leaderWorkerTemplate": {
                "size": s.n_nodes, "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": {"metadata": {"labels": {**labels, "role": "leader"}},
                                   "spec": _pod_spec([_container(f"{engine.value}-leader", leader_cmd, True, node,
                                                                 s.gpus_per_pod, model, image)], node)},
                "workerTemplate": {"metadata": {"labels": {**labels, "role": "worker"}},
                                   "spec": _pod_spec([_container(f"{engine.value}-worker", worker_cmd, False, node,
                                                                 s.gpus_per_pod, model, image)], node)},
            }},
        }
        kind = "LeaderWorkerSet"
        service_selector["role"] = "leader"
    service = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "labels": labels},
        "spec": {"type": "ClusterIP", "selector": service_selector,
                 "ports": [{"name": "http", "port": PORT, "targetPort": "http", "protocol": "TCP"}]},
    }
    return PoolManifests(kind, (workload, service))
