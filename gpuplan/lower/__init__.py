"""Lowering: resolved spec -> artifacts (Kubernetes objects as plain data, or text).

One module per output target; each exposes
``lower(rf: ResolvedFleet, produced: Sequence[Artifact]) -> list[Artifact]``.
``produced`` holds what earlier targets made (the gitops target lists them in
kustomization.yaml and the README describes them)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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


def lower_all(rf: "ResolvedFleet") -> list[Artifact]:
    produced: list[Artifact] = []
    for name in TARGET_MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        produced.extend(mod.lower(rf, tuple(produced)))
    seen: set[str] = set()
    dupes = {a.path for a in produced if a.path in seen or seen.add(a.path)}
    if dupes:
        raise RuntimeError(f"two targets produced the same file: {sorted(dupes)}")
    return sorted(produced, key=lambda a: a.path)
