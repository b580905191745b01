"""A pool's identity, decided once: everything that names or marks a pool, a tier
or a tenant in the generated tree and on the cluster.

Resolve stage. The labels and taints a pool's nodes carry, the device-plugin and
mig-parted configs and the content-addressed names that select them, the
PriorityClass and quota names of tiers, the Argo CD names, the Karpenter node
software settings and the contract pod of each tier are functions of the
resolved fleet, computed here and read by every stage after it: the spec rules,
the lowering targets (which build objects around them), the placement proof,
the reports and ``gpuplan verify-cluster``. Nothing here builds a Kubernetes
object; ``gpuplan.lower`` does.

Stage: resolve (docs/architecture.md)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from gpuplan.dra.claims import DEVICE_PLUGIN_DEPLOY_LABEL, any_dra, is_dra
from gpuplan.provisioning.pools import (
    POOL_LABEL, autoscaled, karpenter_pool, labels_set_at_creation, node_group_pool, operator_runs_driver,
    platform_gpu_stack, platform_taints, template_labels, tier_node_selector)
from gpuplan.resolve import GPU, PoolView, ResolvedFleet
from gpuplan.spec.models import Mig, Tier, Topology
import gpuplan.units as _units


# --- Labels, keys and names ----------------------------------------------------------------


MANAGED_BY = {"app.kubernetes.io/managed-by": "gpuplan"}


# The pool binding taint, ``gpuplan.dev/pool=<pool>:NoSchedule``, on every pool's nodes:
# only pods that tolerate this pool (a tier's contract pods) schedule there. Unlike
# nvidia.com/gpu, ExtendedResourceToleration never adds a toleration for it
# (docs/placement.md), so a pod that merely requests a GPU tolerates no pool.
POOL_TAINT_KEY = POOL_LABEL


TENANT_LABEL = "gpuplan.dev/tenant"

# Where delivery lives in the tree and the annotations the GitOps engines read: written by
# gpuplan.lower.gitops / lower.common, read back by gpuplan.report.delivery and the driver.
BOOTSTRAP_PATH = "delivery/bootstrap.yaml"
PROJECT_DIR = "delivery/project"
PROJECT_PATH = f"{PROJECT_DIR}/appproject.yaml"
ROOT_KUSTOMIZATION = "kustomization.yaml"
# Flux: the tiers' PriorityClasses, synced by a Kustomization of their own that dependsOn the root
# (lower/gitops.py flux_classes_kustomization), and the file of that Kustomization in the root
FLUX_CLASSES_DIR = "delivery/priorityclasses"
FLUX_CLASSES_PATH = "delivery/priorityclasses.yaml"
# Flux: the tenancy objects (Namespaces, quotas, admission policies and bindings, and the classes'
# Kustomization), synced by a Kustomization of their own with no dependsOn; its object lives in the
# operator's Kustomization path (delivery/gpu-operator/), which bootstrap.yaml applies
# (lower/gitops.py flux_tenancy_kustomization)
FLUX_TENANCY_DIR = "delivery/tenancy"
FLUX_TENANCY_OBJECT = "tenancy.yaml"  # in the operator's Kustomization path
PRIORITY_CLASSES_PATH = "cluster/priorityclasses.yaml"
ARGO_SYNC_OPTIONS = "argocd.argoproj.io/sync-options"
FLUX_PRUNE = "kustomize.toolkit.fluxcd.io/prune"
FLUX_FORCE = "kustomize.toolkit.fluxcd.io/force"


TIER_LABEL = "gpuplan.dev/tier"


def content_name(prefix: str, data: Any, *, limit: int = 63) -> str:
    """``<prefix>-<8 hex digits of the content>``, at most ``limit`` characters.

    For names that select a config by node label: the device plugin's
    config-manager and mig-manager act only when the label *value* changes
    (NVIDIA/k8s-device-plugin@v0.20.0 cmd/config-manager/main.go:272-278,
    NVIDIA/mig-parted@v0.15.0 cmd/nvidia-mig-manager/main.go:572-577), so a
    config whose content changes must get a new name to reach any node."""
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    digest = hashlib.sha256(blob.encode()).hexdigest()[:8]
    return f"{prefix[: limit - 9]}-{digest}"


# --- Tiers and tenants ---------------------------------------------------------------------


TIER_NS_LABEL_PREFIX = "tier.gpuplan.dev/"  # tier.gpuplan.dev/<tier>: "true" on namespaces


QUOTA_NAME = "gpuplan-gpus"


OTHER_PRIORITIES_QUOTA = "gpuplan-other-priorities"


def priority_class_name(tier: Tier | str) -> str:
    """The PriorityClass of a tier (what pods put in ``priorityClassName``): the tier's
    ``priorityClassName`` when it adopts an existing name, else ``gpuplan-<tier>``."""
    if not isinstance(tier, str) and tier.priority_class_name is not None:
        return tier.priority_class_name
    return f"gpuplan-{tier if isinstance(tier, str) else tier.name}"


def quota_key(resource: str) -> str:
    """ResourceQuota key of an extended resource: always ``requests.``."""
    return f"requests.{resource}"


def scope_matches(expr: dict[str, Any], priority_class: str) -> bool:
    """Whether a ResourceQuota ``scopeSelector`` expression selects pods of ``priority_class``
    ("" for none); scopes other than PriorityClass select every pod here (kubernetes
    pkg/quota/v1/evaluator/core/pods.go ``podMatchesScopeFunc``)."""
    if expr["scopeName"] != "PriorityClass":
        return True
    op = expr["operator"]
    if op == "In":
        return priority_class in expr["values"]
    if op == "NotIn":
        return priority_class not in expr["values"]
    if op == "Exists":
        return priority_class != ""
    return priority_class == ""


def quota_cap(quotas: Any, priority_class: str, resource: str) -> int | None:
    """The most of ``resource`` that pods of ``priority_class`` may hold under ``quotas``
    (ResourceQuota objects of one namespace): the smallest ``requests.<resource>`` of the quotas
    that select them. None: no quota charges it."""
    caps = []
    for q in quotas:
        scope = (q["spec"].get("scopeSelector") or {}).get("matchExpressions", [])
        hard = q["spec"].get("hard", {}).get(quota_key(resource))
        if hard is not None and all(scope_matches(e, priority_class) for e in scope):
            caps.append(int(hard))
    return min(caps) if caps else None


def tier_namespace_label(tier: str) -> str:
    return f"{TIER_NS_LABEL_PREFIX}{tier}"


# --- Delivery names ------------------------------------------------------------------------


def project_name(rf: ResolvedFleet) -> str:
    """The Argo CD project of gpuplan's Applications: the spec's, else the one gpuplan emits."""
    return rf.fleet.spec.cluster.gitops.project or f"gpuplan-{rf.fleet.metadata.name}"


def app_name(rf: ResolvedFleet) -> str:
    return f"gpuplan-{rf.fleet.metadata.name}"


def classes_app_name(rf: ResolvedFleet) -> str:
    """Flux: the Kustomization of the tiers' PriorityClasses (``FLUX_CLASSES_DIR``)."""
    return f"gpuplan-{rf.fleet.metadata.name}-classes"


def tenancy_app_name(rf: ResolvedFleet) -> str:
    """Flux: the Kustomization of the tenancy objects (``FLUX_TENANCY_DIR``)."""
    return f"gpuplan-{rf.fleet.metadata.name}-tenancy"


def operator_app_name(rf: ResolvedFleet) -> str:
    return f"gpuplan-{rf.fleet.metadata.name}-gpu-operator"


def dra_app_name(rf: ResolvedFleet) -> str:
    return f"gpuplan-{rf.fleet.metadata.name}-dra-driver"


def kueue_app_name(rf: ResolvedFleet) -> str:
    return f"gpuplan-{rf.fleet.metadata.name}-kueue"


def volcano_app_name(rf: ResolvedFleet) -> str:
    return f"gpuplan-{rf.fleet.metadata.name}-volcano"


# --- Taints --------------------------------------------------------------------------------


