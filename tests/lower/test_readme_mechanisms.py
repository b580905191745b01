"""The generated README describes only the mechanisms its tree uses: NFD NodeFeatureRules only
where the tree has some, Karpenter only where it has NodePools, each node-group back-end only
where its templates are, and sync waves and may-be-missing CRDs only of the kinds it holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplan.lower.common import sync_wave
from tests.outputkit import all_objects, compile_ok

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_FILES = sorted((REPO / "examples").glob("*.yaml"))


@pytest.fixture(scope="module", params=EXAMPLE_FILES, ids=lambda p: p.stem)
def tree(request):
    c = compile_ok(request.param)
    kinds = {d.get("kind") for _, d in all_objects(c)}
    return c.files["README.md"].decode(), kinds, c


def test_nfd_rules_only_where_the_tree_has_them(tree):
    readme, kinds, _ = tree
    has = "NodeFeatureRule" in kinds
    for phrase in ("nfd-master", "node-labels.yaml", "NodeFeatureRules in", "(NodeFeatureRule) arrive"):
        assert (phrase in readme) == has, phrase


def test_karpenter_only_where_the_tree_has_nodepools(tree):
    readme, kinds, _ = tree
    assert ("Karpenter" in readme) == ("NodePool" in kinds)
    assert ("EC2NodeClass" in readme) == ("EC2NodeClass" in kinds)
    assert ("NodeOverlay" in readme) == ("NodeOverlay" in kinds)


def test_node_groups_only_where_their_templates_are(tree):
    readme, kinds, c = tree
    files = set(c.files)
    for backend, phrase in (("gke", "GKE node pools ("), ("aks", "AKS agent pools ("),
                            ("capi", "Cluster API MachineDeployments (")):
        here = any(p.startswith(f"provisioning/{backend}/") for p in files)
        assert (phrase in readme) == here, backend


def test_sync_waves_name_the_tree_kinds(tree):
    """The waves line names kinds of this tree only, each at the wave its objects carry."""
    readme, kinds, c = tree
    if c.resolved.fleet.spec.cluster.gitops.engine != "argocd":
        return
    [line] = [ln for ln in readme.splitlines() if ln.startswith("3. Sync waves")]
    listed = line.split("by kind: ", 1)[1].split(". What", 1)[0]
    named = {}
    for part in listed.split("; "):
        wave, names = part.split(" ", 1)
        for kind in names.split(", "):
            named[kind] = int(wave.strip("`"))
    assert named, line
    assert set(named) <= kinds, set(named) - kinds
    assert all(sync_wave(k) == w for k, w in named.items()), named
    assert ("NodeFeatureRule" in named) == ("NodeFeatureRule" in kinds)
