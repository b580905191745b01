"""What an AKS Node Auto Provisioning (Karpenter on Azure) NodePool and its AKSNodeClass say for
``pools[].karpenter``: which NodePools are NAP's, and the AKSNodeClass fields gpuplan writes.

A ``karpenter.sh`` NodePool whose ``spec.template.spec.nodeClassRef.group`` is
``karpenter.azure.com`` (kind ``AKSNodeClass``) is launched by Karpenter on Azure; its
requirements are evaluated over gpuplan's Azure VM-size table (``gpuplan.cloud.aks``,
``gpuplan.cloud.karpenter_requirements.TABLES``). Its AKSNodeClass (``karpenter.azure.com/v1beta1``,
or the deprecated ``v1alpha2``; Azure/karpenter-provider-azure@v1.14.2 pkg/apis/v1beta1/aksnodeclass.go
and pkg/apis/v1alpha2/aksnodeclass.go) gives, as ``gpuplan.lower.karpenter_azure`` writes them:

- ``imageFamily`` (v1beta1 aksnodeclass.go:84, v1alpha2 :67) -> ``karpenter.imageFamily``;
- ``gpu.mode: None`` (v1beta1 :125, :330, :345; AKS's bootstrap then installs no driver,
  pkg/providers/imagefamily/bootstrap/aksbootstrap.go:309-322) -> ``karpenter.driver: gpu-operator``;
  ``Driver`` (the CRD's default) -> nothing (``aks``);
- ``osDiskSizeGB`` (v1beta1 :76, v1alpha2 :59): gpuplan writes 200; any other size is a TODO (the
  round trip shows it);
- ``kubelet``: read by ``gpuplan.importer.karpenter_read.read_kubelet`` (its topology fields).

Any other field set (``vnetSubnetID``, ``tags``, ``fipsMode``, ``maxPods``, ...) is one gpuplan does
not write: a TODO naming it (GP958), and the round trip lists it.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuplan.artifacts import dig as _get
from gpuplan.importer.read import Obj
from gpuplan.provisioning.nap import GPU_OS_DISK_GB, NODECLASS_GROUP as GROUP

IMAGE_FAMILIES = ("Ubuntu", "Ubuntu2204", "Ubuntu2404", "AzureLinux")  # spec.models.Karpenter.image_family
READ = ("imageFamily", "gpu", "osDiskSizeGB", "kubelet")


def is_nap(nodepool: Obj) -> bool:
    """A NodePool whose nodeClassRef names an AKSNodeClass (Karpenter on Azure)."""
    return _get(nodepool.data, "spec", "template", "spec", "nodeClassRef", "group") == GROUP


@dataclass
class NodeClass:
    fields: dict[str, Any] = field(default_factory=dict)  # pools[].karpenter keys
    sources: dict[str, str] = field(default_factory=dict)  # key -> where it came from
    todos: list[tuple[str, tuple]] = field(default_factory=list)  # (what, path in the object)


def read_node_class(nc: Obj) -> NodeClass:
    out = NodeClass()
    spec = nc.data.get("spec") if isinstance(nc.data.get("spec"), dict) else {}
    fam = spec.get("imageFamily")
    if isinstance(fam, str) and fam in IMAGE_FAMILIES:
        out.fields["imageFamily"] = fam
        out.sources["imageFamily"] = f"from AKSNodeClass {nc.name} spec.imageFamily"
    elif fam is not None:
        out.todos.append((f"AKSNodeClass {nc.name} imageFamily {fam!r} is none gpuplan writes",
                          ("spec", "imageFamily")))
    mode = _get(spec, "gpu", "mode")
    if mode == "None":
        out.fields["driver"] = "gpu-operator"
        out.sources["driver"] = f"from AKSNodeClass {nc.name} spec.gpu.mode None"
    elif mode not in (None, "Driver"):
        out.todos.append((f"AKSNodeClass {nc.name} gpu.mode {mode!r} is none gpuplan writes", ("spec", "gpu", "mode")))
    disk = spec.get("osDiskSizeGB")
    if disk != GPU_OS_DISK_GB:
        out.todos.append((f"AKSNodeClass {nc.name} osDiskSizeGB is {disk if disk is not None else 'unset (128)'}; "
                          f"gpuplan writes {GPU_OS_DISK_GB}: new nodes get that disk (the round trip shows it)",
                          ("spec", "osDiskSizeGB") if disk is not None else ("spec",)))
    for key in sorted(k for k in spec if k not in READ):
        out.todos.append((f"AKSNodeClass {nc.name} spec.{key} is a field gpuplan does not write: its nodes lose it "
                          "(the round trip shows it)", ("spec", key)))
    return out