def pool_node_taints(pv: Any) -> list[dict[str, str]]:
    """The taints the nodes of a pool carry once ready (startup taints aside): Karpenter
    pools get ``karpenter.pool_taints`` (spec, else the GPU taint), node groups
    :func:`node_group_taints`, static pools the spec's. Targets that must agree with the
    nodes (tolerations) read them here."""
    if karpenter_pool(pv.pool):
        return karpenter_pool_taints(pv)
    if node_group_pool(pv.pool):
        return node_group_taints(pv)
    return static_pool_taints(pv)


def pool_binding_taint(pool: str) -> dict[str, str]:
    return {"key": POOL_TAINT_KEY, "value": pool, "effect": "NoSchedule"}


def with_binding_taint(taints: list[dict[str, str]], pool: str) -> list[dict[str, str]]:
    """``taints`` plus the pool binding taint (a spec taint on the same key and effect wins)."""
    b = pool_binding_taint(pool)
    if any(t["key"] == b["key"] and t["effect"] == b["effect"] for t in taints):
        return taints
    return [*taints, b]


def spec_taints(taints: Any) -> list[dict[str, str]]:
    """The spec's taints as Kubernetes Taint objects (no ``value`` key when unset)."""
    out = []
    for t in taints:
        d = {"key": t.key}
        if t.value is not None:
            d["value"] = t.value
        d["effect"] = t.effect
        out.append(d)
    return out


# --- Karpenter pools -----------------------------------------------------------------------


DEFAULT_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


# MIG scale-from-zero (user pain #7, NVIDIA/gpu-operator #2670): a new node
# starts with MIG disabled and the device plugin advertises whole GPUs until
# mig-manager has applied the layout; a whole-GPU pod that lands then blocks the
# repartitioning. Every Karpenter MIG pool gets this taint for good: the tiers'
# pods tolerate it, and they ask for nvidia.com/mig-* resources that exist only
# once the layout is applied, so nothing takes a GPU early. ExtendedResourceToleration
# adds tolerations only for the requested resource names (nvidia.com/gpu), never
# for this key. Karpenter marks the node initialized only when the resources the
# launching pods requested are registered (kubernetes-sigs/karpenter@v1.14.1
# pkg/controllers/nodeclaim/lifecycle/initialization.go:82, RequestedResourcesRegistered),
# i.e. after the layout is applied. No startup taint: nothing in the cluster could
# remove one without node-wide RBAC (docs/karpenter.md). On AL2023 the userData applies
# the layout before kubelet starts (boot_mig): the whole-GPU phase is gone, and the gate
# is lifted, per pod, by the device plugin advertising the pool's MIG resources.
MIG_POOL_TAINT_KEY = "gpuplan.dev/mig-pool"


# The GPU Operator runs mig-manager only on nodes labelled ``nvidia.com/gpu.deploy.mig-manager=true``
# (NVIDIA/gpu-operator@v26.7.0 assets/state-mig-manager/0600_daemonset.yaml:18). It adds that
# label only where the key is missing (controllers/state_manager.go:363-370 ``hasMIGManagerLabel``,
# 486-490) and never sweeps it on container nodes (state_manager.go:509-512): a NodePool template
# value ``"false"`` keeps mig-manager off the node for good.
MIG_MANAGER_DEPLOY_LABEL = "nvidia.com/gpu.deploy.mig-manager"


# mig-manager's report of the node's layout (NVIDIA/mig-parted@v0.15.0 pkg/mig/reconfigure:
# ``pending``, ``rebooting``, ``success``, ``failed``). Where the userData applies the layout no
# mig-manager writes it, so the NodePool does: ``success`` is true of every node that registers
# (a node whose layout failed powered off first). What waits for it, such as the DRA kubelet
# plugin's node affinity (gpuplan.lower.dra.mig_gate), then runs there as on a static node.
MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"


def reads_plugin_config(pv: PoolView) -> bool:
    """The operator's device plugin serves the pool's nodes and reads their
    ``nvidia.com/device-plugin.config`` label. Not on Bottlerocket: no operand runs there
    (``nvidia.com/gpu.deploy.operands: "false"``, NVIDIA/gpu-operator@v26.7.0
    controllers/state_manager.go:457-463), and the OS's own device plugin takes its settings
    from the userData (:func:`bottlerocket_device_plugin`). Such pools get neither the label
    nor a config in the ConfigMap: a label nothing reads would only make the NodePool drift."""
    k = pv.pool.karpenter
    return k is None or k.ami_family != "Bottlerocket"


def boot_mig(pv: PoolView) -> bool:
    """The pool's MIG layout is applied by its nodes' userData at boot, before kubelet starts,
    instead of by mig-manager: Karpenter MIG pools on AL2023
    (:func:`gpuplan.lower.karpenter_aws.al2023_mig_script`). Static pools keep mig-manager;
    Bottlerocket MIG pools are refused (GP643). docs/karpenter.md "MIG at boot"."""
    k = pv.pool.karpenter
    return k is not None and k.ami_family == "AL2023" and isinstance(pv.pool.sharing, Mig)


def mig_pool_taint(pv: PoolView) -> dict[str, str] | None:
    """The MIG gate of an autoscaled MIG pool whose layout gpuplan's side applies (Karpenter:
    the userData on AL2023; node groups without the platform's own MIG: mig-manager; None for
    other pools)."""
    if autoscaled(pv.pool) and not platform_gpu_stack(pv.pool) and pv.pool.sharing.mode == "mig":
        return {"key": MIG_POOL_TAINT_KEY, "value": pv.name, "effect": "NoSchedule"}
    return None


def karpenter_pool_taints(pv: PoolView) -> list[dict[str, str]]:
    """The taints of a Karpenter pool's nodes: the spec's (else the GPU taint),
    plus the MIG gate on MIG pools, plus the pool binding taint."""
    out = [dict(DEFAULT_TAINT)] if pv.pool.taints is None else spec_taints(pv.pool.taints)
    gate = mig_pool_taint(pv)
    if gate is not None and all(t["key"] != gate["key"] for t in out):
        out.append(gate)
    return with_binding_taint(out, pv.name)


def node_group_taints(pv: PoolView) -> list[dict[str, str]]:
    """The taints of a node group's nodes: the spec's ``taints`` (the template's), the taints
    the platform adds itself (GKE: the GPU taint), the MIG gate where mig-manager partitions,
    and the pool binding taint."""
    out = spec_taints(pv.pool.taints or ())
    for t in [*platform_taints(pv), *([g] if (g := mig_pool_taint(pv)) is not None else [])]:
        if all((t["key"], t["effect"]) != (o["key"], o["effect"]) for o in out):
            out.append(t)
    return with_binding_taint(out, pv.name)


def template_taints(pv: PoolView) -> list[dict[str, str]]:
    """The taints a node group's template writes: :func:`node_group_taints` without the ones
    the platform adds itself."""
    own = {(t["key"], t["effect"]) for t in platform_taints(pv)} - {(t.key, t.effect) for t in pv.pool.taints or ()}
    return [t for t in node_group_taints(pv) if (t["key"], t["effect"]) not in own]


# "false": no GPU Operator operand on the node (NVIDIA/gpu-operator@v26.7.0
# controllers/state_manager.go:457-463, hasOperandsDisabled): Bottlerocket, a platform's own GPU stack
OPERANDS_LABEL = "nvidia.com/gpu.deploy.operands"


def node_group_node_labels(rf: ResolvedFleet, pv: PoolView) -> dict[str, str]:
    """Template labels of a node group (GKE node pool, AKS agent pool, MachineDeployment): the
    pool's node labels (``pool_node_labels``), plus the operator switches: no operand at all
    where the platform runs the GPU stack (its driver and device plugin would be doubled, as on
    Bottlerocket), no operator driver where the node image ships one."""
    out = dict(pool_node_labels(rf, pv))
    for key, value in template_labels(pv).items():  # what the platform needs (GKE: its plugin off)
        out.setdefault(key, value)
    if platform_gpu_stack(pv.pool):
        out[OPERANDS_LABEL] = "false"
    elif rf.fleet.spec.cluster.gpu_operator.driver == "managed" and not operator_runs_driver(pv.pool):
        out[DRIVER_DEPLOY_LABEL] = "false"
    return out


