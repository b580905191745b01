"""Delivery: the root kustomization and the Argo CD / Flux objects that sync the tree.

Shape (reference/k8s/facts.md §j; docs/output-reference.md explains the choices):

- ``kustomization.yaml`` (root): every artifact marked ``kustomize=True``, sorted.
  It is what the GitOps engine syncs; the bootstrap objects below are not in it
  (an Application/Kustomization that lists itself is a loop nobody can delete).
- Argo CD (``cluster.gitops.engine: argocd``):
  ``delivery/bootstrap.yaml``: the root Application (path = the generated tree),
  applied once by hand; with gpuplan's own project (no ``gitops.project``) also
  the admin AppProject ``gpuplan-<fleet>-admin`` (this repository, the GitOps
  namespace, the AppProject kind and nothing else) and the Application
  ``gpuplan-<fleet>-project`` in it that syncs ``delivery/project/`` — the
  fleet's AppProject — so a new or renamed namespace reaches the live project
  through Git, never by hand (docs/transitions.md, #27). The project keeps the
  namespaces the previous tree's project admitted (``gpuplan.dev/kept-namespaces``)
  so that the root sync may still prune what it left there;
  ``delivery/gpu-operator.yaml``: the GPU Operator
  Application (Helm chart from NGC, values from ``gpu-operator/values.yaml`` in
  Git through a multi-source ``$values`` ref). The operator Application *is* in
  the root kustomization, so a chart-version bump in fleet.yaml reaches the
  cluster through Git like everything else.
- Flux (``engine: flux``): ``delivery/bootstrap.yaml``: two Kustomizations
  (the operator, then the tree, ``dependsOn`` the operator), applied once by
  hand; ``delivery/gpu-operator/``: HelmRepository + HelmRelease (+ the
  operator namespace), synced by the first Kustomization. The GitRepository
  they reference is the one ``flux bootstrap`` created (``flux-system``).
  ``delivery/gpu-operator/tenancy.yaml``: the Kustomization ``gpuplan-<fleet>-tenancy``
  of the tenancy objects (``delivery/tenancy/``: the files of :data:`TENANCY_KINDS` only, and
  the classes' Kustomization), with no ``dependsOn``: applied by the operator's Kustomization,
  which applies before it waits for the HelmRelease, so revoking a grant never waits for the
  operator's health, while the root (NodeFeatureRules, the operator's ConfigMaps, DeviceClasses)
  still does; bootstrap.yaml is unchanged. ``delivery/priorityclasses.yaml``: the Kustomization
  of the tiers' PriorityClasses (``delivery/priorityclasses/``), ``dependsOn`` the tenancy one,
  so a class exists only after its admission rules.

Per-object annotations (sync waves, replace-on-immutable-change) come from
:func:`object_annotations`, which every target calls for the objects it builds.

Stage: lower (docs/architecture.md)."""

from __future__ import annotations

from typing import Any, Sequence

from gpuplan.artifacts import Artifact, Produced
from gpuplan.lower.common import KUSTOMIZE_API, metadata, obj, FLUX_OPERATOR_DIR, VALUES_PATH, engine, object_annotations
from gpuplan.resolve import ResolvedFleet
from gpuplan.identity import FLUX_CLASSES_DIR, FLUX_CLASSES_PATH, classes_app_name
from gpuplan.identity import FLUX_TENANCY_DIR, FLUX_TENANCY_OBJECT, tenancy_app_name
from gpuplan.identity import BOOTSTRAP_PATH, PROJECT_DIR, PROJECT_PATH, ROOT_KUSTOMIZATION, app_name, operator_app_name, project_name

ARGO_API = "argoproj.io/v1alpha1"
FLUX_KUSTOMIZE_API = "kustomize.toolkit.fluxcd.io/v1"
FLUX_HELM_API = "helm.toolkit.fluxcd.io/v2"
FLUX_SOURCE_API = "source.toolkit.fluxcd.io/v1"

