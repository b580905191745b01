"""Helpers every lowering target uses: object metadata and labels."""

from __future__ import annotations

from typing import Any

from gpuplan.resolve import ResolvedFleet
from gpuplan.identity import MANAGED_BY


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


