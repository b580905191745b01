"""Refresh the pinned Config Connector ``ContainerNodePool`` schema (GKE node pools).

    python -m gpuplan.upstream.refresh_gke K8S_CONFIG_CONNECTOR_GIT_DIR

The argument is a clone of GoogleCloudPlatform/k8s-config-connector (bare or not): the
CRD ``config/crds/resources/apiextensions.k8s.io_v1_customresourcedefinition_containernodepools.
container.cnrm.cloud.google.com.yaml`` is read at :data:`TAG`, and every version it serves
(``v1beta1``) becomes ``crds/container.cnrm.cloud.google.com/containernodepool_<version>.json`` through the
strict conversion of the Prometheus Operator schemas (:func:`refresh_monitoring.crd_schema`),
descriptions removed. The CRD has no ``x-kubernetes-validations`` at this tag (its ``cel/``
file lists none); the ``oneOf`` of ``clusterRef`` (``external`` or ``name``) is JSON Schema
and checked as such. ``python -m gpuplan.upstream.refresh`` lists the row of
``SOURCES-gke.md`` in ``sources.json``.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import sys
from pathlib import Path

from gpuplan.upstream.crdpin import pin_crds
from gpuplan.upstream.refresh_monitoring import write_table

REPOSITORY = "GoogleCloudPlatform/k8s-config-connector"
TAG = "v1.155.1"
GROUP = "container.cnrm.cloud.google.com"
VERSION = "v1beta1"  # the version gpuplan writes; every served version is pinned
CRDS = {"ContainerNodePool": "config/crds/resources/"
        "apiextensions.k8s.io_v1_customresourcedefinition_containernodepools.container.cnrm.cloud.google.com.yaml"}
HERE = Path(__file__).resolve().parent
SOURCES = HERE / "SOURCES-gke.md"
INTRO = [
    "# GKE schemas: Config Connector ContainerNodePool",
    "",
    "Strict JSON Schema derived from the CRD's `openAPIV3Schema` by",
    "`python -m gpuplan.upstream.refresh_gke <k8s-config-connector git dir>`",
    "(the conversion of `refresh_monitoring`, descriptions removed); `gpuplan verify` checks the",
    "generated `provisioning/gke/` objects against it. Most `nodeConfig` fields are immutable in",
    "this CRD (their descriptions start with `Immutable.`): docs/gke.md says what that means for",
    "a changed pool.",
]


def refresh(git_dir: Path) -> list[dict[str, str]]:
    return pin_crds(git_dir, REPOSITORY, TAG, [(GROUP, kind, path) for kind, path in CRDS.items()])


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    write_table(SOURCES, INTRO, refresh(Path(argv[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
