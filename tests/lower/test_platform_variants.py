"""The node-group examples and their routine changes (sharing replicas, MIG layout, driver
version, ceiling): every variant's tree still matches the node-facts tables, and `plan --base`
says what the change does to the nodes of each pool it touches."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.lower.test_node_facts import assert_node_facts_hold
from tests.outputkit import REPO

GKE_OPERATOR = [("        maxGPUs: 8\n        minNodes: 2\n",
                 "        maxGPUs: 8\n        minNodes: 8\n        driver: gpu-operator\n        imageType: UBUNTU_CONTAINERD\n")]
CAPI_DRIVER = [("      driver: managed\n", "      driver: managed\n      driverVersion: \"595.91.07\"\n")]

# name: (example, edits of the base, edits of the variant, {pool: what plan --base says of its nodes})
VARIANTS = {
    "aks-replicas": ("aks", [], [("replicas: 4, renameByDefault: false", "replicas: 8, renameByDefault: false")],
                     {"nb-t4": "every node reconfigured"}),
    "aks-layout": ("aks", [], [("layout: {3g.40gb: 2}", "layout: {2g.20gb: 3}")],
                   {"infer-a100": "node pool recreated by hand"}),
    "nap-ceiling": ("aks-nap", [], [("maxGPUs: 16", "maxGPUs: 24")], {}),
    "gke-replicas": ("gke", [], [("replicas: 4}", "replicas: 8}")], {"notebooks-l4": "node pool recreated by hand"}),
    "gke-operator-layout": ("gke", GKE_OPERATOR, [("layout: {3g.40gb: 2}", "layout: {3g.40gb: 1, 2g.20gb: 1, 1g.10gb: 1}")],
                            {"infer-a100": "node pool recreated by hand"}),
    "gke-operator-driver": ("gke", GKE_OPERATOR + [("    gcp:\n", "    gpuOperator: {driver: managed, driverVersion: \"595.91.07\"}\n    gcp:\n")],
                            [("driverVersion: \"595.91.07\"", "driverVersion: \"580.95.05\"")],
                            {"infer-a100": "driver upgraded 1 node at a time by the upgrade controller"}),
    "capi-replicas": ("onprem-capi", [], [("replicas: 4, renameByDefault: false", "replicas: 8, renameByDefault: false")],
                      {"notebooks-l40s": "every node replaced"}),
    "capi-driver": ("onprem-capi", CAPI_DRIVER, [("driverVersion: \"595.91.07\"", "driverVersion: \"580.95.05\"")],
                    {"infer-a100": "driver upgraded 1 node at a time by the upgrade controller",
                     "notebooks-l40s": "driver upgraded 1 node at a time by the upgrade controller",
                     "train-h100": "driver held (roll its nodes by hand)"}),
}


def _edit(text: str, edits) -> str:
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_a_routine_change_keeps_the_node_facts_and_says_what_it_does_to_each_node(tmp_path, name):
    example, base_edits, edits, effects = VARIANTS[name]
    base_text = _edit((REPO / "examples" / f"{example}.yaml").read_text(), base_edits)
    base, new = tmp_path / "base.yaml", tmp_path / "fleet.yaml"
    base.write_text(base_text)
    new.write_text(_edit(base_text, edits))
    assert_node_facts_hold(base)
    assert_node_facts_hold(new)
    r = subprocess.run([sys.executable, "-m", "gpuplan", "plan", str(new), "--base", str(base)],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    head = r.stdout.split("\nCapacity")[0]
    lines = {ln.split(":", 1)[0].strip().removeprefix("pool "): ln.split(":", 1)[1]
             for ln in head.splitlines() if ln.startswith("  pool ")}
    assert set(lines) == set(effects), head
    for pool, effect in effects.items():
        assert effect in lines[pool], (pool, head)
    if not effects:
        assert head.startswith("No disruptive changes"), head