def template_node_labels(rf: ResolvedFleet, pv: PoolView) -> dict[str, str]:
    """The labels gpuplan writes for the pool's nodes, whoever applies them: the NodePool
    template (Karpenter), the node-group template, or nfd-master (static pools)."""
    if karpenter_pool(pv.pool):
        return nodepool_node_labels(rf, pv)
    if node_group_pool(pv.pool):
        return node_group_node_labels(rf, pv)
    return pool_node_labels(rf, pv)


def nodepool_node_labels(rf: ResolvedFleet, pv: PoolView) -> dict[str, str]:
    """Template labels: the pool's node labels (one place decides them,
    ``pool_node_labels``), plus the driver switch
    for the driver the EKS NVIDIA AMIs already ship."""
    out = dict(pool_node_labels(rf, pv))
    op = rf.fleet.spec.cluster.gpu_operator
    # EKS AL2023 and Bottlerocket NVIDIA AMIs ship the driver (facts.md §c): a
    # managed driver stays off these nodes; the operator then uses the host's
    # driver. The container toolkit is never switched off per node: with CDI the
    # device plugin's hook path points into the operator's toolkit install dir
    # on every node (gpuplan.lower.operator.values; GP640 makes the choice
    # fleet-wide).
    k = pv.pool.karpenter
    if k is not None and k.ami_family == "Bottlerocket":
        # no operand at all: NVIDIA does not support them on Bottlerocket, whose
        # own device plugin serves the GPUs (bottlerocket_device_plugin);
        # NVIDIA/gpu-operator@v26.7.0 controllers/state_manager.go:457-463
        out[OPERANDS_LABEL] = "false"
    elif op.driver == "managed":
        out[DRIVER_DEPLOY_LABEL] = "false"
    if boot_mig(pv):
        # the userData applied the layout before kubelet started, or the node never registered
        out[MIG_MANAGER_DEPLOY_LABEL] = "false"
        out[MIG_CONFIG_STATE_LABEL] = "success"
    return out


def ami_alias(pv: PoolView) -> str:
    k = pv.pool.karpenter
    assert k is not None
    family = "al2023" if k.ami_family == "AL2023" else "bottlerocket"
    return f"{family}@{k.ami_version}"


def bottlerocket_settings(pv: PoolView) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    """``[settings.kubernetes]`` keys and topology-manager-policy-options that
    Karpenter's Bottlerocket settings struct carries (facts.md §a)."""
    t = pv.pool.topology
    fields = kubelet_topology_fields(t)
    kube: list[tuple[str, Any]] = []
    if "cpuManagerPolicy" in fields:
        kube.append(("cpu-manager-policy", fields["cpuManagerPolicy"]))
    if "topologyManagerPolicy" in fields:
        kube.append(("topology-manager-policy", fields["topologyManagerPolicy"]))
        kube.append(("topology-manager-scope", fields["topologyManagerScope"]))
    opts: list[tuple[str, Any]] = []
    if "topologyManagerPolicyOptions" in fields:
        opts.append(("prefer-closest-numa-nodes", True))
    return kube, opts


def bottlerocket_device_plugin(pv: PoolView) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    """``[settings.kubelet-device-plugins.nvidia]`` and its ``time-slicing`` table.

    Bottlerocket's NVIDIA variants run their own device plugin as a host
    service; NVIDIA does not support the GPU Operator's operands on
    Bottlerocket, so gpuplan keeps them off these nodes (NodePool label
    ``nvidia.com/gpu.deploy.operands: "false"``) and configures that plugin
    instead. Exclusive pools need no setting (its defaults: whole GPUs,
    ``device-sharing-strategy = "none"``, sources/shared-defaults/
    nvidia-k8s-device-plugin.toml); time-slicing uses the keys Bottlerocket
    added in v1.25.0 (sources/settings-migrations/v1.25.0/
    kubelet-device-plugins-time-slicing-settings), which GP644 checks against
    the pinned AMI. ``enabled = false`` is never written: it exists only from
    Bottlerocket 1.63 and would leave the node with no device plugin at all."""
    s = pv.pool.sharing
    if s.mode != "time-slicing":
        return [], []
    return ([("device-sharing-strategy", "time-slicing")],
            [("replicas", s.replicas), ("rename-by-default", s.rename_by_default),
             ("fail-requests-greater-than-one", s.fail_requests_greater_than_one)])


# --- Kubelet topology ----------------------------------------------------------------------


def effective_cpu_manager_policy(t: Topology) -> str | None:
    """The CPU manager policy gpuplan sets (None: leave the kubelet default).
    Default: ``static`` when a Topology Manager policy other than ``none`` is
    set, so CPUs are aligned with the GPUs (the spec documents this)."""
    if t.cpu_manager_policy is not None:
        return t.cpu_manager_policy
    return "static" if t.policy != "none" else None


def topology_is_default(t: Topology) -> bool:
    return (
        t.policy == "none"
        and effective_cpu_manager_policy(t) is None
        and t.memory_manager_policy is None
        and t.reserved_system_cpus is None
        and not t.prefer_closest_numa_nodes
    )


def kubelet_topology_fields(t: Topology) -> dict[str, Any]:
    """The KubeletConfiguration fields a pool's ``topology`` sets, in a stable
    order; the same map goes into the AL2023 NodeConfig ``spec.kubelet.config``."""
    out: dict[str, Any] = {}
    cpu = effective_cpu_manager_policy(t)
    if cpu is not None:
        out["cpuManagerPolicy"] = cpu
    if t.reserved_system_cpus is not None:
        out["reservedSystemCPUs"] = t.reserved_system_cpus
    if t.memory_manager_policy is not None:
        out["memoryManagerPolicy"] = t.memory_manager_policy
    if t.policy != "none":
        out["topologyManagerPolicy"] = t.policy
        out["topologyManagerScope"] = t.scope
        if t.prefer_closest_numa_nodes:
            # map[string]string in KubeletConfiguration: the value is the string "true"
            out["topologyManagerPolicyOptions"] = {"prefer-closest-numa-nodes": "true"}
    return out


# --- Device-plugin configs -----------------------------------------------------------------


DEVICE_PLUGIN_CONFIGMAP = "gpuplan-device-plugin-config"


# Pool names are DNS labels (no '.'), so this key can never be a pool's key.
DEFAULT_CONFIG = "gpuplan.default"


MPS_MAX_REPLICAS = 48


def cluster_mig_strategy(rf: ResolvedFleet) -> str:
    """The fleet-wide MIG strategy (Helm ``mig.strategy``).

    - ``none`` when no pool uses MIG;
    - the one strategy all MIG pools share, when it suits every node;
    - ``""`` (each node's config decides) when MIG pools differ, or when they
      all use ``mixed`` but a pool shares GPUs with MPS: the device plugin
      refuses to start with ``mixed`` and MPS ("using --mig-strategy=mixed is
      not supported with MPS"), and a cluster-wide value would override the
      MPS pool's own ``none``."""
    # asked once per pool: remembered on the fleet so lowering stays linear in pools
    memo = rf.__dict__.get("_cluster_mig_strategy")
    if memo is None:
        memo = rf.__dict__["_cluster_mig_strategy"] = _cluster_mig_strategy(rf)
    return memo


def _cluster_mig_strategy(rf: ResolvedFleet) -> str:
    seen: list[str] = []
    mps = False
    for pv in rf.pools:
        s = pv.pool.sharing
        if platform_gpu_stack(pv.pool):
            continue  # the platform's own device plugin (GKE) reads no operator setting
        if isinstance(s, Mig) and s.strategy not in seen:
            seen.append(s.strategy)
        mps = mps or s.mode == "mps"
    if not seen:
        return "none"
    if len(seen) == 1 and not (seen[0] == "mixed" and mps):
        return seen[0]
    return ""


