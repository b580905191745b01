"""Refresh the pinned GPU Operator ``NVIDIADriver`` CRD schema and its CEL rules.

    python -m gpuplan.upstream.refresh_nvidia GPU_OPERATOR_GIT_DIR

Reads ``deployments/gpu-operator/crds/nvidia.com_nvidiadrivers.yaml`` of
NVIDIA/gpu-operator at :data:`TAG` (the chart version gpuplan writes values for)
and writes ``crds/nvidia.com/nvidiadriver_v1alpha1.json``: the strict schema (the same
conversion as the Prometheus Operator schemas, :func:`refresh_monitoring.crd_schema`),
descriptions removed, its ``x-kubernetes-validations`` kept where ``gpuplan verify``
evaluates them (``driverType`` and ``usePrecompiled`` immutable, no ``nodeSelector``
on the default CR). The rows go to ``SOURCES-nvidia.md``; ``python -m
gpuplan.upstream.refresh`` lists them, with the ``cel/`` file, in ``sources.json``.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpuplan.upstream.refresh_monitoring import crd_schema, write_table

REPOSITORY = "NVIDIA/gpu-operator"
TAG = "v26.7.0"
GROUP = "nvidia.com"
VERSION = "v1alpha1"
CRDS = {"NVIDIADriver": "deployments/gpu-operator/crds/nvidia.com_nvidiadrivers.yaml"}
HERE = Path(__file__).resolve().parent
OUT = HERE / "crds" / GROUP
SOURCES = HERE / "SOURCES-nvidia.md"


def refresh(git_dir: Path) -> list[dict[str, str]]:
    import yaml

    from gpuplan.upstream.refresh import dump_compact, strip_descriptions

    git = ["git", f"--git-dir={git_dir if (git_dir / 'HEAD').is_file() else git_dir / '.git'}"]
    commit = subprocess.run([*git, "rev-list", "-n1", TAG], check=True, capture_output=True, text=True).stdout.strip()
    rows = []
    OUT.mkdir(parents=True, exist_ok=True)
    for kind, path in CRDS.items():
        text = subprocess.run([*git, "show", f"{TAG}:{path}"], check=True, capture_output=True, text=True).stdout
        [crd] = [d for d in yaml.safe_load_all(text) if d]
        out = OUT / f"{kind.lower()}_{VERSION}.json"
        out.write_text(dump_compact(strip_descriptions(crd_schema(crd, VERSION))), encoding="utf-8")
        rows.append({"file": f"crds/{GROUP}/{out.name}", "apiVersion": f"{GROUP}/{VERSION}", "kind": kind,
                     "repository": REPOSITORY, "tag": TAG, "commit": commit, "path": path})
    return rows


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
