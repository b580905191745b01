"""The Node objects each pool's nodes register, for KWOK and scheduler simulators
(`gpuplan nodes`, docs/nodes.md).

One Node per node a pool may have, as the API server would hold it once the GPU stack runs:

- **which nodes**: a static pool's ``nodes``, by name; an autoscaled pool's nodes at its ceiling,
  ``<nodepool>-<index>`` (Karpenter: each generated NodePool's ``limits.nodes``, so a pool with an
  on-demand floor gets the floor's nodes from the floor NodePool,
  ``gpuplan.identity.guaranteed_nodepool_name``) or ``<pool>-<index>`` (node groups: the
  ceiling ``gpuplan.resolve.PoolView.node_count``, which is what the GKE ``totalMaxNodeCount``,
  the AKS ``maxCount`` and the Cluster API max-size annotation say). ``count`` replaces every
  autoscaled pool's ceiling (:func:`split_count` shares it out over a pool's NodePools). A
  ceiling of 0 is 0 nodes;
- **labels and taints**: what the generated objects put on the node, read back by the placement
  proof's :func:`gpuplan.placement.simulate.pools_from_objects` (NodePool template labels and ``In``
  requirements, NodeFeatureRule labels and taints, node-group templates plus the platform's own
  labels and taints), never recomputed; a requirement with several values gives each node one
  (:func:`_pick`). Then what Kubernetes, the platform and the GPU Operator's operands set
  themselves: ``kubernetes.io/hostname``/``os``/``arch``, the instance type, Karpenter's
  ``karpenter.sh/nodepool``/``registered``/``initialized``, GPU Feature Discovery's
  ``nvidia.com/gpu.product``/``gpu.count`` and mig-manager's ``nvidia.com/mig.config.state``
  where those run (:func:`_stack_labels`);
- **status**: cpu, memory, pods and ephemeral-storage from the machine tables
  (:func:`_machine`; :data:`DEFAULTS` where no table knows the machine), the extended resources
  the device plugin advertises (``PoolView.node_resources``; none on a DRA pool, whose GPUs are
  ResourceSlices) and, on a pool whose multi-node jobs use EFA, the instance type's
  ``vpc.amazonaws.com/efa`` (:func:`_fabric`), allocatable equal to capacity, ``Ready``, and the kubelet version of
  ``cluster.kubernetesVersion``.

Pure: the driver lowers the objects (``gpuplan.cli.nodes``) and writes the bytes.

Stage: report (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from gpuplan.identity import (
    CAPACITY_TYPE_LABEL, MIG_CONFIG_LABEL, MIG_CONFIG_STATE_LABEL, MIG_MANAGER_DEPLOY_LABEL, OPERANDS_LABEL,
    pool_mig_strategy,
)
from gpuplan.k8snames import is_label_value
from gpuplan.k8squantity import binary as binary_quantity
from gpuplan.pergpu import cpulist_count
from gpuplan.placement.simulate import PoolNodes, pools_from_objects
from gpuplan.provisioning.pools import (
    AZURE_SPOT_LABEL, karpenter_cloud, karpenter_pool, machine, platform_gpu_stack, settings, static_nodes,
    template_kinds)
from gpuplan.resolve import GPU, PoolView, ResolvedFleet

HOSTNAME_LABEL = "kubernetes.io/hostname"
OS_LABEL = "kubernetes.io/os"
ARCH_LABEL = "kubernetes.io/arch"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
ZONE_LABEL = "topology.kubernetes.io/zone"
NODEPOOL_LABEL = "karpenter.sh/nodepool"  # Karpenter labels every node it launches with its NodePool
KARPENTER_STATE_LABELS = ("karpenter.sh/registered", "karpenter.sh/initialized")
GFD_PRODUCT_LABEL = "nvidia.com/gpu.product"
GFD_COUNT_LABEL = "nvidia.com/gpu.count"
AWS_GPU_LABELS = ("karpenter.k8s.aws/instance-gpu-name", "karpenter.k8s.aws/instance-gpu-count",
                  "karpenter.k8s.aws/instance-gpu-memory")
# sigs.k8s.io/kwok: the controller manages the nodes its annotation selector matches
# (--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake); `type: kwok` is the label its
# examples give them
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_LABEL = "type"
# requirements whose values are spread over a NodePool's nodes (node i takes value i mod n): a pool
# that allows spot and on-demand, or several zones, gets nodes of each
SPREAD = (CAPACITY_TYPE_LABEL, ZONE_LABEL)

# what a node has where no machine table knows its machine (docs/nodes.md): the kubelet's
# default maxPods, and the root volume gpuplan gives Karpenter GPU nodes
DEFAULTS = {"cpu": "64", "memory": "512Gi", "pods": "110", "ephemeral-storage": "200Gi"}


class NodeNameClash(ValueError):
    """Two nodes of the fleet would get one name (a static node named like an autoscaled pool's)."""


def kinds() -> frozenset[str]:
    """The generated objects :func:`fleet_nodes` reads: NodePools, NodeFeatureRules, the node-group
    templates (``gpuplan.provisioning.pools.template_kinds``), and EC2NodeClasses for the root volume."""
    return frozenset({"NodePool", "NodeFeatureRule", "EC2NodeClass"}) | template_kinds()


@dataclass(frozen=True)
class _Group:
    """Nodes that come from one generated object: a NodeFeatureRule, a NodePool, a node-group template."""

    pv: PoolView
    place: PoolNodes
    names: tuple[str, ...]


def fleet_nodes(rf: ResolvedFleet, docs: Iterable[dict[str, Any]], count: int | None = None,
                kwok: bool = False) -> list[dict[str, Any]]:
    """Every Node of the fleet, sorted by name. ``docs``: the lowered objects (those of
    :func:`kinds` are read, the rest ignored: ``gpuplan.compiler.placement_docs`` will do);
    ``count``: nodes per autoscaled pool instead of its ceiling; ``kwok``: the annotation and
    label KWOK manages nodes by. Raises :class:`NodeNameClash`."""
    docs = [d for d in docs if isinstance(d, dict)]
    places = pools_from_objects(rf, docs)
    node_classes = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "EC2NodeClass"}
    cpus = {inv.metadata.name: n for inv in rf.inventory if (n := cpulist_count(inv.system.online_cpus))}
    out: dict[str, dict[str, Any]] = {}
    owner: dict[str, str] = {}
    for g in _groups(rf, places, count):
        for i, name in enumerate(g.names):
            if name in out:
                raise NodeNameClash(f"pools {owner[name]} and {g.pv.name} would both have a node named {name}; "
                                    "rename the static node or the pool")
            owner[name] = g.pv.name
            out[name] = _node(rf, g, i, name, node_classes, cpus, kwok)
    return [out[n] for n in sorted(out)]


