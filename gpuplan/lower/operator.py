"""GPU Operator: Helm values for chart ``gpu-operator`` and the operator namespace.

``gpu-operator/values.yaml`` is not a Kubernetes object (``kustomize=False``);
the Argo CD Application reads it from Git through a ``$values`` ref, the Flux
HelmRelease carries the same map inline. Only keys gpuplan decides are set;
everything else keeps the chart's defaults (GPU Operator v26.7.0,
reference/k8s/facts.md §c):

- ``driver``: ``enabled`` (false when ``preinstalled``), the pinned ``version``
  and ``upgradePolicy`` (:func:`driver_values`);
- ``toolkit.enabled`` and ``cdi.enabled``: one fleet-wide choice (see ``values``);
- ``devicePlugin.config {create: false, name, default}``: our ConfigMap;
- ``migManager.config {create: false, name, default: all-disabled}``
  (the ClusterPolicy CRD allows only ``all-disabled`` or ``""`` as default);
- ``mig.strategy``: see :func:`gpuplan.lower.device_plugin.cluster_mig_strategy`
  (``""`` makes the chart leave ``spec.mig.strategy`` out of the ClusterPolicy);
- ``daemonsets.tolerations`` and the bundled NFD worker's tolerations: the
  chart default (``nvidia.com/gpu`` Exists NoSchedule) plus every pool taint,
  so operands and nfd-worker (whose NodeFeature objects the pools'
  NodeFeatureRules match against) run on every GPU node;
- ``node-feature-discovery.master.enableTaints`` when a static pool's
  NodeFeatureRule carries taints;
- ``nfd.enabled: true``; ``nfd.nodefeaturerules`` stays false: that flag only
  makes the chart install NVIDIA's own confidential-computing/vGPU rules, it is
  not needed for nfd-master to evaluate gpuplan's NodeFeatureRules;
- ``dcgmExporter.enabled`` + ``serviceMonitor.enabled``, ``gfd.enabled``; with
  ``spec.monitoring``, the ServiceMonitor's ``release`` label, interval and
  ``node`` relabeling (:func:`gpuplan.lower.monitoring.service_monitor_values`).

Stage: lower (docs/architecture.md)."""

from __future__ import annotations

from typing import Any, Sequence

from gpuplan.dra import is_dra
from gpuplan.artifacts import Artifact, Produced
from gpuplan.lower.common import metadata, obj
from gpuplan.identity import DEVICE_PLUGIN_CONFIGMAP as PLUGIN_CONFIGMAP
from gpuplan.identity import DEFAULT_CONFIG, cluster_mig_strategy
from gpuplan.lower.common import VALUES_PATH, object_annotations, operator_namespace_path
from gpuplan.identity import MIG_ALL_DISABLED_CONFIG as ALL_DISABLED, mig_manager_needed
from gpuplan.identity import MIG_PARTED_CONFIGMAP as MIG_CONFIGMAP
from gpuplan.lower.monitoring import dcgm_exporter_values, service_monitor_values
from gpuplan.resolve import ResolvedFleet
from gpuplan.identity import CHART_DEFAULT_DRIVER

