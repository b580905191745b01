"""Lowering: resolved spec -> artifacts (Kubernetes objects as plain data, or text).

One module per output target; each exposes
``lower(rf: ResolvedFleet, produced: Sequence[Produced]) -> Iterable[Artifact]``.
``produced`` summarises what earlier targets made (the gitops target lists the
files in kustomization.yaml and admits their kinds and namespaces in its
AppProject; the README describes them). Only the summaries outlive an artifact:
:func:`iter_artifacts` hands each one on as it is made, so the compiler can
render and drop it before the next is lowered, and a target that writes a file
per tenant yields them one by one. Peak memory is then the checked spec plus
one artifact, not the spec plus every object of the tree."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from gpuplan.resolve import ResolvedFleet

TARGET_MODULES: tuple[str, ...] = (
    "gpuplan.lower.tenancy",
    "gpuplan.lower.admission",  # Kubernetes >= 1.30
    "gpuplan.lower.device_plugin",
    "gpuplan.lower.mig_parted",
    "gpuplan.lower.operator",
    "gpuplan.lower.node_labels",
    "gpuplan.lower.kubelet",
    "gpuplan.lower.karpenter",
    "gpuplan.lower.monitoring",  # only with spec.monitoring
    "gpuplan.lower.dra",  # DRA pools only
    "gpuplan.lower.kueue",  # only with spec.queueing; before gitops (Flux lists its HelmRelease)
    "gpuplan.lower.tenant_page",  # tenant pages without Kueue (kueue writes them otherwise)
    "gpuplan.lower.gitops",  # needs everything above
    "gpuplan.lower.capacity",  # CAPACITY.md (the `gpuplan plan` report)
    "gpuplan.lower.docs",  # README.md: last, describes the tree
)


@dataclass(frozen=True)
class Artifact:
    """One file of the generated tree.

    ``documents``: YAML documents (Kubernetes objects, or one Helm values map).
    ``text``: a text file (Markdown); exactly one of the two is set.
    ``kustomize``: list this file in the root kustomization (Kubernetes objects
    that are applied); False for values files, docs and drop-in configs."""

    path: str
    documents: tuple[dict[str, Any], ...] | None = None
    text: str | None = None
    kustomize: bool = True
    description: str = ""


@dataclass(frozen=True)
class Produced:
    """What later targets may ask of an artifact once its objects are gone."""

    path: str
    kustomize: bool
    description: str
    yaml: bool  # documents, not text
    kinds: frozenset[str] = frozenset()
    namespaces: frozenset[str] = frozenset()  # metadata.namespace of its objects
    applications: tuple[dict[str, Any], ...] = ()  # Argo CD Applications (the AppProject admits their sources)

    @property
    def applied(self) -> bool:
        """Listed in the root kustomization: objects the delivery applies."""
        return self.kustomize and self.yaml

    @classmethod
    def of(cls, a: Artifact) -> "Produced":
        docs = [d for d in a.documents or () if isinstance(d, dict)]
        kinds = {k for d in docs if isinstance(k := d.get("kind"), str)}
        namespaces = {ns for d in docs if isinstance(m := d.get("metadata"), dict)
                      and isinstance(ns := m.get("namespace"), str)}
        apps = tuple(d for d in docs if d.get("kind") == "Application")
        return cls(a.path, a.kustomize, a.description, a.documents is not None,
                   frozenset(kinds), frozenset(namespaces), apps)


def iter_artifacts(rf: "ResolvedFleet") -> Iterator[Artifact]:
    """Every artifact of the tree, in target order, each as soon as it is made."""
    produced: list[Produced] = []
    seen: set[str] = set()
    for name in TARGET_MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        for a in mod.lower(rf, tuple(produced)):
            if a.path in seen:
                raise RuntimeError(f"two targets produced the same file: {a.path}")
            seen.add(a.path)
            produced.append(Produced.of(a))
            yield a


def lower_all(rf: "ResolvedFleet") -> list[Artifact]:
    """Every artifact at once, sorted by path (tests and small trees)."""
    return sorted(iter_artifacts(rf), key=lambda a: a.path)
