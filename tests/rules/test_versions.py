"""GP630-GP631: features gated on kubernetesVersion (gpuplan.k8sversions)."""

from __future__ import annotations

import pytest

from gpuplan.k8sversions import FEATURES, maturity, needs_gate
from tests.rules.helpers import BASE, edit, only, position


def test_table_has_sources_and_ordered_milestones():
    for name, f in FEATURES.items():
        assert f.source and f.title, name
        stages = [v for v in (f.alpha, f.beta, f.ga) if v]
        assert stages == sorted(stages), name


@pytest.mark.parametrize("feature,version,want", [
    ("kubelet-config-dir", "1.27", "missing"), ("kubelet-config-dir", "1.28", "alpha"),
    ("kubelet-config-dir", "1.31", "beta"), ("kubelet-config-dir", "1.35", "ga"),
    ("prefer-closest-numa-nodes", "1.25", "missing"), ("prefer-closest-numa-nodes", "1.27", "alpha"),
    ("prefer-closest-numa-nodes", "1.28", "beta"), ("prefer-closest-numa-nodes", "1.32", "ga"),
    ("validating-admission-policy", "1.30", "ga"), ("dynamic-resource-allocation", "1.33", "beta"),
])
def test_maturity(feature, version, want):
    assert maturity(feature, version) == want


def test_gates():
    assert needs_gate("prefer-closest-numa-nodes", "1.27")
    assert not needs_gate("prefer-closest-numa-nodes", "1.28")
    assert needs_gate("dynamic-resource-allocation", "1.33")  # beta, off by default


def _topology(version: str, topology: str) -> str:
    text = edit(BASE, 'kubernetesVersion: "1.33"', f'kubernetesVersion: "{version}"')
    return edit(text, "      sharing: {mode: exclusive}\n",
                f"      sharing: {{mode: exclusive}}\n      topology: {topology}\n")


@pytest.mark.parametrize("version", ["1.20", "1.25", "1.27"])
def test_dropin_before_128_is_an_error(run, version):
    text = _topology(version, '{policy: restricted, reservedSystemCPUs: "0,1"}')
    d = only(run(text), "GP630")
    assert (d.line, d.col) == position(text, "topology: {policy")
    assert "1.28" in d.message and "1.31" in d.hint


@pytest.mark.parametrize("version", ["1.28", "1.30"])
def test_dropin_on_alpha_needs_the_environment_switch(run, version):
    text = _topology(version, '{policy: restricted, reservedSystemCPUs: "0,1"}')
    d = only(run(text), "GP631")
    assert "KUBELET_CONFIG_DROPIN_DIR_ALPHA" in d.hint and d.severity.value == "warning"


@pytest.mark.parametrize("version", ["1.31", "1.33", "1.35"])
def test_dropin_from_131(run, version):
    codes = run.codes(_topology(version, '{policy: restricted, reservedSystemCPUs: "0,1"}'))
    assert "GP630" not in codes and "GP631" not in codes


@pytest.mark.parametrize("version,bad", [("1.27", True), ("1.28", False), ("1.32", False)])
def test_prefer_closest_numa_nodes_on_karpenter(run, version, bad):
    text = edit(BASE, 'kubernetesVersion: "1.33"', f'kubernetesVersion: "{version}"')
    text = text.replace("    - name: train\n      gpu: A100-SXM4-80GB\n      gpusPerNode: 4\n      nodes: [n1, n2]\n",
                        "    - name: train\n      gpu: A100-SXM4-80GB\n      topology: {policy: restricted, "
                        "preferClosestNUMANodes: true}\n"
                        "      karpenter: {instanceTypes: [p4de.24xlarge], maxGPUs: 16, amiVersion: v20260714}\n")
    text = edit(text, "      repoURL: https://git.example.com/fleet.git\n",
                "      repoURL: https://git.example.com/fleet.git\n    aws: {clusterName: c, nodeRole: r}\n")
    diags = run(text)
    got = [d for d in diags if d.code == "GP630"]
    if not bad:
        assert got == []
        return
    d = only(diags, "GP630")
    assert (d.line, d.col) == position(text, "preferClosestNUMANodes: true", len("preferClosestNUMANodes: "))
    assert "TopologyManagerPolicyAlphaOptions" in d.message and d.hint


def test_memory_manager_before_122(run):
    text = _topology("1.21", '{policy: single-numa-node, memoryManagerPolicy: Static, reservedSystemCPUs: "0"}')
    found = {d.code for d in run(text)}
    assert "GP630" in found
