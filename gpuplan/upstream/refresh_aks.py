"""Refresh the pinned AKS schemas: Azure Service Operator's ``ManagedClustersAgentPool``
and Karpenter on Azure's ``AKSNodeClass`` (AKS Node Auto Provisioning).

    python -m gpuplan.upstream.refresh_aks KARPENTER_AZURE_GIT_DIR [CAPZ_GIT_DIR]

``KARPENTER_AZURE_GIT_DIR`` is a clone of Azure/karpenter-provider-azure (bare or not):
``pkg/apis/crds/karpenter.azure.com_aksnodeclasses.yaml`` is read at :data:`NAP_TAG` and
every version it serves becomes ``crds/karpenter.azure.com/aksnodeclass_<version>.json``
(``v1beta1``, which gpuplan writes, and the deprecated ``v1alpha2``).

``CAPZ_GIT_DIR`` is a clone of kubernetes-sigs/cluster-api-provider-azure: Azure Service
Operator v2 keeps its generated CRDs out of git and publishes them only as release files,
and Cluster API Provider Azure vendored that release file, unchanged, as
``config/aso/crds.yaml`` (read at :data:`ASO_COMMIT`, the commit that brought in ASO
:data:`ASO_TAG`). Every version the ``managedclustersagentpools`` CRD serves becomes
``crds/containerservice.azure.com/managedclustersagentpool_<version>.json`` (gpuplan writes
:data:`ASO_VERSION`). Without it, the
ASO row of ``SOURCES-aks.md`` and its schema stay as they are.

Both go through the strict conversion of the Prometheus Operator schemas
(:func:`refresh_monitoring.crd_schema`), descriptions removed, ``x-kubernetes-validations``
kept where ``gpuplan verify`` evaluates them. ``python -m gpuplan.upstream.refresh`` lists
the rows of ``SOURCES-aks.md``, with their ``cel/`` files, in ``sources.json``.

Karpenter on Azure's ``karpenter.sh/v1`` NodePool is not pinned again: at :data:`NAP_TAG`
(sigs.k8s.io/karpenter v1.14.0) it differs from the pinned AWS build only in the list of
the provider's well-known label keys in two CEL rules (``karpenter.azure.com/...`` for
``karpenter.k8s.aws/...``); gpuplan's NodePools use no provider-domain key outside the
Azure list (``gpuplan.lower.provision_aks`` keeps to it), so one schema checks both.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpuplan.upstream.crdpin import git, pin_crds
from gpuplan.upstream.refresh_monitoring import crd_schema, write_table

NAP_REPOSITORY = "Azure/karpenter-provider-azure"
NAP_TAG = "v1.14.2"
NAP_GROUP = "karpenter.azure.com"
NAP_VERSION = "v1beta1"  # the version gpuplan writes; every served version is pinned
NAP_CRDS = {"AKSNodeClass": "pkg/apis/crds/karpenter.azure.com_aksnodeclasses.yaml"}

ASO_TAG = "v2.17.0"
ASO_REPOSITORY = "kubernetes-sigs/cluster-api-provider-azure"
# "Bump Azure Service Operator from v2.16.1 to v2.17.0": its config/aso/crds.yaml is ASO
# v2.17.0's release file (every CRD labelled app.kubernetes.io/version: v2.17.0).
ASO_COMMIT = "c13545a468b9fc02883ebf92cf8aeeaba15b3fe9"
ASO_PATH = "config/aso/crds.yaml"
ASO_GROUP = "containerservice.azure.com"
ASO_VERSION = "v1api20250801"
ASO_CRD = "managedclustersagentpools.containerservice.azure.com"

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "SOURCES-aks.md"
INTRO = [
    "# AKS schemas: Azure Service Operator agent pools, AKS Node Auto Provisioning",
    "",
    "Strict JSON Schemas derived from each CRD's `openAPIV3Schema` by",
    "`python -m gpuplan.upstream.refresh_aks <karpenter-provider-azure git dir> [cluster-api-provider-azure git dir]`",
    "(the conversion of `refresh_monitoring`, descriptions removed, CEL rules kept);",
    "`gpuplan verify` checks the generated objects against them.",
    "",
    "Azure Service Operator v2 publishes its CRDs only as release files; the ManagedClustersAgentPool",
    f"schema is read from ASO {ASO_TAG}'s release file as Cluster API Provider Azure vendored it",
    f"(`{ASO_PATH}` at the commit shown).",
]


def nap_rows(git_dir: Path) -> list[dict[str, str]]:
    return pin_crds(git_dir, NAP_REPOSITORY, NAP_TAG,
                    [(NAP_GROUP, kind, path) for kind, path in NAP_CRDS.items()])


def aso_rows(capz_git_dir: Path | None) -> list[dict[str, str]]:
    """The agent-pool row: from ASO's CRD file vendored in CAPZ when given, else the current one."""
    from gpuplan.upstream.crdread import served_versions
    from gpuplan.upstream.refresh import _MON_ROW, dump_compact, strip_descriptions

    if capz_git_dir is None:
        if not SOURCES.is_file():
            return []
        rows = []
        for line in SOURCES.read_text(encoding="utf-8").splitlines():
            m = _MON_ROW.match(line.strip())
            if m and m["api"].startswith(f"{ASO_GROUP}/"):
                rows.append({"file": m["file"], "apiVersion": m["api"], "kind": m["kind"],
                             "repository": m["repo"], "tag": m["tag"], "commit": m["commit"], "path": m["path"]})
        return rows
    import yaml

    text = subprocess.run([*git(capz_git_dir), "show", f"{ASO_COMMIT}:{ASO_PATH}"],
                          check=True, capture_output=True, text=True).stdout
    docs = [d for d in yaml.safe_load_all(text) if d]
    [crd] = [d for d in docs if d.get("kind") == "CustomResourceDefinition" and d["metadata"]["name"] == ASO_CRD]
    out_dir = HERE / "crds" / ASO_GROUP
    out_dir.mkdir(parents=True, exist_ok=True)
    kind = crd["spec"]["names"]["kind"]
    rows = []
    # every version the CRD serves, as for the other pinned CRDs: ASO serves each Azure API
    # version it generated (v1api2023..., v1api20250801) and its `...storage` hub beside it
    for v in served_versions(crd):
        version = v["name"]
        out = out_dir / f"{kind.lower()}_{version}.json"
        out.write_text(dump_compact(strip_descriptions(crd_schema(crd, version))), encoding="utf-8")
        rows.append({"file": f"crds/{ASO_GROUP}/{out.name}", "apiVersion": f"{ASO_GROUP}/{version}", "kind": kind,
                     "repository": ASO_REPOSITORY, "tag": ASO_TAG, "commit": ASO_COMMIT, "path": ASO_PATH,
                     "deprecation": v["deprecationWarning"] or ""})
    return rows


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print(__doc__, file=sys.stderr)
        return 2
    rows = aso_rows(Path(argv[1]) if len(argv) == 2 else None) + nap_rows(Path(argv[0]))
    write_table(SOURCES, INTRO, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
