"""Azure Service Operator objects for the pools that are AKS agent pools. They are applied to the
cluster that runs Azure Service Operator (where the cluster's ``ManagedCluster`` object lives,
``cluster.azure.namespace``), not through the rest of the tree: they are not listed in the root
kustomization.

Per AKS pool, ``provisioning/aks/<pool>/agentpool.yaml``: a ``containerservice.azure.com/
v1api20250801`` ``ManagedClustersAgentPool`` (Azure/azure-service-operator v2.19.0; the ARM API
2025-08-01):

- ``owner.name``: the ASO ``ManagedCluster`` (``cluster.azure.managedCluster``); ``azureName``: the
  agent pool's name in Azure (``aks.name``, else the pool's; GP669); ``mode: User``,
  ``osType: Linux``, ``osSKU``, ``vmSize``, ``availabilityZones`` (``aks.zones``).
- Size: ``enableAutoScaling`` with ``minCount`` = ``aks.minNodes`` and ``maxCount`` = the ceiling
  (``maxGPUs`` in whole nodes); AKS requires ``count`` when it creates the pool
  (Azure/azure-service-operator#3220), so ``count`` = ``minCount``. A pool with ``minNodes`` at
  the ceiling is fixed-size: no autoscaling, ``count`` = the ceiling.
- ``nodeLabels``: the pool's node labels (``gpuplan.identity.template_node_labels``: pool label,
  device-plugin and MIG config names, the operator's driver switch); ``nodeTaints``
  (``key=value:Effect``): ``gpuplan.identity.template_taints``. AKS updates both in place
  (MicrosoftDocs/azure-aks-docs @fb060abe articles/aks/use-labels.md:155,
  use-node-taints.md:65-67).
- ``kubeletConfig``: the pool's Topology and CPU Manager policies (the two of its ``topology``
  settings AKS takes: articles/aks/custom-node-configuration-reference.md:27,32; GP673 refuses
  the rest).
- GPU: ``gpuProfile.driver`` ``Install`` (AKS's driver) or ``None`` (``aks.driver:
  gpu-operator``); ``gpuInstanceProfile`` ``MIGng`` on an AKS-partitioned MIG pool
  (``gpuplan.provisioning.aks.gpu_instance_profile``).
- Spot (``aks.spot``): ``scaleSetPriority: Spot``, ``scaleSetEvictionPolicy: Delete``,
  ``spotMaxPrice: -1`` (up to the on-demand price; articles/aks/spot-node-pool.md:40). AKS adds
  the label and taint ``kubernetes.azure.com/scalesetpriority=spot`` itself
  (spot-node-pool.md:41); they are the platform's (``gpuplan.provisioning.aks``), not written here.

``provisioning/aks/kustomization.yaml`` lists them for a sync of their own;
``provisioning/aks/README.md`` says where to apply the folder and which changes replace nodes.

Stage: lower (docs/architecture.md)."""

from __future__ import annotations

from typing import Any, Sequence

from gpuplan.artifacts import Artifact, Produced
from gpuplan.identity import POOL_LABEL, kubelet_topology_fields, template_node_labels, template_taints
from gpuplan.lower.common import cell, folder_kustomization, metadata, obj
from gpuplan.provisioning import aks
from gpuplan.resolve import PoolView, ResolvedFleet

AGENTPOOL_API = "containerservice.azure.com/v1api20250801"
DIR = "provisioning/aks"
DRIVER = {"aks": "Install", "gpu-operator": "None"}


def aks_pools(rf: ResolvedFleet) -> list[PoolView]:
    return [pv for pv in rf.pools if pv.pool.aks is not None]


def fixed_size(pv: PoolView) -> bool:
    return aks.settings(pv.pool).min_nodes >= aks.max_nodes(pv)


def taint_strings(taints: list[dict[str, str]]) -> list[str]:
    """``key=value:Effect`` (the agent pool's ``nodeTaints`` form)."""
    return [f"{t['key']}={t['value']}:{t['effect']}" if t.get("value") else f"{t['key']}:{t['effect']}"
            for t in taints]


def agent_pool_spec(rf: ResolvedFleet, pv: PoolView) -> dict[str, Any]:
    s = aks.settings(pv.pool)
    azure = rf.fleet.spec.cluster.azure
    top = aks.max_nodes(pv)
    spec: dict[str, Any] = {
        "owner": {"name": azure.managed_cluster},
        "azureName": aks.agent_pool_name(pv.pool),
        "mode": "User",
        "osType": "Linux",
        "osSKU": s.os_sku,
        "vmSize": s.vm_size,
    }
    if s.zones:
        spec["availabilityZones"] = list(s.zones)
    if fixed_size(pv):
        spec["count"] = top
        spec["enableAutoScaling"] = False
    else:
        spec["count"] = s.min_nodes
        spec["enableAutoScaling"] = True
        spec["minCount"] = s.min_nodes
        spec["maxCount"] = top
    spec["nodeLabels"] = dict(sorted(template_node_labels(rf, pv).items()))
    spec["nodeTaints"] = taint_strings(template_taints(pv))
    kubelet, _ = aks.kubelet_config(kubelet_topology_fields(pv.pool.topology))
    if kubelet:
        spec["kubeletConfig"] = kubelet
    spec["gpuProfile"] = {"driver": DRIVER[s.driver]}
    if (gip := aks.gpu_instance_profile(pv.pool)) is not None:
        spec["gpuInstanceProfile"] = gip
    if (upgrades := aks.upgrade_settings(rf, pv)) is not None:
        spec["upgradeSettings"] = upgrades
    if s.spot:
        spec["scaleSetPriority"] = "Spot"
        spec["scaleSetEvictionPolicy"] = "Delete"
        spec["spotMaxPrice"] = -1
    return spec


