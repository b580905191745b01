"""The DRA back-end: NVIDIA's DRA driver, DeviceClasses, claim templates.

Written only when a pool uses ``allocation.backend: dra``; a fleet without one
compiles exactly as before.

**Installation.** GPU Operator v26.7.0 can run the DRA driver only through its
experimental ``GPUCluster`` CR, which must replace the ClusterPolicy
("It is an invalid configuration for both CRs to exist",
``NVIDIA/gpu-operator@v26.7.0 : deployments/gpu-operator/values.yaml``
L568-576): all nodes or none. A fleet that mixes back-ends therefore keeps the
ClusterPolicy (driver, toolkit, GFD, mig-manager, DCGM on every node) and
installs the driver's own chart beside it, the way the driver documents for
clusters with the operator (``kubernetes-sigs/dra-driver-nvidia-gpu`` @95932046 :
``site/content/docs/install.md``, ``prerequisites.md``): chart
``dra-driver-nvidia-gpu`` from ``oci://registry.k8s.io/dra-driver-nvidia/charts``
at ``allocation.draDriverVersion``, values in ``dra-driver/values.yaml``:

- ``gpuResourcesEnabledOverride: true`` (GPU allocation is off without it),
  ``resources.computeDomains.enabled: false`` (no multi-node NVLink);
- ``nvidiaDriverRoot: /run/nvidia/driver`` when the operator installs the
  driver, ``/`` when the image ships it (``values.yaml`` L19-23; install.md);
- ``kubeletPlugin.nodeSelector: {nvidia.com/gpu.deploy.device-plugin: "false"}``.
  The chart's default affinity puts the kubelet plugin on *every* NVIDIA node
  (``values.yaml`` L319-345); the selector narrows it to the nodes where the
  operator's device plugin is switched off by the same label
  (``gpuplan.dra.claims.DEVICE_PLUGIN_DEPLOY_LABEL``), which gpuplan sets on the DRA
  pools' nodes and on no other: one label value, one back-end per node;
- ``kubeletPlugin.tolerations``: the chart default plus every pool taint, as
  for the operator's DaemonSets;
- ``kubeletPlugin.affinity``: only on nodes whose ``gpuplan.dev/pool`` names a DRA
  pool (:func:`plugin_affinity`: the switch above has other writers), and on fleets
  with DRA MIG pools only once mig-manager has applied a node's MIG configuration,
  so it never enumerates an unpartitioned GPU (:func:`mig_gate`).

Delivered like the operator: an Argo CD Application (``delivery/dra-driver.yaml``,
chart from the OCI registry — ``repoURL`` without ``oci://``, argo-cd v3.5.1
``docs/user-guide/helm.md`` L28-43), or a Flux OCI HelmRepository + HelmRelease
beside the operator's (``delivery/gpu-operator/dra-driver.yaml``).

**Objects per tier** on a DRA pool (``gpuplan.dra.claims.TierClaim``):

- ``cluster/deviceclasses.yaml``: DeviceClass ``gpuplan-<tier>`` whose CEL
  selector picks the tier's devices (driver, ``type``, MIG ``profile``, GPU
  model), with ``extendedResourceName`` = the tier's device-plugin resource
  when ``extendedResources`` is on: pods that request ``nvidia.com/mig-1g.10gb``
  keep working, served through DRA (KEP-5004);
- ``tenants/<tenant>/resourceclaimtemplates.yaml``: in every namespace granted
  the tier, ``gpuplan-<tier>`` (one device) and, when ``maxGPUsPerPod`` > 1,
  ``gpuplan-<tier>-x<N>``; MIG claims for several devices carry
  ``matchAttribute: gpu.nvidia.com/parentUUID`` so all slices come from one GPU;
- quota keys ``<class>.deviceclass.resource.k8s.io/devices`` (see
  :func:`quota_hard`).

Stage: lower (docs/architecture.md)."""

from __future__ import annotations

from typing import Any, Sequence

from gpuplan.dra.claims import (
    CHART_CLASSES, DEVICE_PLUGIN_DEPLOY_LABEL, PARENT_UUID, TierClaim, any_dra, claim_template_name,
    tier_claims)