NGC_HELM_REPO = "https://helm.ngc.nvidia.com/nvidia"
GPU_OPERATOR_CHART = "gpu-operator"
GPU_OPERATOR_RELEASE = "gpu-operator"
IN_CLUSTER = "https://kubernetes.default.svc"
FLUX_BOOTSTRAP_SOURCE = "flux-system"  # the GitRepository `flux bootstrap` creates

ARGO_OPERATOR_APP_PATH = "delivery/gpu-operator.yaml"
# the fleet's AppProject, synced by its own Application (not by the root one, whose
# sync the project governs: a refused object fails the whole operation before
# anything, the project included, is applied)
KEPT_NAMESPACES_ANNOTATION = "gpuplan.dev/kept-namespaces"


def admin_project_name(rf: ResolvedFleet) -> str:
    return f"gpuplan-{rf.fleet.metadata.name}-admin"


def project_app_name(rf: ResolvedFleet) -> str:
    return f"gpuplan-{rf.fleet.metadata.name}-project"


def gitops_namespace(rf: ResolvedFleet) -> str:
    g = rf.fleet.spec.cluster.gitops
    if g.namespace:
        return g.namespace
    return "argocd" if g.engine == "argocd" else "flux-system"


def _repo_path(rf: ResolvedFleet, rel: str = "") -> str:
    base = rf.fleet.spec.cluster.gitops.path.strip("/")
    parts = [p for p in (base, rel) if p]
    return "/".join(parts) or "."


# --- Argo CD ---------------------------------------------------------------------


def _argo_retry() -> dict[str, Any]:
    return {"limit": 10, "backoff": {"duration": "10s", "factor": 2, "maxDuration": "5m"}}


def argo_root_application(rf: ResolvedFleet) -> dict[str, Any]:
    g = rf.fleet.spec.cluster.gitops
    spec = {
        "project": project_name(rf),
        "source": {"repoURL": g.repo_url, "targetRevision": g.revision, "path": _repo_path(rf)},
        # every namespaced object of the tree names its namespace; this one only
        # has to be a destination the project permits
        "destination": {"server": IN_CLUSTER, "namespace": rf.fleet.spec.cluster.gpu_operator.namespace},
        "syncPolicy": {
            "automated": {"prune": True, "selfHeal": True},
            # ApplyOutOfSyncOnly: only changed objects are applied, so the
            # Force/Replace PriorityClasses are recreated only when they change.
            "syncOptions": ["ServerSideApply=true", "ApplyOutOfSyncOnly=true"],
            "retry": _argo_retry(),
        },
    }
    return obj(ARGO_API, "Application", metadata(rf, app_name(rf), namespace=gitops_namespace(rf)), spec=spec)


def argo_chart_application(rf: ResolvedFleet, name: str, chart: dict[str, Any], release: str, values_path: str,
                           namespace: str, *, create_namespace: bool = True, kind_wave: str = "Application"
                           ) -> dict[str, Any]:
    """An Argo CD Application of a Helm chart (``chart``: its repoURL, chart or
    path, targetRevision) whose values file is ``values_path`` in this tree,
    read through a ``$values`` ref source of the tree's own repository."""
    g = rf.fleet.spec.cluster.gitops
    helm = {"releaseName": release, "valueFiles": [f"$values/{_repo_path(rf, values_path)}"]}
    spec = {
        "project": project_name(rf),
        "sources": [{**chart, "helm": helm}, {"repoURL": g.repo_url, "targetRevision": g.revision, "ref": "values"}],
        "destination": {"server": IN_CLUSTER, "namespace": namespace},
        "syncPolicy": {
            "automated": {"prune": True, "selfHeal": True},
            # charts' CRDs (the operator's ClusterPolicy and NFD) exceed the client-side-apply
            # annotation limit; SSA also avoids diffs on CRD-defaulted fields
            "syncOptions": ["CreateNamespace=true", "ServerSideApply=true"] if create_namespace
            else ["ServerSideApply=true"],
            "retry": _argo_retry(),
        },
    }
    meta = metadata(rf, name, namespace=gitops_namespace(rf), annotations=object_annotations(rf, kind_wave))
    return obj(ARGO_API, "Application", meta, spec=spec)


