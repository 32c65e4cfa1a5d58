"""How Kubernetes names each catalog GPU: the extended resource a pod requests, the node label that
selects the GPU product, and the GPUs one node holds (which decides when an instance spans nodes).

* NVIDIA: the device plugin's resource ``nvidia.com/gpu``; GPU feature discovery (GFD) labels each node
  ``nvidia.com/gpu.product`` with the NVML device name, blanks turned into ``-``
  (https://github.com/NVIDIA/gpu-feature-discovery, "Generated Labels"; NVML names as ``nvidia-smi -L``
  prints them, e.g. "NVIDIA H100 80GB HBM3").
* AMD: the ROCm device plugin's resource ``amd.com/gpu``; the AMD GPU node labeller's product label
  ``amd.com/gpu.product-name`` (https://instinct.docs.amd.com/projects/k8s-device-plugin/en/latest/,
  "node labeller"; the value is the marketing name with blanks as ``_``).

Label values differ by board and driver (SXM vs PCIe, memory size): check yours with
``kubectl get nodes -L nvidia.com/gpu.product`` (or ``-L amd.com/gpu.product-name``) and edit the
manifests' ``nodeSelector`` where they differ.  GPUs per node: 8 for HGX/OAM baseboards (H100/H200/
B200/H800/H20 SXM, A100 SXM4, MI300X), the common cloud shapes for PCIe cards (AWS g5.48xlarge: 8x A10G;
g6.48xlarge: 8x L4; GCP a2/a3: 8; L40S: 8 in the common 8-GPU servers).
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetplan.errors import UnknownNameError

__all__ = ["GPU_NODES", "GpuNode", "gpu_node"]


@dataclass(frozen=True)
class GpuNode:
    """The Kubernetes view of one GPU type (module docstring)."""

    resource: str  # extended resource a container requests
    label_key: str
    label_value: str
    gpus_per_node: int


_NV, _NV_LABEL = "nvidia.com/gpu", "nvidia.com/gpu.product"

#: Catalog GPU name -> its Kubernetes view (module docstring for the sources).
GPU_NODES: dict[str, GpuNode] = {
    "A10G": GpuNode(_NV, _NV_LABEL, "NVIDIA-A10G", 8),
    "A100-40GB": GpuNode(_NV, _NV_LABEL, "NVIDIA-A100-SXM4-40GB", 8),
    "A100-80GB": GpuNode(_NV, _NV_LABEL, "NVIDIA-A100-SXM4-80GB", 8),
    "H100-SXM": GpuNode(_NV, _NV_LABEL, "NVIDIA-H100-80GB-HBM3", 8),
    "H100-PCIe": GpuNode(_NV, _NV_LABEL, "NVIDIA-H100-PCIe", 8),
    "H200": GpuNode(_NV, _NV_LABEL, "NVIDIA-H200", 8),
    "H800": GpuNode(_NV, _NV_LABEL, "NVIDIA-H800", 8),
    "H20": GpuNode(_NV, _NV_LABEL, "NVIDIA-H20", 8),
    "H20-3e": GpuNode(_NV, _NV_LABEL, "NVIDIA-H20-3e", 8),  # NVML name "NVIDIA H20-3e" (gpu_profiles/h20-3e.toml)
    "B200": GpuNode(_NV, _NV_LABEL, "NVIDIA-B200", 8),
    "L4": GpuNode(_NV, _NV_LABEL, "NVIDIA-L4", 8),
    "L40S": GpuNode(_NV, _NV_LABEL, "NVIDIA-L40S", 8),
    "MI300X": GpuNode("amd.com/gpu", "amd.com/gpu.product-name", "AMD_Instinct_MI300X", 8),
}


def gpu_node(gpu: str) -> GpuNode:
    """The Kubernetes view of catalog GPU ``gpu``; ``UnknownNameError`` listing the known ones."""
    for name, node in GPU_NODES.items():
        if name.lower() == str(gpu).strip().lower():
            return node
    raise UnknownNameError("GPU for Kubernetes", str(gpu), sorted(GPU_NODES))