def node_list(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """The nodes as one ``kind: List`` (what ``kubectl get nodes -o yaml`` prints)."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": nodes}


def render(nodes: list[dict[str, Any]]) -> bytes:
    """The List as YAML, through gpuplan's one writer: the same nodes give the same bytes."""
    from gpuplan.render.yamlwriter import dump_bytes

    return dump_bytes(node_list(nodes))


# --- which nodes ------------------------------------------------------------------------


def split_count(count: int, floor_limit: int) -> tuple[int, int]:
    """``count`` nodes of a Karpenter pool with an on-demand floor as (floor's, the pool's own
    NodePool's): half to the floor (rounded down, at most its ``limits.nodes``, as Karpenter
    launches no more there), the rest to the pool's NodePool, so that ``count >= 2`` gives both."""
    floor = min(floor_limit, count // 2)
    return floor, count - floor


def _groups(rf: ResolvedFleet, places: list[PoolNodes], count: int | None) -> list[_Group]:
    by_pool: dict[str, list[PoolNodes]] = {}
    for p in places:
        by_pool.setdefault(p.owner, []).append(p)
    out = []
    for pv in rf.pools:
        mine = by_pool.get(pv.name, [])
        if not mine:
            continue  # nothing generated for it (a static pool without nodes)
        if static_nodes(pv.pool):
            out.append(_Group(pv, mine[0], tuple(pv.pool.nodes or ())))
        elif karpenter_pool(pv.pool):
            own = [p for p in mine if p.name == pv.name]
            floors = [p for p in mine if p.name != pv.name]
            if count is None:
                sizes = {p.name: p.node_limit or 0 for p in mine}
            else:
                left = count
                sizes = {}
                for f in floors:
                    sizes[f.name], left = split_count(left, f.node_limit or 0)
                for p in own:
                    sizes[p.name] = left
            out += [_Group(pv, p, tuple(f"{p.name}-{i}" for i in range(sizes[p.name]))) for p in mine]
        else:  # a node group: one template, the pool's ceiling in whole nodes
            n = (pv.node_count or 0) if count is None else count
            out.append(_Group(pv, mine[0], tuple(f"{pv.name}-{i}" for i in range(n))))
    return out


# --- one node ---------------------------------------------------------------------------


def _pick(values: tuple[str, ...], key: str, i: int) -> str:
    """The value a node takes of a label several values are allowed for: spread by index for
    :data:`SPREAD`, the first otherwise."""
    return values[i % len(values)] if key in SPREAD else values[0]


def _instance_type(pv: PoolView, place: PoolNodes, i: int) -> str | None:
    """The node's instance type / VM size / machine type: a NodePool's ``In`` values whose GPU count
    is the pool's (spread by index), else the node group's machine; None where none is named."""
    values = place.labels.get(INSTANCE_TYPE_LABEL, ())
    if values:
        fitting = [v for v in values if (m := _machine(pv, v)) is not None and m[2] == pv.gpus_per_node]
        choices = fitting or list(values)
        return choices[i % len(choices)]
    m = machine(pv.pool) if not static_nodes(pv.pool) else None
    return m.name if m is not None else None


def _machine(pv: PoolView, name: str) -> tuple[Any, str, int] | None:
    """(the table's entry, the cloud, its GPUs) for an instance type or VM size of a Karpenter pool."""
    from gpuplan.cloud import aks, aws

    it = aws.instance_type(name)
    if it is not None:
        return it, "aws", it.gpu_count
    vm = aks.machine_type(name)
    return (vm, "azure", vm.gpu_count) if vm is not None else None


def _topology_labels(rf: ResolvedFleet, pv: PoolView, name: str) -> dict[str, str]:
    """The ``queueing.topologyLevels`` labels of a node behind a topology-aware Kueue flavor: the
    platform (or the person who racks the nodes) sets them, Kueue's TAS counts a node only when it
    carries every level (kueue v0.19.2 pkg/util/tas/node.go:21-33) and ``gpuplan verify-cluster``
    checks them (GP885). gpuplan cannot know the real racks: every node of the pool goes into one
    domain per level, ``<pool>-<level>``, which is what a pool of one rack looks like."""
    from gpuplan.queues import tas_pools

    q = rf.fleet.spec.queueing
    if q is None or pv.name not in tas_pools(rf):
        return {}
    return {level: f"{pv.name}-{level.rsplit('/', 1)[-1]}"[:63].rstrip("-._") for level in q.topology_levels or ()
            if level != HOSTNAME_LABEL}


def _node(rf: ResolvedFleet, g: _Group, i: int, name: str, node_classes: dict[str, dict[str, Any]],
          cpus: dict[str, int], kwok: bool) -> dict[str, Any]:
    pv, place = g.pv, g.place
    itype = _instance_type(pv, place, i)
    facts = _machine(pv, itype) if itype is not None and karpenter_pool(pv.pool) else None
    aws_it = facts[0] if facts is not None and facts[1] == "aws" else None
    arch = getattr(aws_it, "arch", None) or "amd64"

    labels: dict[str, str] = {OS_LABEL: "linux", ARCH_LABEL: arch}
    if itype is not None:
        labels[INSTANCE_TYPE_LABEL] = itype
    for key, values in place.labels.items():
        if key == INSTANCE_TYPE_LABEL and itype in values:
            continue
        labels[key] = _pick(values, key, i)
    if aws_it is not None:  # Karpenter labels the node with its instance type's facts
        for key, value in zip(AWS_GPU_LABELS, (aws_it.gpu_name, str(aws_it.gpu_count), str(aws_it.gpu_memory_mib))):
            if key in place.labels and value in place.labels[key]:
                labels[key] = value
        labels[ARCH_LABEL] = arch
    if place.karpenter:
        labels[NODEPOOL_LABEL] = place.name
        for key in KARPENTER_STATE_LABELS:
            labels[key] = "true"
        if karpenter_cloud(rf.fleet.spec.cluster) == "azure" and labels.get(CAPACITY_TYPE_LABEL) == "spot":
            labels[AZURE_SPOT_LABEL] = "spot"  # Azure/karpenter-provider-azure: Spot VMs are labelled so
    for key, value in _stack_labels(rf, pv, labels).items():
        labels.setdefault(key, value)
    if is_label_value(name):
        labels[HOSTNAME_LABEL] = name
    for key, value in _topology_labels(rf, pv, name).items():
        labels.setdefault(key, value)
    annotations = {}
    if kwok:
        labels[KWOK_LABEL] = "kwok"
        annotations[KWOK_ANNOTATION] = "fake"

    metadata: dict[str, Any] = {"name": name, "labels": dict(sorted(labels.items()))}
    if annotations:
        metadata["annotations"] = annotations
    node: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": metadata}
    taints = [{"key": k, **({"value": v} if v else {}), "effect": e} for k, v, e in place.taints]
    if taints:
        node["spec"] = {"taints": taints}
    capacity = _capacity(rf, pv, itype, aws_it, node_classes, cpus.get(name))
    node["status"] = {
        "capacity": capacity,
        "allocatable": dict(capacity),
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                        "message": "kubelet is posting ready status"}],
        "addresses": [{"type": "Hostname", "address": name}],
        "nodeInfo": _node_info(rf, arch),
    }
    return node