def argo_operator_application(rf: ResolvedFleet) -> dict[str, Any]:
    op = rf.fleet.spec.cluster.gpu_operator
    chart = {"repoURL": NGC_HELM_REPO, "chart": GPU_OPERATOR_CHART, "targetRevision": op.chart_version}
    return argo_chart_application(rf, operator_app_name(rf), chart, GPU_OPERATOR_RELEASE, VALUES_PATH, op.namespace)


# Cluster-scoped kinds the project admits: the tree's own, and those of the
# charts its Applications install, by chart name.
_TREE_CLUSTER_KINDS = {
    "Namespace": "", "PriorityClass": "scheduling.k8s.io", "NodeFeatureRule": "nfd.k8s-sigs.io",
    "NodePool": "karpenter.sh", "NodeOverlay": "karpenter.sh", "EC2NodeClass": "karpenter.k8s.aws",
    "AKSNodeClass": "karpenter.azure.com",
    "DeviceClass": "resource.k8s.io",
    "ClusterQueue": "kueue.x-k8s.io", "Cohort": "kueue.x-k8s.io", "ResourceFlavor": "kueue.x-k8s.io",
    "Topology": "kueue.x-k8s.io", "WorkloadPriorityClass": "kueue.x-k8s.io",
    "Queue": "scheduling.volcano.sh",
    "ValidatingAdmissionPolicy": "admissionregistration.k8s.io",
    "ValidatingAdmissionPolicyBinding": "admissionregistration.k8s.io",
}
_RBAC = (("rbac.authorization.k8s.io", "ClusterRole"), ("rbac.authorization.k8s.io", "ClusterRoleBinding"))
CHART_CLUSTER_KINDS: dict[str, tuple[tuple[str, str], ...]] = {
    # NVIDIA/gpu-operator@v26.7.0 deployments/gpu-operator/templates/, crds/,
    # charts/node-feature-discovery/ (OpenShift's SecurityContextConstraints left out)
    GPU_OPERATOR_CHART: (
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
        ("nfd.k8s-sigs.io", "NodeFeatureRule"),
        ("nvidia.com", "ClusterPolicy"),
        ("nvidia.com", "GPUCluster"),
        ("nvidia.com", "NVIDIADriver"),
        *_RBAC,
    ),
    # dra-driver-nvidia-gpu deployments/helm/nvidia-dra-driver-gpu/templates/ and crds/:
    # its DeviceClasses, the ComputeDomain CRD, RBAC and the GPU mutating webhook
    "dra-driver-nvidia-gpu": (
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
        ("resource.k8s.io", "DeviceClass"),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
        *_RBAC,
    ),
    # volcano-sh/volcano@v1.15.1 installer/helm/chart/volcano/templates/ (and its jobflow
    # subchart): CRDs, RBAC and the admission webhooks (its ValidatingAdmissionPolicies,
    # custom.vap_enable, are off by default)
    "volcano": (
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
        *_RBAC,
    ),
    # kubernetes-sigs/kueue charts/kueue/templates/: CRDs, RBAC, webhooks and the
    # visibility API's APIService
    "kueue": (
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
        ("apiregistration.k8s.io", "APIService"),
        *_RBAC,
    ),
}


def managed_namespaces(rf: ResolvedFleet) -> list[str]:
    """Every namespace gpuplan's Applications put objects in."""
    names = {gitops_namespace(rf), rf.fleet.spec.cluster.gpu_operator.namespace}
    for t in rf.fleet.spec.tenants:
        names.update(t.namespaces)
    return sorted(names)