CHART_DEFAULT_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
# the bundled NFD worker's chart defaults, kept when its list is replaced
NFD_WORKER_DEFAULT_TOLERATIONS = (
    {"key": "node-role.kubernetes.io/master", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"},
)
_EFFECT_ORDER = {"NoSchedule": 0, "PreferNoSchedule": 1, "NoExecute": 2}


def pool_taints(rf: ResolvedFleet) -> list[tuple[str, str]]:
    """(key, effect) of every taint on any pool's nodes — the MIG gate of
    Karpenter MIG pools included, or mig-manager could never run there to
    apply the layout — deduplicated and sorted."""
    from gpuplan.identity import pool_node_taints

    seen: dict[tuple[str, str], None] = {}
    for pv in rf.pools:
        for t in pool_node_taints(pv):  # the pool binding taint included
            seen[(t["key"], t["effect"])] = None
    return sorted(seen, key=lambda ke: (ke[0], _EFFECT_ORDER[ke[1]]))


def tolerations(rf: ResolvedFleet) -> list[dict[str, str]]:
    """Tolerations for the operator's DaemonSets: the chart default plus every pool taint.

    ``operator: Exists`` tolerates any value of the key (pools may differ in value)."""
    out = [dict(CHART_DEFAULT_TOLERATION)]
    for key, effect in pool_taints(rf):
        t = {"key": key, "operator": "Exists", "effect": effect}
        if t not in out:
            out.append(t)
    return out


def values(rf: ResolvedFleet) -> dict[str, Any]:
    op = rf.fleet.spec.cluster.gpu_operator
    tol = tolerations(rf)
    mig_manager: dict[str, Any] = {"enabled": mig_manager_needed(rf)}
    if mig_manager["enabled"]:
        mig_manager["config"] = {"create": False, "name": MIG_CONFIGMAP, "default": ALL_DISABLED}
    nfd: dict[str, Any] = {}
    if nfd_taints_needed(rf):
        # the chart turns this into nfd-master's -enable-taints flag
        # (kubernetes-sigs/node-feature-discovery@v0.19.0 deployment/helm/node-feature-discovery/
        # templates/master.yaml:141-142); without it nfd-master ignores NodeFeatureRule `taints`
        # (pkg/nfd-master/nfd-master.go:965)
        nfd["master"] = {"enableTaints": True}
    nfd["worker"] = {"tolerations": [*(dict(t) for t in NFD_WORKER_DEFAULT_TOLERATIONS), *tol]}
    managed_toolkit = rf.toolkit != "preinstalled"
    return {
        "nfd": {"enabled": True},
        "node-feature-discovery": nfd,
        "daemonsets": {"tolerations": tol},
        "driver": driver_values(rf),
        "toolkit": {"enabled": managed_toolkit},
        # CDI follows the fleet-wide toolkit choice: with CDI on and the operator's
        # toolkit, the device plugin's NVIDIA_CDI_HOOK_PATH points into the toolkit's
        # install dir (NVIDIA/gpu-operator@v26.7.0 controllers/object_controls.go:1527-1535,
        # 2106-2110), so every GPU node must run that toolkit (GP640 refuses a fleet
        # that mixes). A preinstalled toolkit keeps the runtime the node ships:
        # no CDI. (EKS AL2023 NVIDIA AMIs: nodeadm makes nvidia the default
        # containerd runtime when nvidia-container-runtime is installed,
        # awslabs/amazon-eks-ami@81fec2e8 nodeadm/internal/containerd/
        # runtime_config_nvidia.go:25-35, config.template.toml:9.)
        "cdi": {"enabled": managed_toolkit},
        "mig": {"strategy": cluster_mig_strategy(rf)},
        "devicePlugin": {
            # off only when every pool uses DRA: the chart then also drops the
            # validator's plugin check (controllers/object_controls.go L2464-2468)
            "enabled": not all(is_dra(rf, pv) for pv in rf.pools),
            "config": {"create": False, "name": PLUGIN_CONFIGMAP, "default": DEFAULT_CONFIG},
        },
        "gfd": {"enabled": True},
        "migManager": mig_manager,
        "dcgmExporter": {
            "enabled": op.dcgm_exporter.enabled,
            "serviceMonitor": {"enabled": op.dcgm_exporter.enabled and op.dcgm_exporter.service_monitor,
                               **service_monitor_values(rf)},
            # with monitoring: the counters file with the XID count, NVIDIA_RESOURCE_NAMES
            **dcgm_exporter_values(rf),
        },
    }


def driver_values(rf: ResolvedFleet) -> dict[str, Any]:
    """``driver``: pinned version and upgrade policy from the spec.

    Without ``driver.version`` the chart's default (595.91.07 in v26.7.0,
    deployments/gpu-operator/values.yaml:154) applies and changes with every
    chart bump; with ``upgradePolicy.autoUpgrade`` (default true, values.yaml:170)
    the operator then replaces the driver on every node and evicts GPU pods.
    No ``driverVersion``: the chart's own default for ``chartVersion``
    (:data:`CHART_DEFAULT_DRIVER`), written out. A branch (``R535``) selects precompiled driver images, whose tag is
    ``<branch>-<kernel>`` (controllers/object_controls.go:3375-3393,
    ``resolveDriverTag``); a full version selects the compiled driver image."""
    op = rf.fleet.spec.cluster.gpu_operator
    out: dict[str, Any] = {"enabled": op.driver == "managed"}
    if op.driver != "managed":
        return out
    version = op.driver_version or CHART_DEFAULT_DRIVER.get(op.chart_version)
    branch = driver_branch(version) if version else None
    if branch is not None:
        out["usePrecompiled"] = True
        out["version"] = branch
    elif version is not None:
        out["version"] = version
    up = op.driver_upgrade
    out["upgradePolicy"] = {
        "autoUpgrade": up.auto_upgrade,
        "maxParallelUpgrades": up.max_parallel_upgrades,
        "maxUnavailable": up.max_unavailable,
    }
    return out


def driver_branch(version: str) -> str | None:
    """``R535`` -> ``535``; None for a full version."""
    if version[:1] in ("R", "r") and version[1:].isdigit():
        return version[1:]
    return None


def nfd_taints_needed(rf: ResolvedFleet) -> bool:
    """Some static pool's NodeFeatureRule sets taints (see gpuplan.lower.node_labels)."""
    from gpuplan.identity import static_pool_taints

    return any(static_pool_taints(pv) for pv in rf.pools if pv.pool.is_static)


def namespace(rf: ResolvedFleet) -> dict[str, Any]:
    ns = rf.fleet.spec.cluster.gpu_operator.namespace
    # The operands are privileged DaemonSets: Pod Security Admission must allow them.
    meta = metadata(rf, ns, extra_labels={"pod-security.kubernetes.io/enforce": "privileged"},
                    annotations=object_annotations(rf, "Namespace"))
    return obj("v1", "Namespace", meta)


def lower(rf: ResolvedFleet, produced: Sequence[Produced]) -> list[Artifact]:
    ns_path, in_root = operator_namespace_path(rf)
    return [
        Artifact(
            path=VALUES_PATH,
            documents=(values(rf),),
            kustomize=False,
            description=f"Helm values for chart gpu-operator {rf.fleet.spec.cluster.gpu_operator.chart_version}",
        ),
        Artifact(
            path=ns_path,
            documents=(namespace(rf),),
            kustomize=in_root,
            description="the GPU Operator namespace (Pod Security: privileged)",
        ),
    ]
