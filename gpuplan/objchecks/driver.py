"""Checks over generated objects: the stage after lowering.

The spec rules (``gpuplan.rules``) read the resolved fleet. What can only be
judged on the objects gpuplan writes runs here, on the artifacts lowering hands
on, never by calling a lowering target: the placement proof (a tier's contract
pod against the NodePools, NodeFeatureRules, Namespaces, ResourceQuotas and the
admission policy) and the DRA claim templates. The driver lowers the targets
:func:`targets` names for each family (only those, for `validate`), keeps the
objects :func:`collect` wants, and calls :func:`check_objects`. Like the spec families that used to do
this work, these checks run only on a spec the rules accept.

Stage: check-objects (docs/architecture.md)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Iterable

from gpuplan.diagnostics import Diagnostic

if TYPE_CHECKING:
    from gpuplan.artifacts import Artifact
    from gpuplan.resolve import ResolvedFleet

# family -> the lowering targets whose objects it reads
FAMILIES: dict[str, tuple[str, ...]] = {
    "gpuplan.objchecks.placement": ("gpuplan.lower.tenancy", "gpuplan.lower.admission", "gpuplan.queueing.volcano.admission",
                                    "gpuplan.lower.node_labels", "gpuplan.lower.karpenter",
                                    # node groups (missing back-ends are skipped by iter_artifacts)
                                    "gpuplan.lower.provision_gke", "gpuplan.lower.provision_aks",
                                    "gpuplan.lower.provision_capi"),
    "gpuplan.objchecks.dra": ("gpuplan.lower.dra",),
    "gpuplan.objchecks.monitoring": ("gpuplan.lower.monitoring",),
}
# families that run only on some fleets: module -> its ``needed(rf)``
_OPTIONAL = ("gpuplan.objchecks.dra", "gpuplan.objchecks.monitoring")
KINDS = frozenset({"NodePool", "NodeFeatureRule", "Namespace", "ResourceQuota", "PriorityClass", "ValidatingAdmissionPolicy",
                   "ValidatingAdmissionPolicyBinding", "ResourceClaimTemplate", "PrometheusRule"})
# Checks over the whole tree: the AppProject admits what every target made, so these
# read the files the build streams (``TreeObjects``) rather than a few targets'
# objects, and run in `build` and `check` (`validate` lowers no tree).
TREE_FAMILIES = ("gpuplan.objchecks.charts",)

def _active(rf: "ResolvedFleet") -> list[str]:
    return [f for f in FAMILIES if f not in _OPTIONAL or importlib.import_module(f).needed(rf)]


def targets(rf: "ResolvedFleet") -> dict[str, tuple[str, ...]]:
    """Per family, the lowering targets whose objects it reads on this fleet (a family
    reads only its own targets' objects; none listed: nothing to lower for it)."""
    from gpuplan.objchecks.placement import proves

    return {f: FAMILIES[f] for f in _active(rf) if f != "gpuplan.objchecks.placement" or proves(rf)}


def collect(artifacts: Iterable["Artifact"], family: str | None = None) -> list[dict[str, Any]]:
    """The objects the checks read, in artifact order; the rest is dropped as it passes (node-group
    templates, ``gpuplan.provisioning.pools.template_kinds``, are read like NodePools). With
    ``family``, each object as that family keeps it (its ``slim``, where it has one: the part of
    the object its checks read)."""
    from gpuplan.provisioning.pools import template_kinds

    kinds = KINDS | template_kinds()
    slim = getattr(importlib.import_module(family), "slim", None) if family else None
    if slim is None:
        return [d for a in artifacts for d in a.documents or () if isinstance(d, dict) and d.get("kind") in kinds]
    kept: dict[str, Any] = {}
    return [slim(d, kept) for a in artifacts for d in a.documents or () if isinstance(d, dict) and d.get("kind") in kinds]


class TreeObjects:
    """What the tree checks read, kept as the build streams each file past
    (``keep``); everything else is dropped at once. Made before the build frees the
    spec's positions: the lines the checks report at are looked up here."""

    def __init__(self, rf: "ResolvedFleet") -> None:
        from gpuplan.objchecks.charts import ANCHORS, keep_document
        from gpuplan.spec.validate import format_path

        self._keep = keep_document
        self.docs: list[dict[str, Any]] = []
        from gpuplan.objchecks.placement import TENANTS_PATH

        positions = {p: rf.doc.locate(p) for p in (*ANCHORS, TENANTS_PATH)}
        file = rf.doc.file

        def diag(code: Any, message: str, path: tuple, *, hint: str | None = None) -> Diagnostic:
            line, col = positions.get(path, (None, None))
            return code.diag(message, file=file, line=line, col=col, path=format_path(path) or None, hint=hint)

        self.diag = diag

    def keep(self, path: str, documents: Iterable[Any]) -> None:
        for d in documents:
            kept = self._keep(path, d)
            if kept is not None:
                self.docs.append(kept)


def check_tree(rf: "ResolvedFleet", objects: TreeObjects) -> list[Diagnostic]:
    from gpuplan.objchecks import charts
    from gpuplan.rules.registry import drop_disabled

    return drop_disabled(rf, list(charts.check(rf, objects.docs, diag=objects.diag)) if charts.needed(rf) else [])


def check_objects(rf: "ResolvedFleet", docs: dict[str, list[dict[str, Any]]]) -> list[Diagnostic]:
    """``docs``: per family, the objects :func:`collect` kept from its targets."""
    from gpuplan.rules.registry import drop_disabled

    out: list[Diagnostic] = []
    for family in _active(rf):
        out.extend(importlib.import_module(family).check(rf, docs.get(family, [])))
    return drop_disabled(rf, out)
