"""Delivery: the root kustomization and the Argo CD / Flux objects that sync the tree.

Shape (reference/k8s/facts.md §j; docs/output-reference.md explains the choices):

- ``kustomization.yaml`` (root): every artifact marked ``kustomize=True``, sorted.
  It is what the GitOps engine syncs; the bootstrap objects below are not in it
  (an Application/Kustomization that lists itself is a loop nobody can delete).
- Argo CD (``cluster.gitops.engine: argocd``):
  ``delivery/bootstrap.yaml``: the root Application (path = the generated tree),
  applied once by hand; ``delivery/gpu-operator.yaml``: the GPU Operator
  Application (Helm chart from NGC, values from ``gpu-operator/values.yaml`` in
  Git through a multi-source ``$values`` ref). The operator Application *is* in
  the root kustomization, so a chart-version bump in fleet.yaml reaches the
  cluster through Git like everything else.
- Flux (``engine: flux``): ``delivery/bootstrap.yaml``: two Kustomizations
  (the operator, then the tree, ``dependsOn`` the operator), applied once by
  hand; ``delivery/gpu-operator/``: HelmRepository + HelmRelease (+ the
  operator namespace), synced by the first Kustomization. The GitRepository
  they reference is the one ``flux bootstrap`` created (``flux-system``).

Per-object annotations (sync waves, replace-on-immutable-change) come from
:func:`object_annotations`, which every target calls for the objects it builds.
"""

from __future__ import annotations

from typing import Any, Sequence

from gpuplan.lower import Artifact
from gpuplan.lower.common import metadata, obj
from gpuplan.resolve import ResolvedFleet

ARGO_API = "argoproj.io/v1alpha1"
ARGO_WAVE = "argocd.argoproj.io/sync-wave"
ARGO_SYNC_OPTIONS = "argocd.argoproj.io/sync-options"
FLUX_FORCE = "kustomize.toolkit.fluxcd.io/force"
FLUX_KUSTOMIZE_API = "kustomize.toolkit.fluxcd.io/v1"
FLUX_HELM_API = "helm.toolkit.fluxcd.io/v2"
FLUX_SOURCE_API = "source.toolkit.fluxcd.io/v1"
KUSTOMIZE_API = "kustomize.config.k8s.io/v1beta1"

NGC_HELM_REPO = "https://helm.ngc.nvidia.com/nvidia"
GPU_OPERATOR_CHART = "gpu-operator"
GPU_OPERATOR_RELEASE = "gpu-operator"
IN_CLUSTER = "https://kubernetes.default.svc"
FLUX_BOOTSTRAP_SOURCE = "flux-system"  # the GitRepository `flux bootstrap` creates

VALUES_PATH = "gpu-operator/values.yaml"
BOOTSTRAP_PATH = "delivery/bootstrap.yaml"
ARGO_OPERATOR_APP_PATH = "delivery/gpu-operator.yaml"
FLUX_OPERATOR_DIR = "delivery/gpu-operator"

# Argo CD sync waves by kind (lower first; prune runs in reverse). Namespaces and
# PriorityClasses before anything that lives in or refers to them; the operator's
# ConfigMaps and the operator Application next; quotas; then objects whose CRD
# the operator chart installs (NodeFeatureRule comes with its bundled NFD).
WAVES: dict[str, int] = {
    "Namespace": -2,
    "PriorityClass": -2,
    "ConfigMap": -1,
    "Application": -1,
    "ResourceQuota": 0,
    "NodeFeatureRule": 1,
}
# Kinds whose CRD the GPU Operator chart installs: Argo CD must not fail the
# dry run of the whole sync while the operator is still being installed.
CRD_FROM_OPERATOR = frozenset({"NodeFeatureRule"})


def engine(rf: ResolvedFleet) -> str:
    return rf.fleet.spec.cluster.gitops.engine


def gitops_namespace(rf: ResolvedFleet) -> str:
    g = rf.fleet.spec.cluster.gitops
    if g.namespace:
        return g.namespace
    return "argocd" if g.engine == "argocd" else "flux-system"