def argo_project(rf: ResolvedFleet, produced: Sequence[Produced]) -> dict[str, Any]:
    """An AppProject that lets the two Applications do exactly what gpuplan
    needs: its Git repository and the NGC chart repository as sources, the
    managed namespaces as destinations, and the cluster-scoped kinds of the
    tree and the chart. Argo CD checks each synced object against it
    (argoproj/argo-cd@v3.5.1 controller/sync.go:647-671: group/kind against
    the cluster whitelist, the namespace of a namespaced object against
    ``destinations``)."""
    g = rf.fleet.spec.cluster.gitops
    kinds = {k for a in produced if a.applied for k in a.kinds if k in _TREE_CLUSTER_KINDS}
    whitelist = {(_TREE_CLUSTER_KINDS[k], k) for k in kinds} | set(CHART_CLUSTER_KINDS[GPU_OPERATOR_CHART])
    repos = {g.repo_url, NGC_HELM_REPO}
    namespaces = set(managed_namespaces(rf))
    # Applications other targets produced (e.g. a DRA driver chart): their
    # sources, destinations and chart kinds must be admitted too
    for app in (d for a in produced for d in a.applications):
        spec_ = app["spec"]
        for src in spec_.get("sources") or [spec_.get("source", {})]:
            repos.add(src["repoURL"])
            # a Helm source names its chart; an OCI source is the chart's artifact
            chart = src.get("chart") or src["repoURL"].rstrip("/").rsplit("/", 1)[-1]
            whitelist.update(CHART_CLUSTER_KINDS.get(chart, ()))
        namespaces.add(spec_["destination"]["namespace"])
    namespaces.update(ns for a in produced if a.applied for ns in a.namespaces)
    kept = kept_namespaces(rf, namespaces)
    whitelist = sorted(whitelist)
    spec = {
        "description": f"gpuplan fleet {rf.fleet.metadata.name}: GPU Operator, pools, tenants",
        "sourceRepos": sorted(repos),
        "destinations": [{"server": IN_CLUSTER, "namespace": ns} for ns in sorted(namespaces | kept)],
        "clusterResourceWhitelist": [{"group": grp, "kind": kind} for grp, kind in whitelist],
    }
    annotations = {KEPT_NAMESPACES_ANNOTATION: ",".join(sorted(kept))} if kept else None
    meta = metadata(rf, project_name(rf), namespace=gitops_namespace(rf), annotations=annotations)
    return obj(ARGO_API, "AppProject", meta, spec=spec)


def kept_namespaces(rf: ResolvedFleet, current: set[str]) -> set[str]:
    """Namespaces the previous tree's AppProject admitted and this one would not:
    they stay destinations until retired (``gpuplan build --retire-namespace``).

    The root sync prunes what a removed tenant left (its quotas, queues) from a
    namespace that is no longer in the tree, and Argo CD checks a prune against
    the project like an apply (argoproj/argo-cd@v3.5.1
    gitops-engine/pkg/sync/sync_context.go:1086-1093, ``task.obj()`` is the live
    object of a prune; controller/sync.go:660-669). The project Application and
    the root Application sync independently, so the project may change first:
    without the kept destination the prune is refused and every later root sync
    fails. The Namespace itself is never pruned (Prune=false), so a kept
    destination admits a namespace that still exists."""
    prev = rf.previous
    old = getattr(prev, "namespaces", frozenset()) if prev is not None else frozenset()
    retire = getattr(prev, "retire_namespaces", frozenset()) if prev is not None else frozenset()
    return {ns for ns in old if ns not in current and ns not in retire}


def argo_admin_project(rf: ResolvedFleet) -> dict[str, Any]:
    """The project of the Application that delivers the fleet's AppProject: one
    repository, one namespace, one kind. Created once by bootstrap.yaml and never
    changed by a spec change (only by the repository or the GitOps namespace)."""
    g = rf.fleet.spec.cluster.gitops
    spec = {
        "description": f"gpuplan fleet {rf.fleet.metadata.name}: delivers AppProject {project_name(rf)} from Git",
        "sourceRepos": [g.repo_url],
        "destinations": [{"server": IN_CLUSTER, "namespace": gitops_namespace(rf)}],
        "clusterResourceWhitelist": [],
        "namespaceResourceWhitelist": [{"group": "argoproj.io", "kind": "AppProject"}],
    }
    return obj(ARGO_API, "AppProject", metadata(rf, admin_project_name(rf), namespace=gitops_namespace(rf)),
               spec=spec)


