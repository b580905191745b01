"""The upstream APIs gpuplan targets, pinned and shipped as package data.

``crds/<group>/<kind>_<version>.json`` are strict CRD schemas (their CEL rules
inside, under ``x-kubernetes-validations``), ``cel/*.cel.json`` list those
rules per CRD, ``sources.json`` / ``SOURCES.md`` name the repository, tag,
commit and path of each. ``python -m gpuplan.upstream.refresh`` rewrites them.
Nothing here imports more than the standard library.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
CRDS = ROOT / "crds"
CEL = ROOT / "cel"
_NAME = re.compile(r"[A-Za-z0-9]+")


@lru_cache(maxsize=None)
def sources() -> dict[str, Any]:
    return json.loads((ROOT / "sources.json").read_text(encoding="utf-8"))


@lru_cache(maxsize=None)
def crd_groups() -> frozenset[str]:
    """API groups with at least one pinned CRD."""
    return frozenset(p.name for p in CRDS.iterdir() if p.is_dir())


def crd_schema_path(group: str, kind: str, version: str) -> Path:
    return CRDS / group / f"{kind.lower()}_{version}.json"


@lru_cache(maxsize=None)
def crd_schema(group: str, kind: str, version: str) -> dict[str, Any] | None:
    """The strict schema of ``group/version kind``, or None when it is not pinned."""
    if not _NAME.fullmatch(kind) or not _NAME.fullmatch(version) or group not in crd_groups():
        return None  # names from a manifest never become paths outside crds/
    path = crd_schema_path(group, kind, version)
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def crd_kinds() -> list[tuple[str, str, str]]:
    """Every pinned (group, kind, version), in ``sources.json`` order."""
    out = []
    for e in sources()["crds"]:
        group, _, version = e["apiVersion"].rpartition("/")
        out.append((group, e["kind"], version))
    return out


def served_versions(group: str, kind: str) -> list[str]:
    """The versions of ``group`` ``kind`` the pinned release serves (each pinned with its own
    schema), in ``sources.json`` order; empty when gpuplan pins no CRD of that kind."""
    return [v for g, k, v in crd_kinds() if g == group and k == kind]


def deprecation_warning(group: str, kind: str, version: str) -> str | None:
    """The warning the API server sends for a request at a deprecated served version (the
    CRD's ``deprecationWarning`` or the API server's default, recorded at refresh), else None."""
    for e in sources()["crds"]:
        if e["apiVersion"] == f"{group}/{version}" and e["kind"] == kind and e.get("deprecated"):
            return e.get("deprecationWarning") or f"{group}/{version} {kind} is deprecated"
    return None


def cel_rules(group: str, kind: str, version: str) -> list[dict[str, str]]:
    """The CEL rules listed for a CRD (``path``, ``message``, ``rule``)."""
    for e in sources()["crds"]:
        if e["apiVersion"] == f"{group}/{version}" and e["kind"] == kind:
            return json.loads((ROOT / e["cel"]).read_text(encoding="utf-8"))
    return []
