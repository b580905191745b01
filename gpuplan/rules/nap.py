"""GP695-GP699: Karpenter pools on AKS Node Auto Provisioning (``karpenter`` on a cluster with
``cluster.azure`` and no ``cluster.aws``; ``gpuplan.provisioning.nap``).

- the fields only one provider has (GP695): EC2 AMI, EFA, capacity reservations and ``reserved``
  on Azure; ``imageFamily``/``driver`` on AWS; topology settings the AKSNodeClass kubelet cannot carry;
- the VM sizes (GP696 unknown; the generic machine rules GP637-GP639 and GP612 for the GPU model
  and count, as for AKS agent pools);
- the Karpenter AKS runs on the cluster's Kubernetes minor (GP697: the node ceiling from core
  1.11.0, NodeOverlay, ``gpu.mode``);
- MIG (GP698): nothing on an AKSNodeClass lays out MIG before the node registers;
- the GPU Operator path (GP699): no driver and no NVIDIA runtime from AKS.

Stage: check (docs/architecture.md)."""

from __future__ import annotations

from typing import Iterable, Iterator

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.provisioning import nap
from gpuplan.provisioning.pools import karpenter_cloud, karpenter_pool
from gpuplan.resolve import PoolView, ResolvedFleet

_DOCS = "MicrosoftDocs/azure-aks-docs@fb060abe articles/aks/"
_AZ = "Azure/karpenter-provider-azure@v1.14.2 "

E_OTHER_CLOUD_FIELD = Code(
    "GP695", "Karpenter field the cluster's cloud does not have", Severity.ERROR,
    "A `karpenter` pool lowers to an EC2NodeClass on AWS and to an AKSNodeClass on Azure (AKS Node Auto "
    "Provisioning, a cluster with `cluster.azure` and no `cluster.aws`). On Azure there is no AMI "
    "(`amiFamily`, `amiVersion`: use `imageFamily`), no EFA, no EC2 capacity reservation and no `reserved` "
    "capacity type (" + _AZ + "pkg/providers/instance/aksmachineinstanceutils.go:50-52 maps only `spot` and "
    "`on-demand`), no user data (so no MIG at boot and no instance-store RAID0), and the AKSNodeClass "
    "`kubelet` takes only `cpuManagerPolicy` and `topologyManagerPolicy` of the topology settings "
    "(pkg/apis/crds/karpenter.azure.com_aksnodeclasses.yaml). On AWS, `imageFamily` and `driver` mean nothing.",
    bad="cluster:\n  azure: {managedCluster: aks-ml}\npools:\n  - karpenter: {instanceTypes: [Standard_NC24ads_A100_v4], "
        "maxGPUs: 8, amiVersion: v20260714}",
    good="cluster:\n  azure: {managedCluster: aks-ml}\npools:\n  - karpenter: {instanceTypes: [Standard_NC24ads_A100_v4], "
         "maxGPUs: 8, imageFamily: Ubuntu2204}",
)
E_UNKNOWN_VM_SIZE = Code(
    "GP696", "unknown Azure GPU VM size", Severity.ERROR,
    "On AKS Node Auto Provisioning a Karpenter pool's `instanceTypes` are Azure VM sizes "
    "(`node.kubernetes.io/instance-type`), and the size decides the GPU model and count (gpuplan's table: "
    "gpuplan/cloud/data/aks-gpu-vm-sizes.json, docs/aks.md). A size gpuplan does not list is a typo or a "
    "size without the NVIDIA GPUs gpuplan plans for (NVads A10 v5 sells fractions of a GPU).",
    bad="karpenter: {instanceTypes: [Standard_NC24ads_A100_v5], maxGPUs: 8}",
    good="karpenter: {instanceTypes: [Standard_NC24ads_A100_v4], maxGPUs: 8}",
)
E_AKS_KARPENTER = Code(
    "GP697", "AKS's Karpenter on this Kubernetes version lacks what the pool needs", Severity.ERROR,
    "AKS runs its own Karpenter, one release per Kubernetes minor (" + _DOCS + "supported-kubernetes-versions.md:"
    "90,96,102,108: 1.12.2-aks on 1.36, 1.7.0-aks on 1.35, 1.6.5-aks on 1.34, 0.7.3-aks on 1.33; their Karpenter "
    "cores, from each provider tag's go.mod: 1.12.x, 1.7.1, 1.6.2, 1.0.5). gpuplan caps a pool at `maxGPUs` with "
    "the NodePool's `limits.nodes`, enforced from Karpenter 1.11.0 (kubernetes-sigs/karpenter 9f749d9, #2526; "
    "GP633 on AWS): before AKS 1.36 the pool has no ceiling. The NodeOverlay CRD ships from provider 1.7.0 (AKS "
    "1.35), the AKSNodeClass `gpu.mode` (the GPU Operator path) from provider 1.12.2 (AKS 1.36). Unlike on EKS, "
    "the Karpenter version cannot be upgraded apart from the cluster.",
    bad='cluster:\n  kubernetesVersion: "1.35"\n  azure: {managedCluster: aks-ml}',
    good='cluster:\n  kubernetesVersion: "1.36"\n  azure: {managedCluster: aks-ml}',
)
E_NAP_MIG = Code(
    "GP698", "MIG on a Node Auto Provisioning pool", Severity.ERROR,
    "gpuplan's Karpenter MIG pools apply their layout before kubelet starts, from the node's user data "
    "(EC2NodeClass `userData`, docs/karpenter.md \"MIG at boot\"). An AKSNodeClass has neither user data nor a "
    "MIG field (" + _AZ + "pkg/apis/v1beta1/aksnodeclass.go; AKS's `gpuInstanceProfile` is an agent-pool "
    "setting), so a NAP node would register with whole GPUs and Karpenter would count units it never gets. "
    "Use an AKS agent pool (`aks:` with a MIGng `gpuInstanceProfile`, docs/aks.md) for MIG.",
    bad="sharing: {mode: mig, strategy: single, layout: {3g.40gb: 2}}\n"
        "karpenter: {instanceTypes: [Standard_NC24ads_A100_v4], maxGPUs: 8}",
    good="sharing: {mode: mig, strategy: single, layout: {3g.40gb: 2}}\n"
         "aks: {vmSize: Standard_NC24ads_A100_v4, maxGPUs: 8}",
)
E_NAP_DRIVER = Code(
    "GP699", "NAP GPU Operator path without the operator's driver and toolkit", Severity.ERROR,
    "`karpenter.driver: gpu-operator` writes AKSNodeClass `gpu.mode: None`: the provider then tells AKS's node "
    "bootstrap `GPU_NODE=false`, which installs no NVIDIA driver, no fabric manager and keeps `runc` instead of "
    "the NVIDIA container runtime (" + _AZ + "pkg/providers/imagefamily/bootstrap/aksbootstrap.go:309-322). The "
    "GPU Operator must install both (`gpuOperator.driver: managed`, `gpuOperator.toolkit: managed`), or the "
    "nodes never advertise a GPU.",
    bad="cluster:\n  gpuOperator: {driver: preinstalled}\npools:\n  - karpenter: {..., driver: gpu-operator}",
    good="cluster:\n  gpuOperator: {driver: managed}\npools:\n  - karpenter: {..., driver: gpu-operator}",
)