def argo_project_application(rf: ResolvedFleet) -> dict[str, Any]:
    """The Application that syncs ``delivery/project/`` (the fleet's AppProject).
    No prune: the project must outlive a bad commit that drops its file."""
    g = rf.fleet.spec.cluster.gitops
    spec = {
        "project": admin_project_name(rf),
        "source": {"repoURL": g.repo_url, "targetRevision": g.revision, "path": _repo_path(rf, PROJECT_DIR)},
        "destination": {"server": IN_CLUSTER, "namespace": gitops_namespace(rf)},
        "syncPolicy": {
            "automated": {"prune": False, "selfHeal": True},
            "syncOptions": ["ServerSideApply=true"],
            "retry": _argo_retry(),
        },
    }
    return obj(ARGO_API, "Application", metadata(rf, project_app_name(rf), namespace=gitops_namespace(rf)),
               spec=spec)


# --- Flux ------------------------------------------------------------------------


def _flux_kustomization(rf: ResolvedFleet, name: str, path: str, *, timeout: str = "5m",
                        depends_on: str | None = None, wait: bool = False) -> dict[str, Any]:
    """A Flux Kustomization of ``path`` in this tree, from the GitRepository `flux bootstrap` made."""
    spec: dict[str, Any] = {"interval": "10m", "retryInterval": "1m", "timeout": timeout}
    if depends_on is not None:
        spec["dependsOn"] = [{"name": depends_on}]
    spec["path"] = "./" + _repo_path(rf, path)
    spec["prune"] = True
    if wait:
        spec["wait"] = True  # Ready only when the HelmRelease (and so the CRDs) are
    spec["sourceRef"] = {"kind": "GitRepository", "name": FLUX_BOOTSTRAP_SOURCE}
    return obj(FLUX_KUSTOMIZE_API, "Kustomization", metadata(rf, name, namespace=gitops_namespace(rf)), spec=spec)


# the kinds of the tenancy boundary (gpuplan.placement.steps.STEP_KINDS but the classes, which have
# a Kustomization of their own, and the RBAC a boundary may carry): a file of these kinds only is
# synced by the tenancy Kustomization; none of them needs a CRD of the GPU Operator chart
TENANCY_KINDS = frozenset({"Namespace", "ResourceQuota", "LimitRange", "ValidatingAdmissionPolicy",
                           "ValidatingAdmissionPolicyBinding", "Role", "RoleBinding", "ClusterRole",
                           "ClusterRoleBinding"})


def flux_tenancy_files(produced: Sequence[Produced]) -> list[str]:
    """The applied files of the tree that the tenancy Kustomization syncs (Flux)."""
    return sorted(p.path for p in produced
                  if p.applied and p.kinds and p.kinds <= TENANCY_KINDS and not p.path.startswith("delivery/"))


def flux_tenancy_kustomization(rf: ResolvedFleet) -> dict[str, Any]:
    """The Kustomization of the tenancy objects: no ``dependsOn``. Its object is in the operator's
    Kustomization path, so it exists once the operator's Kustomization has applied, whatever the
    HelmRelease's health: the controller applies (kustomization_controller.go:473) and prunes
    (:504) before it checks health (:513, fluxcd/kustomize-controller@v1.9.4). With ``wait`` the
    operator's Kustomization is Ready only once this one is (checkHealth waits on every object it
    applied, :997-1045), so the root, which ``dependsOn`` the operator, applies and prunes only
    after this one has applied the same revision: an object moved from the root to here is
    relabelled before the root's prune, which then skips it (fluxcd/pkg ssa/v0.76.1
    ssa/manager_delete.go:77-84, the owner labels in ``Inclusions``, kustomization_controller.go
    :1409) — the move deletes nothing."""
    return _flux_kustomization(rf, tenancy_app_name(rf), FLUX_TENANCY_DIR)


def flux_kustomizations(rf: ResolvedFleet) -> list[dict[str, Any]]:
    return [_flux_kustomization(rf, operator_app_name(rf), FLUX_OPERATOR_DIR, timeout="10m", wait=True),
            _flux_kustomization(rf, app_name(rf), "", depends_on=operator_app_name(rf))]


