"""GKE node pools: what GKE itself does to a pool's nodes, as the rest of gpuplan needs it.

With GKE's own GPU stack (``gke.driver: default|latest``) GKE installs the driver, runs its
device plugin and creates the MIG partitions and the sharing the node pool asks for:

- every MIG partition and every time-shared or MPS share is advertised as plain
  ``nvidia.com/gpu`` (cloud.google.com/kubernetes-engine/docs/how-to/gpus-multi,
  .../timesharing-gpus, .../nvidia-mps-gpus); a pool has one partition size
  (``gpuPartitionSize``) and GKE creates as many partitions of it as fit on each GPU;
- the nodes carry ``cloud.google.com/gke-gpu-partition-size``,
  ``cloud.google.com/gke-gpu-sharing-strategy`` and
  ``cloud.google.com/gke-max-shared-clients-per-gpu``, which pods select;
- GKE taints a GPU node pool added to a cluster that has non-GPU pools with key
  ``nvidia.com/gpu``, effect ``NoSchedule`` (.../how-to/gpus), and its ExtendedResourceToleration
  admission tolerates it for pods that request GPUs. gpuplan models it by key and effect (the
  tiers' pods tolerate any value of it) and does not expect it on nodes in verify-cluster.

With ``gke.driver: gpu-operator`` GKE installs no driver and the GPU Operator serves the pool
like any other: nothing here applies but the node-pool labels.

Stage: resolve (docs/architecture.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpuplan.nodefacts import fact, taint
from gpuplan.provisioning.pools import GPU, POOL_LABEL
from gpuplan.spec.models import Gke, Mig, Pool

if TYPE_CHECKING:
    from gpuplan.cloud.machine import Machine

TITLE = "GKE node pool"
# How a changed node label (a new device-plugin or MIG config name) reaches the nodes, for the
# generated README: ``nodeConfig.labels`` is immutable in the pinned CRD (IMMUTABLE, below).
LABELS_CHANGE = ("Config Connector cannot change a ContainerNodePool's `nodeConfig.labels` (immutable): "
                 "a changed label is a hand step, the node pool deleted and created again "
                 "(`gpuplan plan --base` lists it)")
MACHINE_FIELD = "machineType"  # the spec key under ``gke`` (GP637-GP639 point at it)

NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
ACCELERATOR_LABEL = fact("gke", "label.accelerator")  # gpuplan/upstream/nodes/gke.json
PARTITION_LABEL = "cloud.google.com/gke-gpu-partition-size"
SHARING_STRATEGY_LABEL = "cloud.google.com/gke-gpu-sharing-strategy"
MAX_SHARED_LABEL = "cloud.google.com/gke-max-shared-clients-per-gpu"
SPOT_LABEL = "cloud.google.com/gke-spot"
GPU_TAINT = taint("gke", "taint.gpu")

# GKE's names of the sharing strategies (label values; the API's are TIME_SHARING and MPS)
SHARING_STRATEGY = {"time-slicing": "time-sharing", "mps": "mps"}


def settings(pool: Pool) -> Gke:
    assert pool.gke is not None
    return pool.gke


def machine(pool: Pool) -> "Machine | None":
    from gpuplan.cloud.gke import machine_type

    return machine_type(settings(pool).machine_type)


def closest_machine(pool: Pool) -> str | None:
    from gpuplan.cloud.gke import closest

    return closest(settings(pool).machine_type)


def platform_gpu_stack(pool: Pool) -> bool:
    return settings(pool).driver != "gpu-operator"


def partition_size(pool: Pool) -> str | None:
    """The one MIG partition size of a GKE-stack MIG pool (None: not MIG, or no single size,
    which GP663 reports)."""
    s = pool.sharing
    if not isinstance(s, Mig) or not platform_gpu_stack(pool):
        return None
    layouts = [s.layout] if s.layout is not None else [g.layout for g in s.devices or ()]
    profiles = {p for lay in layouts if lay for p in lay}
    return next(iter(profiles)) if len(profiles) == 1 and all(layouts) else None


def partitions_per_gpu(pool: Pool) -> int:
    """Partitions GKE makes of each GPU: the spec's count of its one size (GP664 checks it is
    as many as fit)."""
    s = pool.sharing
    size = partition_size(pool)
    if size is None or not isinstance(s, Mig):
        return 0
    lay = s.layout if s.layout is not None else next((g.layout for g in s.devices or () if g.layout), None)
    return (lay or {}).get(size, 0)


def node_resources(pv: Any) -> dict[str, int]:
    n = pv.gpus_per_node or 0
    s = pv.pool.sharing
    if not n:
        return {}
    if s.mode == "exclusive":
        return {GPU: n}
    if s.mode in ("time-slicing", "mps"):
        return {GPU: n * s.replicas}
    per = partitions_per_gpu(pv.pool)
    return {GPU: n * per} if per else {}


def tier_resource(pv: Any, tier: Any) -> str | None:
    return GPU


def platform_labels(pv: Any) -> dict[str, str]:
    """Labels GKE sets on the pool's nodes (node-pool name, accelerator, and with GKE's stack the
    partition size and sharing settings; spot)."""
    pool = pv.pool
    out = {NODEPOOL_LABEL: pool.name}
    m = machine(pool)
    if m is not None and m.accelerator:
        out[ACCELERATOR_LABEL] = m.accelerator
    out.update(tier_node_selector(pv, None))
    if settings(pool).spot:
        out[SPOT_LABEL] = "true"
    return out


# GKE runs its own device plugin on every GPU node unless the node carries this label; on the GPU
# Operator path the operator's plugin must be the only one advertising nvidia.com/gpu (NVIDIA AI
# Cluster Runtime, "GKE GPU Setup": pools created with the label and gpu-driver-version=disabled;
# "exactly one nvidia.com/gpu advertiser per node is required").
NO_GKE_DEVICE_PLUGIN_LABEL = "gke-no-default-nvidia-gpu-device-plugin"


def template_labels(pv: Any) -> dict[str, str]:
    """On the GPU Operator path: the label that keeps GKE's device plugin off the nodes."""
    return {} if platform_gpu_stack(pv.pool) else {NO_GKE_DEVICE_PLUGIN_LABEL: "true"}