def pool_mig_strategy(rf: ResolvedFleet, pv: PoolView) -> str:
    """The MIG strategy the pool's nodes effectively run: the cluster's when it
    sets one (the ``MIG_STRATEGY`` environment variable overrides the file's
    flag), else the pool's own (:func:`own_mig_strategy`)."""
    cluster = cluster_mig_strategy(rf)
    if cluster:
        return cluster
    return own_mig_strategy(pv)


def own_mig_strategy(pv: PoolView) -> str:
    """The MIG strategy the pool asks for itself (``none`` unless it uses MIG):
    what its device-plugin config file says. It is the strategy its nodes run
    whenever the cluster sets none; where the cluster sets one, the operator
    hands it to the plugin as ``MIG_STRATEGY``, which overrides the file's flag
    (NVIDIA/k8s-device-plugin@v0.20.0 api/config/v1/flags.go:32-33,
    ``updateFromCLIFlag``: ``c.IsSet`` wins), so the file's own value never changes what a node runs.
    Writing the pool's own value keeps the file, and so its content-addressed
    name, a function of the pool alone (#27)."""
    s = pv.pool.sharing
    return s.strategy if isinstance(s, Mig) else "none"


def pool_config(rf: ResolvedFleet, pv: PoolView) -> dict[str, Any]:
    """The device-plugin config (as data) for one pool."""
    s = pv.pool.sharing
    if s.mode in ("time-slicing", "mps"):
        # The rules reject these first; lowering must still never write a config
        # the device plugin refuses (it crashes on it, together with GFD).
        if s.replicas < 2:
            raise ValueError(f"pool {pv.name}: sharing replicas must be >= 2, got {s.replicas}")
        if s.mode == "mps" and s.replicas > MPS_MAX_REPLICAS:
            raise ValueError(f"pool {pv.name}: MPS allows at most {MPS_MAX_REPLICAS} replicas")
    return _plugin_config(rf, pv)


def _plugin_config(rf: ResolvedFleet, pv: PoolView) -> dict[str, Any]:
    # the pool's own strategy, never the cluster's: see own_mig_strategy
    cfg: dict[str, Any] = {"version": "v1", "flags": {"migStrategy": own_mig_strategy(pv)}}
    s = pv.pool.sharing
    if s.mode in ("time-slicing", "mps"):
        key = "timeSlicing" if s.mode == "time-slicing" else "mps"
        cfg["sharing"] = {
            key: {
                "renameByDefault": s.rename_by_default,
                "failRequestsGreaterThanOne": s.fail_requests_greater_than_one,
                "resources": [{"name": GPU, "replicas": s.replicas}],
            }
        }
    return cfg


def plugin_config_key(rf: ResolvedFleet, pv: PoolView) -> str:
    """The pool's key in the ConfigMap = its ``nvidia.com/device-plugin.config``
    label value: ``<pool>-<hash of the config>``. A changed replica count or
    sharing mode gives a new value, which is what makes config-manager switch
    (it reacts to label changes only; cmd/config-manager/main.go:272-278).

    The config, and so the name, is a function of this pool alone (``rf`` is
    not read): a change to another pool, such as one that changes the
    cluster-wide MIG strategy, renames nothing here (:func:`own_mig_strategy`).

    A new name reaches a node only when the node's label changes: nfd-master
    relabels static nodes (the NodeFeatureRule, Argo CD wave 1, after the
    ConfigMap's -1, so the ConfigMap keeps a static pool's old name for that one
    build), but Karpenter never relabels a node it launched: a node
    gets the new value only by being replaced, which a pool whose budgets block
    drift postpones until expiry. Until then the node needs its old name, so
    the ConfigMap keeps it (:func:`kept_plugin_configs`). If the kubelet has
    not refreshed the mounted ConfigMap yet, config-manager exits on the
    unknown key ("specified config ... does not exist", main.go:356-358) and is
    restarted until it has. Rules read it too, on specs that may still be
    invalid: the name is computed without ``pool_config``'s guard."""
    return content_name(pv.name, _plugin_config(rf, pv))


# --- Config names that nodes may still carry ------------------------------------------------


# On the device-plugin ConfigMap: the names it keeps for nodes that still carry
# them, as JSON ``{name: pool}`` (sorted). A later build reads it back.
KEPT_CONFIGS_ANNOTATION = "gpuplan.dev/kept-configs"


_HASH_SUFFIX = re.compile(r"-[0-9a-f]{8}")


@dataclass(frozen=True)
class PreviousConfigs:
    """What the existing generated tree says about device-plugin config names,
    read by the driver (``gpuplan.kept.previous_configs``) before lowering.

    ``data``: the old ConfigMap's keys and values, as written; ``owners``: name
    -> pool whose nodes get their labels at creation (Karpenter, Cluster API, GKE), from the old
    NodePools' and node-group templates' labels and the old ConfigMap's
    :data:`KEPT_CONFIGS_ANNOTATION`; ``static_owners``: name -> static
    pool, from the old NodeFeatureRules' labels only (never from the annotation, so
    a static pool's old name is kept until its next change: :func:`_static_names`);
    ``retire``: names the person building retires (``gpuplan build --retire-config``)."""

    data: dict[str, str] = field(default_factory=dict)
    owners: dict[str, str] = field(default_factory=dict)
    retire: frozenset[str] = frozenset()
    # the same for mig-parted configs: the old ``mig-configs`` (name -> entries)
    # and name -> Karpenter pool (old NodePools' nvidia.com/mig.config, old annotation)
    mig_data: dict[str, Any] = field(default_factory=dict)
    mig_owners: dict[str, str] = field(default_factory=dict)
    # the destination namespaces of the old tree's own Argo CD AppProject, and those
    # the person building retires (`gpuplan build --retire-namespace`):
    # gpuplan.lower.gitops.kept_namespaces
    namespaces: frozenset[str] = frozenset()
    retire_namespaces: frozenset[str] = frozenset()
    # the namespaces that project lists only to keep them (its gpuplan.dev/kept-namespaces
    # annotation): `gpuplan verify-cluster` names those the cluster no longer has
    kept_namespaces: frozenset[str] = frozenset()
    # name -> pool relabelled in place (static, AKS) for nvidia.com/device-plugin.config and
    # nvidia.com/mig.config: the names the old tree's NodeFeatureRule (an AKS pool's old agent pool)
    # of that pool put on its nodes
    static_owners: dict[str, str] = field(default_factory=dict)
    static_mig_owners: dict[str, str] = field(default_factory=dict)
    # name -> pool relabelled in place: what the old annotation kept for a pool the old tree labelled
    # through its NodeFeatureRule or agent pool (the name the pool's last change replaced)
    static_kept: dict[str, str] = field(default_factory=dict)
    static_mig_kept: dict[str, str] = field(default_factory=dict)
    # what the old tree states that no build could have written, and why: destination -> why,
    # file -> why its kept-configs annotation was not read (gpuplan.kept, GP810)
    discarded_namespaces: dict[str, str] = field(default_factory=dict)
    discarded_configs: dict[str, str] = field(default_factory=dict)
    # name -> the device-plugin config its old ConfigMap value states, parsed (None: not one
    # object): a kept name must be the content hash of it (_kept)
    plugin_bodies: dict[str, Any] = field(default_factory=dict)
    # the GPU resource names the old tree's namespace quotas charge (`gpuplan-gpus`, read from one
    # tenant's quotas: every namespace's lists them all), and those the person building retires
    # (`gpuplan build --retire-resource`): kept_gpu_resources
    resources: frozenset[str] = frozenset()
    retire_resources: frozenset[str] = frozenset()
    # static pool -> the rules of its old NodeFeatureRule (name, labels, nodes), from which a
    # rollout in progress continues (gpuplan.provisioning.rollout), and the pools whose rollout
    # the person building moves one step on (`gpuplan build --advance POOL`)
    static_rules: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    advance: frozenset[str] = frozenset()


