"""How a pool's nodes come to exist: the provisioning back-ends and the predicates every
stage asks instead of testing a spec field.

Three kinds of pool (``Pool.provisioner``):

- **static** (:func:`static_nodes`): nodes named in the spec; nfd-master labels and taints
  them (``gpuplan.lower.node_labels``); their count is the list's length;
- **Karpenter** (:func:`karpenter_pool`): a NodePool whose template carries the labels and
  taints; its count is a ceiling (``maxGPUs``);
- **node group** (:func:`node_group_pool`): a node pool a platform creates from a template —
  GKE node pools, AKS agent pools, Cluster API MachineDeployments. Like Karpenter, no node
  list, a ceiling, labels and taints from the template; the GPUs per node from the machine
  type (``gpuplan.cloud.<back-end>``). Where the platform runs the GPU software itself
  (:func:`platform_gpu_stack`: GKE's driver, device plugin, MIG partitions and sharing), the
  GPU Operator's operands stay off the pool's nodes and the platform decides the resources
  they advertise.

:func:`autoscaled` is "not static": Karpenter and node groups alike.

A node-group back-end is one module ``gpuplan.provisioning.<name>`` (``gke``, ``aks``,
``capi``) with the functions :data:`BACKEND_FUNCTIONS` lists; any it leaves out take the
defaults below. Nothing here builds an object: the back-end's lowering target does
(``gpuplan.lower.driver.provision_<name>``).

Stage: resolve (docs/architecture.md)."""

from __future__ import annotations

import importlib
from functools import lru_cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

from gpuplan.nodefacts import fact
from gpuplan.spec.models import Pool

if TYPE_CHECKING:
    from gpuplan.cloud.machine import Machine

GPU = "nvidia.com/gpu"  # as gpuplan.resolve.GPU (resolve imports this module)
# The label naming a node's pool; gpuplan.identity hands it on (it imports this module), and a
# back-end reads its own templates back by it.
POOL_LABEL = "gpuplan.dev/pool"

NODE_GROUP_BACKENDS = ("gke", "aks", "capi")

# What a back-end module may define (all take the Pool, or a PoolView ``pv``):
#   TITLE: str                          "GKE node pool", for messages and the README
#   MACHINE_FIELD: str                  the key of the machine type under the pool's block ("machineType")
#   closest_machine(pool) -> str|None   a known machine type near a misspelt one (GP637's hint)
#   settings(pool) -> model             the pool's ``gke``/``aks``/``capi`` block
#   machine(pool) -> Machine | None     its machine type / VM size from the back-end's table
#   platform_gpu_stack(pool) -> bool    the platform runs driver + device plugin (default False)
#   node_resources(pv) -> dict          resources one node advertises under the platform stack
#   tier_resource(pv, tier) -> str|None the resource a tier of the pool hands out (platform stack)
#   platform_labels(pv) -> dict         labels the platform sets on every node of the pool
#   platform_taints(pv) -> list[dict]   taints the platform adds to them (beyond the spec's)
#   template_labels(pv) -> dict         labels the template must carry for the platform (written by gpuplan)
#   tier_node_selector(pv, tier) -> dict labels a tier's pods must select on the pool
#   preemptible(pool) -> bool           the pool's nodes can be reclaimed (spot)
#   operator_driver(pool) -> bool       the GPU Operator installs the driver (default: not platform_gpu_stack)
#   TEMPLATE_KINDS: tuple[str, ...]     kinds of the objects holding the node template (the proof reads them)
#   TEMPLATE_PATH: str                  the tree path of a pool's template file, "{pool}" for its name
#   read_template(doc) -> (pool, labels, taints) | None   such an object read back (Kubernetes taint form)
#   template_changes(old, new) -> [(severity, message)]    what the platform does with a changed template
#                                                          (gpuplan.report.disruption; severities as there)
BACKEND_FUNCTIONS = ("settings", "machine", "platform_gpu_stack", "node_resources", "tier_resource",
                     "platform_labels", "platform_taints", "tier_node_selector", "preemptible", "operator_driver")


def static_nodes(pool: Pool) -> bool:
    """Nodes named in the spec (``nodes``)."""
    return pool.nodes is not None


