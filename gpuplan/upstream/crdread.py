"""Read upstream CRDs for the refresh scripts: from a git clone or the Go module cache, with
the versions each serves and the deprecation warning the API server sends for a deprecated one.

Imports nothing of gpuplan (``crdpin`` and ``refresh_kueue`` use it, and ``refresh`` imports
``refresh_kueue``).

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any


def git(git_dir: Path) -> list[str]:
    """``git`` reading the repository ``git_dir`` (a bare clone, or a checkout with ``.git``)."""
    return ["git", f"--git-dir={git_dir if (git_dir / 'HEAD').is_file() else git_dir / '.git'}"]


def read_crds(source: Path, tag: str, path: str) -> tuple[list[dict[str, Any]], str]:
    """(the CRDs of the YAML file ``path``, the commit of ``tag``) from ``source``: a git clone
    (the file read at ``tag``), or the Go module cache's copy of the module at ``tag``
    (``$(go env GOMODCACHE)/<module>@<tag>``: the commit is the ``Origin.Hash`` the module
    proxy recorded in ``cache/download/<module>/@v/<tag>.info``)."""
    import yaml

    if (source / path).is_file():
        text, commit = (source / path).read_text(encoding="utf-8"), module_commit(source, tag)
    else:
        cmd = git(source)
        text = subprocess.run([*cmd, "show", f"{tag}:{path}"], check=True, capture_output=True, text=True).stdout
        commit = subprocess.run([*cmd, "rev-list", "-n1", tag], check=True, capture_output=True,
                                text=True).stdout.strip()
    crds = [d for d in yaml.safe_load_all(text) if d and d.get("kind") == "CustomResourceDefinition"]
    return crds, commit


def module_commit(module_dir: Path, tag: str) -> str:
    """The commit of a module in the Go module cache, from its ``.info`` file."""
    name, _, version = module_dir.name.rpartition("@")
    if version != tag:
        raise SystemExit(f"{module_dir}: the module is at {version!r}, the pin at {tag!r}")
    for root in module_dir.parents:
        info = root / "cache" / "download" / module_dir.parent.relative_to(root) / name / "@v" / f"{tag}.info"
        if info.is_file():
            commit = json.loads(info.read_text(encoding="utf-8")).get("Origin", {}).get("Hash", "")
            if re.fullmatch(r"[0-9a-f]{40}", commit):
                return commit
    raise SystemExit(f"{module_dir}: no commit recorded for {tag} in the module cache (cache/download/.../{tag}.info)")


_KUBE_VERSION = re.compile(r"v(\d+)(?:(alpha|beta)(\d+))?")


def _kube_order(version: str) -> tuple:
    """Sort key of k8s.io/apimachinery pkg/version/helpers.go CompareKubeAwareVersionStrings
    (v0.36.3, lines 34-88): GA above beta above alpha, then the major number, then the minor;
    names outside that form below all of them, in reverse string order."""
    m = _KUBE_VERSION.fullmatch(version)
    if m is None:
        return (0, tuple(-ord(c) for c in version))
    kind = {"alpha": 0, "beta": 1, None: 2}[m[2]]
    return (1, kind, int(m[1]), int(m[3] or 0))


def served_versions(crd: dict[str, Any]) -> list[dict[str, Any]]:
    """``{"name", "deprecated", "deprecationWarning"}`` of every version the CRD serves. The
    warning is what the API server sends with each request at a deprecated version: the CRD's
    ``deprecationWarning``, else its default (k8s.io/apiextensions-apiserver@v0.36.3
    pkg/apiserver/customresource_handler.go:1043-1048 and defaultDeprecationWarning, 1150-1167:
    "<group>/<version> <Kind> is deprecated; use <group>/<newest served, not deprecated, newer
    version> <Kind>")."""
    spec = crd["spec"]
    group, kind, versions = spec["group"], spec["names"]["kind"], spec["versions"]
    out = []
    for v in versions:
        if not v.get("served"):
            continue
        warning = None
        if v.get("deprecated"):
            warning = v.get("deprecationWarning")
            if warning is None:
                warning = f"{group}/{v['name']} {kind} is deprecated"
                newer = [w["name"] for w in versions if w.get("served") and not w.get("deprecated")
                         and _kube_order(w["name"]) > _kube_order(v["name"])]
                if newer:
                    warning += f"; use {group}/{max(newer, key=_kube_order)} {kind}"
        out.append({"name": v["name"], "deprecated": bool(v.get("deprecated")), "deprecationWarning": warning})
    return out
