"""Pin CRD schemas from an upstream checkout: the loop the per-family refresh scripts share
(``refresh_capi``, ``refresh_gke``, ``refresh_nvidia``, ``refresh_aks``).

Kept apart from ``refresh_monitoring`` (whose :func:`crd_schema` it uses): that module is imported
by ``refresh_kueue``, which ``refresh`` imports, and this one needs ``refresh``'s writers.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

HERE = Path(__file__).resolve().parent


def git(git_dir: Path) -> list[str]:
    """``git`` reading the repository ``git_dir`` (a bare clone, or a checkout with ``.git``)."""
    return ["git", f"--git-dir={git_dir if (git_dir / 'HEAD').is_file() else git_dir / '.git'}"]


def pin_crds(git_dir: Path, repository: str, tag: str, version: str,
             crds: Iterable[tuple[str, str, str]]) -> list[dict[str, str]]:
    """Each ``(group, kind, path)`` CRD of the checkout ``git_dir`` at ``tag``: its ``version`` as a
    strict schema (``refresh_monitoring.crd_schema``, descriptions removed, CEL rules kept) in
    ``crds/<group>/<kind>_<version>.json``; the rows ``refresh_monitoring.write_table`` writes."""
    import subprocess

    import yaml

    from gpuplan.upstream.refresh import dump_compact, strip_descriptions
    from gpuplan.upstream.refresh_monitoring import crd_schema

    cmd = git(git_dir)
    commit = subprocess.run([*cmd, "rev-list", "-n1", tag], check=True, capture_output=True, text=True).stdout.strip()
    rows = []
    for group, kind, path in crds:
        text = subprocess.run([*cmd, "show", f"{tag}:{path}"], check=True, capture_output=True, text=True).stdout
        [crd] = [d for d in yaml.safe_load_all(text) if d]
        out = HERE / "crds" / group / f"{kind.lower()}_{version}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(dump_compact(strip_descriptions(crd_schema(crd, version))), encoding="utf-8")
        rows.append({"file": f"crds/{group}/{out.name}", "apiVersion": f"{group}/{version}", "kind": kind,
                     "repository": repository, "tag": tag, "commit": commit, "path": path})
    return rows
