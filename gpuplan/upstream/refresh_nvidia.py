"""Refresh the pinned GPU Operator ``NVIDIADriver`` CRD schema and its CEL rules.

    python -m gpuplan.upstream.refresh_nvidia GPU_OPERATOR_GIT_DIR

Reads ``deployments/gpu-operator/crds/nvidia.com_nvidiadrivers.yaml`` of
NVIDIA/gpu-operator at :data:`TAG` (the chart version gpuplan writes values for)
and writes, for every version it serves (``v1alpha1``), ``crds/nvidia.com/nvidiadriver_<version>.json``: the strict schema (the same
conversion as the Prometheus Operator schemas, :func:`refresh_monitoring.crd_schema`),
descriptions removed, its ``x-kubernetes-validations`` kept where ``gpuplan verify``
evaluates them (``driverType`` and ``usePrecompiled`` immutable, no ``nodeSelector``
on the default CR). The rows go to ``SOURCES-nvidia.md``; ``python -m
gpuplan.upstream.refresh`` lists them, with the ``cel/`` file, in ``sources.json``.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import sys
from pathlib import Path

from gpuplan.upstream.crdpin import pin_crds
from gpuplan.upstream.refresh_monitoring import write_table

REPOSITORY = "NVIDIA/gpu-operator"
TAG = "v26.7.0"
GROUP = "nvidia.com"
VERSION = "v1alpha1"  # the version gpuplan writes; every served version is pinned
CRDS = {"NVIDIADriver": "deployments/gpu-operator/crds/nvidia.com_nvidiadrivers.yaml"}
SOURCES = Path(__file__).resolve().parent / "SOURCES-nvidia.md"


def refresh(git_dir: Path) -> list[dict[str, str]]:
    return pin_crds(git_dir, REPOSITORY, TAG, [(GROUP, kind, path) for kind, path in CRDS.items()])


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    write_table(SOURCES, [
        "# GPU Operator CRD schemas beside ClusterPolicy",
        "",
        "Strict JSON Schemas derived from each CRD's `openAPIV3Schema` by",
        "`python -m gpuplan.upstream.refresh_nvidia <gpu-operator git dir>` (the conversion of",
        "`refresh_monitoring`, descriptions removed, CEL rules kept); `gpuplan verify` checks the",
        "generated objects against them.",
    ], refresh(Path(argv[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
