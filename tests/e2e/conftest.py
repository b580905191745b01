"""Fixtures of the control-plane tests: the binaries (built once into the cache, reused), the
pinned CRDs, and a control plane per example (tests/cluster/controlplane.py)."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import pytest

CLUSTER = Path(__file__).resolve().parents[1] / "cluster"
sys.path.insert(0, str(CLUSTER))

from controlplane import ControlPlane, ControlPlaneError, build, built  # noqa: E402


@pytest.fixture(scope="session")
def control_plane_bin() -> Path:
    if shutil.which("go") is None:
        pytest.skip("Go is not installed: the control-plane tests build kube-apiserver and friends from "
                    "tests/cluster/go.mod (README, Quickstart)")
    d = built()
    if d is None:
        d = build(log=lambda line: print(f"control-plane build: {line}", file=sys.stderr, flush=True))
    return d


@pytest.fixture(scope="session")
def pinned_crds() -> list[dict]:
    from crds import crd_documents

    return crd_documents()


class Clusters:
    """Starts control planes and stops every one it started."""

    def __init__(self, bin_dir: Path, crds: list[dict]):
        self.bin_dir, self.crds = bin_dir, crds
        self.running: list[ControlPlane] = []
        self.tmp = Path(tempfile.mkdtemp(prefix="gpuplan-cp-"))

    def start(self, name: str, admission_plugins: tuple[str, ...] = (),
              admission_config: dict | None = None) -> ControlPlane:
        cp = ControlPlane(self.tmp / name, self.bin_dir)
        self.running.append(cp)
        try:
            cp.start(admission_plugins, self.crds, admission_config=admission_config)
        except ControlPlaneError:
            cp.stop()
            raise
        return cp

    def stop(self, cp: ControlPlane) -> None:
        cp.stop()
        if cp in self.running:
            self.running.remove(cp)
        shutil.rmtree(cp.dir, ignore_errors=True)

    def close(self) -> None:
        for cp in list(self.running):
            self.stop(cp)
        shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def clusters(control_plane_bin, pinned_crds):
    c = Clusters(control_plane_bin, pinned_crds)
    yield c
    c.close()