def karpenter_pool(pool: Pool) -> bool:
    """A Karpenter NodePool (``karpenter``), on AWS or on Azure (:func:`karpenter_cloud`)."""
    return pool.karpenter is not None


KARPENTER_CLOUDS = ("aws", "azure")


def karpenter_cloud(cluster: Any) -> str:
    """The cloud whose Karpenter provider launches the cluster's Karpenter pools: ``azure``
    (AKS Node Auto Provisioning: NodePools with an ``AKSNodeClass``, ``gpuplan.provisioning.nap``)
    on a cluster with ``cluster.azure`` and no ``cluster.aws``; else ``aws`` (an ``EC2NodeClass``)."""
    return "azure" if cluster.azure is not None and cluster.aws is None else "aws"


def platform(cluster: Any, pool: Pool) -> str:
    """Who makes the pool's nodes, for reports: ``static``, ``karpenter-aws``, ``karpenter-azure``,
    or the node-group back-end (``gke``, ``aks``, ``capi``)."""
    if karpenter_pool(pool):
        return f"karpenter-{karpenter_cloud(cluster)}"
    return pool.provisioner


def platforms() -> tuple[str, ...]:
    """Every platform :func:`platform` can name: the spec's provisioners
    (``gpuplan.spec.models.Provisioner``), Karpenter once per cloud (:data:`KARPENTER_CLOUDS`)."""
    from typing import get_args

    from gpuplan.spec.models import Provisioner

    out: list[str] = []
    for p in get_args(Provisioner):
        out += [f"karpenter-{c}" for c in KARPENTER_CLOUDS] if p == "karpenter" else [p]
    return tuple(out)


# How a platform's nodes get gpuplan's labels: platform -> (set at node creation, why). A label
# set at creation reaches a running node only by replacing it, so a node keeps the labels it was
# made with (``nvidia.com/device-plugin.config``, ``nvidia.com/mig.config``) until it is gone
# (gpuplan.identity.kept_plugin_configs); one relabelled in place gets the new value where it
# stands, once the object that says so is applied, and until then needs only the name of the
# pool's last change. Every platform of :func:`platforms` has an
# entry (tests/rules/test_platform_families.py).
NODE_LABELS: dict[str, tuple[bool, str]] = {
    "static": (False, "nfd-master relabels the nodes in place when the pool's NodeFeatureRule changes "
               "(kubernetes-sigs/node-feature-discovery@v0.19.0 pkg/nfd-master/nfd-api-controller.go:280-296)"),
    "karpenter-aws": (True, "the NodePool template's labels are set when Karpenter launches the node; a changed "
                      "template only marks the NodeClaim drifted (kubernetes-sigs/karpenter@v1.14.1 "
                      "pkg/controllers/nodeclaim/disruption/drift.go:154-167), and the node keeps its labels "
                      "until it is replaced"),
    "karpenter-azure": (True, "as on AWS: the same Karpenter core launches the node with the NodePool "
                        "template's labels and never relabels it (drift.go:154-167)"),
    "gke": (True, "the ContainerNodePool's nodeConfig.labels are set when GKE creates a node, and Config "
            "Connector refuses to change them (immutable in the pinned CRD; "
            "GoogleCloudPlatform/k8s-config-connector@v1.155.1 pkg/controller/tf/controller.go:381-384): "
            "a new value reaches the nodes only by replacing the node pool"),
    "aks": (False, "AKS applies a changed nodeLabels to every node of the agent pool in place "
            "(MicrosoftDocs/azure-aks-docs @fb060abe articles/aks/use-labels.md:155)"),
    "capi": (True, "the kubelet registers the node with the bootstrap config's --node-labels and later "
             "reconciles only its default labels (kubernetes@v1.36.3 pkg/kubelet/kubelet_node_status.go:"
             "131, 232-245, 353-358); a changed KubeadmConfigTemplate is a new one, which Cluster API rolls "
             "out by replacing every machine (kubernetes-sigs/cluster-api@v1.14.0 "
             "core/reconcilers/machinedeployment/mdutil/util.go:359-411)"),
}


