"""Refresh the pinned Cluster API schemas: ``MachineDeployment`` and ``KubeadmConfigTemplate``.

    python -m gpuplan.upstream.refresh_capi CLUSTER_API_GIT_DIR

Reads the CRDs of kubernetes-sigs/cluster-api at :data:`TAG` (a clone, or the Go module
cache's ``sigs.k8s.io/cluster-api@v1.14.0``) and writes, for every version they serve (gpuplan
emits :data:`VERSION`; ``gpuplan verify`` checks a v1beta1 object against v1beta1), the strict schema (the conversion of
:func:`refresh_monitoring.crd_schema`, descriptions removed, CEL rules kept where
``gpuplan verify`` evaluates them) to ``crds/<group>/<kind>_<version>.json``. The rows go to
``SOURCES-capi.md``; ``python -m gpuplan.upstream.refresh`` lists them, with their ``cel/``
files, in ``sources.json``.

Why v1beta2: at v1.14.0 both CRDs serve v1beta1 and v1beta2, and v1beta2 is the storage
version while v1beta1 is marked ``deprecated: true``
(``core/config/crd/bases/cluster.x-k8s.io_machinedeployments.yaml`` lines 60-61, 858-859,
912, 1723-1724; ``bootstrap/kubeadm/config/crd/bases/bootstrap.cluster.x-k8s.io_kubeadmconfigtemplates.yaml``
lines 24-25, 2249-2250, 2265, 4739-4740). The Cluster Autoscaler's clusterapi provider
picks the newest served version of the group unless ``CAPI_VERSION`` says otherwise
(kubernetes/autoscaler@cluster-autoscaler-1.36.1
``cluster-autoscaler/cloudprovider/clusterapi/README.md`` "Specifying a Custom Resource
Version"), and its own README shows the scale-from-zero annotations on a v1beta2
MachineDeployment.

The infrastructure machine template (AWSMachineTemplate, VSphereMachineTemplate,
Metal3MachineTemplate, ...) differs per provider and is referenced by name, never emitted:
no schema for it is pinned.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import sys
from pathlib import Path

from gpuplan.upstream.crdpin import pin_crds
from gpuplan.upstream.refresh_monitoring import write_table

REPOSITORY = "kubernetes-sigs/cluster-api"
TAG = "v1.14.0"
VERSION = "v1beta2"
# (group, kind, path of the CRD at TAG)
CRDS = (
    ("cluster.x-k8s.io", "MachineDeployment", "core/config/crd/bases/cluster.x-k8s.io_machinedeployments.yaml"),
    ("bootstrap.cluster.x-k8s.io", "KubeadmConfigTemplate",
     "bootstrap/kubeadm/config/crd/bases/bootstrap.cluster.x-k8s.io_kubeadmconfigtemplates.yaml"),
)
SOURCES = Path(__file__).resolve().parent / "SOURCES-capi.md"


def refresh(git_dir: Path) -> list[dict[str, str]]:
    return pin_crds(git_dir, REPOSITORY, TAG, CRDS)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    write_table(SOURCES, [
        "# Cluster API CRD schemas",
        "",
        "Strict JSON Schemas derived from each CRD's `openAPIV3Schema` by",
        "`python -m gpuplan.upstream.refresh_capi <cluster-api git dir>` (the conversion of",
        "`refresh_monitoring`, descriptions removed, CEL rules kept); `gpuplan verify` checks the",
        "generated MachineDeployments and KubeadmConfigTemplates against them. v1beta2 is the",
        "storage version at this tag (v1beta1 is served but deprecated, and pinned too). The infrastructure",
        "machine template is provider-specific and referenced by name, not emitted.",
    ], refresh(Path(argv[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