def kept_gpu_resources(rf: ResolvedFleet) -> list[str]:
    """GPU resource names the old tree charged that the new spec no longer advertises, held at 0
    in every namespace's ``gpuplan-gpus`` quota until retired by hand.

    A change that drops a name (a MIG profile leaves a layout, ``renameByDefault`` goes) does
    not take it off the nodes: the device plugin advertises what the node's partitions and its
    config give until mig-manager has repartitioned it, which it does only once the node's
    ``nvidia.com/mig.config`` changes value (NVIDIA/mig-parted@v0.15.0
    cmd/nvidia-mig-manager/main.go:572-577), and an old Karpenter node keeps its label until it
    is replaced (:func:`kept_plugin_configs`). A
    ResourceQuota charges only the names its ``hard`` lists (kubernetes@v1.36.3
    plugin/pkg/admission/resourcequota/controller.go ``checkRequest``: a request of a resource no
    quota of the namespace constrains is admitted), so without the key any pod takes the old name
    uncharged; with ``"0"`` one unit is refused. Below Kubernetes 1.30 (no admission policy) the
    quota is the only guard; above, the namespace policy refuses every ``nvidia.com/gpu.*`` and
    ``nvidia.com/mig-*`` name a class is not pinned to, and the zero key is kept all the same.

    The name is read back from the old quotas on every build, so it stays until ``gpuplan build
    --retire-resource NAME`` once no node advertises it (``gpuplan verify-cluster`` names those,
    GP888), or until the spec advertises it again."""
    prev = rf.previous
    if prev is None:
        return []
    current = set(rf.gpu_resources)
    retired = getattr(prev, "retire_resources", frozenset())
    return sorted(n for n in getattr(prev, "resources", ()) if n not in current and n not in retired)


def kept_plugin_configs(rf: ResolvedFleet) -> dict[str, tuple[str, str]]:
    """Old device-plugin config names the new ConfigMap keeps: name -> (pool,
    the old config text, verbatim).

    A pool whose nodes get their labels when they are made keeps them until the node is
    replaced (``gpuplan.provisioning.pools.labels_set_at_creation``, the platform fact of
    :data:`gpuplan.provisioning.pools.NODE_LABELS`): Karpenter never changes the labels of a
    node it launched (a NodePool whose template changes only marks its NodeClaims drifted,
    kubernetes-sigs/karpenter@v1.14.1 pkg/controllers/nodeclaim/disruption/drift.go:154-167,
    which a ``Drifted: 0`` budget postpones until ``expireAfter``); a Cluster API node keeps the
    ``--node-labels`` its kubelet registered with until its machine is replaced, and a GKE node
    the ``nodeConfig.labels`` its node pool was created with. So the node keeps its old
    ``nvidia.com/device-plugin.config``. A device-plugin pod that starts there (a DaemonSet roll,
    a reboot) reads the config of its old name (NVIDIA/k8s-device-plugin@v0.20.0
    cmd/config-manager/main.go:356-358) and, were it gone, would advertise no GPU.

    The rule: a name an old template of pool P selected (its NodePool, KubeadmConfigTemplate or
    ContainerNodePool), or that the old ConfigMap already kept for P, stays while P's nodes get
    their labels at creation and the name is not P's current one. It is retired when P leaves the
    spec or stops being such a pool (for Karpenter: the NodePool is deleted, and Karpenter
    terminates its NodeClaims with it), or by hand with ``gpuplan build
    --retire-config NAME`` once no node carries it (``kubectl get nodes -l
    nvidia.com/device-plugin.config=NAME``; for Karpenter at the latest after the pool's
    ``expireAfter``).

    Pools relabelled in place keep the name of their last change: static pools and AKS agent
    pools (AKS applies a changed ``nodeLabels`` to the nodes where they stand once Azure Service
    Operator has applied the agent pool, MicrosoftDocs/azure-aks-docs @fb060abe
    articles/aks/use-labels.md:155, in a sync of its own; until then they carry the old name; the
    old name is read from the old agent pool's ``nodeLabels``). nfd-master relabels static
    nodes when the new NodeFeatureRule is applied
    (kubernetes-sigs/node-feature-discovery@v0.19.0
    pkg/nfd-master/nfd-api-controller.go:280-296), but under Argo CD that is wave
    1, after the ConfigMaps' -1, and in between the nodes still carry the old
    name (a real kube-apiserver replay shows it: tests/e2e/test_transitions.py).
    So a name the old tree's NodeFeatureRule of static pool P put on its nodes,
    and that is not P's current name, stays; building the same spec again keeps
    it (read back from :data:`KEPT_CONFIGS_ANNOTATION`, so ``gpuplan check``
    agrees with the build), until P's next change replaces it or
    ``--retire-config`` drops it (:func:`_static_names`: at most one per pool;
    under Flux the rule and the ConfigMaps apply together, and keeping it is
    harmless).

    Only names of the shape ``<pool>-<8 hex digits>`` are kept, so a hand-edited
    tree cannot smuggle in another key."""
    prev = getattr(rf, "previous", None)
    if not isinstance(prev, PreviousConfigs):
        return {}
    current = {plugin_config_key(rf, pv) for pv in rf.pools}
    # no operator device plugin reads the label on Bottlerocket and DRA nodes
    served = {pv.name for pv in rf.pools if not is_dra(rf, pv)}
    return _kept(rf, prev, prev.owners, _static_names(prev.static_owners, prev.static_kept, current), prev.data,
                 current, served, lambda pool: pool,
                 lambda v: isinstance(v, str), lambda n, v: prev.plugin_bodies.get(n))


def kept_mig_configs(rf: ResolvedFleet) -> dict[str, tuple[str, Any]]:
    """Old mig-parted config names the new mig-parted ConfigMap keeps: name ->
    (pool, the old entries). The rule of :func:`kept_plugin_configs`, for
    ``nvidia.com/mig.config``: a Karpenter MIG pool's old nodes keep the name
    they were launched with, and mig-manager, when it restarts there, applies
    the config of that name (NVIDIA/mig-parted@v0.15.0
    cmd/nvidia-mig-manager/main.go:572-577); kept, it finds the layout the node
    already has and leaves the GPUs alone (pkg/mig/reconfigure/reconfigure.go:142-146).
    A static MIG pool keeps the old name of its last change, which its nodes carry until the
    new NodeFeatureRule (Argo CD wave 1); nfd-master then relabels them and
    mig-manager repartitions."""
    prev = getattr(rf, "previous", None)
    if not isinstance(prev, PreviousConfigs):
        return {}
    current = {n for pv in rf.pools if (n := mig_config_name(pv)) is not None}
    served = {pv.name for pv in rf.pools}
    return _kept(rf, prev, prev.mig_owners, _static_names(prev.static_mig_owners, prev.static_mig_kept, current),
                 prev.mig_data, current, served,
                 lambda pool: f"gpuplan-{pool}",
                 lambda v: isinstance(v, list) and bool(v) and all(isinstance(e, dict) for e in v), lambda n, v: v)


def _static_names(rule: dict[str, str], kept: dict[str, str], current: set[str]) -> dict[str, str]:
    """name -> static pool: the name the old NodeFeatureRule put on the pool's nodes when it is not
    the pool's current one (a change in this build), else what the old tree kept for the pool (the
    name its last change replaced). At most one old name per pool and label, and a fixed point:
    building the same spec over the tree gives the same tree, so ``gpuplan check`` agrees with the
    build that kept it. The next change replaces it; ``--retire-config`` drops it."""
    pools = sorted({*rule.values(), *kept.values()})
    out: dict[str, str] = {}
    for pool in pools:
        fresh = [n for n, p in rule.items() if p == pool and n not in current]
        carried = [n for n, p in kept.items() if p == pool and n not in current]
        # gpuplan writes one per pool and label: several are a hand edit, and none is trusted
        for n in fresh or (carried if len(carried) == 1 else []):
            out[n] = pool
    return out