from gpuplan.k8s_features_dra import RESOURCE_API
from gpuplan.artifacts import Artifact, Produced
from gpuplan.lower.common import metadata, obj
from gpuplan.identity import DRA_NAMESPACE, TIER_LABEL, dra_app_name
from gpuplan.lower.gitops import FLUX_HELM_API, FLUX_SOURCE_API, argo_chart_application, gitops_namespace
from gpuplan.lower.common import FLUX_OPERATOR_DIR, engine, object_annotations
from gpuplan.resolve import ResolvedFleet
from gpuplan.spec.models import Tenant

CHART = "dra-driver-nvidia-gpu"
CHART_REPO_OCI = "oci://registry.k8s.io/dra-driver-nvidia/charts"
RELEASE = "dra-driver-nvidia-gpu"
NAMESPACE = DRA_NAMESPACE
VALUES_PATH = "dra-driver/values.yaml"
ARGO_APP_PATH = "delivery/dra-driver.yaml"
FLUX_PATH = f"{FLUX_OPERATOR_DIR}/dra-driver.yaml"
REQUEST_NAME = "gpus"
OPERATOR_DRIVER_ROOT = "/run/nvidia/driver"


def chart_version(rf: ResolvedFleet) -> str:
    """Helm chart versions are strict semver without the ``v`` (Chart.yaml)."""
    return rf.fleet.spec.cluster.allocation.dra_driver_version.lstrip("v")


# --- DeviceClasses and claim templates ---------------------------------------------


def device_class(rf: ResolvedFleet, claim: TierClaim) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": claim.selector}}]}
    if claim.extended_resource is not None:
        spec["extendedResourceName"] = claim.extended_resource
    meta = metadata(rf, claim.class_name, extra_labels={TIER_LABEL: claim.tier},
                    annotations=object_annotations(rf, "DeviceClass"))
    return obj(RESOURCE_API, "DeviceClass", meta, spec=spec)


def claim_template(rf: ResolvedFleet, claim: TierClaim, namespace: str, count: int,
                   *, parent_constraint: bool | None = None) -> dict[str, Any]:
    """A ResourceClaimTemplate for ``count`` devices of the tier.
    ``parent_constraint`` defaults to what the claim needs (tests turn it off)."""
    exactly: dict[str, Any] = {"deviceClassName": claim.class_name, "allocationMode": "ExactCount",
                               "count": count}
    devices: dict[str, Any] = {"requests": [{"name": REQUEST_NAME, "exactly": exactly}]}
    if parent_constraint is None:
        parent_constraint = claim.needs_parent_constraint(count)
    if parent_constraint:
        devices["constraints"] = [{"requests": [REQUEST_NAME], "matchAttribute": PARENT_UUID}]
    meta = metadata(rf, claim_template_name(claim.tier, count), namespace=namespace,
                    extra_labels={TIER_LABEL: claim.tier},
                    annotations=object_annotations(rf, "ResourceClaimTemplate"))
    return obj(RESOURCE_API, "ResourceClaimTemplate", meta, spec={"spec": {"devices": devices}})


def _granted(rf: ResolvedFleet, tenant: Tenant, ns: str) -> list[TierClaim]:
    claims = {c.tier: c for c in tier_claims(rf)}
    return [claims[t] for t, units in tenant.quotas.get(ns, {}).items() if units > 0 and t in claims]


def namespace_templates(rf: ResolvedFleet, tenant: Tenant, ns: str) -> list[dict[str, Any]]:
    return [claim_template(rf, c, ns, n) for c in _granted(rf, tenant, ns) for n in c.template_counts()]


def quota_hard(rf: ResolvedFleet, tenant: Tenant, ns: str) -> dict[str, str]:
    """DRA quota keys of one namespace: ``<class>.deviceclass.resource.k8s.io/devices``
    (devices requested by the namespace's ResourceClaims of that class) = the
    namespace's grant of the tier, ``"0"`` for every other DRA tier's class and
    for the driver chart's ``gpu.nvidia.com`` / ``mig.nvidia.com`` classes —
    without that, a claim naming the chart's class would take any GPU or MIG
    device of any DRA pool, past every tier. Empty when no pool uses DRA."""
    if not any_dra(rf):
        return {}
    grants = tenant.quotas.get(ns, {})
    out = {f"{name}.deviceclass.resource.k8s.io/devices": "0" for name in CHART_CLASSES}
    for c in tier_claims(rf):
        out[c.quota_key] = str(grants.get(c.tier, 0))
    return dict(sorted(out.items()))


# --- the driver's installation --------------------------------------------------------


