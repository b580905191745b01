"""GP633, GP674, GP675, GP679, GP975: what the cluster's autoscaler and its version make of the pools' objects.

A Karpenter pool's GPU ceiling is the NodePool's ``limits.nodes`` (``maxGPUs`` in whole
nodes); Karpenter enforces a node-count limit only from v1.11.0 (kubernetes-sigs/karpenter
commit 9f749d9, "feat(limits): support NodePool node limits (#2526)", first tagged v1.11.0;
issue #2657). On an older Karpenter the field is accepted and ignored: the pool has no
ceiling, and the capacity report's numbers are not what the cluster holds to.

A Cluster API pool is sized by the Cluster Autoscaler's clusterapi provider
(``cluster.capi.autoscalerVersion``; kubernetes/autoscaler@cluster-autoscaler-1.36.1,
cluster-autoscaler/cloudprovider/clusterapi/). The autoscaler counts a node that carries the GPU
label and has no allocatable ``nvidia.com/gpu`` as unready, so an autoscaled pool whose nodes
advertise only MIG or renamed shared resources stalls the whole cluster's scale-up (GP675,
kubernetes/autoscaler#8095, see ``gpuplan.provisioning.capi``); and the scale-from-zero template
node has the pool's labels and taints only from cluster-autoscaler 1.27.1, which first reads the
``capacity.cluster-autoscaler.kubernetes.io/labels`` and ``/taints`` annotations (commit
e63244a136, "Use capacity annotations to set labels and taints for cluster api node groups")
(GP679).

**MIG autoscaling, one rule family.** No autoscaler gpuplan targets sees the
``nvidia.com/mig-*`` (or renamed shared) resources of a node before it exists: each builds the
node it would add from the machine's physical GPUs, and the Cluster Autoscaler counts a GPU node
without allocatable ``nvidia.com/gpu`` as unready. :data:`MIG_AUTOSCALING` says, for every
platform gpuplan provisions on (``gpuplan.provisioning.pools.platforms``), which rule refuses an
autoscaled pool whose nodes advertise no ``nvidia.com/gpu``, or why none is needed; the Cluster
Autoscaler platforms (GKE on the GPU Operator path, AKS, Cluster API) are checked here
(:func:`_gpu_unready`), Karpenter's by its own rules (GP615 on AWS, GP698 on Azure). A
fixed-size pool is not scaled, but where the platform puts the autoscaler's GPU label on its
nodes (GKE, AKS) they still count as unready: GP975 warns.

Stage: check (docs/architecture.md)."""

from __future__ import annotations

from typing import Iterable

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.resolve import GPU, ResolvedFleet

NODE_LIMITS_FROM = (1, 11, 0)
CAPACITY_LABELS_FROM = (1, 27, 1)  # cluster-autoscaler: capacity labels/taints annotations (e63244a136)

W_NO_NODE_LIMIT = Code(
    "GP633", "Karpenter too old to enforce the pools' GPU ceiling", Severity.WARNING,
    "gpuplan caps a Karpenter pool at its `maxGPUs` with the NodePool's `limits.nodes`. Karpenter enforces "
    "node-count limits only from v1.11.0 (kubernetes-sigs/karpenter #2526, commit 9f749d9); an older "
    "Karpenter ignores the field, so the pool can grow past every quota and price gpuplan reports.",
    bad="cluster:\n  aws: {clusterName: c, nodeRole: r, karpenterVersion: 1.10.2}",
    good="cluster:\n  aws: {clusterName: c, nodeRole: r, karpenterVersion: 1.14.1}",
)

