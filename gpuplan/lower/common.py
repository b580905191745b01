"""Helpers every lowering target uses: object metadata and labels.

Stage: lower (docs/architecture.md)."""

from __future__ import annotations

from typing import Any, Sequence

from gpuplan.artifacts import Artifact
from gpuplan.resolve import ResolvedFleet
from gpuplan.identity import ARGO_SYNC_OPTIONS, FLUX_FORCE, FLUX_PRUNE, MANAGED_BY


KUSTOMIZE_API = "kustomize.config.k8s.io/v1beta1"


def folder_kustomization(directory: str, artifacts: Sequence[Artifact], description: str) -> Artifact:
    """``<directory>/kustomization.yaml`` listing ``artifacts`` (files under ``directory``) in their
    order: a folder outside the root kustomization, synced on its own."""
    resources = [a.path[len(directory) + 1:] for a in artifacts]
    return Artifact(path=f"{directory}/kustomization.yaml", kustomize=False, description=description,
                    documents=({"apiVersion": KUSTOMIZE_API, "kind": "Kustomization", "resources": resources},))


def labels(rf: ResolvedFleet, extra: dict[str, str] | None = None) -> dict[str, str]:
    out = dict(MANAGED_BY)
    out["app.kubernetes.io/part-of"] = rf.fleet.metadata.name
    if extra:
        out.update(extra)
    return out