def platform_taints(pv: Any) -> list[dict[str, str]]:
    return [dict(GPU_TAINT)]


def tier_node_selector(pv: Any, tier: Any) -> dict[str, str]:
    """What a tier's pods select on a GKE-stack pool: the partition size on MIG pools, the
    sharing strategy and clients per GPU on shared pools (the node labels GKE documents for it)."""
    pool = pv.pool
    if not platform_gpu_stack(pool):
        return {}
    s = pool.sharing
    size = partition_size(pool)
    if size is not None:
        return {PARTITION_LABEL: size}
    if s.mode in SHARING_STRATEGY:
        return {SHARING_STRATEGY_LABEL: SHARING_STRATEGY[s.mode], MAX_SHARED_LABEL: str(s.replicas)}
    return {}


def preemptible(pool: Pool) -> bool:
    return settings(pool).spot


# GKE Standard limits pods of the system PriorityClasses to namespaces holding a ResourceQuota scoped
# to them: its quota admission configuration lists ``pods`` under ``limitedResources`` with
# ``matchScopes`` PriorityClass In [system-node-critical, system-cluster-critical], and the
# ResourceQuota admission plugin refuses such a pod where no quota's scope covers it ("insufficient
# quota to match these scopes", k8s.io/apiserver@v0.36.3 pkg/admission/plugin/resourcequota/
# controller.go:388-399 getMatchedLimitedScopes, :583-591). NVIDIA's "GPU Operator with Google GKE"
# creates ResourceQuota ``gpu-operator-quota`` with that scope selector in the operator's namespace
# (NVIDIA/aicr#915 reported the pods staying at zero without it). The GPU Operator chart gives that
# class to the operator, to every operand DaemonSet and to NFD (NVIDIA/gpu-operator@v26.7.0
# deployments/gpu-operator/values.yaml:44 daemonsets, :80 operator, :619 node-feature-discovery).
SYSTEM_PRIORITY_CLASSES = ("system-node-critical", "system-cluster-critical")
OPERATOR_QUOTA = "gpu-operator-quota"
# The quota only has to exist and cover ``pods``; its ``hard`` is sized so that it never binds:
# - the operand DaemonSets of the operator that set system-node-critical, all of them on one node
#   (NVIDIA/gpu-operator@v26.7.0 assets/state-*/: 18 DaemonSets with ``priorityClassName:
#   system-node-critical``, state-dcgm/0400_dcgm.yml among them; a node runs fewer, some exclude
#   each other), on
#   every GPU node the fleet can have (static nodes, and every pool's ceiling);
# - nfd-worker, a DaemonSet with no node selector (charts/node-feature-discovery/templates/
#   worker.yaml:1-3,43-44), on every node of the cluster, GPU or not: gpuplan does not know the
#   cluster's other nodes, so it counts as many as a GKE Standard cluster may have (15,000 nodes,
#   GKE "Quotas and limits");
# - the three Deployments, gpu-operator, nfd-master and nfd-gc (templates/operator.yaml:2,11,
#   charts/node-feature-discovery/templates/master.yaml:3,40-41, nfd-gc.yaml:3,36-37), one replica
#   each, twice over for a rolling update's surge pod.
OPERAND_DAEMONSETS = 18
GKE_MAX_NODES = 15_000
OPERATOR_DEPLOYMENT_PODS = 3 * 2