E_CA_GPU_UNREADY = Code(
    "GP675", "Cluster Autoscaler would count the pool's nodes as unready", Severity.ERROR,
    "The Cluster Autoscaler treats a node with its GPU label (`cluster-api/accelerator` on Cluster API, "
    "`cloud.google.com/gke-accelerator` on GKE) and no "
    "allocatable `nvidia.com/gpu` as unready, forever on a node that advertises only "
    "`nvidia.com/mig-*` or renamed shared resources (kubernetes/autoscaler#8095, open through "
    "cluster-autoscaler 1.36.1: processors/customresources/gpu_processor.go:41-70, utils/gpu/gpu.go:137-146). "
    "Enough such nodes and it stops scaling the whole cluster (clusterstate/clusterstate.go:493-505); "
    "without the label it would not know the nodes are GPU nodes, scale up again while the device "
    "plugin starts, and could never scale the pool from zero (the template node has no MIG resources). "
    "An autoscaled Cluster API pool must advertise `nvidia.com/gpu`; a fixed-size pool (`minNodes` at "
    "the ceiling) is not autoscaled and gpuplan leaves the label off its nodes. The same holds for a GKE "
    "node pool on the GPU Operator path (`gke.driver: gpu-operator`): GKE labels its nodes with the GCE "
    "provider's GPU label (cloudprovider/gce/gce_cloud_provider.go:47) and the autoscaler builds the node it "
    "would add with `nvidia.com/gpu` only (cloudprovider/gce/templates.go:83), never `nvidia.com/mig-*`. "
    "On GKE's own GPU stack GKE makes the partitions (`gpuPartitionSize`) and advertises each as "
    "`nvidia.com/gpu`, and its autoscaler scales for them.",
    bad="sharing: {mode: mig, strategy: mixed, layout: {1g.10gb: 7}}\n"
        "capi: {infrastructureRef: {kind: Metal3MachineTemplate, name: a100}, maxGPUs: 32}",
    good="sharing: {mode: mig, strategy: mixed, layout: {1g.10gb: 7}}\n"
         "capi: {infrastructureRef: {kind: Metal3MachineTemplate, name: a100}, maxGPUs: 32, minNodes: 4}",
)
E_CA_NO_CAPACITY_LABELS = Code(
    "GP679", "Cluster Autoscaler too old for scale-from-zero labels and taints", Severity.ERROR,
    "gpuplan tells the Cluster Autoscaler the labels and taints of a Cluster API pool's future nodes "
    "with the `capacity.cluster-autoscaler.kubernetes.io/labels` and `/taints` annotations, read from "
    "cluster-autoscaler 1.27.1 (kubernetes/autoscaler commit e63244a136). An older autoscaler builds "
    "the scale-from-zero template node without them: the tiers' pods select `gpuplan.dev/pool`, never "
    "fit the template, and a pool at zero nodes never scales up.",
    bad="cluster:\n  capi: {clusterName: lab, version: v1.33.4, autoscalerVersion: 1.26.8}",
    good="cluster:\n  capi: {clusterName: lab, version: v1.33.4, autoscalerVersion: 1.36.1}",
)

W_FIXED_UNREADY = Code(
    "GP975", "fixed-size pool whose nodes the Cluster Autoscaler counts unready", Severity.WARNING,
    "The Cluster Autoscaler counts every ready node that carries its GPU label and has no allocatable "
    "`nvidia.com/gpu` as unready, whether or not it scales the node's pool "
    "(kubernetes/autoscaler@cluster-autoscaler-1.36.1 processors/customresources/gpu_processor.go:41-70). "
    "Past `--ok-total-unready-count` (default 3) and `--max-total-unready-percentage` (default 45) of the "
    "cluster's nodes it stops scaling the whole cluster (clusterstate/clusterstate.go:493-505; "
    "config/flags/flags.go:123-124). On Cluster API gpuplan leaves the label off a fixed-size pool's nodes; "
    "GKE (`cloud.google.com/gke-accelerator`) and AKS with its driver (`kubernetes.azure.com/accelerator`) "
    "set it themselves, so a fixed-size pool there whose nodes advertise only `nvidia.com/mig-*` or renamed "
    "shared resources counts against those bounds.",
    bad="sharing: {mode: mig, strategy: mixed, layout: {3g.40gb: 2}}\n"
        "gke: {machineType: a2-ultragpu-1g, maxGPUs: 8, minNodes: 8, driver: gpu-operator}",
    good="sharing: {mode: mig, strategy: single, layout: {3g.40gb: 2}}\n"
         "gke: {machineType: a2-ultragpu-1g, maxGPUs: 8, minNodes: 8, driver: gpu-operator}",
)

CODES = (W_NO_NODE_LIMIT, E_CA_GPU_UNREADY, E_CA_NO_CAPACITY_LABELS, W_FIXED_UNREADY)

