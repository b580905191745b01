"""AKS agent pools (Azure Service Operator ``ManagedClustersAgentPool``): what AKS itself does to
a pool's nodes, as the rest of gpuplan needs it.

AKS runs only part of the GPU stack on an agent pool (MicrosoftDocs/azure-aks-docs @fb060abe
articles/aks/use-nvidia-gpu.md:29, "Self-managed GPU setup: the NVIDIA GPU driver only, by
default"); the GPU Operator's device plugin, GFD and mig-manager serve the pool as on any
other node, so the pool advertises what its sharing and MIG layout say
(:func:`platform_gpu_stack` is False). What AKS decides:

- **The driver** (``aks.driver``). ``aks``: AKS installs the NVIDIA driver from the node image
  (``gpuProfile.driver: Install``, the API default); the operator's driver stays off the nodes
  (``nvidia.com/gpu.deploy.driver: "false"``, :func:`operator_driver`). ``gpu-operator``: AKS
  installs none (``gpuProfile.driver: None``, the API field behind ``az aks nodepool add
  --gpu-driver none``; articles/aks/nvidia-gpu-operator.md:50) and the GPU Operator installs it
  — then no two AKS pools may run different OS versions (nvidia-gpu-operator.md:46, GP672).
- **MIG** (``gpuInstanceProfile``, only with AKS's driver). One profile for the whole pool,
  ``MIG1g`` … ``MIG7g``; the node's bootstrap partitions every GPU with it
  (``gpuplan.cloud.aks``; articles/aks/gpu-multi-instance.md:31-43). gpuplan derives the value
  from the pool's uniform layout (:func:`gpu_instance_profile`); GP670/GP671 refuse a layout
  AKS cannot make. The operator's mig-manager finds the GPUs already in that layout.
- **Labels and taints.** AKS labels every node ``kubernetes.azure.com/agentpool=<agent pool>``,
  GPU nodes ``kubernetes.azure.com/accelerator=nvidia``, spot nodes
  ``kubernetes.azure.com/scalesetpriority=spot`` (articles/aks/use-labels.md:181,191,201), and
  taints spot nodes ``kubernetes.azure.com/scalesetpriority=spot:NoSchedule``
  (articles/aks/spot-node-pool.md:41). ``kubernetes.azure.com/`` and ``kubernetes.io/`` are
  reserved: a node label under them is refused (use-labels.md:217-222, GP673).
- **The autoscaler.** AKS's cluster autoscaler sizes the pool between ``minCount`` and
  ``maxCount``; its Azure provider knows GPU nodes by ``kubernetes.azure.com/accelerator``
  (kubernetes/autoscaler@cluster-autoscaler-1.36.1 cluster-autoscaler/cloudprovider/azure/
  azure_cloud_provider.go:45), so a node without allocatable ``nvidia.com/gpu`` is unready to
  it (kubernetes/autoscaler#8095, GP674).

Stage: resolve (docs/architecture.md)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from gpuplan.nodefacts import fact, taint
from gpuplan.provisioning.pools import AZURE_SPOT_LABEL as SPOT_LABEL, GPU, POOL_LABEL
from gpuplan.spec.models import Mig, Pool

if TYPE_CHECKING:
    from gpuplan.cloud.machine import Machine
    from gpuplan.spec.models import Aks

TITLE = "AKS agent pool"
# How a changed node label reaches the nodes, for the generated README: AKS updates an agent
# pool's labels and taints on its existing nodes (articles/aks/use-labels.md:155,
# use-node-taints.md:65-67; template_changes, below).
LABELS_CHANGE = "AKS updates an agent pool's node labels and taints on its existing nodes in place"
MACHINE_FIELD = "vmSize"

# labels and taints from the node-facts table (gpuplan/upstream/nodes/aks.json)
AGENTPOOL_LABEL = fact("aks", "label.agentpool")
ACCELERATOR_LABEL = fact("aks", "label.accelerator")
ACCELERATOR_VALUE = fact("aks", "label.accelerator.value")
SPOT_TAINT = taint("aks", "taint.spot")
RESERVED_LABEL_DOMAINS = ("kubernetes.azure.com", "kubernetes.io")  # use-labels.md:217-222
# ASO v1api20250801 ManagedClustersAgentPool_Spec.AzureName (managed_clusters_agent_pool_types_gen.go
# @70edf9f0, kubebuilder Pattern): Linux agent pool names
AGENT_POOL_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")


def settings(pool: Pool) -> "Aks":
    assert pool.aks is not None
    return pool.aks


def agent_pool_name(pool: Pool) -> str:
    """The agent pool's name in Azure (``azureName``): ``aks.name``, else the pool's name."""
    return settings(pool).name or pool.name


def machine(pool: Pool) -> "Machine | None":
    from gpuplan.cloud.aks import machine_type

    return machine_type(settings(pool).vm_size)


def closest_machine(pool: Pool) -> str | None:
    from gpuplan.cloud.aks import closest

    return closest(settings(pool).vm_size)


def platform_gpu_stack(pool: Pool) -> bool:
    return False  # AKS installs at most the driver; the GPU Operator runs the rest


def operator_driver(pool: Pool) -> bool:
    """The GPU Operator installs the driver only where AKS does not (``aks.driver: gpu-operator``)."""
    return settings(pool).driver == "gpu-operator"


def uniform_profile(pool: Pool) -> tuple[str, int] | None:
    """The one MIG profile and its count per GPU of a pool whose every GPU has the same
    single-profile layout (None: not MIG, several profiles, or per-GPU layouts)."""
    s = pool.sharing
    if not isinstance(s, Mig) or s.layout is None or len(s.layout) != 1:
        return None
    [(profile, count)] = s.layout.items()
    return profile, count


def gpu_instance_profile(pool: Pool) -> str | None:
    """The agent pool's ``gpuInstanceProfile``: the ``MIGng`` whose partition of the VM size's GPU
    is the pool's uniform layout (None: not an AKS-partitioned MIG pool, or no such profile)."""
    from gpuplan.cloud.aks import instance_profiles

    if settings(pool).driver != "aks":
        return None
    m = machine(pool)
    uni = uniform_profile(pool)
    if m is None or uni is None:
        return None
    for name, (profile, count) in instance_profiles(m.gpu).items():
        if (profile, count) == uni:
            return name
    return None


