"""GKE node pools as Config Connector objects, under ``provisioning/gke/``.

Per GKE pool, ``provisioning/gke/<pool>.yaml``: a ``container.cnrm.cloud.google.com/v1beta1``
ContainerNodePool (Config Connector v1.155.1, pinned in ``gpuplan/upstream``, SOURCES-gke.md)
whose ``metadata.name`` is the GKE node pool's name (``resourceID`` defaults to it), with:

- the machine type and its GPUs as ``guestAccelerator`` (type and count from the machine-type
  table, ``gpuplan.cloud.gke``), the driver mode ``gpuDriverInstallationConfig`` (``DEFAULT``,
  ``LATEST``, or ``INSTALLATION_DISABLED`` for the GPU Operator path), the MIG partition size
  ``gpuPartitionSize`` and the sharing ``gpuSharingConfig`` where GKE runs the GPU stack;
- ``nodeConfig.labels``: the pool identity gpuplan owns (``gpuplan.identity.template_node_labels``)
  and ``nodeConfig.taint``: the template taints (GKE's effect names, ``NO_SCHEDULE``, as in
  k8s-config-connector@v1.155.1 pkg/test/resourcefixture/testdata/basic/container/v1beta1/
  containernodepool/containernodepool-advanced-machine-features/_generated_object_*.golden.yaml:30);
- ``autoscaling.totalMinNodeCount``/``totalMaxNodeCount``: ``minNodes`` and the ceiling in whole
  nodes (``maxGPUs`` / GPUs per node), ``nodeConfig.spot``, ``nodeLocations``.

These objects are for the Config Connector that manages the cluster's project (the GKE add-on
in the cluster itself, or Config Controller), not for the workloads' GitOps sync: they are not
in the root kustomization (``provisioning/gke/kustomization.yaml`` lists them for a sync of
their own; docs/gke.md). Most of ``nodeConfig`` is immutable in the CRD (labels, the
accelerator, the machine type): a change there is a node pool that must be replaced, which
``gpuplan plan --base`` reports.

Stage: lower (docs/architecture.md)."""

from __future__ import annotations

from typing import Any, Iterator, Sequence

from gpuplan.artifacts import Artifact, Produced
from gpuplan.identity import POOL_LABEL, template_node_labels, template_taints
from gpuplan.lower.common import folder_kustomization, metadata, obj
from gpuplan.provisioning.pools import machine, platform_gpu_stack
from gpuplan.provisioning.gke import SHARING_STRATEGY, TEMPLATE_PATH, partition_size
from gpuplan.resolve import PoolView, ResolvedFleet

API = "container.cnrm.cloud.google.com/v1beta1"
KIND = "ContainerNodePool"
DIR = "provisioning/gke"
PROJECT_ANNOTATION = "cnrm.cloud.google.com/project-id"

# Kubernetes taint effects -> the GKE API's (container/v1 NodeTaint.Effect)
EFFECTS = {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}
DRIVER_VERSIONS = {"default": "DEFAULT", "latest": "LATEST", "gpu-operator": "INSTALLATION_DISABLED"}
STRATEGIES = {"time-sharing": "TIME_SHARING", "mps": "MPS"}


def gke_pools(rf: ResolvedFleet) -> list[PoolView]:
    return [pv for pv in rf.pools if pv.pool.gke is not None]


def accelerator(pv: PoolView) -> dict[str, Any] | None:
    """The node pool's ``guestAccelerator`` entry (None: machine type unknown, GP637)."""
    m = machine(pv.pool)
    g = pv.pool.gke
    assert g is not None
    if m is None or m.accelerator is None:
        return None
    out: dict[str, Any] = {"type": m.accelerator, "count": m.gpu_count,
                           "gpuDriverInstallationConfig": {"gpuDriverVersion": DRIVER_VERSIONS[g.driver]}}
    if platform_gpu_stack(pv.pool):
        size = partition_size(pv.pool)
        if size is not None:
            out["gpuPartitionSize"] = size
        s = pv.pool.sharing
        if s.mode in SHARING_STRATEGY:
            out["gpuSharingConfig"] = {"gpuSharingStrategy": STRATEGIES[SHARING_STRATEGY[s.mode]],
                                       "maxSharedClientsPerGpu": s.replicas}
    return out


def node_count(pv: PoolView) -> int:
    """The node ceiling: ``maxGPUs`` in whole nodes."""
    return pv.node_count or 0


def node_pool(rf: ResolvedFleet, pv: PoolView) -> dict[str, Any]:
    gcp = rf.fleet.spec.cluster.gcp
    g = pv.pool.gke
    assert gcp is not None and g is not None
    node_config: dict[str, Any] = {"machineType": g.machine_type, "imageType": g.image_type}
    acc = accelerator(pv)
    if acc is not None:
        node_config["guestAccelerator"] = [acc]
    node_config["labels"] = template_node_labels(rf, pv)
    taints = [{"key": t["key"], "value": t.get("value", ""), "effect": EFFECTS[t["effect"]]} for t in template_taints(pv)]
    if taints:
        node_config["taint"] = taints
    t = pv.pool.topology
    if t.cpu_manager_policy == "static":
        node_config["kubeletConfig"] = {"cpuManagerPolicy": "static"}
    if g.spot:
        node_config["spot"] = True
    spec: dict[str, Any] = {
        "location": gcp.location,
        "clusterRef": {"external": f"projects/{gcp.project}/locations/{gcp.location}/clusters/{gcp.cluster_name}"},
    }
    if g.zones:
        spec["nodeLocations"] = list(g.zones)
    spec["autoscaling"] = {"totalMinNodeCount": g.min_nodes, "totalMaxNodeCount": node_count(pv)}
    if not g.auto_upgrade:
        # ContainerNodePool spec.management (the pinned CRD: management {autoRepair, autoUpgrade});
        # written only when the spec turns upgrades off, autoRepair stated so that it stays on
        spec["management"] = {"autoRepair": True, "autoUpgrade": False}
    spec["nodeConfig"] = node_config
    meta = metadata(rf, pv.name, namespace=gcp.namespace, extra_labels={POOL_LABEL: pv.name},
                    annotations={PROJECT_ANNOTATION: gcp.project})
    return obj(API, KIND, meta, spec=spec)


def lower(rf: ResolvedFleet, produced: Sequence[Produced]) -> Iterator[Artifact]:
    pools = gke_pools(rf)
    if not pools or rf.fleet.spec.cluster.gcp is None:
        return
    files = [Artifact(path=TEMPLATE_PATH.format(pool=pv.name), documents=(node_pool(rf, pv),), kustomize=False,
                      description=f"GKE node pool {pv.name} (Config Connector ContainerNodePool; not synced "
                      "with the tree: docs/gke.md)") for pv in pools]
    yield from files
    yield folder_kustomization(DIR, files, "the GKE node pools, for a Config Connector sync of their own")