# The MIG-autoscaling refusal per platform (every one of gpuplan.provisioning.pools.platforms():
# tests/rules/test_platform_families.py): the code that refuses an autoscaled pool whose nodes
# advertise only nvidia.com/mig-* or renamed shared resources, and why; None: exempt, and why.
MIG_AUTOSCALING: dict[str, tuple[str | None, str]] = {
    "static": (None, "no autoscaler: the spec names the pool's nodes"),
    "karpenter-aws": ("GP615", "Karpenter fits pending pods against the instance type's capacity, which lists "
                      "only nvidia.com/gpu (aws/karpenter-provider-aws@v1.14.1 pkg/providers/instancetype/"
                      "types.go:332-349), unless a NodeOverlay states the pool's real capacity"),
    "karpenter-azure": ("GP698", "an AKSNodeClass has no user data and no MIG setting: a NAP MIG pool is refused "
                        "whatever its scaling"),
    "gke": ("GP675", "on the GPU Operator path GKE labels the nodes cloud.google.com/gke-accelerator, the GCE "
            "provider's GPU label (kubernetes/autoscaler@cluster-autoscaler-1.36.1 cluster-autoscaler/"
            "cloudprovider/gce/gce_cloud_provider.go:47), and builds the template node with nvidia.com/gpu "
            "only (cloudprovider/gce/templates.go:83); on GKE's own stack each partition is nvidia.com/gpu, "
            "which GKE's autoscaler scales for (the shape does not arise)"),
    "aks": ("GP674", "AKS labels GPU nodes kubernetes.azure.com/accelerator, the Azure provider's GPU label "
            "(cloudprovider/azure/azure_cloud_provider.go:45)"),
    "capi": ("GP675", "gpuplan labels the nodes cluster-api/accelerator, the clusterapi provider's GPU label "
             "(cloudprovider/clusterapi/clusterapi_provider.go:51-52), where their nodes advertise nvidia.com/gpu"),
}


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split("."))


def check(rf: ResolvedFleet) -> Iterable[Diagnostic]:
    yield from _karpenter(rf)
    yield from _cluster_autoscaler(rf)


def _karpenter(rf: ResolvedFleet) -> Iterable[Diagnostic]:
    aws = rf.fleet.spec.cluster.aws
    pools = [pv for pv in rf.pools if pv.pool.karpenter is not None]
    if aws is None or not pools:
        return
    version = version_tuple(aws.karpenter_version)
    if version < NODE_LIMITS_FROM:
        names = ", ".join(pv.name for pv in pools)
        yield rf.diag(W_NO_NODE_LIMIT, f"Karpenter {aws.karpenter_version} does not enforce NodePool limits.nodes "
                      f"(from 1.11.0): pools {names} have no GPU ceiling", ("spec", "cluster", "aws", "karpenterVersion"),
                      hint="upgrade Karpenter to 1.11.0 or later (gpuplan's NodePools are written for 1.14)")


def _gpu_label(pv) -> str | None:
    """The GPU label of the Cluster Autoscaler provider that sizes the pool, where the pool's nodes
    carry it (``gpuplan.provisioning.pools.platform_labels``): GKE's, AKS's (with its driver), and
    Cluster API's where gpuplan sets it."""
    from gpuplan.provisioning import aks, capi, gke
    from gpuplan.provisioning.pools import platform_labels

    label = {"gke": gke.ACCELERATOR_LABEL, "aks": aks.ACCELERATOR_LABEL,
             "capi": capi.ACCELERATOR_LABEL}.get(pv.pool.provisioner)
    return label if label is not None and label in platform_labels(pv) else None


def _fixed_unready(rf: ResolvedFleet) -> Iterable[Diagnostic]:
    """GP975: a fixed-size pool whose nodes carry the autoscaler's GPU label and advertise no
    ``nvidia.com/gpu``: not scaled, but counted unready."""
    for pv in rf.pools:
        if not pv.gpus_per_node or _scaled_by(rf, pv) is not None or pv.node_resources().get(GPU, 0) > 0:
            continue
        label = _gpu_label(pv)
        if label is None:
            continue
        what = ", ".join(pv.node_resources()) or "no GPU resource"
        yield rf.diag(W_FIXED_UNREADY, f"pool {pv.name} is fixed-size, but its nodes carry {label} and advertise "
                      f"{what}, no nvidia.com/gpu: the Cluster Autoscaler counts each unready, and past 3 unready "
                      "nodes and 45% of the cluster's it stops scaling every pool", (*pv.path, "sharing"),
                      hint="share it so that nodes advertise nvidia.com/gpu (MIG strategy single, time-slicing "
                           "without renameByDefault)"
                           + (", or run GKE's own GPU stack on it" if pv.pool.gke is not None else "")
                           + "; or keep the cluster's unready nodes within the autoscaler's bounds")


