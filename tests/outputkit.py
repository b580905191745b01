"""Helpers for the lowering tests: compile specs in memory, read documents back."""

from __future__ import annotations

from pathlib import Path

import yaml

from gpuplan.compiler import Compiled, compile_fleet
from gpuplan.diagnostics import has_errors

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = {
    "argocd": REPO / "examples" / "fleet.yaml",
    "flux": REPO / "examples" / "flux-onprem.yaml",
}

HEAD = """\
apiVersion: gpuplan.dev/v1alpha1
kind: Fleet
metadata: {{name: {name}}}
spec:
  cluster:
    kubernetesVersion: "1.33"
    gitops: {{engine: {engine}, repoURL: "https://git.example.com/fleet.git"}}
"""


def fleet(body: str, *, name: str = "t", engine: str = "argocd") -> str:
    """A spec: the header plus ``body`` (the rest of ``spec:``, indented 2)."""
    return HEAD.format(name=name, engine=engine) + body


def compile_ok(path: Path) -> Compiled:
    c = compile_fleet(path, out_dir=path.parent / "generated")
    errors = [d for d in c.diagnostics if d.is_error]
    assert not has_errors(c.diagnostics), f"{path} does not compile: {errors}"
    assert c.files, f"{path} produced no files"
    return c


def docs(data: bytes) -> list:
    return [d for d in yaml.safe_load_all(data) if d is not None]


def one(c: Compiled, path: str) -> dict:
    found = docs(c.files[path])
    assert len(found) == 1, f"{path}: expected one document, got {len(found)}"
    return found[0]


def all_objects(c: Compiled) -> list[tuple[str, dict]]:
    """(file, object) for every Kubernetes object of the tree (not values or kustomizations)."""
    out = []
    for path in sorted(c.files):
        if not path.endswith(".yaml") or path.endswith("kustomization.yaml") or path.endswith("values.yaml"):
            continue
        for d in docs(c.files[path]):
            out.append((path, d))
    return out