CODES = (E_OTHER_CLOUD_FIELD, E_UNKNOWN_VM_SIZE, E_AKS_KARPENTER, E_NAP_MIG, E_NAP_DRIVER)

# spec key -> pydantic field name, of the fields nap.AWS_ONLY / AZURE_ONLY name
_FIELD = {"amiFamily": "ami_family", "amiVersion": "ami_version", "efa": "efa",
          "capacityReservations": "capacity_reservations", "imageFamily": "image_family", "driver": "driver"}


def check(rf: ResolvedFleet) -> Iterable[Diagnostic]:
    pools = [pv for pv in rf.pools if karpenter_pool(pv.pool)]
    if not pools:
        return
    if karpenter_cloud(rf.fleet.spec.cluster) != "azure":
        for pv in pools:
            yield from _fields(rf, pv, nap.AZURE_ONLY, "AWS", "EC2NodeClass")
        return
    for pv in pools:
        yield from _fields(rf, pv, nap.AWS_ONLY, "Azure", "AKSNodeClass")
        yield from _azure_pool(rf, pv)
        yield from _vm_sizes(rf, pv)
    yield from _bundled(rf, pools)


def _fields(rf: ResolvedFleet, pv: PoolView, fields: dict[str, str], cloud: str, kind: str) -> Iterator[Diagnostic]:
    k = pv.pool.karpenter
    assert k is not None
    for key, what in fields.items():
        if _FIELD[key] in k.model_fields_set:
            yield rf.diag(E_OTHER_CLOUD_FIELD, f"pool {pv.name!r}: karpenter.{key} ({what}) does not exist on "
                          f"{cloud}: this cluster's Karpenter pools get an {kind}",
                          (*pv.path, "karpenter", key), key=True,
                          hint=f"remove karpenter.{key}" + (" (imageFamily picks the node image on Azure)"
                                                           if key.startswith("ami") else ""))