def sync_wave(kind: str) -> int:
    return WAVES.get(kind, 0)


def object_annotations(rf: ResolvedFleet, kind: str, *, recreate: bool = False) -> dict[str, str]:
    """GitOps annotations for one object of ``kind``.

    ``recreate``: the object has immutable fields that gpuplan may change
    (PriorityClass ``value``/``preemptionPolicy``): Argo CD replaces it
    (``Force=true,Replace=true`` = delete and create), Flux recreates it on an
    immutable-field error (``kustomize.toolkit.fluxcd.io/force: enabled``)."""
    out: dict[str, str] = {}
    if engine(rf) == "argocd":
        out[ARGO_WAVE] = str(sync_wave(kind))
        opts = []
        if recreate:
            opts += ["Force=true", "Replace=true"]
        if kind in CRD_FROM_OPERATOR:
            opts.append("SkipDryRunOnMissingResource=true")
        if opts:
            out[ARGO_SYNC_OPTIONS] = ",".join(opts)
    elif recreate:
        out[FLUX_FORCE] = "enabled"
    return out


def app_name(rf: ResolvedFleet) -> str:
    return f"gpuplan-{rf.fleet.metadata.name}"


def operator_app_name(rf: ResolvedFleet) -> str:
    return f"gpuplan-{rf.fleet.metadata.name}-gpu-operator"


def operator_namespace_path(rf: ResolvedFleet) -> tuple[str, bool]:
    """Where the operator Namespace object goes, and whether the root kustomization lists it.

    Argo CD: in the tree (wave -2, before the operator Application at wave -1).
    Flux: beside the HelmRelease, so that it exists before the release installs
    and before the tree (which depends on the operator) puts ConfigMaps in it."""
    if engine(rf) == "argocd":
        return "gpu-operator/namespace.yaml", True
    return f"{FLUX_OPERATOR_DIR}/namespace.yaml", False


def _repo_path(rf: ResolvedFleet, rel: str = "") -> str:
    base = rf.fleet.spec.cluster.gitops.path.strip("/")
    parts = [p for p in (base, rel) if p]
    return "/".join(parts) or "."


def _values(produced: Sequence[Artifact]) -> dict[str, Any]:
    for a in produced:
        if a.path == VALUES_PATH and a.documents:
            return a.documents[0]
    raise RuntimeError("gitops target needs gpu-operator/values.yaml from the operator target")


# --- Argo CD ---------------------------------------------------------------------


def _argo_retry() -> dict[str, Any]:
    return {"limit": 10, "backoff": {"duration": "10s", "factor": 2, "maxDuration": "5m"}}


def argo_root_application(rf: ResolvedFleet) -> dict[str, Any]:
    g = rf.fleet.spec.cluster.gitops
    spec = {
        "project": g.project,
        "source": {"repoURL": g.repo_url, "targetRevision": g.revision, "path": _repo_path(rf)},
        "destination": {"server": IN_CLUSTER},
        "syncPolicy": {
            "automated": {"prune": True, "selfHeal": True},
            # ApplyOutOfSyncOnly: only changed objects are applied, so the
            # Force/Replace PriorityClasses are recreated only when they change.
            "syncOptions": ["ServerSideApply=true", "ApplyOutOfSyncOnly=true"],
            "retry": _argo_retry(),
        },
    }
    return obj(ARGO_API, "Application", metadata(rf, app_name(rf), namespace=gitops_namespace(rf)), spec=spec)