def values(rf: ResolvedFleet) -> dict[str, Any]:
    from gpuplan.lower.operator import tolerations

    op = rf.fleet.spec.cluster.gpu_operator
    chart_default = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    tol = [chart_default, *(t for t in tolerations(rf) if t != chart_default)]
    return {
        "gpuResourcesEnabledOverride": True,
        "nvidiaDriverRoot": OPERATOR_DRIVER_ROOT if op.driver == "managed" else "/",
        "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": False}},
        "kubeletPlugin": {
            "nodeSelector": {DEVICE_PLUGIN_DEPLOY_LABEL: "false"},
            "tolerations": tol,
            "affinity": plugin_affinity(rf),
        },
    }


MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_STATE_LABEL = "nvidia.com/mig.config.state"


def dra_mig_pools(rf: ResolvedFleet) -> list[str]:
    from gpuplan.dra.claims import is_dra
    from gpuplan.spec.models import Mig

    return [pv.name for pv in rf.pools if is_dra(rf, pv) and isinstance(pv.pool.sharing, Mig)]


def plugin_affinity(rf: ResolvedFleet) -> dict[str, Any]:
    """The kubelet plugin's required node affinity: a node of a DRA pool (gpuplan's own pool
    label, :data:`gpuplan.identity.POOL_LABEL`), and on fleets with DRA MIG pools the MIG gate
    (:func:`mig_gate`) in every term (node selector terms are ORed, the expressions of one term
    ANDed: k8s.io/api@v0.36.3 core/v1/types.go lines 3771-3794, ``NodeSelector``/``NodeSelectorTerm``).

    The ``nodeSelector`` on the device-plugin switch stays: it is what hands a node from one
    back-end to the other in one label change (docs/dra.md "Moving a pool to DRA"). But that switch is
    written by several hands — nfd-master from the pool's NodeFeatureRule on static pools, which
    removes it again when the rule stops setting it; the GPU Operator, which sets ``true`` where
    it is missing or empty (NVIDIA/gpu-operator@v26.7.0 controllers/state_manager.go:98-108
    ``gpuStateLabels``, 476-485 ``addGPUStateLabels``); a person
    pausing the device plugin on one node — so on its own it would put the DRA plugin on any node
    where it reads ``false``, and DRA tiers would take that node's GPUs. The pool label limits the
    plugin to the pools this tree serves through DRA."""
    from gpuplan.dra.claims import is_dra
    from gpuplan.identity import POOL_LABEL

    pools = {"key": POOL_LABEL, "operator": "In", "values": sorted(pv.name for pv in rf.pools if is_dra(rf, pv))}
    terms = (mig_gate()["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
             if any(dra_mig_pools(rf)) else [{"matchExpressions": []}])
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [pools, *t["matchExpressions"]]} for t in terms]}}}