def agent_pool(rf: ResolvedFleet, pv: PoolView) -> dict[str, Any]:
    azure = rf.fleet.spec.cluster.azure
    meta = metadata(rf, pv.name, namespace=azure.namespace, extra_labels={POOL_LABEL: pv.name})
    return obj(AGENTPOOL_API, "ManagedClustersAgentPool", meta, spec=agent_pool_spec(rf, pv))


def _readme(rf: ResolvedFleet, pools: list[PoolView]) -> str:
    azure = rf.fleet.spec.cluster.azure
    lines = [
        "# AKS agent pools",
        "",
        f"Apply this folder to the cluster that runs Azure Service Operator, in namespace "
        f"`{azure.namespace}` beside the `ManagedCluster` object `{azure.managed_cluster}` (e.g. "
        f"`kubectl apply -R -f {DIR}/`, or a GitOps application of its own there). It is not part of the "
        "workload cluster's kustomization.",
        "",
        "| pool | agent pool | VM size | nodes | driver | MIG | spot |",
        "|---|---|---|---|---|---|---|",
    ]
    for pv in pools:
        s = aks.settings(pv.pool)
        nodes = str(aks.max_nodes(pv)) if fixed_size(pv) else f"{s.min_nodes}-{aks.max_nodes(pv)}"
        gip = aks.gpu_instance_profile(pv.pool) or "-"
        lines.append(f"| {cell(pv.name)} | `{aks.agent_pool_name(pv.pool)}` | `{s.vm_size}` | {nodes} | "
                     f"{'AKS' if s.driver == 'aks' else 'GPU Operator'} | {gip} | {'yes' if s.spot else 'no'} |")
    lines += [
        "",
        "## Changes that replace nodes",
        "",
        "AKS does not change an existing pool's `vmSize` (a resize is a new agent pool, the old one "
        "cordoned, drained and removed), `scaleSetPriority`, `spotMaxPrice` or `gpuInstanceProfile`: such an "
        "edit needs a new agent pool (a new pool name in the spec), and the old pool's nodes go with it. "
        "`gpuProfile.driver` applies to nodes created afterwards only: scale the pool to zero and back. "
        "Labels and taints are updated in place. Run `gpuplan plan --base` before such a change "
        "(docs/aks.md lists the sources).",
        "",
        "## Autoscaling and `count`",
        "",
        "AKS requires `count` when it creates an agent pool; gpuplan writes the pool's minimum. Azure Service "
        "Operator sends `count` with every update of the object, and once the cluster autoscaler has moved the "
        "pool away from it AKS may refuse the update (\"Cannot manually scale AgentPool ... with cluster "
        "autoscaler enabled\"): apply a changed agent pool while the pool is at its minimum, and check the "
        "object's `Ready` condition (docs/aks.md).",
    ]
    held = [pv.name for pv in pools if aks.upgrade_settings(rf, pv) is not None]
    if held:
        lines += [
            "",
            "## Upgrades under training jobs",
            "",
            f"AKS upgrades the nodes itself (the cluster's upgrade and node OS channels), draining each. Pools "
            f"{', '.join(cell(n) for n in held)} run training or batch jobs and say `undrainableNodeBehavior: "
            "Cordon`: a node whose pods a PodDisruptionBudget keeps from eviction is cordoned and labelled "
            f"`{aks.QUARANTINE_LABEL}=Quarantined` instead of deleted, and its job runs on. Only pods with such a "
            "budget (`maxUnavailable: 0` over the job's pods) are kept; the others are evicted. Delete a "
            "quarantined node once its job has finished (docs/aks.md).",
        ]
    return "\n".join(lines) + "\n"


def lower(rf: ResolvedFleet, produced: Sequence[Produced]) -> list[Artifact]:
    pools = [pv for pv in aks_pools(rf) if pv.gpus_per_node]
    if not pools or rf.fleet.spec.cluster.azure is None:
        return []  # GP668 / GP637 are errors: compile stops before lowering
    out = [Artifact(path=aks.TEMPLATE_PATH.format(pool=pv.name), documents=(agent_pool(rf, pv),), kustomize=False,
                    description=f"AKS agent pool of pool {pv.name} (Azure Service Operator ManagedClustersAgentPool)")
           for pv in pools]
    out.append(folder_kustomization(
        DIR, out, "the AKS agent pools, for a sync of their own where Azure Service Operator runs"))
    out.append(Artifact(path=f"{DIR}/README.md", text=_readme(rf, pools), kustomize=False,
                        description="how to apply the AKS agent pools, and which changes replace nodes"))
    return out