def flux_classes_kustomization(rf: ResolvedFleet) -> dict[str, Any]:
    """The Kustomization of the tiers' PriorityClasses, synced by the tenancy Kustomization: it
    applies only once that one has applied and pruned the same revision (fluxcd/kustomize-controller@v1.9.4
    internal/controller/kustomization_controller.go:551-628 checkDependencies: Ready, and the
    last applied revision equal to the source's), so a new tier's class exists only after its
    policies and bindings. A removed tier's class goes after its rules; the namespace policy the
    root applied first already refuses it GPUs and the pools' taint (docs/transitions.md)."""
    return _flux_kustomization(rf, classes_app_name(rf), FLUX_CLASSES_DIR, depends_on=tenancy_app_name(rf))


def flux_chart_objects(rf: ResolvedFleet, source: str, url: str, chart: str, release: str, version: str,
                       namespace: str, values: dict[str, Any], *, oci: bool = False) -> list[dict[str, Any]]:
    """A Flux HelmRepository ``source`` (``oci``: an OCI registry) and the HelmRelease of its
    ``chart`` into ``namespace`` (created on install; CRDs created and replaced)."""
    ns = gitops_namespace(rf)
    repo = obj(FLUX_SOURCE_API, "HelmRepository", metadata(rf, source, namespace=ns),
               spec={**({"type": "oci"} if oci else {}), "interval": "1h", "url": url})
    rel = obj(FLUX_HELM_API, "HelmRelease", metadata(rf, release, namespace=ns), spec={
        "interval": "10m",
        "releaseName": release,
        "targetNamespace": namespace,
        "storageNamespace": namespace,
        "chart": {"spec": {"chart": chart, "version": version, "sourceRef": {"kind": "HelmRepository", "name": source}}},
        "install": {"createNamespace": True, "crds": "CreateReplace", "remediation": {"retries": 3}},
        "upgrade": {"crds": "CreateReplace", "remediation": {"retries": 3}},
        "values": values,
    })
    return [repo, rel]


def flux_helm_objects(rf: ResolvedFleet, values: dict[str, Any]) -> list[dict[str, Any]]:
    ns = gitops_namespace(rf)
    op = rf.fleet.spec.cluster.gpu_operator
    repo = obj(FLUX_SOURCE_API, "HelmRepository", metadata(rf, "nvidia", namespace=ns), spec={
        "interval": "1h",
        "url": NGC_HELM_REPO,
    })
    release = obj(FLUX_HELM_API, "HelmRelease", metadata(rf, GPU_OPERATOR_RELEASE, namespace=ns), spec={
        "interval": "10m",
        "releaseName": GPU_OPERATOR_RELEASE,
        "targetNamespace": op.namespace,
        "storageNamespace": op.namespace,
        "chart": {
            "spec": {
                "chart": GPU_OPERATOR_CHART,
                "version": op.chart_version,
                "sourceRef": {"kind": "HelmRepository", "name": "nvidia"},
            }
        },
        "install": {"crds": "CreateReplace", "remediation": {"retries": 3}},
        "upgrade": {"crds": "CreateReplace", "remediation": {"retries": 3}},
        "values": values,
    })
    return [repo, release]


# --- root kustomization ------------------------------------------------------------


def kustomization(resources: list[str]) -> dict[str, Any]:
    return {"apiVersion": KUSTOMIZE_API, "kind": "Kustomization", "resources": sorted(resources)}


