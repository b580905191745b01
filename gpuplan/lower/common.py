"""Helpers every lowering target uses: object metadata and labels."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from gpuplan.resolve import ResolvedFleet

MANAGED_BY = {"app.kubernetes.io/managed-by": "gpuplan"}
POOL_LABEL = "gpuplan.dev/pool"
# The pool binding taint, ``gpuplan.dev/pool=<pool>:NoSchedule``, on every pool's nodes:
# only pods that tolerate this pool (a tier's contract pods) schedule there. Unlike
# nvidia.com/gpu, ExtendedResourceToleration never adds a toleration for it
# (docs/placement.md), so a pod that merely requests a GPU tolerates no pool.
POOL_TAINT_KEY = POOL_LABEL
TENANT_LABEL = "gpuplan.dev/tenant"
TIER_LABEL = "gpuplan.dev/tier"


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


def content_name(prefix: str, data: Any, *, limit: int = 63) -> str:
    """``<prefix>-<8 hex digits of the content>``, at most ``limit`` characters.

    For names that select a config by node label: the device plugin's
    config-manager and mig-manager act only when the label *value* changes
    (NVIDIA/k8s-device-plugin@v0.20.0 cmd/config-manager/main.go:272-278,
    NVIDIA/mig-parted@v0.15.0 cmd/nvidia-mig-manager/main.go:572-577), so a
    config whose content changes must get a new name to reach any node."""
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    digest = hashlib.sha256(blob.encode()).hexdigest()[:8]
    return f"{prefix[: limit - 9]}-{digest}"


def pool_node_taints(pv: Any) -> list[dict[str, str]]:
    """The taints the nodes of a pool carry once ready (startup taints aside): Karpenter
    pools get ``karpenter.pool_taints`` (spec, else the GPU taint), static pools the
    spec's. Targets that must agree with the nodes (tolerations) read them here."""
    if pv.pool.karpenter is not None:
        from gpuplan.lower.karpenter import pool_taints

        return pool_taints(pv)
    from gpuplan.lower.node_labels import static_pool_taints

    return static_pool_taints(pv)


def pool_binding_taint(pool: str) -> dict[str, str]:
    return {"key": POOL_TAINT_KEY, "value": pool, "effect": "NoSchedule"}


def with_binding_taint(taints: list[dict[str, str]], pool: str) -> list[dict[str, str]]:
    """``taints`` plus the pool binding taint (a spec taint on the same key and effect wins)."""
    b = pool_binding_taint(pool)
    if any(t["key"] == b["key"] and t["effect"] == b["effect"] for t in taints):
        return taints
    return [*taints, b]


def spec_taints(taints: Any) -> list[dict[str, str]]:
    """The spec's taints as Kubernetes Taint objects (no ``value`` key when unset)."""
    out = []
    for t in taints:
        d = {"key": t.key}
        if t.value is not None:
            d["value"] = t.value
        d["effect"] = t.effect
        out.append(d)
    return out
