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


def kustomize(path: Path, *, unrestricted: bool = False) -> list[dict]:
    """``unrestricted``: files outside the directory may be listed, as Flux builds
    (fluxcd/pkg kustomize/v1.35.4 kustomize_generator.go:698, LoadRestrictionsNone)."""
    extra = ["--load-restrictor", "LoadRestrictionsNone"] if unrestricted else []
    r = subprocess.run([KUBECTL, "kustomize", *extra, str(path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return [d for d in yaml.safe_load_all(r.stdout) if d]


@pytest.mark.parametrize("example", ["argocd", "flux"])
def test_kustomize_builds_the_tree(examples, example, tmp_path):
    c = examples[example]
    root = write(c.files, tmp_path / "generated")
    built = kustomize(root)
    artifacts = [a for a in lower_all(c.resolved) if a.kustomize and a.documents is not None]
    # under Flux the tenancy files are the tenancy Kustomization's (delivery/tenancy/), not the root's
    tenancy: set[str] = set()
    if example == "flux":
        listed = yaml.safe_load((root / "delivery" / "tenancy" / "kustomization.yaml").read_text())["resources"]
        tenancy = {str((Path("delivery/tenancy") / r)).replace("delivery/tenancy/../../", "") for r in listed}
        assert tenancy and all((root / t).is_file() for t in tenancy)
    expected = sum(len(a.documents) for a in artifacts if a.path not in tenancy)
    assert len(built) == expected
    ids = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in built}
    assert len(ids) == len(built)
    if example == "flux":
        sub = kustomize(root / "delivery" / "gpu-operator")
        assert sorted(o["kind"] for o in sub) == ["HelmRelease", "HelmRepository", "Kustomization", "Namespace"]
        # every tenancy file is built by exactly the tenancy Kustomization: with the root, every object once
        in_tenancy = kustomize(root / "delivery" / "tenancy", unrestricted=True)
        both = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in in_tenancy}
        assert not both & ids and len(both) == len(in_tenancy)
        assert len(in_tenancy) == sum(len(a.documents) for a in artifacts if a.path in tenancy) + \
            sum(1 for t in tenancy if t == "delivery/priorityclasses.yaml" and t not in {a.path for a in artifacts})