def _kept(rf: ResolvedFleet, prev: PreviousConfigs, owners: dict[str, str], static_owners: dict[str, str],
          data: dict[str, Any], current: set[str], served: set[str], prefix_of, valid,
          body_of) -> dict[str, tuple[str, Any]]:
    """``owners``: name -> pool (old templates, the old annotation), kept while the pool's nodes get
    their labels at creation; ``static_owners``: name -> static pool (the old NodeFeatureRules only), kept
    while the pool is static (:func:`_static_names`). A name is kept only with the body it was made
    from: its hash suffix is the content hash of ``body_of(name, value)``, recomputed (a hand edit can
    change neither; gpuplan.kept)."""
    out: dict[str, tuple[str, Any]] = {}
    named = sorted([*((n, p, False) for n, p in owners.items()), *((n, p, True) for n, p in static_owners.items())])
    for name, pool, static in named:
        pv = rf.pool_by_name.get(pool)
        if pv is None or name in out or name in current or name in prev.retire:
            continue
        if static:
            if labels_set_at_creation(rf.fleet.spec.cluster, pv.pool) or platform_gpu_stack(pv.pool):
                continue  # the pool's nodes are no longer relabelled in place, or no operand reads the label
        elif (not labels_set_at_creation(rf.fleet.spec.cluster, pv.pool) or not reads_plugin_config(pv)
              or platform_gpu_stack(pv.pool)):
            continue  # relabelled in place, or no operand of the GPU Operator reads the label there
        if pool not in served:
            continue  # DRA: the operator's device plugin is off these nodes
        value = data.get(name)
        prefix = prefix_of(pool)[: 63 - 9]
        if not valid(value) or not name.startswith(prefix) or not _HASH_SUFFIX.fullmatch(name[len(prefix):]):
            continue
        if content_name(prefix_of(pool), body_of(name, value)) != name:
            continue  # not the body this name was made from
        out[name] = (pool, value)
    return out


# --- mig-parted configs --------------------------------------------------------------------


MIG_PARTED_CONFIGMAP = "gpuplan-mig-parted-config"


MIG_PARTED_CONFIG_KEY = "config.yaml"


MIG_ALL_DISABLED_CONFIG = "all-disabled"


def mig_manager_needed(rf: ResolvedFleet) -> bool:
    """MIG manager runs when a pool uses MIG or has MIG-capable GPUs (to keep them disabled);
    pools whose platform runs the GPU stack (GKE's MIG) do not count."""
    return any(
        (isinstance(pv.pool.sharing, Mig) or (pv.gpu is not None and pv.gpu.mig_capable))
        and not platform_gpu_stack(pv.pool) for pv in rf.pools
    )


def _mig_entry(pv: PoolView, devices: Any, layout: dict[str, int] | None) -> dict[str, Any]:
    e: dict[str, Any] = {}
    if pv.gpu is not None and pv.gpu.device_filters:
        e["device-filter"] = list(pv.gpu.device_filters)
    e["devices"] = devices
    e["mig-enabled"] = layout is not None
    if layout is not None:
        e["mig-devices"] = dict(layout)
    return e


def pool_entries(pv: PoolView) -> list[dict[str, Any]]:
    """The mig-parted entries of one MIG pool."""
    s = pv.pool.sharing
    assert isinstance(s, Mig)
    if s.layout is not None:
        return [_mig_entry(pv, "all", dict(s.layout))]
    if pv.gpus_per_node:
        per = pv.gpu_layouts()
        if all(layout == per[0] for layout in per):
            return [_mig_entry(pv, "all", per[0])]
        groups: list[tuple[dict[str, int] | None, list[int]]] = []
        for i, layout in enumerate(per):
            for g_layout, idx in groups:
                if g_layout == layout:
                    idx.append(i)
                    break
            else:
                groups.append((layout, [i]))
        return [_mig_entry(pv, idx, layout) for layout, idx in groups]
    # GPUs per node unknown (rules report it): the spec's groups as written
    return [
        _mig_entry(pv, list(g.devices), dict(g.layout) if g.layout is not None else None) for g in s.devices or ()
    ]


def mig_config_name(pv: PoolView) -> str | None:
    """The pool's mig-parted config name = its ``nvidia.com/mig.config`` label
    value (None: not a MIG pool): ``gpuplan-<pool>-<hash of its entries>``.
    mig-manager repartitions a node only when that label's value changes
    (NVIDIA/mig-parted@v0.15.0 cmd/nvidia-mig-manager/main.go:572-577), so a
    changed layout must change the name or it reaches no node. None too where the platform
    partitions the GPUs itself (GKE ``gpuPartitionSize``): no mig-manager runs there."""
    if not isinstance(pv.pool.sharing, Mig) or platform_gpu_stack(pv.pool):
        return None
    return content_name(f"gpuplan-{pv.name}", pool_entries(pv))


# --- Node labels ---------------------------------------------------------------------------


DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"


MIG_CONFIG_LABEL = "nvidia.com/mig.config"


MIG_ALL_DISABLED = "all-disabled"


def pool_mig_config(pv: PoolView) -> str | None:
    """The ``nvidia.com/mig.config`` value for the pool's nodes (None: no label)."""
    name = mig_config_name(pv)
    if name is not None:
        return name
    if pv.gpu is not None and pv.gpu.mig_capable and not platform_gpu_stack(pv.pool):
        return MIG_ALL_DISABLED
    return None


# The GPU Operator's driver upgrade controller passes over a node with this label
# (NVIDIA/gpu-operator@v26.7.0 vendor/github.com/NVIDIA/k8s-operator-libs/pkg/upgrade/
# consts.go:23 "nvidia.com/%s-driver-upgrade.skip" with driver name "gpu",
# cmd/gpu-operator/main.go:176; common_manager.go:679-681, upgrade_inplace.go:85-88), and the
# driver DaemonSet is OnDelete (assets/state-driver/0500_daemonset.yaml:16-17), so the node
# keeps its driver, and its pods, until someone rolls it by hand.
DRIVER_UPGRADE_SKIP_LABEL = "nvidia.com/gpu-driver-upgrade.skip"
DRIVER_DEPLOY_LABEL = "nvidia.com/gpu.deploy.driver"  # "false": the operator's driver stays off the node


# Tier workloads whose pods are jobs: deleting one loses the work since its last checkpoint.
JOB_WORKLOADS = ("training", "batch")


def job_pool(rf: ResolvedFleet, pv: PoolView) -> bool:
    """Some tier on the pool runs training or batch jobs (the pools whose node upgrades gpuplan
    holds or warns about: driver upgrades here, platform node upgrades on GKE and AKS)."""
    return any(t.pool == pv.name and t.workload in JOB_WORKLOADS for t in rf.fleet.spec.tiers)


def pool_driver_version(rf: ResolvedFleet, pv: PoolView) -> str | None:
    """The driver a static pool's nodes run: the pool's ``driverVersion``, else the
    fleet's, else (managed driver) the chart's default; None when gpuplan cannot know."""
    op = rf.fleet.spec.cluster.gpu_operator
    if pv.pool.driver_version is not None:
        return pv.pool.driver_version
    if op.driver_version is not None:
        return op.driver_version
    return CHART_DEFAULT_DRIVER.get(op.chart_version) if op.driver == "managed" else None


PRECOMPILED_SUFFIX = "-precompiled"


def nvidia_driver_name(pool: str, precompiled: bool) -> str:
    """The name of a static pool's NVIDIADriver: the pool's name for a compiled driver,
    ``<pool>-precompiled`` for a precompiled one (a driver branch, ``R570``).

    ``usePrecompiled`` and ``driverType`` are immutable (NVIDIA/gpu-operator@v26.7.0
    api/nvidia/v1alpha1/nvidiadriver_types.go:57,64, CEL ``self == oldSelf``), so the name
    carries the one gpuplan varies: a switch between compiled and precompiled is a new object
    (the engine creates it and prunes the old one), every other change an in-place update
    that the upgrade controller rolls node by node. The name is also the value of the node
    label ``nvidia.com/gpu-operator.driver.owner`` (internal/state/nodepool.go:68,
    internal/nvidiadriver/nvidiadriver.go:87), so it stays within 63 characters: a pool name
    too long for the suffix keeps a prefix and a digest of itself."""
    if not precompiled:
        return pool
    name = f"{pool}{PRECOMPILED_SUFFIX}"
    return name if len(name) <= 63 else content_name(name, pool)