def _stack_labels(rf: ResolvedFleet, pv: PoolView, labels: dict[str, str]) -> dict[str, str]:
    """Labels the GPU Operator's operands set once they run on the node (none where no operand runs:
    ``nvidia.com/gpu.deploy.operands: "false"``, a platform's own GPU stack):

    - GPU Feature Discovery: ``nvidia.com/gpu.product`` (``-MIG-<profile>`` under the ``single`` MIG
      strategy, ``-SHARED`` for shared GPUs that keep the ``nvidia.com/gpu`` name:
      ``gpuplan.catalog.gfd_product_name``) and ``nvidia.com/gpu.count`` (the GPUs, or the MIG
      devices under ``single``);
    - mig-manager: ``nvidia.com/mig.config.state: success`` on a node whose ``nvidia.com/mig.config``
      it applied (not where the node's userData did and the NodePool says so itself)."""
    if labels.get(OPERANDS_LABEL) == "false" or platform_gpu_stack(pv.pool):
        return {}
    out: dict[str, str] = {}
    if pv.gpu is not None:
        from gpuplan.catalog import gfd_product_name

        s = pv.pool.sharing
        profile = None
        n = pv.gpus_per_node
        if s.mode == "mig" and pool_mig_strategy(rf, pv) == "single":
            layouts = pv.gpu_layouts()
            profiles = {p for lay in layouts if lay for p in lay}
            if len(profiles) == 1 and all(layouts):
                profile = profiles.pop()
                n = pv.node_resources().get(GPU, n)
        shared = s.mode in ("time-slicing", "mps") and not s.rename_by_default
        out[GFD_PRODUCT_LABEL] = gfd_product_name(pv.gpu, mig_profile=profile, shared=shared)
        if n:
            out[GFD_COUNT_LABEL] = str(n)
    if MIG_CONFIG_LABEL in labels and labels.get(MIG_MANAGER_DEPLOY_LABEL) != "false":
        out[MIG_CONFIG_STATE_LABEL] = "success"
    return out


