"""Refresh the pinned Kueue ``kueue.x-k8s.io/v1beta2`` schemas and CEL rules.

    python -m gpuplan.upstream.refresh_kueue REFERENCE_DIR KUEUE_GIT_DIR

``REFERENCE_DIR`` holds ``catalog-strict/kueue.x-k8s.io/<kind>_v1beta2.json`` and
``cel/<kind>-kueue-v1beta2.cel.json`` (the strict schemas of the project's other pinned
CRDs): the five kinds gpuplan emits besides Topology are copied byte for byte. Topology
is derived from the CRD in ``KUEUE_GIT_DIR`` at :data:`TAG` (``config/components/crd/
bases/kueue.x-k8s.io_topologies.yaml``) with the same strict conversion as the
Prometheus Operator schemas, and its ``x-kubernetes-validations`` become its CEL file.
Output: ``crds/kueue.x-k8s.io/``, ``cel/`` and ``SOURCES-kueue.md``.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from gpuplan.upstream.refresh_monitoring import crd_schema

REPOSITORY = "kubernetes-sigs/kueue"
TAG = "v0.19.2"
GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
COPIED = ("clusterqueue", "cohort", "localqueue", "resourceflavor", "workloadpriorityclass")
TOPOLOGY_CRD = "config/components/crd/bases/kueue.x-k8s.io_topologies.yaml"
HERE = Path(__file__).resolve().parent
OUT = HERE / "crds" / GROUP
CEL = HERE / "cel"
SOURCES = HERE / "SOURCES-kueue.md"


def cel_rules(node: Any, path: str = "$") -> list[dict[str, str]]:
    """Every ``x-kubernetes-validations`` rule of an openAPIV3Schema, with the JSON path
    of the node it applies to (``[*]`` for array items)."""
    out: list[dict[str, str]] = []
    if not isinstance(node, dict):
        return out
    for v in node.get("x-kubernetes-validations", []):
        out.append({"path": path, "message": v.get("message", ""), "rule": v["rule"]})
    for key, child in (node.get("properties") or {}).items():
        out.extend(cel_rules(child, f"{path}.{key}"))
    if isinstance(node.get("items"), dict):
        out.extend(cel_rules(node["items"], f"{path}[*]"))
    return out


def refresh(reference: Path, kueue_git: Path) -> list[dict[str, str]]:
    import subprocess

    import yaml

    OUT.mkdir(parents=True, exist_ok=True)
    CEL.mkdir(parents=True, exist_ok=True)
    rows = []
    for kind in COPIED:
        src = reference / "catalog-strict" / GROUP / f"{kind}_{VERSION}.json"
        shutil.copyfile(src, OUT / src.name)
        cel = reference / "cel" / f"{kind}-kueue-{VERSION}.cel.json"
        shutil.copyfile(cel, CEL / cel.name)
        rows.append({"file": f"crds/{GROUP}/{src.name}", "how": "copied from the reference catalog",
                     "path": f"config/components/crd/bases/{GROUP}_{kind}*.yaml"})
    git = ["git", f"--git-dir={kueue_git}"]
    text = subprocess.run([*git, "show", f"{TAG}:{TOPOLOGY_CRD}"], check=True, capture_output=True, text=True).stdout
    commit = subprocess.run([*git, "rev-list", "-n1", TAG], check=True, capture_output=True, text=True).stdout.strip()
    [crd] = [d for d in yaml.safe_load_all(text) if d]
    out = OUT / f"topology_{VERSION}.json"
    out.write_text(json.dumps(crd_schema(crd, VERSION), indent=1) + "\n", encoding="utf-8")
    [ver] = [v for v in crd["spec"]["versions"] if v["name"] == VERSION]
    rules = cel_rules(ver["schema"]["openAPIV3Schema"])
    (CEL / f"topology-kueue-{VERSION}.cel.json").write_text(json.dumps(rules, indent=1) + "\n", encoding="utf-8")
    rows.append({"file": f"crds/{GROUP}/{out.name}", "how": f"derived from {REPOSITORY}@{TAG} ({commit})",
                 "path": TOPOLOGY_CRD})
    return rows


def write_sources(rows: list[dict[str, str]]) -> None:
    lines = [
        "# Kueue CRD schemas (kueue.x-k8s.io/v1beta2)",
        "",
        f"Kueue {TAG} ({REPOSITORY}). Refreshed by",
        "`python -m gpuplan.upstream.refresh_kueue <reference dir> <kueue git dir>`; the CEL rules",
        "of each CRD are in `cel/<kind>-kueue-v1beta2.cel.json`. The tests validate generated",
        "objects against the schemas and evaluate the CEL rules with gpuplan.verify.cel.",
        "",
        "| file | how | upstream path |",
        "|---|---|---|",
    ]
    lines += [f"| {r['file']} | {r['how']} | {r['path']} |" for r in rows]
    SOURCES.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    write_sources(refresh(Path(argv[0]), Path(argv[1])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