def driver_upgrade_held(rf: ResolvedFleet, pv: PoolView) -> bool:
    """A static pool whose driver the operator manages and upgrades automatically, and
    that runs a training or batch tier: with the chart defaults the upgrade deletes its
    GPU pods (``gpuPodDeletion``, gpu-operator v26.7.0
    deployments/gpu-operator/values.yaml:185-188) whatever they run, because
    ``waitForCompletion.podSelector`` is empty (values.yaml:181-183; an empty selector
    skips the wait, k8s-operator-libs pkg/upgrade/common_manager.go:405-419). Such a pool's
    nodes carry :data:`DRIVER_UPGRADE_SKIP_LABEL`; the README says how to roll them.
    Karpenter pools run the AMI's driver (``nvidia.com/gpu.deploy.driver: "false"``); a node
    group whose driver the operator installs is held like a static pool."""
    op = rf.fleet.spec.cluster.gpu_operator
    if op.driver != "managed" or not op.driver_upgrade.auto_upgrade or not op.driver_upgrade.hold_job_pools:
        return False
    if not operator_runs_driver(pv.pool):
        return False
    return any(t.pool == pv.name and t.workload in JOB_WORKLOADS for t in rf.fleet.spec.tiers)


def pool_node_labels(rf: ResolvedFleet, pv: PoolView) -> dict[str, str]:
    """Every label gpuplan puts on the nodes of a pool, in a stable order.

    Used for static pools (NodeFeatureRule) and Karpenter pools (NodePool
    ``spec.template.metadata.labels``) alike."""
    out: dict[str, str] = {POOL_LABEL: pv.name}
    if reads_plugin_config(pv):
        # read by the operator's device plugin (config-manager), not on Bottlerocket
        # (reads_plugin_config). Likewise where the platform runs its own device plugin
        # (GKE), whose node-pool labels cannot change in place
        if not platform_gpu_stack(pv.pool):
            out[DEVICE_PLUGIN_CONFIG_LABEL] = plugin_config_key(rf, pv)
    mig = pool_mig_config(pv)
    if mig is not None:
        out[MIG_CONFIG_LABEL] = mig
    if is_dra(rf, pv):
        # the operator's device plugin off, the DRA kubelet plugin on (gpuplan.lower.dra)
        out[DEVICE_PLUGIN_DEPLOY_LABEL] = "false"
    if driver_upgrade_held(rf, pv):
        out[DRIVER_UPGRADE_SKIP_LABEL] = "true"
    q = rf.fleet.spec.queueing
    if q is not None and q.engine == "volcano":
        from gpuplan.queueing.volcano.names import NODE_GROUP_LABEL

        # the pool's Volcano node group: its leaf queues' pods run only here (queueing.volcano.queues)
        out[NODE_GROUP_LABEL] = pv.name
    for key in sorted(pv.pool.labels):
        if key not in out:
            out[key] = pv.pool.labels[key]
    return out


def static_pool_taints(pv: PoolView) -> list[dict[str, str]]:
    """The taints nfd-master keeps on a static pool's nodes: the spec's ``taints`` and
    the pool binding taint."""
    return with_binding_taint(spec_taints(pv.pool.taints or ()), pv.name)


# --- GPU Operator --------------------------------------------------------------------------


# The driver each chart release installs by default (driver.version in
# NVIDIA/gpu-operator@<tag> deployments/gpu-operator/values.yaml; v26.7.0: line 154).
# Written out so that the driver is pinned even when the spec names none: a
# chartVersion bump then changes driver.version visibly, in the diff.
CHART_DEFAULT_DRIVER = {"v26.7.0": "595.91.07"}


# --- The contract pod ----------------------------------------------------------------------


EXAMPLE_IMAGE = "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"


def tolerations_for(taints: list[dict[str, str]]) -> list[dict[str, str]]:
    """Tolerations for exactly these taints (PreferNoSchedule ones need none)."""
    out = []
    for t in taints:
        if t["effect"] == "PreferNoSchedule":
            continue
        if "value" in t:
            out.append({"key": t["key"], "operator": "Equal", "value": t["value"], "effect": t["effect"]})
        else:
            out.append({"key": t["key"], "operator": "Exists", "effect": t["effect"]})
    return out


def pool_gang_resources(rf: ResolvedFleet, pv: PoolView) -> dict[str, int]:
    """What every pod of a multi-node job on the pool requests besides its GPUs, ``{resource:
    count}``: the platform's fabric (:func:`gpuplan.provisioning.pools.gang_pod_resources`; on EKS
    the EFA interfaces of a Karpenter pool, ``vpc.amazonaws.com/efa``). Empty for most pools."""
    from gpuplan.provisioning.pools import gang_pod_resources

    gang = any(t.gang is not None and t.pool == pv.name for t in rf.fleet.spec.tiers)
    return gang_pod_resources(rf.fleet.spec.cluster, pv.pool, gang)


def tier_gang_resources(rf: ResolvedFleet, tier) -> dict[str, int]:
    """:func:`pool_gang_resources` for a tier with ``gang`` (its pods are a multi-node job); empty
    for any other tier: a pod of one node needs no fabric between nodes."""
    pv = rf.pool_by_name.get(tier.pool)
    if tier.gang is None or pv is None:
        return {}
    return pool_gang_resources(rf, pv)


def contract_pod_spec(rf: ResolvedFleet, tier, resource: str, units: int) -> dict[str, Any]:
    """What a pod of the tier must say: its PriorityClass, its pool's selector, tolerations
    for its pool's taints (the binding taint included), its resource as requests = limits,
    and, for a gang tier, the pool's fabric (:func:`tier_gang_resources`) beside it."""
    qty = {resource: str(units), **{k: str(v) for k, v in tier_gang_resources(rf, tier).items()}}
    selector = {POOL_LABEL: tier.pool}
    pv = rf.pool_by_name.get(tier.pool)
    if pv is not None:  # what the platform makes pods select (GKE MIG: the partition size)
        selector.update(tier_node_selector(pv, tier))
    pin = capacity_pin(rf, tier)
    pv = rf.pool_by_name[tier.pool]
    taints = pool_node_taints(pv)
    if pin is not None:  # a tier that must not be interrupted stays off the pool's spot nodes
        selector[CAPACITY_TYPE_LABEL] = pin
        if floor_nodes(pv):  # and may use the pool's on-demand floor
            taints = [*taints, guaranteed_taint(tier.pool)]
    out = {
        "priorityClassName": priority_class_name(tier),
        # the pool binding; with Kueue it also picks the tier's flavor (flavor nodeLabels)
        "nodeSelector": selector,
        "tolerations": tolerations_for(taints),
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": EXAMPLE_IMAGE, "command": ["nvidia-smi"],
                        "resources": {"requests": dict(qty), "limits": dict(qty)}}],
    }
    q = rf.fleet.spec.queueing
    if q is not None and q.engine == "volcano":
        from gpuplan.queues import queued_tiers
        from gpuplan.queueing.volcano.names import SCHEDULER

        if tier.name in queued_tiers(rf):  # a queued tier's pods go through the Volcano scheduler
            out["schedulerName"] = SCHEDULER
    return out


def contract_units(tier) -> int:
    return 1


def contract_spec(rf: ResolvedFleet, tier) -> dict[str, Any]:
    res = rf.tier_resource(tier)
    assert res is not None
    return contract_pod_spec(rf, tier, res, contract_units(tier))


DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
CA_SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"


def pod_annotations(rf: ResolvedFleet, tier) -> dict[str, str]:
    """Annotations a tier's pods carry: those that keep their node (:func:`_disruption_annotations`)
    and, for a queued tier, the topology its pod sets ask Kueue for (:func:`topology_annotations`)."""
    return {**_disruption_annotations(rf, tier), **topology_annotations(rf, tier)}


