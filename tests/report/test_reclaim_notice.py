"""What the reports say a spot node's loss looks like follows who runs the pool: EC2 gives two
minutes' notice (AWS "Spot Instance interruption notices") and Karpenter drains on it; Azure Spot
VMs and Compute Engine Spot VMs give 30 seconds (Azure Scheduled Events "Preempt"; Compute
Engine "Preemption process"). The capacity report's ceiling note names the mechanism that holds:
NodePool `limits.nodes` for Karpenter, the node group's maximum size otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplan.compiler import compile_fleet

REPO = Path(__file__).parents[2]


@pytest.mark.parametrize("example, who, notice", [
    ("aws-spot", "EC2", "two minutes"),
    ("gke", "Compute Engine", "30 seconds"),
    ("aks", "Azure", "30 seconds"),
    ("aks-nap", "Azure", "30 seconds"),
])
def test_spot_notice_follows_the_platform(tmp_path, example, who, notice):
    files = compile_fleet(REPO / "examples" / f"{example}.yaml", out_dir=tmp_path).files
    capacity = files["CAPACITY.md"].decode()
    assert f"Grants on pools that allow spot: {who} can reclaim these nodes with {notice}' notice" in capacity
    pages = [t.decode() for p, t in files.items() if p.startswith("tenants/") and p.endswith("README.md")]
    lines = [ln for page in pages for ln in page.splitlines() if ln.startswith("- Interruption: May run on spot")]
    assert lines, "a preemptible tier on a spot pool gets the interruption line"
    for ln in lines:
        assert f"{who} reclaims a spot node {notice} after its notice" in ln
        assert ("Karpenter drains the node" in ln) == (example == "aws-spot")


@pytest.mark.parametrize("example, karpenter_only", [("fleet", True), ("gke", False), ("onprem-capi", False)])
def test_ceiling_note_names_the_mechanism(tmp_path, example, karpenter_only):
    files = compile_fleet(REPO / "examples" / f"{example}.yaml", out_dir=tmp_path).files
    capacity = files["CAPACITY.md"].decode()
    if karpenter_only:
        assert "Karpenter pools are capped in whole nodes (NodePool `limits.nodes`)" in capacity
        assert "(Karpenter pools at their maxGPUs)" in capacity
    else:
        assert "Karpenter pools are capped" not in capacity and "Karpenter pools at their" not in capacity
        assert "(autoscaled pools at their maxGPUs)" in capacity