def _capacity(rf: ResolvedFleet, pv: PoolView, itype: str | None, aws_it: Any,
              node_classes: dict[str, dict[str, Any]], inventory_cpus: int | None) -> dict[str, str]:
    """cpu, memory, pods, ephemeral-storage, then the extended resources, in that order."""
    from gpuplan.dra.claims import is_dra

    out = dict(DEFAULTS)
    if aws_it is not None:  # the EC2 instance type's vCPUs and memory
        if aws_it.cpu:
            out["cpu"] = str(aws_it.cpu)
        if aws_it.memory_mib:
            out["memory"] = binary_quantity(aws_it.memory_mib * 2 ** 20)
        storage = _ec2_storage(node_classes.get(pv.name), aws_it)
        if storage is not None:
            out["ephemeral-storage"] = storage
    s = settings(pv.pool)
    for key in ("cpu", "memory"):  # a back-end that states the machine's size (Cluster API: scale from zero)
        own = getattr(s, key, None) if s is not None else None
        if isinstance(own, str) and own:
            out[key] = own
    if inventory_cpus is not None:  # the node probe's count of online CPUs
        out["cpu"] = str(inventory_cpus)
    if not is_dra(rf, pv):  # a DRA pool's GPUs are ResourceSlices, not node resources
        out.update((k, str(v)) for k, v in pv.node_resources().items())
    out.update((k, str(v)) for k, v in _fabric(rf, pv, aws_it).items())
    return out