# Who replaces a pool's nodes on its own (a new node image or Kubernetes version, which also brings
# a new driver where the platform installs it), and what keeps a training or batch pool's running
# jobs through it: platform -> (the upgrader, None where nothing but the owner changes the nodes;
# the protection gpuplan emits or reports). Every platform of :func:`platforms` has an entry, and
# tests/rules/test_platform_families.py holds each protection to the tree of a job pool there.
JOB_POOL_UPGRADES: dict[str, tuple[str | None, str]] = {
    "static": (None, "nothing replaces static nodes but their owner; the operator's driver upgrades skip "
               "job pools (nvidia.com/gpu-driver-upgrade.skip)"),
    "karpenter-aws": ("Karpenter drift: a new AMI behind the EC2NodeClass's alias, a changed NodePool or "
                      "EC2NodeClass", "the job pool's NodePool budget {nodes: 0, reasons: [Drifted]} "
                      "(gpuplan.lower.karpenter)"),
    "karpenter-azure": ("Karpenter drift: a new node image or Kubernetes version "
                        "(Azure/karpenter-provider-azure@v1.14.2 pkg/cloudprovider/drift.go:59-75)",
                        "the same Drifted budget of 0"),
    "gke": ("GKE node auto-upgrade (on unless management.autoUpgrade is false; always on a release channel)",
            "gke.autoUpgrade: false (ContainerNodePool management.autoUpgrade), else GP980 at the pool"),
    "aks": ("AKS cluster and node-image upgrades (auto-upgrade channels), which drain and reimage nodes",
            "upgradeSettings.undrainableNodeBehavior: Cordon on job pools: a node whose PodDisruptionBudget "
            "blocks the drain is cordoned, not deleted"),
    "capi": (None, "Cluster API replaces machines only when the MachineDeployment or its templates change "
             "(a fleet.yaml change that plan --base reports)"),
}


def labels_set_at_creation(cluster: Any, pool: Pool) -> bool:
    """The pool's nodes get gpuplan's labels when they are made and keep them until they are
    replaced (:data:`NODE_LABELS`): Karpenter, Cluster API, GKE node pools; not static pools
    (nfd-master) nor AKS agent pools (relabelled in place)."""
    return NODE_LABELS[platform(cluster, pool)][0]


def template_path(pool: Pool) -> str | None:
    """The tree path of the object that carries the labels of a pool whose template sets them: its
    NodePool (Karpenter) or its back-end's template file (``TEMPLATE_PATH``); None for static pools."""
    if karpenter_pool(pool):
        return f"pools/{pool.name}/nodepool.yaml"
    mod = backend(pool)
    path = getattr(mod, "TEMPLATE_PATH", None) if mod is not None else None
    return path.format(pool=pool.name) if path else None


# Who takes a spot node back, and the least warning it gives: EC2 two minutes (AWS "Spot Instance
# interruption notices"); Azure Spot VMs and Compute Engine Spot VMs 30 seconds (Azure Scheduled
# Events "Preempt"; Compute Engine "Preemption process"). By :func:`platform`.
# The label Azure puts on Spot VMs, agent pools' and NAP's alike.
AZURE_SPOT_LABEL = fact("aks", "label.spot")  # gpuplan/upstream/nodes/aks.json
RECLAIM_NOTICE: dict[str, tuple[str, str]] = {
    "karpenter-aws": ("EC2", "two minutes"),
    "karpenter-azure": ("Azure", "30 seconds"),
    "aks": ("Azure", "30 seconds"),
    "gke": ("Compute Engine", "30 seconds"),
}


def karpenter_node_toolkit(cluster: Any, pool: Pool) -> bool:
    """A Karpenter pool whose nodes come with an NVIDIA container toolkit: on AWS the EKS AL2023
    NVIDIA AMI; on Azure AKS's node bootstrap wherever it installs the driver (it keeps ``runc``
    only with ``gpu.mode: None``, Azure/karpenter-provider-azure@v1.14.2
    pkg/providers/imagefamily/bootstrap/aksbootstrap.go:309-322)."""
    k = pool.karpenter
    if k is None:
        return False
    if karpenter_cloud(cluster) == "azure":
        return k.driver != "gpu-operator"
    return k.ami_family == "AL2023"


