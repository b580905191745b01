"""Pin CRD schemas from an upstream checkout: the loop the per-family refresh scripts share
(``refresh_capi``, ``refresh_gke``, ``refresh_nvidia``, ``refresh_aks``, ``refresh_volcano``).

Every version the CRD serves (``spec.versions[]`` with ``served: true``,
:func:`crdread.served_versions`) is pinned, each with its own schema and CEL rules, and with
the deprecation warning the API server sends for it.

Kept apart from ``refresh_monitoring`` (whose :func:`crd_schema` it uses): that module is imported
by ``refresh_kueue``, which ``refresh`` imports, and this one needs ``refresh``'s writers.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from gpuplan.upstream.crdread import git, read_crds, served_versions

__all__ = ["git", "pin_crds", "plan_crds"]

HERE = Path(__file__).resolve().parent


def pin_crds(source: Path, repository: str, tag: str,
             crds: Iterable[tuple[str, str, str]]) -> list[dict[str, str]]:
    """Each ``(group, kind, path)`` CRD of ``source`` (:func:`crdread.read_crds`) at ``tag``: every version
    it serves as a strict schema (``refresh_monitoring.crd_schema``, descriptions removed, CEL
    rules kept) in ``crds/<group>/<kind>_<version>.json``; the rows ``refresh_monitoring.write_table``
    writes, with the deprecation warning of a deprecated version."""
    rows, files = plan_crds(source, repository, tag, crds)
    for out, text in files.items():
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    return rows


def plan_crds(source: Path, repository: str, tag: str,
              crds: Iterable[tuple[str, str, str]]) -> tuple[list[dict[str, Any]], dict[Path, str]]:
    """What :func:`pin_crds` writes, without writing it: (the rows, with ``storage``: whether the
    version is the CRD's storage version; each schema file with its content)."""
    from gpuplan.upstream.refresh import dump_compact, strip_descriptions
    from gpuplan.upstream.refresh_monitoring import crd_schema

    rows, files = [], {}
    for group, kind, path in crds:
        found, commit = read_crds(source, tag, path)
        [crd] = [d for d in found if d["spec"]["names"]["kind"] == kind]
        storage = {x["name"]: bool(x.get("storage")) for x in crd["spec"]["versions"]}
        for v in served_versions(crd):
            version = v["name"]
            out = HERE / "crds" / group / f"{kind.lower()}_{version}.json"
            files[out] = dump_compact(strip_descriptions(crd_schema(crd, version)))
            rows.append({"file": f"crds/{group}/{out.name}", "apiVersion": f"{group}/{version}", "kind": kind,
                         "repository": repository, "tag": tag, "commit": commit, "path": path,
                         "deprecation": v["deprecationWarning"] or "", "storage": storage[version]})
    return rows, files