def gke_cluster(pools: Any) -> bool:
    """The fleet is on GKE Standard: some pool is a GKE node pool."""
    return any(pv.pool.gke is not None for pv in pools)


def operator_quota_pods(gpu_nodes: int) -> int:
    """``hard.pods`` of the operator namespace's system-class quota (the bound above)."""
    return OPERATOR_DEPLOYMENT_PODS + OPERAND_DAEMONSETS * gpu_nodes + GKE_MAX_NODES


# The DRA driver chart gives the system classes to its pods too (kubernetes-sigs/dra-driver-nvidia-gpu
# @95932046 deployments/helm/dra-driver-nvidia-gpu/values.yaml:172-177 webhook,
# system-cluster-critical; :225-237 controller and :276-282 kubeletPlugin, system-node-critical), in
# its own namespace: the same quota goes there, sized as the operator's: the kubelet plugin (a
# DaemonSet, templates/kubeletplugin.yaml:21) on every node of the DRA pools, the controller and the
# webhook Deployments (one replica each, :174, :226) twice over for a surge pod.
DRA_DEPLOYMENT_PODS = 2 * 2


def dra_quota_pods(dra_nodes: int) -> int:
    """``hard.pods`` of the DRA driver namespace's system-class quota."""
    return DRA_DEPLOYMENT_PODS + dra_nodes


TEMPLATE_KINDS = ("ContainerNodePool",)
TEMPLATE_PATH = "provisioning/gke/{pool}.yaml"  # gpuplan.lower.provision_gke writes it
_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "PREFER_NO_SCHEDULE": "PreferNoSchedule", "NO_EXECUTE": "NoExecute"}


def read_template(doc: dict[str, Any]) -> tuple[str, dict[str, str], list[dict[str, str]]] | None:
    """A generated ContainerNodePool: its node labels and taints (GKE effect names turned back)."""
    nc = (doc.get("spec") or {}).get("nodeConfig") or {}
    labels = dict(nc.get("labels") or {})
    pool = labels.get(POOL_LABEL) or doc["metadata"]["name"]
    taints = [{"key": t["key"], "value": t.get("value", ""), "effect": _EFFECTS.get(t["effect"], t["effect"])}
              for t in nc.get("taint") or ()]
    return pool, labels, taints


# What Config Connector does with a changed ContainerNodePool. Its Terraform-based controller
# refuses an update whose diff "requires new" (a field marked ``Immutable.`` in the CRD): the
# object reports UpdateFailed "cannot make changes to immutable field(s)" and the node pool stays
# as it was (GoogleCloudPlatform/k8s-config-connector@v1.155.1 pkg/controller/tf/controller.go:
# 381-384, pkg/k8s/errors.go:230). Of the fields gpuplan writes, these are immutable in the pinned
# CRD; the node image and the kubelet settings update in place, by GKE recreating the nodes.
IMMUTABLE = (("location",), ("nodeConfig", "machineType"), ("nodeConfig", "guestAccelerator"),
             ("nodeConfig", "labels"), ("nodeConfig", "spot"))
RECREATES_NODES = (("nodeConfig", "imageType"), ("nodeConfig", "kubeletConfig"))


def _at(doc: dict[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = doc.get("spec") or {}
    for k in path:
        node = node.get(k) if isinstance(node, dict) else None
    return node


def template_changes(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, str]]:
    """(severity, message) for a ContainerNodePool that changes between two trees
    (``gpuplan.report.disruption`` lists them): an immutable field is a hand step (Config
    Connector refuses it; the node pool must be deleted and created again, and its nodes with
    it), a new node image or kubelet setting replaces every node."""
    out = []
    frozen = [".".join(p) for p in IMMUTABLE if _at(old, p) != _at(new, p)]
    if frozen:
        out.append(("hand-step",
                    f"{', '.join(frozen)} changed, which Config Connector cannot update (immutable; the object "
                    "reports UpdateFailed and the node pool stays as it was): delete the ContainerNodePool once its "
                    "workloads can go (GKE deletes the node pool and every node in it) and let the sync create it "
                    "again, or add the new settings as a new pool beside it"))
    rolled = [".".join(p) for p in RECREATES_NODES if _at(old, p) != _at(new, p)]
    if rolled:
        out.append(("replace",
                    f"{', '.join(rolled)} changed: GKE recreates every node of the pool with its upgrade "
                    "strategy (surge by default), draining their pods; this is not a Karpenter drift and no "
                    "disruption budget of gpuplan's holds it"))
    return out