def node_group_pool(pool: Pool) -> bool:
    """A node pool a platform creates from a template (``gke``, ``aks``, ``capi``)."""
    return pool.provisioner in NODE_GROUP_BACKENDS


def autoscaled(pool: Pool) -> bool:
    """Not static: the node count is a ceiling, labels and taints come from a template."""
    return not static_nodes(pool)


def backend(pool: Pool) -> ModuleType | None:
    """The back-end module of a node-group pool (None for static and Karpenter pools)."""
    if not node_group_pool(pool):
        return None
    return importlib.import_module(f"gpuplan.provisioning.{pool.provisioner}")


def _call(pool: Pool, name: str, arg: Any, default: Any, *more: Any) -> Any:
    mod = backend(pool)
    fn = getattr(mod, name, None) if mod is not None else None
    return default if fn is None else fn(arg, *more)


def title(pool: Pool) -> str:
    """How messages name the pool's kind: ``static pool``, ``Karpenter pool``, ``GKE node pool``."""
    if static_nodes(pool):
        return "static pool"
    if karpenter_pool(pool):
        return "Karpenter pool"
    mod = backend(pool)
    return getattr(mod, "TITLE", f"{pool.provisioner} pool")


def labels_change(pool: Pool) -> str | None:
    """How a node-group back-end brings a changed node label to the pool's existing nodes
    (its ``LABELS_CHANGE``; None for static and Karpenter pools)."""
    mod = backend(pool)
    return getattr(mod, "LABELS_CHANGE", None) if mod is not None else None


def settings(pool: Pool) -> Any:
    """The pool's provisioning block (``karpenter``, ``gke``, ...; None for static pools)."""
    return None if static_nodes(pool) else getattr(pool, pool.provisioner)


def ceiling_gpus(pool: Pool) -> int | None:
    """Most physical GPUs an autoscaled pool may have (``maxGPUs``); None for static pools."""
    s = settings(pool)
    return getattr(s, "max_gpus", None) if s is not None else None


def machine(pool: Pool) -> "Machine | None":
    """A node-group pool's machine type from its back-end's table (None: unknown, or not a node group)."""
    return _call(pool, "machine", pool, None)


def node_group_gpus_per_node(pool: Pool) -> int | None:
    """GPUs per node of a node-group pool: declared, else its machine type's."""
    if pool.gpus_per_node is not None:
        return pool.gpus_per_node
    m = machine(pool)
    return m.gpu_count if m is not None and m.gpu_count else None


def platform_gpu_stack(pool: Pool) -> bool:
    """The platform runs the pool's GPU software (driver, device plugin, MIG, sharing): the GPU
    Operator's operands stay off its nodes and the platform decides what they advertise."""
    return bool(_call(pool, "platform_gpu_stack", pool, False))


def platform_node_resources(pv: Any) -> dict[str, int] | None:
    """What one node advertises when the platform runs the GPU stack (None: the device plugin decides)."""
    if not platform_gpu_stack(pv.pool):
        return None
    return _call(pv.pool, "node_resources", pv, None)


def platform_tier_resource(pv: Any, tier: Any) -> str | None:
    """The resource a tier hands out on a platform-stack pool (None: ask the device plugin's rules)."""
    if not platform_gpu_stack(pv.pool):
        return None
    return _call(pv.pool, "tier_resource", pv, None, tier)


def platform_labels(pv: Any) -> dict[str, str]:
    """Labels the platform itself sets on the pool's nodes (GKE: ``cloud.google.com/gke-nodepool``)."""
    return dict(_call(pv.pool, "platform_labels", pv, {}))


def template_labels(pv: Any) -> dict[str, str]:
    """Labels the node template must carry for the platform to behave (GKE operator path: the
    label that keeps GKE's own device plugin off), beside gpuplan's own."""
    return dict(_call(pv.pool, "template_labels", pv, {}))


def platform_taints(pv: Any) -> list[dict[str, str]]:
    """Taints the platform adds to the pool's nodes beyond the spec's."""
    return list(_call(pv.pool, "platform_taints", pv, []))


