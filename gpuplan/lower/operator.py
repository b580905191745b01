"""GPU Operator: Helm values for chart ``gpu-operator`` and the operator namespace.

``gpu-operator/values.yaml`` is not a Kubernetes object (``kustomize=False``);
the Argo CD Application reads it from Git through a ``$values`` ref, the Flux
HelmRelease carries the same map inline. Only keys gpuplan decides are set;
everything else keeps the chart's defaults (GPU Operator v26.7.0,
reference/k8s/facts.md §c):

- ``driver``: ``enabled`` (false when ``preinstalled``), the pinned ``version``
  and ``upgradePolicy`` (:func:`driver_values`), or, when the fleet mixes OS, driver
  versions or Karpenter pools, ``nvidiaDriverCRD`` and one NVIDIADriver per static
  pool in ``gpu-operator/nvidiadrivers.yaml`` (:func:`per_pool_drivers`);
- ``toolkit.enabled`` and ``cdi.enabled``: one fleet-wide choice (see ``values``);
- ``NVIDIA_VISIBLE_DEVICES`` made inert for unprivileged pods
  (:func:`envvar_inert_values`): ``toolkit.env`` turns the toolkit's envvar
  acceptance off where the operator manages the toolkit, and with CDI off
  ``devicePlugin.env`` switches the plugin to the ``volume-mounts`` strategy;
- ``devicePlugin.config {create: false, name, default}``: our ConfigMap;
- ``migManager.config {create: false, name, default: all-disabled}``
  (the ClusterPolicy CRD allows only ``all-disabled`` or ``""`` as default); no
  ``WITH_REBOOT``: Karpenter MIG pools partition at boot (:func:`mig_reboot_needed`);
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

from gpuplan.dra.claims import is_dra
from gpuplan.nodefacts import fact
from gpuplan.provisioning.pools import operator_runs_driver
from gpuplan.provisioning.runtime import runtime_class, unconfigurable_toolkit_pools
from gpuplan.artifacts import Artifact, Produced
from gpuplan.lower.common import metadata, obj, system_quota
from gpuplan.identity import DEVICE_PLUGIN_CONFIGMAP as PLUGIN_CONFIGMAP
from gpuplan.identity import DEFAULT_CONFIG, cluster_mig_strategy
from gpuplan.lower.common import VALUES_PATH, object_annotations, operator_namespace_path
from gpuplan.identity import MIG_ALL_DISABLED_CONFIG as ALL_DISABLED, boot_mig, mig_manager_needed
from gpuplan.identity import MIG_PARTED_CONFIGMAP as MIG_CONFIGMAP
from gpuplan.lower.monitoring import dcgm_exporter_values, service_monitor_values
from gpuplan.resolve import ResolvedFleet
from gpuplan.identity import CHART_DEFAULT_DRIVER
from gpuplan.spec.models import Mig

CHART_DEFAULT_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
# the bundled NFD worker's chart defaults, kept when its list is replaced
NFD_WORKER_DEFAULT_TOLERATIONS = (
    {"key": "node-role.kubernetes.io/master", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"},
)
_EFFECT_ORDER = {"NoSchedule": 0, "PreferNoSchedule": 1, "NoExecute": 2}


def pool_taints(rf: ResolvedFleet) -> list[tuple[str, str]]:
    """(key, effect) of every taint on any pool's nodes — the MIG gate of
    Karpenter MIG pools included, or the device plugin could never run there to
    advertise the layout — deduplicated and sorted."""
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
        if mig_reboot_needed(rf):
            mig_manager["env"] = [{"name": "WITH_REBOOT", "value": "true"}]
    nfd: dict[str, Any] = {}
    if nfd_taints_needed(rf):
        # the chart turns this into nfd-master's -enable-taints flag
        # (kubernetes-sigs/node-feature-discovery@v0.19.0 deployment/helm/node-feature-discovery/
        # templates/master.yaml:141-142); without it nfd-master ignores NodeFeatureRule `taints`
        # (pkg/nfd-master/nfd-master.go:965)
        nfd["master"] = {"enableTaints": True}
    nfd["worker"] = {"tolerations": [*(dict(t) for t in NFD_WORKER_DEFAULT_TOLERATIONS), *tol]}
    managed_toolkit = rf.toolkit != "preinstalled"
    toolkit_env, plugin_env = envvar_inert_values(rf)
    plugin_on = not all(is_dra(rf, pv) for pv in rf.pools)
    handler = runtime_class(rf)
    return {
        # the RuntimeClass the operator creates and gives its operands: its handler is its name
        # (NVIDIA/gpu-operator@v26.7.0 controllers/object_controls.go:5178-5190, 2747-2753), so it
        # must be a runtime the nodes' containerd defines (gpuplan/upstream/nodes/, GP990)
        **({"operator": {"runtimeClass": handler}} if handler != fact("operator", "runtimeHandler") else {}),
        "nfd": {"enabled": True},
        "node-feature-discovery": nfd,
        "daemonsets": {"tolerations": tol},
        "driver": driver_values(rf),
        "toolkit": {"enabled": managed_toolkit, **({"env": toolkit_env} if toolkit_env else {})},
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
            "enabled": plugin_on,
            "config": {"create": False, "name": PLUGIN_CONFIGMAP, "default": DEFAULT_CONFIG},
            **({"env": plugin_env} if plugin_env and plugin_on else {}),
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


# NVIDIA_VISIBLE_DEVICES made inert (issue #26). Without CDI the device plugin's
# default strategy is `envvar` (NVIDIA/gpu-operator@v26.7.0
# assets/state-device-plugin/0500_daemonset.yaml:77-78; NVIDIA/k8s-device-plugin@v0.20.0
# README.md:308-325) and the toolkit honours NVIDIA_VISIBLE_DEVICES from unprivileged
# containers (NVIDIA/nvidia-container-toolkit@v1.20.0 api/config/v1/config.go:106,
# internal/config/image/cuda_image.go:258-291), so any pod whose image sets
# NVIDIA_VISIBLE_DEVICES=all (every CUDA base image) sees every GPU of its node.
# With `volume-mounts` the plugin hands the allocated devices over as mounts under
# /var/run/nvidia-container-devices (k8s-device-plugin@v0.20.0 internal/plugin/server.go:
# 46-48, 497-514), which the toolkit reads first when it accepts them
# (cuda_image.go:265-271), and an unprivileged pod's own variable is ignored
# (cuda_image.go:279-290). The variable names are the toolkit installer's
# (nvidia-container-toolkit@v1.20.0 cmd/nvidia-ctk-installer/toolkit/toolkit.go:157-169;
# the chart's toolkit image is v1.20.0, gpu-operator values.yaml:233), applied by the
# operator after its own settings (controllers/object_controls.go:1359-1362); the
# plugin's `env` likewise last (object_controls.go:1620-1624), after the CDI strategy.
TOOLKIT_ENVVAR_OFF = "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED"
TOOLKIT_VOLUME_MOUNTS_ON = "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS"
DEVICE_LIST_STRATEGY = "DEVICE_LIST_STRATEGY"
VOLUME_MOUNTS = "volume-mounts"
# the same two settings in the node's /etc/nvidia-container-runtime/config.toml
# (nvidia-container-toolkit@v1.20.0 api/config/v1/config.go:64-65), for a preinstalled toolkit
NODE_TOOLKIT_SETTINGS = (("accept-nvidia-visible-devices-envvar-when-unprivileged", "false"),
                         ("accept-nvidia-visible-devices-as-volume-mounts", "true"))


def envvar_inert_values(rf: ResolvedFleet) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """(``toolkit.env``, ``devicePlugin.env``) that make ``NVIDIA_VISIBLE_DEVICES`` inert.

    Operator's toolkit (CDI on): the plugin already uses ``cdi-annotations,cdi-cri``
    (object_controls.go:1527-1530) and the toolkit no longer makes ``nvidia`` the default
    runtime (object_controls.go:1257-1270); envvar acceptance goes off as well, for the
    pods that run the ``nvidia`` runtime class. Preinstalled toolkit (CDI off): the
    plugin uses ``volume-mounts``; the node's toolkit must accept them and refuse the
    variable (:data:`NODE_TOOLKIT_SETTINGS`: the README's prerequisites, and the
    userData of Karpenter AL2023 pools)."""
    plugin_env: list[dict[str, str]] = []
    toolkit_env: list[dict[str, str]] = []
    if rf.toolkit != "preinstalled":
        toolkit_env = [{"name": TOOLKIT_ENVVAR_OFF, "value": "false"},
                       {"name": TOOLKIT_VOLUME_MOUNTS_ON, "value": "true"}]
    elif not unconfigurable_toolkit_pools(rf):
        plugin_env = [{"name": DEVICE_LIST_STRATEGY, "value": VOLUME_MOUNTS}]
    return toolkit_env, plugin_env


NVIDIADRIVER_API = "nvidia.com/v1alpha1"
NVIDIADRIVERS_PATH = "gpu-operator/nvidiadrivers.yaml"
# the chart's driver image (NVIDIA/gpu-operator@v26.7.0 deployments/gpu-operator/values.yaml:152-153),
# written out because an NVIDIADriver defaults `image` to a full path instead
# (deployments/gpu-operator/crds/nvidia.com_nvidiadrivers.yaml, spec.image default)
DRIVER_REPOSITORY = "nvcr.io/nvidia"
DRIVER_IMAGE = "driver"


def per_pool_drivers(rf: ResolvedFleet) -> bool:
    """One NVIDIADriver per static pool instead of the ClusterPolicy's one driver.

    In ClusterPolicy mode the driver image is ``<repo>/driver:<version>-<osTag>``
    (NVIDIA/gpu-operator@v26.7.0 controllers/object_controls.go:3424-3427) and ``osTag``
    comes from the NFD labels of whichever node with ``nvidia.com/gpu.present=true`` the
    API lists first (controllers/state_manager.go:579-611): a Karpenter AL2023 node gives
    the static Ubuntu nodes an ``amzn2023`` image. An NVIDIADriver groups the nodes it
    selects by their own OS (internal/state/nodepool.go:60-119). So: whenever the
    operator's driver runs beside Karpenter pools, or the static pools differ in ``os`` or
    driver version. Otherwise the ClusterPolicy path stays."""
    from gpuplan.identity import pool_driver_version

    if rf.fleet.spec.cluster.gpu_operator.driver != "managed":
        return False
    static = [pv for pv in rf.pools if operator_runs_driver(pv.pool)]
    if not static:
        return False
    return (len(static) < len(rf.pools) or len({pv.pool.os for pv in static}) > 1
            or len({pool_driver_version(rf, pv) for pv in static}) > 1)


def _upgrade_policy(rf: ResolvedFleet) -> dict[str, Any]:
    up = rf.fleet.spec.cluster.gpu_operator.driver_upgrade
    return {"autoUpgrade": up.auto_upgrade, "maxParallelUpgrades": up.max_parallel_upgrades,
            "maxUnavailable": up.max_unavailable}


def nvidia_driver(rf: ResolvedFleet, pv: Any) -> dict[str, Any]:
    """The NVIDIADriver of one static pool: it selects the pool's nodes by the pool label
    gpuplan owns (one value per node, so no two overlap: the operator refuses overlapping
    NVIDIADrivers, internal/validator/validator.go:51-100), tolerates every pool taint like
    the other operands, and carries the upgrade policy (the upgrade controller reads each
    NVIDIADriver's own, controllers/upgrade_controller.go:199-262).

    Never replaced by the GitOps engine: Argo CD's ``Replace=true`` deletes and creates the
    object on *every* change (argoproj/argo-cd@v3.5.1 gitops-engine/pkg/sync/sync_context.go:
    1400-1434, ``kubectl replace --force``: k8s.io/kubectl@v0.36.3 pkg/cmd/replace/replace.go:
    264-265,315-410), and a new NVIDIADriver has a new UID, so a new driver DaemonSet
    (its name hashes the UID, internal/state/driver.go:500-533; owned by the NVIDIADriver,
    internal/state/state_skel.go:106): every node of the pool would get a new driver pod at
    once, outside the upgrade controller. Updated in place, the DaemonSet keeps its name and
    its ``OnDelete`` strategy (manifests/state-driver/0500_daemonset.yaml:37-38), and the
    upgrade controller rolls the new driver ``maxParallelUpgrades`` nodes at a time, passing
    over held pools. Nor Flux's ``force: enabled``: it deletes the object on any Conflict or
    Invalid apply error, not only an immutable field (fluxcd/pkg/ssa@v0.76.1
    manager_apply.go:141-148,519-533, errors/immutable.go:32-48). ``usePrecompiled`` and
    ``driverType`` are immutable (CEL ``self == oldSelf``): the name carries the first
    (:func:`gpuplan.identity.nvidia_driver_name`; ``driverType`` is always ``gpu``)."""
    from gpuplan.identity import POOL_LABEL, nvidia_driver_name, pool_driver_version

    version = pool_driver_version(rf, pv)
    assert version is not None, "a managed driver always has a version (the chart default at worst)"
    branch = driver_branch(version)
    spec = {
        "default": False,
        "driverType": "gpu",
        "repository": DRIVER_REPOSITORY,
        "image": DRIVER_IMAGE,
        "version": branch or version,
        "usePrecompiled": branch is not None,
        "kernelModuleType": "auto",
        "nodeSelector": {POOL_LABEL: pv.name},
        "tolerations": tolerations(rf),
        "upgradePolicy": _upgrade_policy(rf),
    }
    meta = metadata(rf, nvidia_driver_name(pv.name, branch is not None), extra_labels={POOL_LABEL: pv.name},
                    annotations=object_annotations(rf, "NVIDIADriver"))
    return obj(NVIDIADRIVER_API, "NVIDIADriver", meta, spec=spec)


def driver_values(rf: ResolvedFleet) -> dict[str, Any]:
    """``driver``: pinned version and upgrade policy from the spec.

    Without ``driver.version`` the chart's default (595.91.07 in v26.7.0,
    deployments/gpu-operator/values.yaml:154) applies and changes with every
    chart bump; with ``upgradePolicy.autoUpgrade`` (default true, values.yaml:170)
    the operator then replaces the driver on every node and evicts GPU pods.
    No ``driverVersion``: the chart's own default for ``chartVersion``
    (:data:`CHART_DEFAULT_DRIVER`), written out. A branch (``R535``) selects precompiled driver images, whose tag is
    ``<branch>-<kernel version>-<os tag>`` (controllers/object_controls.go:3375-3429,
    ``resolveDriverTag``: the kernel version appended at line 3393, the OS tag at 3424-3427);
    a full version selects the compiled driver image, ``<version>-<os tag>``."""
    op = rf.fleet.spec.cluster.gpu_operator
    out: dict[str, Any] = {"enabled": op.driver == "managed"}
    if op.driver != "managed":
        return out
    if per_pool_drivers(rf):
        # the NVIDIADrivers of gpuplan/nvidiadrivers.yaml, and no default one: the chart's
        # default NVIDIADriver selects every GPU node (templates/nvidiadriver.yaml)
        out["nvidiaDriverCRD"] = {"enabled": True, "deployDefaultCR": False}
        return out
    version = op.driver_version or CHART_DEFAULT_DRIVER.get(op.chart_version)
    branch = driver_branch(version) if version else None
    if branch is not None:
        out["usePrecompiled"] = True
        out["version"] = branch
    elif version is not None:
        out["version"] = version
    out["upgradePolicy"] = _upgrade_policy(rf)
    return out


def driver_branch(version: str) -> str | None:
    """``R535`` -> ``535``; None for a full version."""
    if version[:1] in ("R", "r") and version[1:].isdigit():
        return version[1:]
    return None


def mig_reboot_needed(rf: ResolvedFleet) -> bool:
    """Whether mig-manager needs ``WITH_REBOOT``: a MIG pool on the operator path whose
    nodes are EC2 instances. Turning MIG mode on needs a GPU reset, which EC2 instances can
    refuse; without ``WITH_REBOOT`` mig-manager then marks the node
    ``nvidia.com/mig.config.state=failed`` (NVIDIA/mig-parted@v0.15.0
    pkg/mig/reconfigure/reconfigure.go:184-208: only with the option does it label the node
    ``rebooting`` and reboot it, after which the pending mode takes effect). ``WITH_REBOOT``
    is read from mig-manager's env (cmd/nvidia-mig-manager/main.go:200-206), which the
    operator takes from ``migManager.env`` (NVIDIA/gpu-operator@v26.7.0
    controllers/object_controls.go:2113-2116).

    GKE node pools on the GPU Operator path are Compute Engine VMs, where NVIDIA's MIG guide
    has mig-manager reboot ("In a CSP environment such as Google Cloud, also specify ...
    WITH_REBOOT", gpuplan/upstream/nodes/gke.json ``migManager.withReboot``): a fleet with
    such a MIG pool gets it. Karpenter AL2023 MIG pools partition in their userData,
    rebooting once themselves (:func:`gpuplan.identity.boot_mig`), Bottlerocket MIG pools are
    refused (GP643), and gpuplan cannot tell whether a static pool's nodes are EC2 instances
    (the README says what to do when a static node's reset is refused): rebooting a static
    node is a decision for its owner, not a fleet-wide default."""
    from gpuplan.nodefacts import fact

    gke_reboot = fact("gke", "migManager.withReboot")
    return any(isinstance(pv.pool.sharing, Mig)
               and ((pv.pool.karpenter is not None and not boot_mig(pv))
                    or (gke_reboot and pv.pool.gke is not None and pv.pool.gke.driver == "gpu-operator"))
               for pv in rf.pools)


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


def system_class_quota(rf: ResolvedFleet) -> dict[str, Any] | None:
    """On GKE: the ResourceQuota that lets the operator's pods use ``system-node-critical`` in its
    namespace (None elsewhere). GKE's quota admission configuration refuses pods of the system
    PriorityClasses in a namespace without a quota scoped to them, so without it the operator, NFD
    and every operand stay at zero pods, on the GPU Operator path and on GKE's own stack alike (the
    operator and NFD run there too). Facts and the size: ``gpuplan.provisioning.gke``."""
    from gpuplan.provisioning.gke import gke_cluster, operator_quota_pods

    if not gke_cluster(rf.pools):
        return None
    gpu_nodes = sum(pv.node_count or 0 for pv in rf.pools)
    return system_quota(rf, rf.fleet.spec.cluster.gpu_operator.namespace, operator_quota_pods(gpu_nodes))


def lower(rf: ResolvedFleet, produced: Sequence[Produced]) -> list[Artifact]:
    ns_path, in_root = operator_namespace_path(rf)
    quota = system_class_quota(rf)
    drivers: list[Artifact] = []
    if per_pool_drivers(rf):
        docs = tuple(nvidia_driver(rf, pv) for pv in rf.pools if operator_runs_driver(pv.pool))
        drivers.append(Artifact(path=NVIDIADRIVERS_PATH, documents=docs,
                                description="the GPU Operator's driver, one NVIDIADriver per static pool"))
    return [*drivers,
        Artifact(
            path=VALUES_PATH,
            documents=(values(rf),),
            kustomize=False,
            description=f"Helm values for chart gpu-operator {rf.fleet.spec.cluster.gpu_operator.chart_version}",
        ),
        Artifact(
            path=ns_path,
            documents=(namespace(rf), *([quota] if quota else [])),
            kustomize=in_root,
            description="the GPU Operator namespace (Pod Security: privileged)"
            + ("; the quota GKE requires for its system-node-critical pods" if quota else ""),
        ),
    ]