def platform_labels(pv: Any) -> dict[str, str]:
    """Labels AKS sets on the pool's nodes (use-labels.md:181,191,201). The accelerator label is
    expected only where AKS sets the node up for its GPU (its driver): with ``gpuProfile.driver:
    None`` AKS applies no NVIDIA configuration (AgentBaker gpu_config.proto ``enable_nvidia``), and
    gpuplan does not claim the label there (GP674 still assumes it, the safe side)."""
    pool = pv.pool
    out = {AGENTPOOL_LABEL: agent_pool_name(pool)}
    if settings(pool).driver == "aks":
        out[ACCELERATOR_LABEL] = ACCELERATOR_VALUE
    if settings(pool).spot:
        out[SPOT_LABEL] = "spot"
    return out


def platform_taints(pv: Any) -> list[dict[str, str]]:
    """AKS taints spot nodes itself (spot-node-pool.md:41); gpuplan writes the taint into
    ``nodeTaints`` too, so the agent pool says what its nodes carry."""
    return [dict(SPOT_TAINT)] if settings(pv.pool).spot else []


def preemptible(pool: Pool) -> bool:
    return settings(pool).spot


def max_nodes(pv: Any) -> int:
    """``maxCount``: the ceiling in whole nodes."""
    n = pv.gpus_per_node or 0
    return settings(pv.pool).max_gpus // n if n else 0


def advertises_gpu(pv: Any) -> bool:
    """Whether the pool's nodes advertise allocatable ``nvidia.com/gpu`` (what the cluster
    autoscaler's GPU readiness check looks for, utils/gpu/gpu.go:137-146)."""
    return bool(pv.node_resources().get(GPU))


# AKS upgrades an agent pool's nodes itself (the cluster's Kubernetes and node OS upgrade channels,
# ``ManagedCluster`` settings, not the pool's): each node is cordoned, drained and reimaged, a surge
# node standing in (MicrosoftDocs/azure-aks-docs@fb060abe articles/aks/upgrade-conceptual.md:49).
# What AKS does with a node it cannot drain, because a PodDisruptionBudget blocks eviction, is the
# pool's ``upgradeSettings.undrainableNodeBehavior`` (the pinned v1api20250801 CRD: enum Cordon,
# Schedule): ``Schedule``, the default, "deletes blocked node and surges replacement";
# ``Cordon`` cordons it, labels it ``kubernetes.azure.com/upgrade-status=Quarantined`` and goes on
# with the other nodes, the blocked pods still running there (articles/aks/upgrade-options.md:
# 222-241; upgrade-conceptual.md:113-115, 179-193: the node stays on the old version until someone
# resolves it). A training or batch pool gets ``Cordon``: a job whose pods a PodDisruptionBudget
# protects keeps its node through an upgrade instead of losing it.
UNDRAINABLE_CORDON = {"undrainableNodeBehavior": "Cordon"}
QUARANTINE_LABEL = "kubernetes.azure.com/upgrade-status"