def tier_node_selector(pv: Any, tier: Any) -> dict[str, str]:
    """Node labels a tier's pods select on this pool besides the pool label (GKE MIG: the partition size)."""
    return dict(_call(pv.pool, "tier_node_selector", pv, {}, tier))


# Per platform (:func:`platform`): its home module, whose ``gang_pod_resources(block, gang)`` names
# what every pod of a multi-node job on a pool must request (a fabric's devices), and the pool's
# provisioner block it reads; ``gang``: a tier with ``gang`` runs on the pool. A platform with no
# such fabric is not listed; the next one (another vendor's RDMA device) is one row.
GANG_RESOURCES = {"karpenter-aws": ("gpuplan.cloud.aws", "karpenter")}


def gang_pod_resources(cluster: Any, pool: Pool, gang: bool) -> dict[str, int]:
    """``{resource: count}`` every pod of a multi-node job on ``pool`` requests (requests = limits)
    beside its GPUs: on EKS the pool's EFA interfaces (:func:`gpuplan.cloud.aws.gang_pod_resources`)."""
    row = GANG_RESOURCES.get(platform(cluster, pool))
    if row is None:
        return {}
    home, block = row
    return dict(importlib.import_module(home).gang_pod_resources(getattr(pool, block), gang))


def node_group_spot(pool: Pool) -> bool:
    """A node group of spot VMs (the back-end's ``preemptible``); a node group is all spot or
    none (``gpuplan.units.pool_capacity_types`` turns this into the pool's purchase options)."""
    return node_group_pool(pool) and bool(_call(pool, "preemptible", pool, False))


def operator_runs_driver(pool: Pool) -> bool:
    """The GPU Operator installs the driver on the pool's nodes (when ``gpuOperator.driver`` is
    ``managed``): static pools; not Karpenter pools (the EKS NVIDIA AMIs ship one, so does AKS's
    node bootstrap) unless a NAP pool asks for the GPU Operator path; node groups
    unless the platform runs the GPU stack (a back-end may say otherwise with ``operator_driver``)."""
    if static_nodes(pool):
        return True
    if karpenter_pool(pool):
        # the EKS NVIDIA AMIs and AKS's node bootstrap install a driver; only a NAP pool's
        # ``driver: gpu-operator`` (AKSNodeClass gpu.mode None) leaves it to the operator
        return pool.karpenter.driver == "gpu-operator"  # type: ignore[union-attr]
    return bool(_call(pool, "operator_driver", pool, not platform_gpu_stack(pool)))


@lru_cache(maxsize=1)
def _backends() -> tuple[ModuleType, ...]:
    """The back-end modules (imported once: the placement proof asks for every object it reads)."""
    out = []
    for name in NODE_GROUP_BACKENDS:
        try:
            out.append(importlib.import_module(f"gpuplan.provisioning.{name}"))
        except ModuleNotFoundError as exc:
            if exc.name != f"gpuplan.provisioning.{name}":
                raise
    return tuple(out)


def template_kinds() -> frozenset[str]:
    """The kinds of the node-group templates the back-ends write (``TEMPLATE_KINDS``): the
    placement proof reads them as it reads NodePools."""
    return frozenset(k for mod in _backends() for k in getattr(mod, "TEMPLATE_KINDS", ()))


def read_template(doc: dict[str, Any]) -> tuple[str, dict[str, str], list[dict[str, str]]] | None:
    """A generated node-group template read back: (pool, the labels its nodes get, their taints
    in Kubernetes form), as the back-end's ``read_template`` reads its own object; None for other
    objects. The platform's own labels and taints are not in it (:func:`platform_labels`)."""
    kind = doc.get("kind")
    for mod in _backends():
        if kind in getattr(mod, "TEMPLATE_KINDS", ()):
            return mod.read_template(doc)
    return None


def template_changes(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, str]]:
    """(severity, message) for a node-group template that differs between two trees, as its
    back-end's ``template_changes`` judges it (what the platform does with the change: a node pool
    replaced is not a Karpenter drift). () for other kinds."""
    kind = new.get("kind")
    for mod in _backends():
        if kind in getattr(mod, "TEMPLATE_KINDS", ()) and hasattr(mod, "template_changes"):
            return list(mod.template_changes(old, new))
    return []
