"""Karpenter on Azure: AKS Node Auto Provisioning (NAP) for ``karpenter`` pools on a cluster
with ``cluster.azure`` and no ``cluster.aws`` (:func:`gpuplan.provisioning.pools.karpenter_cloud`).

The pool is a Karpenter pool like on AWS (one NodePool, ``limits.nodes`` as its ceiling, the same
labels, taints, weights and disruption); only the node class differs: an ``AKSNodeClass``
(``karpenter.azure.com/v1beta1``, ``gpuplan.lower.karpenter_azure``) instead of an EC2NodeClass,
and ``instanceTypes`` are Azure VM sizes (``gpuplan.cloud.aks``).

**AKS runs its own Karpenter**, one release per Kubernetes minor (MicrosoftDocs/azure-aks-docs
@fb060abe6a8fef960d4c487b543bf7b1e97808fe articles/aks/supported-kubernetes-versions.md:90,96,102,108:
``karpenter 1.12.2-aks`` on 1.36, ``1.7.0-aks`` on 1.35, ``1.6.5-aks`` on 1.34, ``0.7.3-aks`` on
1.33). Those are Azure/karpenter-provider-azure releases; the Karpenter core each builds on is its
``go.mod`` ``sigs.k8s.io/karpenter`` (tags v0.7.3: v1.0.5; v1.6.5: v1.6.2; v1.7.0: v1.7.1; v1.12.2:
v1.12.0 replaced by a v1.12.1 pre-release commit). What gpuplan needs of it (:data:`FEATURES`):

- ``limits.nodes`` (gpuplan's ceiling) is enforced from core v1.11.0 (kubernetes-sigs/karpenter
  commit 9f749d9, #2526; GP633 on AWS): only AKS 1.36's Karpenter has it;
- the ``NodeOverlay`` CRD ships from provider v1.7.0 (``pkg/apis/crds/karpenter.sh_nodeoverlays.yaml``
  first in that tag; Karpenter reads it only with its ``NodeOverlay`` feature gate,
  pkg/cloudprovider/cloudprovider.go:568 @v1.12.2);
- the AKSNodeClass ``gpu.mode`` field (``None``: no driver, for the GPU Operator) from provider
  v1.12.2 (absent from the v1.7.0 CRD).

**GPU VM sizes.** The provider passes ``GPUNode`` and the driver version to AKS's node bootstrap
when the VM size is a GPU size and ``gpu.mode`` is not ``None``
(Azure/karpenter-provider-azure@v1.14.2 pkg/providers/imagefamily/bootstrap/aksbootstrap.go:309-322:
with ``None`` it sets ``GPU_NODE=false`` so AgentBaker installs no driver, no fabric manager and
keeps ``runc`` instead of the NVIDIA runtime); it never asks AKS for its device plugin
(``EnableGPUDevicePluginIfNeeded: false``, "deprecated/preview only", staticvalues.go:138 and
aksbootstrap.go:153). So on NAP gpuplan's GPU Operator runs the device plugin (and, with
``driver: gpu-operator``, the driver and toolkit) as on EKS: the platform does not run the GPU
stack. The AKSNodeClass has no MIG field (pkg/apis/v1beta1/aksnodeclass.go @v1.14.2) and no
user data, so gpuplan has no way to lay out MIG before the node registers (GP698).

Spot: ``karpenter.sh/capacity-type: spot`` launches Spot VMs (pkg/providers/instance/
aksmachineinstanceutils.go:50-52) labelled ``kubernetes.azure.com/scalesetpriority=spot``
(pkg/cloudprovider/cloudprovider.go:656); no ``reserved`` capacity type exists on Azure.

Stage: resolve (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuplan.cloud.machine import Machine

NODECLASS_API = "karpenter.azure.com/v1beta1"
NODECLASS_GROUP = "karpenter.azure.com"
NODECLASS_KIND = "AKSNodeClass"
# the AKSNodeClass osDiskSizeGB gpuplan writes (the CRD default is 128): GPU images are large, as on
# AWS (gpuplan.lower.karpenter_aws.GPU_VOLUME_SIZE, 200Gi)
GPU_OS_DISK_GB = 200


@dataclass(frozen=True)
class Bundled:
    """AKS's Karpenter on one Kubernetes minor."""

    aks: str  # as AKS names it, "1.12.2-aks"
    provider: tuple[int, ...]  # Azure/karpenter-provider-azure tag
    core: tuple[int, ...]  # its sigs.k8s.io/karpenter (go.mod)


