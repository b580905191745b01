"""Refresh the pinned Kueue ``kueue.x-k8s.io`` schemas and CEL rules: every version the
pinned release serves (``v1beta2``, which gpuplan writes, and the deprecated ``v1beta1``).

    python -m gpuplan.upstream.refresh_kueue REFERENCE_DIR KUEUE_SOURCE

``KUEUE_SOURCE`` is a clone of kubernetes-sigs/kueue (read at :data:`TAG`) or the Go module
cache's copy of the release (``$(go env GOMODCACHE)/sigs.k8s.io/kueue@v0.19.2``): each CRD's
``spec.versions[]`` says which versions are served and which are deprecated, with what
warning (:func:`crdread.served_versions`). ``REFERENCE_DIR`` holds
``catalog-strict/kueue.x-k8s.io/<kind>_<version>.json`` and ``cel/<kind>-kueue-<version>.cel.json``
(the strict schemas of the project's other pinned CRDs): for the five kinds gpuplan emits
besides Topology, each served version is copied byte for byte. Topology and the admission
check kinds (AdmissionCheck, MultiKueueConfig, MultiKueueCluster, ProvisioningRequestConfig,
which Kueue's own setups write beside the queues) are derived from their CRDs (:data:`CRDS`)
with the same strict conversion as the Prometheus Operator schemas, and their
``x-kubernetes-validations`` become their CEL files.
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
VERSION = "v1beta2"  # the version gpuplan writes; every served version is pinned
BASES = "config/components/crd/bases"
# kind (lower case, as the pinned files are named) -> its CRD at TAG
CRDS = {
    "clusterqueue": f"{BASES}/kueue.x-k8s.io_clusterqueues.yaml",
    "cohort": f"{BASES}/kueue.x-k8s.io_cohorts.yaml",
    "localqueue": f"{BASES}/kueue.x-k8s.io_localqueues.yaml",
    "resourceflavor": f"{BASES}/kueue.x-k8s.io_resourceflavors.yaml",
    "workloadpriorityclass": f"{BASES}/kueue.x-k8s.io_workloadpriorityclasses.yaml",
    "topology": f"{BASES}/kueue.x-k8s.io_topologies.yaml",
    # admission checks and their configurations: multi-cluster dispatch (MultiKueue) and
    # ProvisioningRequests (cluster-autoscaler's provisioning classes)
    "admissioncheck": f"{BASES}/kueue.x-k8s.io_admissionchecks.yaml",
    "multikueueconfig": f"{BASES}/kueue.x-k8s.io_multikueueconfigs.yaml",
    "multikueuecluster": f"{BASES}/kueue.x-k8s.io_multikueueclusters.yaml",
    "provisioningrequestconfig": f"{BASES}/kueue.x-k8s.io_provisioningrequestconfigs.yaml",
}
COPIED = ("clusterqueue", "cohort", "localqueue", "resourceflavor", "workloadpriorityclass")
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


def refresh(reference: Path, kueue: Path) -> list[dict[str, str]]:
    from gpuplan.upstream.crdread import read_crds, served_versions

    OUT.mkdir(parents=True, exist_ok=True)
    CEL.mkdir(parents=True, exist_ok=True)
    rows = []
    for kind, path in CRDS.items():
        [crd], commit = read_crds(kueue, TAG, path)
        for v in served_versions(crd):
            version, out = v["name"], OUT / f"{kind}_{v['name']}.json"
            cel = CEL / f"{kind}-kueue-{version}.cel.json"
            if kind in COPIED:
                shutil.copyfile(reference / "catalog-strict" / GROUP / out.name, out)
                shutil.copyfile(reference / "cel" / cel.name, cel)
                how = f"copied from the reference catalog ({REPOSITORY}@{TAG})"
            else:
                out.write_text(json.dumps(crd_schema(crd, version), indent=1) + "\n", encoding="utf-8")
                [ver] = [x for x in crd["spec"]["versions"] if x["name"] == version]
                cel.write_text(json.dumps(cel_rules(ver["schema"]["openAPIV3Schema"]), indent=1) + "\n",
                               encoding="utf-8")
                how = f"derived from {REPOSITORY}@{TAG} ({commit})"
            rows.append({"file": f"crds/{GROUP}/{out.name}", "how": how, "path": path,
                         "deprecation": v["deprecationWarning"] or ""})
    return rows


def write_sources(rows: list[dict[str, str]]) -> None:
    lines = [
        "# Kueue CRD schemas (kueue.x-k8s.io)",
        "",
        f"Kueue {TAG} ({REPOSITORY}): every version the release serves (v1beta2, which gpuplan",
        "writes, and the deprecated v1beta1). Refreshed by",
        "`python -m gpuplan.upstream.refresh_kueue <reference dir> <kueue git dir or module dir>`;",
        "the CEL rules of each CRD version are in `cel/<kind>-kueue-<version>.cel.json`. `gpuplan",
        "verify` validates each object against the schema and CEL rules of its own version.",
        "",
        "| file | how | upstream path | deprecation warning |",
        "|---|---|---|---|",
    ]
    lines += [f"| {r['file']} | {r['how']} | {r['path']} | {r['deprecation'] or '-'} |" for r in rows]
    SOURCES.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    write_sources(refresh(Path(argv[0]), Path(argv[1])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
