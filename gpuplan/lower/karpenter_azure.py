"""The Azure provider's half of a Karpenter pool (AKS Node Auto Provisioning):
``pools/<pool>/aksnodeclass.yaml``.

``karpenter.azure.com/v1beta1`` AKSNodeClass (the CRD gpuplan pins from
Azure/karpenter-provider-azure@v1.14.2, ``gpuplan/upstream/SOURCES-aks.md``), referenced by the
pool's NodePool (``gpuplan.lower.karpenter.node_class_ref``):

- ``imageFamily``: the pool's ``karpenter.imageFamily`` when set; otherwise left out, so AKS
  picks its default image for the Kubernetes version (MicrosoftDocs/azure-aks-docs @fb060abe
  articles/aks/node-auto-provisioning-aksnodeclass.md:25);
- ``osDiskSizeGB``: 200 (the CRD's default is 128): GPU images are large, as on AWS
  (``gpuplan.lower.karpenter_aws.GPU_VOLUME_SIZE``);
- ``kubelet``: the CPU and Topology Manager policies of the pool's ``topology`` (the AKSNodeClass
  takes these two of them, as an agent pool's ``kubeletConfig`` does: ``gpuplan.provisioning.aks.
  kubelet_config``; GP695 refuses the others);
- ``gpu.mode: None`` on the GPU Operator path (``karpenter.driver: gpu-operator``): AKS's node
  bootstrap installs no driver (``gpuplan.provisioning.nap``); left out otherwise (``Driver``).

No user data and no MIG field exist on an AKSNodeClass (GP698). A target of its own, beside the
NodePool's, like ``gpuplan.lower.karpenter_aws``.

Stage: lower (docs/architecture.md)."""

from __future__ import annotations

from typing import Any, Sequence

from gpuplan.artifacts import Artifact, Produced
from gpuplan.identity import POOL_LABEL, kubelet_topology_fields
from gpuplan.lower.common import metadata, obj, object_annotations
from gpuplan.lower.karpenter import karpenter_pools
from gpuplan.provisioning import nap
from gpuplan.provisioning.pools import karpenter_cloud
from gpuplan.resolve import PoolView, ResolvedFleet

GPU_OS_DISK_GB = nap.GPU_OS_DISK_GB


def aksnodeclass(rf: ResolvedFleet, pv: PoolView) -> dict[str, Any]:
    from gpuplan.provisioning.aks import kubelet_config

    k = pv.pool.karpenter
    assert k is not None
    spec: dict[str, Any] = {}
    if k.image_family is not None:
        spec["imageFamily"] = k.image_family
    spec["osDiskSizeGB"] = GPU_OS_DISK_GB
    kubelet, _refused = kubelet_config(kubelet_topology_fields(pv.pool.topology))  # GP695 refuses the rest
    if kubelet:
        spec["kubelet"] = kubelet
    if (mode := nap.gpu_mode(pv.pool)) is not None:
        spec["gpu"] = {"mode": mode}
    meta = metadata(rf, pv.name, extra_labels={POOL_LABEL: pv.name},
                    annotations=object_annotations(rf, nap.NODECLASS_KIND) or None)
    return obj(nap.NODECLASS_API, nap.NODECLASS_KIND, meta, spec=spec)


def lower(rf: ResolvedFleet, produced: Sequence[Produced]) -> list[Artifact]:
    if karpenter_cloud(rf.fleet.spec.cluster) != "azure":
        return []
    return [Artifact(path=f"pools/{pv.name}/aksnodeclass.yaml", documents=(aksnodeclass(rf, pv),),
                     description=f"AKS Node Auto Provisioning AKSNodeClass of pool {pv.name} (image family, "
                                 "OS disk, kubelet topology, GPU driver mode)")
            for pv in karpenter_pools(rf)]