def _scaled_by(rf: ResolvedFleet, pv) -> tuple[str, bool, str] | None:
    """(who scales the pool, whether a node of it is ready to that autoscaler, the hint's field
    for a fixed size) for a pool the Cluster Autoscaler sizes; None for a fixed-size pool, a pool
    of unknown size, or one no Cluster Autoscaler sizes."""
    from gpuplan.provisioning import aks, capi, gke

    if not pv.gpus_per_node:
        return None
    gpu = pv.node_resources().get(GPU, 0) > 0
    cluster = rf.fleet.spec.cluster
    if pv.pool.capi is not None and cluster.capi is not None:
        if capi.fixed_size(pv):
            return None
        version = version_tuple(cluster.capi.autoscaler_version)
        return (f"the Cluster Autoscaler {cluster.capi.autoscaler_version}", capi.gpu_ready_to_autoscaler(pv, version),
                f"capi.minNodes: {capi.max_nodes(pv)}")
    if pv.pool.aks is not None:
        if aks.settings(pv.pool).min_nodes >= aks.max_nodes(pv):
            return None
        return "AKS's cluster autoscaler", gpu, f"aks.minNodes: {aks.max_nodes(pv)}"
    if pv.pool.gke is not None:
        if gke.settings(pv.pool).min_nodes >= (pv.node_count or 0):
            return None
        return "GKE's cluster autoscaler", gpu, f"gke.minNodes: {pv.node_count}"
    return None


def _gpu_unready(rf: ResolvedFleet) -> Iterable[Diagnostic]:
    """GP674/GP675: an autoscaled pool whose nodes advertise no ``nvidia.com/gpu``, on a platform
    whose Cluster Autoscaler counts them unready (:data:`MIG_AUTOSCALING`)."""
    from gpuplan.provisioning.pools import platform
    from gpuplan.rules.aks import E_CA_GPU_UNREADY as E_AKS_GPU_UNREADY

    codes = {c.code: c for c in (E_CA_GPU_UNREADY, E_AKS_GPU_UNREADY)}
    for pv in rf.pools:
        code = codes.get(MIG_AUTOSCALING[platform(rf.fleet.spec.cluster, pv.pool)][0] or "")
        scaled = _scaled_by(rf, pv) if code is not None else None
        if scaled is None or scaled[1]:
            continue
        who, _, fixed = scaled
        what = ", ".join(pv.node_resources()) or "no GPU resource"
        other = ("run GKE's own GPU stack on it (no gke.driver: gpu-operator: GKE makes the partitions and "
                 "advertises each as nvidia.com/gpu), " if pv.pool.gke is not None else "")
        yield rf.diag(code, f"pool {pv.name} is autoscaled by {who}, which counts its nodes ({what}, no "
                      "nvidia.com/gpu) as unready (kubernetes/autoscaler#8095): its scale-up and the cluster's stall",
                      (*pv.path, "sharing"),
                      hint=f"make the pool fixed-size ({fixed}), {other}or share it so that nodes advertise "
                           "nvidia.com/gpu (MIG strategy single, time-slicing without renameByDefault)")


def _cluster_autoscaler(rf: ResolvedFleet) -> Iterable[Diagnostic]:
    yield from _gpu_unready(rf)
    yield from _fixed_unready(rf)
    cfg = rf.fleet.spec.cluster.capi
    pools = [pv for pv in rf.pools if pv.pool.capi is not None and pv.gpus_per_node]
    if cfg is None or not pools:
        return
    from gpuplan.provisioning import capi

    version = version_tuple(cfg.autoscaler_version)
    scaling = [pv.name for pv in pools if not capi.fixed_size(pv) and pv.pool.capi.min_nodes == 0]
    if scaling and version < CAPACITY_LABELS_FROM:
        yield rf.diag(E_CA_NO_CAPACITY_LABELS, f"Cluster Autoscaler {cfg.autoscaler_version} ignores the "
                      "capacity labels/taints annotations (from 1.27.1): pools " + ", ".join(scaling) +
                      " never scale up from zero nodes", ("spec", "cluster", "capi", "autoscalerVersion"),
                      hint="upgrade the Cluster Autoscaler to 1.27.1 or later (gpuplan is checked against 1.36.1)")