def lower(rf: ResolvedFleet, produced: Sequence[Produced]) -> list[Artifact]:
    out: list[Artifact] = []
    if engine(rf) == "argocd":
        out.append(Artifact(
            path=ARGO_OPERATOR_APP_PATH,
            documents=(argo_operator_application(rf),),
            description="Argo CD Application: the GPU Operator Helm chart, values from gpu-operator/values.yaml",
        ))
        boot: tuple[dict[str, Any], ...] = (argo_root_application(rf),)
        if rf.fleet.spec.cluster.gitops.project is None:
            boot = (argo_admin_project(rf), argo_project_application(rf), *boot)
            out.append(Artifact(
                path=PROJECT_PATH,
                documents=(argo_project(rf, produced),),
                kustomize=False,
                description=f"Argo CD AppProject of the fleet, synced by Application {project_app_name(rf)} "
                            "(not in kustomization.yaml)",
            ))
            described = ("Argo CD admin AppProject, the Application that syncs delivery/project/, and the "
                         "Application that syncs this tree; apply once by hand (not in kustomization.yaml)")
        else:
            described = "Argo CD Application that syncs this tree; apply once by hand (not in kustomization.yaml)"
        out.append(Artifact(
            path=BOOTSTRAP_PATH,
            documents=boot,
            kustomize=False,
            description=described,
        ))
    else:
        from gpuplan.lower.operator import values as operator_values

        values = operator_values(rf)
        sub = [p for p in (a.path for a in produced) if p.startswith(FLUX_OPERATOR_DIR + "/")]
        out.append(Artifact(
            path=f"{FLUX_OPERATOR_DIR}/helmrelease.yaml",
            documents=tuple(flux_helm_objects(rf, values)),
            kustomize=False,
            description="Flux HelmRepository (NGC) + HelmRelease of the GPU Operator, values = gpu-operator/values.yaml",
        ))
        local = sorted({p[len(FLUX_OPERATOR_DIR) + 1:] for p in sub} | {"helmrelease.yaml", FLUX_TENANCY_OBJECT})
        out.append(Artifact(
            path=f"{FLUX_OPERATOR_DIR}/{FLUX_TENANCY_OBJECT}",
            documents=(flux_tenancy_kustomization(rf),),
            kustomize=False,
            description=f"Flux Kustomization of the tenancy objects ({FLUX_TENANCY_DIR}/), applied by the operator's "
                        "whatever its health",
        ))
        out.append(Artifact(
            path=f"{FLUX_OPERATOR_DIR}/kustomization.yaml",
            documents=(kustomization(local),),
            kustomize=False,
            description="kustomization of the GPU Operator delivery (synced by the operator Flux Kustomization)",
        ))
        classes = [p for p in (a.path for a in produced) if p.startswith(FLUX_CLASSES_DIR + "/")]
        tenancy = flux_tenancy_files(produced)
        if classes:
            out.append(Artifact(
                path=FLUX_CLASSES_PATH,
                documents=(flux_classes_kustomization(rf),),
                kustomize=False,
                description=f"Flux Kustomization of the tiers' PriorityClasses ({FLUX_CLASSES_DIR}/), after the "
                            f"tenancy objects (synced by Flux Kustomization {tenancy_app_name(rf)})",
            ))
            tenancy.append(FLUX_CLASSES_PATH)
            out.append(Artifact(
                path=f"{FLUX_CLASSES_DIR}/kustomization.yaml",
                documents=(kustomization([p[len(FLUX_CLASSES_DIR) + 1:] for p in classes]),),
                kustomize=False,
                description=f"kustomization of the tiers' PriorityClasses (synced by Flux Kustomization "
                            f"{classes_app_name(rf)})",
            ))
        out.append(Artifact(
            path=f"{FLUX_TENANCY_DIR}/kustomization.yaml",
            documents=(kustomization(["../../" + p for p in tenancy]),),
            kustomize=False,
            description=f"kustomization of the tenancy objects (synced by Flux Kustomization {tenancy_app_name(rf)}, "
                        "not by this tree's)",
        ))
        out.append(Artifact(
            path=BOOTSTRAP_PATH,
            documents=tuple(flux_kustomizations(rf)),
            kustomize=False,
            description="Flux Kustomizations (operator, then this tree); apply once by hand",
        ))
    away = set(flux_tenancy_files(produced)) if engine(rf) == "flux" else set()
    resources = [a.path for a in (*produced, *map(Produced.of, out)) if a.applied and a.path not in away]
    out.append(Artifact(
        path=ROOT_KUSTOMIZATION,
        documents=(kustomization(resources),),
        kustomize=False,
        description="root kustomization: every applied object file of this tree",
    ))
    return out