def mig_gate() -> dict[str, Any]:
    """The kubelet plugin's node affinity on fleets with DRA MIG pools: a node with a MIG
    configuration runs the plugin only once mig-manager reports it applied.

    The plugin enumerates a node's devices once, when it starts
    (kubernetes-sigs/dra-driver-nvidia-gpu@95932046 cmd/gpu-kubelet-plugin/nvlib.go:199-202,
    ``GetPerGpuAllocatableDevices``), and mig-manager never restarts it; mig-manager moves
    ``nvidia.com/mig.config.state`` to ``pending`` while it repartitions and to ``success`` when
    done (NVIDIA/mig-parted v0.15.0 pkg/mig/reconfigure). The DaemonSet controller runs a daemon
    pod only on nodes that match its required node affinity and deletes it from nodes that stop
    matching (kubernetes v1.33 pkg/controller/daemon/daemon_controller.go,
    ``NodeShouldRunDaemonPod``/``podsShouldBeOnNode``): so the plugin starts after the layout
    exists, and restarts, re-enumerating, after every change. The chart's default affinity (any
    NVIDIA node) is replaced; ``nodeSelector`` already keeps the plugin to the DRA pools."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": MIG_CONFIG_LABEL, "operator": "DoesNotExist"}]},
        {"matchExpressions": [{"key": MIG_STATE_LABEL, "operator": "In", "values": ["success"]}]},
    ]}}}


def namespace(rf: ResolvedFleet) -> dict[str, Any]:
    meta = metadata(rf, NAMESPACE, extra_labels={"pod-security.kubernetes.io/enforce": "privileged"},
                    annotations=object_annotations(rf, "Namespace"))
    return obj("v1", "Namespace", meta)


def system_class_quota(rf: ResolvedFleet) -> dict[str, Any] | None:
    """On GKE: the quota GKE requires before the driver's system-class pods run in its namespace
    (``gpuplan.provisioning.gke.dra_quota_pods``); None elsewhere."""
    from gpuplan.dra.claims import is_dra
    from gpuplan.lower.common import system_quota
    from gpuplan.provisioning.gke import dra_quota_pods, gke_cluster

    if not gke_cluster(rf.pools):
        return None
    nodes = sum(pv.node_count or 0 for pv in rf.pools if is_dra(rf, pv))
    return system_quota(rf, NAMESPACE, dra_quota_pods(nodes))


def namespace_documents(rf: ResolvedFleet) -> tuple[dict[str, Any], ...]:
    quota = system_class_quota(rf)
    return (namespace(rf), *([quota] if quota else []))


def argo_application(rf: ResolvedFleet) -> dict[str, Any]:
    chart = {"repoURL": CHART_REPO_OCI.removeprefix("oci://"), "chart": CHART, "targetRevision": chart_version(rf)}
    # synced with the DeviceClasses (lower/common.py WAVES): its chart's GPU DeviceClasses exist only
    # once the claims policy is bound and the quotas hold the classes' keys
    return argo_chart_application(rf, dra_app_name(rf), chart, RELEASE, VALUES_PATH, NAMESPACE, create_namespace=False,
                                  kind_wave="DeviceClass")


def flux_objects(rf: ResolvedFleet) -> list[dict[str, Any]]:
    ns = gitops_namespace(rf)
    repo = obj(FLUX_SOURCE_API, "HelmRepository", metadata(rf, "dra-driver-nvidia", namespace=ns), spec={
        "type": "oci",
        "interval": "1h",
        "url": CHART_REPO_OCI,
    })
    release = obj(FLUX_HELM_API, "HelmRelease", metadata(rf, RELEASE, namespace=ns), spec={
        "interval": "10m",
        "releaseName": RELEASE,
        "targetNamespace": NAMESPACE,
        "storageNamespace": NAMESPACE,
        "chart": {"spec": {"chart": CHART, "version": chart_version(rf),
                           "sourceRef": {"kind": "HelmRepository", "name": "dra-driver-nvidia"}}},
        "install": {"crds": "CreateReplace", "remediation": {"retries": 3}},
        "upgrade": {"crds": "CreateReplace", "remediation": {"retries": 3}},
        "values": values(rf),
    })
    return [*namespace_documents(rf), repo, release]


def lower(rf: ResolvedFleet, produced: Sequence[Produced]) -> list[Artifact]:
    if not any_dra(rf):
        return []
    claims = tier_claims(rf)
    version = rf.fleet.spec.cluster.allocation.dra_driver_version
    out = [Artifact(
        path=VALUES_PATH, documents=(values(rf),), kustomize=False,
        description=f"Helm values for chart {CHART} {version} (the DRA driver, on DRA pools' nodes only)",
    )]
    if engine(rf) == "argocd":
        out.append(Artifact(path="dra-driver/namespace.yaml", documents=namespace_documents(rf),
                            description="the DRA driver's namespace (Pod Security: privileged)"))
        out.append(Artifact(path=ARGO_APP_PATH, documents=(argo_application(rf),),
                            description=f"Argo CD Application: the DRA driver chart {version}, "
                                        f"values from {VALUES_PATH}"))
    else:
        out.append(Artifact(path=FLUX_PATH, documents=tuple(flux_objects(rf)), kustomize=False,
                            description=f"Flux OCI HelmRepository + HelmRelease of the DRA driver {version}"))
    if claims:
        out.append(Artifact(
            path="cluster/deviceclasses.yaml", documents=tuple(device_class(rf, c) for c in claims),
            description=f"DRA DeviceClasses, one per tier on a DRA pool ({len(claims)})",
        ))
    for tenant in rf.fleet.spec.tenants:
        docs = [t for ns in tenant.namespaces for t in namespace_templates(rf, tenant, ns)]
        if docs:
            out.append(Artifact(
                path=f"tenants/{tenant.name}/resourceclaimtemplates.yaml", documents=tuple(docs),
                description=f"ResourceClaimTemplates of tenant {tenant.name}, per DRA tier it is granted",
            ))
    return out