def _azure_pool(rf: ResolvedFleet, pv: PoolView) -> Iterator[Diagnostic]:
    from gpuplan.identity import kubelet_topology_fields
    from gpuplan.provisioning.aks import kubelet_config

    k = pv.pool.karpenter
    assert k is not None
    if "reserved" in k.capacity_types:
        yield rf.diag(E_OTHER_CLOUD_FIELD, f"pool {pv.name!r}: Azure's Karpenter has no reserved capacity type "
                      "(only spot and on-demand)", (*pv.path, "karpenter", "capacityTypes",
                                                     k.capacity_types.index("reserved")),
                      hint="remove reserved from capacityTypes")
    _, refused = kubelet_config(kubelet_topology_fields(pv.pool.topology))
    if refused:
        yield rf.diag(E_OTHER_CLOUD_FIELD, f"pool {pv.name!r}: the AKSNodeClass kubelet cannot carry "
                      + ", ".join(refused) + " (it takes cpuManagerPolicy and topologyManagerPolicy)",
                      (*pv.path, "topology"), key=True,
                      hint="keep only cpuManagerPolicy and topologyManagerPolicy in this pool's topology")
    if pv.pool.sharing.mode == "mig":
        yield rf.diag(E_NAP_MIG, f"pool {pv.name!r}: MIG on AKS Node Auto Provisioning — an AKSNodeClass has no "
                      "user data and no MIG setting, so gpuplan cannot lay out MIG before the node registers",
                      (*pv.path, "sharing"), key=True,
                      hint="provision this pool as an AKS agent pool (aks: {vmSize: ..., maxGPUs: ...}): AKS "
                           "creates a uniform MIG layout from gpuInstanceProfile")
    if k.driver == "gpu-operator":
        op = rf.fleet.spec.cluster.gpu_operator
        if op.driver != "managed" or rf.toolkit == "preinstalled":
            what = (f"gpuOperator.driver is {op.driver}" if op.driver != "managed"
                    else "gpuOperator.toolkit is preinstalled")
            yield rf.diag(E_NAP_DRIVER, f"pool {pv.name!r}: driver gpu-operator makes AKS install no NVIDIA driver "
                          f"and no NVIDIA container runtime, but {what}: no one installs it",
                          (*pv.path, "karpenter", "driver"),
                          hint="set cluster.gpuOperator.driver: managed and toolkit: managed, or karpenter.driver: aks")


def _vm_sizes(rf: ResolvedFleet, pv: PoolView) -> Iterator[Diagnostic]:
    from gpuplan.rules.karpenter import E_GPU_COUNT
    from gpuplan.rules.provisioning import machine_rules

    k = pv.pool.karpenter
    assert k is not None
    base = (*pv.path, "karpenter", "instanceTypes")
    first: tuple[str, int] | None = None
    for j, name in enumerate(k.instance_types):
        m = nap.vm_size(name)
        if m is None:
            near = nap.closest_vm_size(name)
            yield rf.diag(E_UNKNOWN_VM_SIZE, f"pool {pv.name!r}: {name!r} is not an Azure GPU VM size gpuplan knows",
                          (*base, j), hint=f"did you mean {near}?" if near else
                          "see the VM sizes in gpuplan/cloud/data/aks-gpu-vm-sizes.json")
            continue
        yield from machine_rules(rf, pv, m, (*base, j), lambda: None)
        if first is None:
            first = (name, m.gpu_count)
        elif m.gpu_count != first[1]:
            yield rf.diag(E_GPU_COUNT, f"pool {pv.name!r}: {name} has {m.gpu_count} GPUs but {first[0]} has "
                          f"{first[1]}; the VM sizes of one pool must have the same number of GPUs", (*base, j),
                          hint="put VM sizes of different GPU counts in different pools")


def _bundled(rf: ResolvedFleet, pools: list[PoolView]) -> Iterator[Diagnostic]:
    version = rf.fleet.spec.cluster.kubernetes_version
    b = nap.bundled(version)
    for pv in pools:
        lacks = nap.missing(version, pv.pool)
        if lacks is None:
            newest = max(nap.BUNDLED, key=lambda v: tuple(map(int, v.split("."))))
            if tuple(map(int, version.split("."))) > tuple(map(int, newest.split("."))):
                continue  # a later minor than the newest gpuplan knows: a later Karpenter
            lacks = nap.needs(pv.pool)
        if not lacks:
            continue
        which = f"Karpenter {b.aks}" if b is not None else "its Karpenter"
        yield rf.diag(E_AKS_KARPENTER, f"pool {pv.name!r}: AKS {version} runs {which}, which "
                      + "; ".join(nap.FEATURES[f][2] for f in lacks),
                      ("spec", "cluster", "kubernetesVersion"),
                      hint='upgrade the cluster to Kubernetes "1.36" (AKS\'s Karpenter 1.12.2-aks), or provision '
                           "the pool as an AKS agent pool (aks:)")