def metadata(
    rf: ResolvedFleet,
    name: str,
    *,
    namespace: str | None = None,
    extra_labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Kubernetes object metadata in conventional key order."""
    md: dict[str, Any] = {"name": name}
    if namespace is not None:
        md["namespace"] = namespace
    md["labels"] = labels(rf, extra_labels)
    if annotations:
        md["annotations"] = dict(annotations)
    return md


def obj(api_version: str, kind: str, meta: dict[str, Any], **body: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": meta}
    out.update(body)
    return out


# --- Delivery: where objects go and how the GitOps engine treats them ----------------------


ARGO_WAVE = "argocd.argoproj.io/sync-wave"


VALUES_PATH = "gpu-operator/values.yaml"


FLUX_OPERATOR_DIR = "delivery/gpu-operator"


# Argo CD sync waves by kind (lower first; prune runs in reverse). Namespaces before
# anything that lives in them; the operator's ConfigMaps and the operator
# Application next; quotas; then objects whose CRD the operator chart installs
# (NodeFeatureRule comes with its bundled NFD).
#
# A tier's PriorityClass comes last, after its policies and their bindings: a pod
# naming a class that does not exist is refused at its creation (kubernetes v1.36.3
# plugin/pkg/admission/priority/admission.go:168-172, 294-299 "no PriorityClass with
# name ... was found"; a mutating plugin, before any policy), so the class is usable only once every rule of it is in place. Prunes
# run in the reverse order of their waves (gitops-engine sync_context.go:1097-1125),
# so a removed tier's class goes first and its rules after it: at no step of a sync
# is a class accepted without its rules (docs/transitions.md "The tenancy boundary
# at every step"). Nothing in the tree refers to the classes before they exist:
# quotas scope by the class name (pkg/quota/v1/evaluator/core/pods.go), not the object.
WAVES: dict[str, int] = {
    "Namespace": -2,
    "PriorityClass": 2,
    # GPU DeviceClasses (gpuplan's and, through its Application, the DRA driver chart's) after the
    # claims policy's binding and the quotas: until then no claim can name them unchecked
    "DeviceClass": 2,
    "ConfigMap": -1,
    "Application": -1,
    # with the policies, before them within the wave (a listed kind: gitops-engine sync_tasks.go
    # kindOrder): a GPU name a policy newly lets a class request is charged from the same step
    "ResourceQuota": -1,
    "NodeFeatureRule": 1,
    "NVIDIADriver": 1,
    # the policy before its binding; the binding after the namespaces' tier labels
    "ValidatingAdmissionPolicy": -1,
    "ValidatingAdmissionPolicyBinding": 1,
}


# Kinds whose CRD may not exist when the tree syncs: NodeFeatureRule comes with
# the operator chart's bundled NFD and NVIDIADriver with the operator chart itself
# (installed by the operator Application in the
# same sync), the Karpenter kinds with Karpenter (a prerequisite, NodeOverlay
# only with its alpha feature gate). Without the option a missing CRD fails
# the dry run of the *whole* sync (argoproj/argo-cd@v3.5.1
# gitops-engine/pkg/sync/sync_context.go:1072); with it Argo CD skips that
# object's dry run and the sync retry applies it once the CRD exists.
CRD_MAY_BE_MISSING = frozenset({"NodeFeatureRule", "NodePool", "EC2NodeClass", "AKSNodeClass", "NodeOverlay",
                                "NVIDIADriver"})


# Namespaces are never pruned or deleted by the GitOps engine: removing a tenant
# from fleet.yaml would otherwise delete its namespaces and every object in them.
# Argo CD (argoproj/argo-cd@v3.5.1): `Prune=false` skips the prune and counts as a
# success (gitops-engine/pkg/sync/sync_context.go:333-342,1454-1458,1568-1573), so
# the sync goes on; `Prune=confirm` would instead hold the *whole* operation until
# someone confirms (sync_context.go:458-475,1616-1624) and auto-sync starts no new
# one meanwhile (controller/appcontroller.go:2336-2338), which held every later
# commit (#27). `IgnoreExtraneous` (compare-options) keeps the orphaned Namespace
# from making the Application OutOfSync (controller/state.go:986-997), so nothing
# re-syncs for it. `Delete=false` keeps the namespace when the Application itself
# is deleted. Flux: `prune: disabled` skips it in garbage collection
# (fluxcd/kustomize-controller@v1.9.4 docs/spec/v1/kustomizations.md:1686-1693).
PROTECTED_KINDS = frozenset({"Namespace"})
ARGO_COMPARE_OPTIONS = "argocd.argoproj.io/compare-options"


def engine(rf: ResolvedFleet) -> str:
    return rf.fleet.spec.cluster.gitops.engine


def sync_wave(kind: str) -> int:
    return WAVES.get(kind, 0)


def object_annotations(rf: ResolvedFleet, kind: str, *, recreate: bool = False, protected: bool = False
                       ) -> dict[str, str]:
    """GitOps annotations for one object of ``kind``.

    ``recreate``: the object has immutable fields that gpuplan may change
    (PriorityClass ``value``/``preemptionPolicy``): Argo CD replaces it
    (``Force=true,Replace=true`` = delete and create), Flux recreates it on an
    immutable-field error (``kustomize.toolkit.fluxcd.io/force: enabled``).

    ``protected``: never pruned, like the kinds of ``PROTECTED_KINDS`` (a namespace's
    GPU quota outlives its grant as the namespace does)."""
    out: dict[str, str] = {}
    if engine(rf) == "argocd":
        out[ARGO_WAVE] = str(sync_wave(kind))
        opts = []
        if recreate:
            opts += ["Force=true", "Replace=true"]
        if kind in CRD_MAY_BE_MISSING:
            opts.append("SkipDryRunOnMissingResource=true")
        if kind in PROTECTED_KINDS or protected:
            opts += ["Prune=false", "Delete=false"]
            out[ARGO_COMPARE_OPTIONS] = "IgnoreExtraneous"
        if opts:
            out[ARGO_SYNC_OPTIONS] = ",".join(opts)
    else:
        if recreate:
            out[FLUX_FORCE] = "enabled"
        if kind in PROTECTED_KINDS or protected:
            out[FLUX_PRUNE] = "disabled"
    return out


def operator_namespace_path(rf: ResolvedFleet) -> tuple[str, bool]:
    """Where the operator Namespace object goes, and whether the root kustomization lists it.

    Argo CD: in the tree (wave -2, before the operator Application at wave -1).
    Flux: beside the HelmRelease, so that it exists before the release installs
    and before the tree (which depends on the operator) puts ConfigMaps in it."""
    if engine(rf) == "argocd":
        return "gpu-operator/namespace.yaml", True
    return f"{FLUX_OPERATOR_DIR}/namespace.yaml", False


def system_quota(rf: ResolvedFleet, namespace: str, pods: int) -> dict[str, Any]:
    """A ResourceQuota scoped to the system PriorityClasses, ``hard.pods`` = ``pods``: what GKE's
    quota admission requires before pods of those classes run in ``namespace``
    (``gpuplan.provisioning.gke``; the name is the one NVIDIA's GKE guide uses)."""
    from gpuplan.provisioning.gke import OPERATOR_QUOTA, SYSTEM_PRIORITY_CLASSES

    meta = metadata(rf, OPERATOR_QUOTA, namespace=namespace, annotations=object_annotations(rf, "ResourceQuota"))
    return obj("v1", "ResourceQuota", meta, spec={
        "hard": {"pods": str(pods)},
        "scopeSelector": {"matchExpressions": [
            {"operator": "In", "scopeName": "PriorityClass", "values": list(SYSTEM_PRIORITY_CLASSES)}]},
    })


# --- Markdown ------------------------------------------------------------------------------


_CELL = str.maketrans({"|": "\\|", "\n": " ", "\r": " ", "<": "&lt;", ">": "&gt;", "`": "'"})


def cell(value: Any) -> str:
    """Text that stays inside one Markdown table cell and renders as itself."""
    return str(value).translate(_CELL)