# supported-kubernetes-versions.md:90,96,102,108 @fb060abe; cores from each provider tag's go.mod
BUNDLED: dict[str, Bundled] = {
    "1.33": Bundled("0.7.3-aks", (0, 7, 3), (1, 0, 5)),
    "1.34": Bundled("1.6.5-aks", (1, 6, 5), (1, 6, 2)),
    "1.35": Bundled("1.7.0-aks", (1, 7, 0), (1, 7, 1)),
    "1.36": Bundled("1.12.2-aks", (1, 12, 2), (1, 12, 0)),
}

# What gpuplan's NAP objects need -> ("core"|"provider", first version, what breaks without it)
FEATURES: dict[str, tuple[str, tuple[int, ...], str]] = {
    "limits.nodes": ("core", (1, 11, 0), "does not enforce NodePool limits.nodes: the pool has no GPU ceiling"),
    "NodeOverlay": ("provider", (1, 7, 0), "ships no NodeOverlay CRD: Karpenter cannot see the pool's shared units"),
    "gpu.mode": ("provider", (1, 12, 2), "has no AKSNodeClass gpu.mode: AKS installs its driver on every GPU node"),
}


def bundled(kubernetes_version: str) -> Bundled | None:
    """AKS's Karpenter on a Kubernetes minor (None: a minor gpuplan has no record of)."""
    return BUNDLED.get(kubernetes_version)


def needs(pool: Any) -> list[str]:
    """The :data:`FEATURES` a NAP pool's objects use."""
    k = pool.karpenter
    out = ["limits.nodes"]
    if k.node_overlay:
        out.append("NodeOverlay")
    if k.driver == "gpu-operator":
        out.append("gpu.mode")
    return out


def missing(kubernetes_version: str, pool: Any) -> list[str] | None:
    """The features of :func:`needs` AKS's Karpenter on that minor lacks (None: minor unknown)."""
    b = bundled(kubernetes_version)
    if b is None:
        return None
    return [f for f in needs(pool) if (b.core if FEATURES[f][0] == "core" else b.provider) < FEATURES[f][1]]


def vm_size(name: str) -> "Machine | None":
    """An Azure GPU VM size from gpuplan's table (``gpuplan.cloud.aks``)."""
    from gpuplan.cloud.aks import machine_type

    return machine_type(name)


def closest_vm_size(name: str) -> str | None:
    from gpuplan.cloud.aks import closest

    return closest(name)


def gpus_per_node(pool: Any) -> int | None:
    """GPUs per node of a NAP pool from its first known VM size."""
    for name in pool.karpenter.instance_types:
        m = vm_size(name)
        if m is not None and m.gpu_count:
            return m.gpu_count
    return None


def gpu_mode(pool: Any) -> str | None:
    """The AKSNodeClass ``gpu.mode``: ``None`` on the GPU Operator path; None (field left out,
    the CRD's default ``Driver``) otherwise."""
    return "None" if pool.karpenter.driver == "gpu-operator" else None


# Fields of ``pools[].karpenter`` only the AWS provider has (spec key -> what it is on AWS).
AWS_ONLY = {
    "amiFamily": "EC2NodeClass AMI alias", "amiVersion": "EC2NodeClass AMI alias",
    "efa": "EC2 Elastic Fabric Adapter", "capacityReservations": "EC2 capacity reservations",
}
AZURE_ONLY = {"imageFamily": "AKSNodeClass imageFamily", "driver": "AKSNodeClass gpu.mode"}
