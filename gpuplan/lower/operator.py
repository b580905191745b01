"""GPU Operator: Helm values for chart ``gpu-operator`` and the operator namespace.

``gpu-operator/values.yaml`` is not a Kubernetes object (``kustomize=False``);
the Argo CD Application reads it from Git through a ``$values`` ref, the Flux
HelmRelease carries the same map inline. Only keys gpuplan decides are set;
everything else keeps the chart's defaults (GPU Operator v26.7.0,
reference/k8s/facts.md §c):

- ``driver.enabled`` / ``toolkit.enabled``: false when ``preinstalled``;
- ``devicePlugin.config {create: false, name, default}``: our ConfigMap;
- ``migManager.config {create: false, name, default: all-disabled}``
  (the ClusterPolicy CRD allows only ``all-disabled`` or ``""`` as default);
- ``mig.strategy``: see :func:`gpuplan.lower.device_plugin.cluster_mig_strategy`
  (``""`` makes the chart leave ``spec.mig.strategy`` out of the ClusterPolicy);
- ``daemonsets.tolerations`` and the bundled NFD worker's tolerations: the
  chart default (``nvidia.com/gpu`` Exists NoSchedule) plus every pool taint,
  so operands and nfd-worker (whose NodeFeature objects the pools'
  NodeFeatureRules match against) run on every GPU node;
- ``nfd.enabled: true``; ``nfd.nodefeaturerules`` stays false: that flag only
  makes the chart install NVIDIA's own confidential-computing/vGPU rules, it is
  not needed for nfd-master to evaluate gpuplan's NodeFeatureRules;
- ``dcgmExporter.enabled`` + ``serviceMonitor.enabled``, ``gfd.enabled``.
"""

from __future__ import annotations

from typing import Any, Sequence

from gpuplan.dra import is_dra
from gpuplan.lower import Artifact
from gpuplan.lower.common import metadata, obj
from gpuplan.lower.device_plugin import CONFIGMAP_NAME as PLUGIN_CONFIGMAP
from gpuplan.lower.device_plugin import DEFAULT_CONFIG, cluster_mig_strategy
from gpuplan.lower.gitops import VALUES_PATH, object_annotations, operator_namespace_path
from gpuplan.lower.mig_parted import ALL_DISABLED, mig_manager_needed
from gpuplan.lower.mig_parted import CONFIGMAP_NAME as MIG_CONFIGMAP
from gpuplan.resolve import ResolvedFleet

# Karpenter pools without `taints` get this one (spec.models.Pool.taints).
DEFAULT_GPU_TAINT = ("nvidia.com/gpu", "NoSchedule")
CHART_DEFAULT_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
# the bundled NFD worker's chart defaults, kept when its list is replaced
NFD_WORKER_DEFAULT_TOLERATIONS = (
    {"key": "node-role.kubernetes.io/master", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"},
)
_EFFECT_ORDER = {"NoSchedule": 0, "PreferNoSchedule": 1, "NoExecute": 2}


def pool_taints(rf: ResolvedFleet) -> list[tuple[str, str]]:
    """(key, effect) of every taint on any pool's nodes — their startup taints
    included, or mig-manager could never run to lift them — deduplicated and sorted."""
    from gpuplan.lower.karpenter import startup_taints

    seen: dict[tuple[str, str], None] = {}
    for pv in rf.pools:
        for t in startup_taints(pv):
            seen[(t["key"], t["effect"])] = None
        if pv.pool.taints is not None:
            for t in pv.pool.taints:
                seen[(t.key, t.effect)] = None
        elif pv.pool.karpenter is not None:
            seen[DEFAULT_GPU_TAINT] = None
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
    driver: dict[str, Any] = {"enabled": op.driver == "managed"}
    if op.driver == "managed" and op.driver_version:
        driver["version"] = op.driver_version
    mig_manager: dict[str, Any] = {"enabled": mig_manager_needed(rf)}
    if mig_manager["enabled"]:
        mig_manager["config"] = {"create": False, "name": MIG_CONFIGMAP, "default": ALL_DISABLED}
    return {
        "nfd": {"enabled": True},
        "node-feature-discovery": {
            "worker": {"tolerations": [*(dict(t) for t in NFD_WORKER_DEFAULT_TOLERATIONS), *tol]},
        },
        "daemonsets": {"tolerations": tol},
        "driver": driver,
        "toolkit": {"enabled": op.toolkit == "managed"},
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
            "serviceMonitor": {"enabled": op.dcgm_exporter.enabled and op.dcgm_exporter.service_monitor},
        },
    }


def namespace(rf: ResolvedFleet) -> dict[str, Any]:
    ns = rf.fleet.spec.cluster.gpu_operator.namespace
    # The operands are privileged DaemonSets: Pod Security Admission must allow them.
    meta = metadata(rf, ns, extra_labels={"pod-security.kubernetes.io/enforce": "privileged"},
                    annotations=object_annotations(rf, "Namespace"))
    return obj("v1", "Namespace", meta)


def lower(rf: ResolvedFleet, produced: Sequence[Artifact]) -> list[Artifact]:
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