def _fabric(rf: ResolvedFleet, pv: PoolView, aws_it: Any) -> dict[str, int]:
    """The fabric a node of a pool whose multi-node jobs use one carries (``identity.pool_gang_resources``):
    on EKS the instance type's own EFA interfaces, which Karpenter advertises on a node it launched
    for a pod that requests them (aws/karpenter-provider-aws@v1.14.1 pkg/cloudprovider/cloudprovider.go:442-446)
    and the EFA device plugin then publishes; the pool's count where the machine is unknown."""
    from gpuplan.cloud.aws import EFA
    from gpuplan.identity import pool_gang_resources

    out = pool_gang_resources(rf, pv)
    if EFA in out and aws_it is not None and aws_it.efa_interfaces:
        out[EFA] = aws_it.efa_interfaces
    return out


def _ec2_storage(node_class: dict[str, Any] | None, it: Any) -> str | None:
    """Ephemeral storage of a node of the pool's EC2NodeClass: the instance-store array under
    ``instanceStorePolicy: RAID0``, else the root volume's size."""
    if node_class is None:
        return None
    spec = node_class.get("spec") or {}
    if spec.get("instanceStorePolicy") == "RAID0" and it.local_nvme_gib:
        return binary_quantity(it.local_nvme_gib * 2 ** 30)
    for bd in spec.get("blockDeviceMappings") or ():
        if bd.get("rootVolume") and isinstance((bd.get("ebs") or {}).get("volumeSize"), str):
            return bd["ebs"]["volumeSize"]
    return None


def _node_info(rf: ResolvedFleet, arch: str) -> dict[str, str]:
    """``status.nodeInfo``: the kubelet of the cluster's minor (patch 0), the OS and architecture;
    the rest empty (every field is required in the API's schema; none is validated)."""
    info = {k: "" for k in ("machineID", "systemUUID", "bootID", "kernelVersion", "osImage",
                            "containerRuntimeVersion")}
    info.update(kubeletVersion=f"v{rf.fleet.spec.cluster.kubernetes_version}.0", kubeProxyVersion="",
                operatingSystem="linux", architecture=arch)
    return info
