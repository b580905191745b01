"""What lowering hands on: one file of the generated tree (``Artifact``), and the
summary of it that later targets, the object checks and the writer may still ask
for once its objects are gone (``Produced``). Plain data, below every stage that
makes or reads them.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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


def dig(doc: Any, *keys: str) -> Any:
    """The value at ``keys`` in a parsed document, or None where a level is missing or is
    not a mapping (documents read from a tree or a cluster are whatever a person left)."""
    for k in keys:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(k)
    return doc
