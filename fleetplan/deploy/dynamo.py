"""A prefill-decode fleet as NVIDIA Dynamo's ``DynamoGraphDeployment`` (``nvidia.com/v1alpha1``).

Why Dynamo: its graph names the disaggregated roles directly (a ``frontend`` component that takes the
OpenAI requests and routes each through a ``worker`` of ``subComponentType: prefill`` then one of
``decode``, KV moved between them by NIXL), every role is one entry of ``spec.services`` with its
``replicas`` and GPU ``resources.limits.gpu``, and its vLLM worker (``python3 -m dynamo.vllm``) takes vLLM's
engine flags, so the verified limits keep their vLLM spelling.  llm-d expresses the same split as Helm
values of separate prefill and decode deployments plus its scheduler, with no single object to validate.
The layout follows Dynamo's own example ``components/backends/vllm/deploy/disagg.yaml`` (ai-dynamo/dynamo at
``DYNAMO_COMMIT``); the service fields are those of ``DynamoComponentDeploymentSharedSpec``
(``deploy/cloud/operator/api/v1alpha1/dynamocomponentdeployment_types.go``).

Each worker's arguments are the vLLM launch line of its role (``engines``) without ``serve``'s positional
model, host and port (the frontend serves HTTP), plus ``--is-prefill-worker`` on the prefill role; the
decode role's ``--max-num-seqs`` is the verified decode batch.  The frontend is one replica on no GPU.
"""

from __future__ import annotations

from typing import Any

from fleetplan.deploy.engines import LaunchLine
from fleetplan.deploy.gpus import GpuNode
from fleetplan.errors import ConfigError

__all__ = ["DYNAMO_COMMIT", "DYNAMO_IMAGE", "dynamo_graph", "worker_args"]

DYNAMO_COMMIT = "416ff06e7feabbebb220e56a2e5dfed656ec4bbd"
DYNAMO_IMAGE = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1"  # the image of Dynamo's example at that commit
PREFILL_FLAG = "--is-prefill-worker"
_DROP = {"--host": 1, "--port": 1}


def worker_args(line: LaunchLine, model: str, prefill: bool) -> list[str]:
    """``dynamo.vllm``'s arguments for a role: the ``vllm serve`` line less its positional model, host and port."""
    argv = list(line.argv)
    if argv[:3] != ["vllm", "serve", "{model}"]:
        raise ConfigError(f"a Dynamo vLLM worker takes vLLM's launch line, got {' '.join(argv[:3])!r}; export the "
                          "prefill-decode fleet with `engine` 'vllm'", param="engine")
    rest, out, i = argv[3:], ["--model", model], 0
    while i < len(rest):
        if rest[i] in _DROP:
            i += 1 + _DROP[rest[i]]
            continue
        out.append(rest[i])
        i += 1
    return [*out, PREFILL_FLAG] if prefill else out


def dynamo_graph(name: str, roles: list[tuple[str, int, list[str], int]], node: dict[str, GpuNode],
                 image: str = DYNAMO_IMAGE) -> dict[str, Any]:
    """The graph: ``roles`` = (role, replicas, worker arguments, GPUs per replica) for prefill and decode;
    ``node`` the Kubernetes view of each role's GPU (its product label selects the nodes)."""
    services: dict[str, Any] = {
        "Frontend": {"componentType": "frontend", "replicas": 1,
                     "extraPodSpec": {"mainContainer": {"image": image}}},
    }
    for role, replicas, args, gpus in roles:
        g = node[role]
        services[f"Vllm{role.capitalize()}Worker"] = {
            "envFromSecret": "hf-token",
            "componentType": "worker",
            "subComponentType": role,
            "replicas": replicas,
            "resources": {"limits": {"gpu": str(gpus)}},
            "extraPodSpec": {
                "nodeSelector": {g.label_key: g.label_value},
                "mainContainer": {"image": image, "workingDir": "/workspace/components/backends/vllm",
                                  "command": ["python3", "-m", "dynamo.vllm"], "args": args},
            },
        }
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment",
            "metadata": {"name": name}, "spec": {"backendFramework": "vllm", "services": services}}
