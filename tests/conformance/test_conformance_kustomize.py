"""``kubectl kustomize`` builds the written tree."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from gpuplan.lower.driver import lower_all

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed: `kubectl kustomize` cannot run")


def write(files: dict[str, bytes], root: Path) -> Path:
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return root


def kustomize(path: Path) -> list[dict]:
    r = subprocess.run([KUBECTL, "kustomize", str(path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return [d for d in yaml.safe_load_all(r.stdout) if d]


@pytest.mark.parametrize("example", ["argocd", "flux"])
def test_kustomize_builds_the_tree(examples, example, tmp_path):
    c = examples[example]
    root = write(c.files, tmp_path / "generated")
    built = kustomize(root)
    expected = sum(len(a.documents) for a in lower_all(c.resolved) if a.kustomize and a.documents is not None)
    assert len(built) == expected
    ids = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in built}
    assert len(ids) == len(built)
    if example == "flux":
        sub = kustomize(root / "delivery" / "gpu-operator")
        assert sorted(o["kind"] for o in sub) == ["HelmRelease", "HelmRepository", "Namespace"]
