"""Node groups of a managed platform: GKE node pools, AKS agent pools and Cluster API
MachineDeployments, drafted as ``gke:``, ``aks:`` and ``capi:`` pools instead of static ones.

Two sources per pool, the declared and the running one:

* the pool object gpuplan writes for the platform (Config Connector ``ContainerNodePool``,
  Azure Service Operator ``ManagedClustersAgentPool``, Cluster API ``MachineDeployment``), when
  the export holds it: machine type, autoscaling limits, spot, driver, MIG and sharing settings;
* the Nodes, grouped by the label the platform puts on every node of a group:
  ``cloud.google.com/gke-nodepool`` (gpuplan.provisioning.gke.NODEPOOL_LABEL) and
  ``kubernetes.azure.com/agentpool`` (gpuplan.provisioning.aks.AGENTPOOL_LABEL); Cluster API
  nodes by gpuplan's pool label (its KubeadmConfigTemplate's ``node-labels``) or by the MachineSet
  Cluster API names in their ``cluster.x-k8s.io/owner-name`` annotation
  (kubernetes-sigs/cluster-api@v1.14.0 core/reconcilers/machine/machine_controller_noderef.go:49-56,
  CommonNodeAnnotations; a MachineSet of a MachineDeployment is named ``<deployment>-<suffix>``).

One module per platform: gpuplan.importer.gke_read, aks_read and capi_read, over
gpuplan.importer.nodegroups.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

from typing import Any

from gpuplan.importer import aks_read, capi_read, gke_read
from gpuplan.importer import draft as I
from gpuplan.importer.nodegroups import Platforms
from gpuplan.importer.read import Obj


def read(objs: list[Obj], nodes: list[Obj], cfg: Any, draft: I.Draft, sharing: Any, node_gpus: Any) -> Platforms:
    """The platform pools of the input; ``nodes``: every Node, GFD labels or not; ``sharing`` and
    ``node_gpus``: infer's readers of the operator's configs and the GFD labels."""
    out = Platforms(sharing=sharing, node_gpus=node_gpus)
    gke_read.gke_pools(objs, nodes, cfg, draft, out)
    aks_read.aks_pools(objs, [n for n in nodes if n.name not in out.claimed], cfg, draft, out)
    capi_read.capi_pools(objs, [n for n in nodes if n.name not in out.claimed], cfg, draft, out)
    return out


def operator_settings(plat: Platforms, cfg: Any, op: dict[str, Any], draft: I.Draft) -> None:
    aks_read.operator_settings(plat, cfg, op, draft)
