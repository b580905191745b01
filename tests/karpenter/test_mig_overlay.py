"""GP615 (#27): a Karpenter MIG pool without a NodeOverlay can never launch a node.

Karpenter launches only for pods whose requests some instance type offers, and no
instance type offers ``nvidia.com/mig-*`` before the node exists
(kubernetes-sigs/karpenter@v1.14.1 pkg/controllers/provisioning/scheduling/scheduler.go:725-760)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from gpuplan.compiler import check_fleet, compile_fleet
from gpuplan.importer.pipeline import import_cluster

REPO = Path(__file__).resolve().parents[2]
AWS = (REPO / "examples" / "aws-burst.yaml").read_text(encoding="utf-8")
OVERLAY = "        amiVersion: v20260714\n        nodeOverlay: true\n"


def _compile(tmp_path: Path, text: str):
    spec = tmp_path / "fleet.yaml"
    spec.write_text(text, encoding="utf-8")
    return compile_fleet(spec, out_dir=tmp_path / "generated")


def test_dropping_the_overlay_of_a_mixed_mig_pool_is_an_error(tmp_path):
    assert AWS.count(OVERLAY) == 1
    before = _compile(tmp_path, AWS)
    assert before.files and "pools/mig-a100/nodeoverlay.yaml" in before.files
    after = _compile(tmp_path, AWS.replace(OVERLAY, "        amiVersion: v20260714\n", 1))
    [d] = [d for d in after.diagnostics if d.code == "GP615"]
    assert d.is_error and "nvidia.com/mig-1g.10gb" in d.message
    assert d.path == "spec.pools[1].karpenter" and d.line is not None
    assert not after.files  # no tree that claims the MIG tiers a pool that never gets a node


def test_renamed_time_slicing_without_overlay_is_an_error_even_on_bottlerocket(tmp_path):
    """infer-l40s runs Bottlerocket, whose own plugin time-slices: it renames the units to
    nvidia.com/gpu.shared on the running node, but Karpenter decides before, from the instance
    type's capacity, which lists nvidia.com/gpu only (aws/karpenter-provider-aws v1.14.1
    pkg/providers/instancetype/types.go:332-349; karpenter v1.14.1 scheduling/nodeclaim.go:624-635):
    an error, and no tree. With renameByDefault: false the pods ask for nvidia.com/gpu, which
    Karpenter launches for (counting physical GPUs): a warning."""
    old = "      sharing: {mode: exclusive}\n      topology: {policy: single-numa-node"
    for sharing, error in (("{mode: time-slicing, replicas: 2}", True),
                           ("{mode: time-slicing, replicas: 2, renameByDefault: false}", False)):
        text = AWS.replace(old, f"      sharing: {sharing}\n      topology: {{policy: single-numa-node", 1)
        assert text != AWS
        c = _compile(tmp_path, text)
        [d] = [d for d in c.diagnostics if d.code == "GP615"]
        assert d.is_error is error and d.path == "spec.pools[2].karpenter"
        assert ("nvidia.com/gpu.shared" in d.message) is error
        assert bool(c.files) is not error


def _aws_cluster() -> dict:
    from tests.importer.snapshot import snapshot

    return snapshot("aws-burst.yaml", REPO / "tests" / "golden" / "aws-burst")


def test_import_reads_the_overlay_and_keeps_a_mig_pool_launchable(tmp_path):
    snap = _aws_cluster()
    assert any(o["kind"] == "NodeOverlay" for o in snap["items"])
    r = import_cluster(["-"], stdin=json.dumps(snap).encode())
    pools = {p["name"]: p for p in yaml.safe_load(r.text)["spec"]["pools"]}
    assert pools["mig-a100"]["karpenter"]["nodeOverlay"] is True
    assert "nodeOverlay" not in pools["train-h100"]["karpenter"]
    # an export without NodeOverlays still gives a draft that validates (the MIG pool gets one)
    snap["items"] = [o for o in snap["items"] if o["kind"] != "NodeOverlay"]
    r = import_cluster(["-"], stdin=json.dumps(snap).encode())
    pools = {p["name"]: p for p in yaml.safe_load(r.text)["spec"]["pools"]}
    assert pools["mig-a100"]["karpenter"]["nodeOverlay"] is True
    draft = tmp_path / "draft.yaml"
    draft.write_text(r.text, encoding="utf-8")
    assert "GP615" not in [d.code for d in check_fleet(draft).diagnostics]