def topology_annotations(rf: ResolvedFleet, tier) -> dict[str, str]:
    """A queued tier's pod template asks Kueue for topology-aware scheduling: a gang tier with a
    ``topologyLevel`` requires that level; any other tier on a topology-aware pool asks for it
    unconstrained, since Kueue gives a pod set that does not ask only the flavors that are not
    topology-aware when a ClusterQueue has both (kueue v0.19.2
    pkg/scheduler/flavorassigner/tas_flavorassigner.go:166-203; lower/admission.py
    ``_topology_validations`` refuses a template without one)."""
    from gpuplan.queues import queued_tiers, tas_pools

    if tier.name not in set(queued_tiers(rf)):
        return {}
    if tier.gang is not None and tier.gang.topology_level:
        return {REQUIRED_TOPOLOGY: tier.gang.topology_level}
    return {UNCONSTRAINED_TOPOLOGY: "true"} if tier.pool in tas_pools(rf) else {}


def _disruption_annotations(rf: ResolvedFleet, tier) -> dict[str, str]:
    """On a Karpenter pool, a training or gang tier's pods say
    ``karpenter.sh/do-not-disrupt: "true"``, which keeps Karpenter from consolidating or drifting
    their node while they run (aws/karpenter-provider-aws v1.14.1
    website/content/en/docs/concepts/disruption.md:354-372); ``expireAfter`` still ends it, so jobs
    checkpoint. Not where the pods may run on spot (below). On an autoscaled Cluster API pool they say
    ``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"``: the Cluster Autoscaler does not
    scale their node down while they run."""
    pv = rf.pool_by_name.get(tier.pool)
    if pv is None or not (tier.workload == "training" or tier.gang is not None):
        return {}
    if pv.pool.capi is not None:
        from gpuplan.provisioning.capi import fixed_size

        # the Cluster Autoscaler never removes the node of a pod that says so (kubernetes/autoscaler
        # @cluster-autoscaler-1.36.1 cluster-autoscaler/FAQ.md:115, simulator/drainability/rules/
        # notsafetoevict/rule.go:43); a fixed-size pool is not the autoscaler's to shrink
        return {} if fixed_size(pv) else {CA_SAFE_TO_EVICT: "false"}
    if pv.pool.karpenter is None:
        return {}
    if _units.preemptible_pool(pv) and _units.capacity_pin(rf, tier) is None:
        # Pods that may run on spot go without it: Karpenter's drain never evicts an annotated pod
        # before the node's terminationGracePeriod (kubernetes-sigs/karpenter v1.14.1
        # pkg/utils/pod/scheduling.go:58-62 IsEvictable, node/termination/terminator/terminator.go:96-116),
        # so on an interruption it would lose its SIGTERM inside the two-minute notice; voluntary
        # disruption of a running job is already off on job pools (WhenEmpty, Drifted budget 0).
        return {}
    return {DO_NOT_DISRUPT: "true"}


def contract_pod(rf: ResolvedFleet, tier, namespace: str, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """The tier's example Pod in ``namespace`` (the placement proof's subject);
    ``spec``: the tier's contract pod spec, when the caller has it already."""
    meta: dict[str, Any] = {"name": f"{tier.name}-example", "namespace": namespace}
    ann = pod_annotations(rf, tier)
    if ann:
        meta["annotations"] = ann
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec or contract_spec(rf, tier)}


def contract_job(rf: ResolvedFleet, tier, namespace: str, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """The tier's example Job (not queued: the Job controller creates the pod at once)."""
    template: dict[str, Any] = {"spec": spec or contract_spec(rf, tier)}
    ann = pod_annotations(rf, tier)
    if ann:
        template = {"metadata": {"annotations": ann}, **template}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"generateName": f"{tier.name}-", "namespace": namespace},
            "spec": {"backoffLimit": 0, "template": template}}


# --- Kueue: what a tenant's Job names ------------------------------------------------------


QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


def workload_priority_class_name(tier: Tier | str) -> str:
    """The Kueue WorkloadPriorityClass of a queued tier (what its Jobs name in
    ``PRIORITY_LABEL``): ``gpuplan-<tier>``, the tier's own name even where its pods adopt an
    existing PriorityClass."""
    return f"gpuplan-{tier if isinstance(tier, str) else tier.name}"


REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
# kueue v0.19.2 apis/kueue/v1beta2/topology_types.go:41-47: TAS without a constraint
UNCONSTRAINED_TOPOLOGY = "kueue.x-k8s.io/podset-unconstrained-topology"


LOCAL_QUEUE = "default"

# --- capacity types ----------------------------------------------------------------------------

CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"  # a label Karpenter sets on its nodes


# Where a tier's pods pin their capacity type, and the on-demand floor's size, are decided in
# gpuplan.units (the capacity and Kueue ledgers read them there); the names stay here for targets.
guaranteed_capacity_type = _units.guaranteed_capacity_type
capacity_pin = _units.capacity_pin
floor_nodes = _units.floor_nodes


# The on-demand floor (``karpenter.guaranteedGPUs``): a second NodePool of the pool, only the
# guaranteed types, with the floor as its node limit and a taint that only the pods of the
# pool's pinned tiers tolerate (their contract pods do; the admission policy keeps every other
# tier's pods from tolerating it). Karpenter orders the NodePools by weight, highest first, then
# by name descending (kubernetes-sigs/karpenter@v1.14.1 pkg/controllers/provisioning/
# provisioner.go:293, pkg/utils/nodepool/nodepool.go:157-170), launches from the first one the
# pod fits (pkg/controllers/provisioning/scheduling/scheduler.go:756-760) and skips a NodePool
# whose node limit is used up (scheduler.go:709-714): a pinned pod the floor cannot take falls
# to the pool's own NodePool, which allows the guaranteed type too; a spot node never counts
# against the floor's limit.
GUARANTEED_TAINT_KEY = "gpuplan.dev/guaranteed"
GUARANTEED_SUFFIX = "-guaranteed"


def guaranteed_nodepool_name(pool: str) -> str:
    return f"{pool}{GUARANTEED_SUFFIX}"


def guaranteed_taint(pool: str) -> dict[str, str]:
    return {"key": GUARANTEED_TAINT_KEY, "value": pool, "effect": "NoSchedule"}


# The namespace the DRA driver's chart installs into (gpuplan.lower.dra)
DRA_NAMESPACE = "dra-driver-nvidia-gpu"


def exempt_namespaces(rf: ResolvedFleet) -> dict[str, str]:
    """Namespaces no admission binding selects, and why: the cluster's system namespaces
    (kube-proxy, CNI and CSI node plugins tolerate every taint), the namespaces of what
    gpuplan installs (the GPU Operator's validator pods request a GPU; its and the DRA
    driver's DaemonSets tolerate the GPU pools), the GitOps engine's, Kueue's, the monitoring
    namespace and ``admission.unmanagedNamespaces``: trusted, and said so in
    docs/placement.md "Threat model". A tenant namespace among them would be outside the
    boundary (gpuplan.rules.tenancy refuses it)."""
    c = rf.fleet.spec.cluster
    spec = rf.fleet.spec
    g = c.gitops
    out: dict[str, str] = {}
    for ns in c.admission.unmanaged_namespaces:
        out[ns] = "listed in cluster.admission.unmanagedNamespaces"
    for ns in c.admission.system_namespaces:
        out[ns] = "listed in cluster.admission.systemNamespaces"
    if any_dra(rf):
        out[DRA_NAMESPACE] = "the DRA driver's namespace"
    if spec.monitoring is not None and spec.monitoring.namespace:
        out[spec.monitoring.namespace] = "the monitoring namespace (monitoring.namespace)"
    if spec.queueing is not None and spec.queueing.engine == "volcano":
        out[spec.queueing.volcano.namespace] = "Volcano's namespace (queueing.volcano.namespace)"
    elif spec.queueing is not None:
        out[spec.queueing.kueue.namespace] = "Kueue's namespace (queueing.kueue.namespace)"
    out[g.namespace or ("argocd" if g.engine == "argocd" else "flux-system")] = \
        f"the {'Argo CD' if g.engine == 'argocd' else 'Flux'} namespace"
    out[c.gpu_operator.namespace] = "the GPU Operator's namespace"
    return dict(sorted(out.items()))