def upgrade_settings(rf: Any, pv: Any) -> dict[str, Any] | None:
    """The agent pool's ``upgradeSettings`` (None: AKS's defaults)."""
    from gpuplan.identity import job_pool

    return dict(UNDRAINABLE_CORDON) if job_pool(rf, pv) else None


TEMPLATE_KINDS = ("ManagedClustersAgentPool",)
TEMPLATE_PATH = "provisioning/aks/{pool}/agentpool.yaml"  # gpuplan.lower.provision_aks writes it


def parse_taint(text: str) -> dict[str, str]:
    """``key=value:Effect`` (or ``key:Effect``), the agent pool's ``nodeTaints`` form, in Kubernetes form."""
    head, _, effect = text.rpartition(":")
    key, _, value = head.partition("=")
    return {"key": key, "value": value, "effect": effect}


def read_template(doc: dict[str, Any]) -> tuple[str, dict[str, str], list[dict[str, str]]] | None:
    """A generated ManagedClustersAgentPool: the labels and taints AKS gives its nodes (AKS's own aside)."""
    spec = doc.get("spec") or {}
    labels = dict(spec.get("nodeLabels") or {})
    pool = labels.get(POOL_LABEL) or doc["metadata"]["name"]
    return pool, labels, [parse_taint(t) for t in spec.get("nodeTaints") or ()]


# The kubelet settings an agent pool's ``kubeletConfig`` takes of those a pool's ``topology`` sets
# (MicrosoftDocs/azure-aks-docs @fb060abe articles/aks/custom-node-configuration-reference.md:27,32);
# AKS has no field for the others (scope, reserved CPUs, memory manager, policy options).
KUBELET_FIELDS = ("cpuManagerPolicy", "topologyManagerPolicy")
KUBELET_DEFAULTS = {"topologyManagerScope": "container"}  # the kubelet's own default: nothing to set


def kubelet_config(fields: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``gpuplan.identity.kubelet_topology_fields`` of a pool split into the agent pool's
    ``kubeletConfig`` and the names of the settings AKS cannot take (GP673)."""
    ok = {k: v for k, v in fields.items() if k in KUBELET_FIELDS}
    refused = [k for k, v in fields.items() if k not in KUBELET_FIELDS and KUBELET_DEFAULTS.get(k) != v]
    return ok, refused


# Agent-pool fields AKS does not change on an existing pool (MicrosoftDocs/azure-aks-docs @fb060abe):
# a VM size change is a new pool (resize-node-pool.md:19), spot priority and price are fixed at
# creation (spot-node-pool.md:39), so is the GPU instance profile (gpu-multi-instance.md:46); the
# name is the pool's identity in Azure.
FIXED_AT_CREATION = ("azureName", "vmSize", "scaleSetPriority", "spotMaxPrice", "gpuInstanceProfile")


def template_changes(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, str]]:
    """What AKS does with a changed ``ManagedClustersAgentPool`` spec (old -> new object), as
    ``(severity, message)`` with the severities of ``gpuplan.report.disruption``: ``hand-step`` for a
    field AKS keeps (Azure Service Operator's update fails until the pool is replaced by one of
    another name), ``hand-step`` for the driver setting (it reaches only nodes created afterwards:
    nvidia-gpu-operator.md:50), ``reconfigure`` for labels and taints (updated in place:
    use-labels.md:155, use-node-taints.md:65-67)."""
    a, b = old.get("spec") or {}, new.get("spec") or {}
    out = []
    fixed = [f for f in FIXED_AT_CREATION if a.get(f) != b.get(f)]
    if fixed:
        out.append(("hand-step", "AKS does not change " + ", ".join(fixed) + " of an existing agent pool: "
                    "give the pool a new name, so that a new agent pool is created and the old one, with its "
                    "nodes, is deleted"))
    if (a.get("gpuProfile") or {}).get("driver") != (b.get("gpuProfile") or {}).get("driver"):
        out.append(("hand-step", "gpuProfile.driver reaches only nodes created afterwards: scale the agent pool "
                    "to zero and back up"))
    if a.get("nodeLabels") != b.get("nodeLabels") or a.get("nodeTaints") != b.get("nodeTaints"):
        out.append(("reconfigure", "AKS updates the nodes' labels and taints in place"))
    return out