def argo_operator_application(rf: ResolvedFleet) -> dict[str, Any]:
    g = rf.fleet.spec.cluster.gitops
    op = rf.fleet.spec.cluster.gpu_operator
    spec = {
        "project": g.project,
        "sources": [
            {
                "repoURL": NGC_HELM_REPO,
                "chart": GPU_OPERATOR_CHART,
                "targetRevision": op.chart_version,
                "helm": {
                    "releaseName": GPU_OPERATOR_RELEASE,
                    "valueFiles": [f"$values/{_repo_path(rf, VALUES_PATH)}"],
                },
            },
            {"repoURL": g.repo_url, "targetRevision": g.revision, "ref": "values"},
        ],
        "destination": {"server": IN_CLUSTER, "namespace": op.namespace},
        "syncPolicy": {
            "automated": {"prune": True, "selfHeal": True},
            # the chart's CRDs (ClusterPolicy, NFD) exceed the client-side-apply
            # annotation limit; SSA also avoids diffs on CRD-defaulted fields
            "syncOptions": ["CreateNamespace=true", "ServerSideApply=true"],
            "retry": _argo_retry(),
        },
    }
    meta = metadata(rf, operator_app_name(rf), namespace=gitops_namespace(rf),
                    annotations=object_annotations(rf, "Application"))
    return obj(ARGO_API, "Application", meta, spec=spec)


# --- Flux ------------------------------------------------------------------------


def flux_kustomizations(rf: ResolvedFleet) -> list[dict[str, Any]]:
    ns = gitops_namespace(rf)
    source = {"kind": "GitRepository", "name": FLUX_BOOTSTRAP_SOURCE}
    operator = obj(FLUX_KUSTOMIZE_API, "Kustomization", metadata(rf, operator_app_name(rf), namespace=ns), spec={
        "interval": "10m",
        "retryInterval": "1m",
        "timeout": "10m",
        "path": "./" + _repo_path(rf, FLUX_OPERATOR_DIR),
        "prune": True,
        "wait": True,  # Ready only when the HelmRelease (and so the CRDs) are
        "sourceRef": dict(source),
    })
    tree = obj(FLUX_KUSTOMIZE_API, "Kustomization", metadata(rf, app_name(rf), namespace=ns), spec={
        "interval": "10m",
        "retryInterval": "1m",
        "timeout": "5m",
        "dependsOn": [{"name": operator_app_name(rf)}],
        "path": "./" + _repo_path(rf),
        "prune": True,
        "sourceRef": dict(source),
    })
    return [operator, tree]


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


def lower(rf: ResolvedFleet, produced: Sequence[Artifact]) -> list[Artifact]:
    out: list[Artifact] = []
    if engine(rf) == "argocd":
        out.append(Artifact(
            path=ARGO_OPERATOR_APP_PATH,
            documents=(argo_operator_application(rf),),
            description="Argo CD Application: the GPU Operator Helm chart, values from gpu-operator/values.yaml",
        ))
        out.append(Artifact(
            path=BOOTSTRAP_PATH,
            documents=(argo_root_application(rf),),
            kustomize=False,
            description="Argo CD Application that syncs this tree; apply once by hand (not in kustomization.yaml)",
        ))
    else:
        values = _values(produced)
        sub = [p for p in (a.path for a in produced) if p.startswith(FLUX_OPERATOR_DIR + "/")]
        out.append(Artifact(
            path=f"{FLUX_OPERATOR_DIR}/helmrelease.yaml",
            documents=tuple(flux_helm_objects(rf, values)),
            kustomize=False,
            description="Flux HelmRepository (NGC) + HelmRelease of the GPU Operator, values = gpu-operator/values.yaml",
        ))
        local = sorted({p[len(FLUX_OPERATOR_DIR) + 1:] for p in sub} | {"helmrelease.yaml"})
        out.append(Artifact(
            path=f"{FLUX_OPERATOR_DIR}/kustomization.yaml",
            documents=(kustomization(local),),
            kustomize=False,
            description="kustomization of the GPU Operator delivery (synced by the operator Flux Kustomization)",
        ))
        out.append(Artifact(
            path=BOOTSTRAP_PATH,
            documents=tuple(flux_kustomizations(rf)),
            kustomize=False,
            description="Flux Kustomizations (operator, then this tree); apply once by hand",
        ))
    resources = [a.path for a in (*produced, *out) if a.kustomize and a.documents is not None]
    out.append(Artifact(
        path="kustomization.yaml",
        documents=(kustomization(resources),),
        kustomize=False,
        description="root kustomization: every applied object file of this tree",
    ))
    return out
