"""`gpuplan verify-cluster` on recorded `kubectl get nodes,resourcequotas -A -o json` output.

The fixtures are Kubernetes v1 List documents of Node and ResourceQuota objects
in the API's own shape (metadata / spec.taints / status.capacity and
allocatable as quantity strings; ResourceQuota spec.hard, scopeSelector and
status): ``fleet-live.json`` is the example fleet as planned, with one
Karpenter node; ``fleet-live-drift.json`` the same cluster after things went
wrong; ``fleet-nodes.json`` a NodeList (``kubectl get nodes -o json``)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from gpuplan.compiler import check_fleet, planned_quotas
from gpuplan.drift import Live, parse_live, verify
from tests.conftest import run_gpuplan
from tests.outputkit import EXAMPLES

FIX = Path(__file__).parent / "fixtures"
SPEC = str(EXAMPLES["argocd"].relative_to(EXAMPLES["argocd"].parents[1]))


@pytest.fixture(scope="module")
def rf():
    c = check_fleet(EXAMPLES["argocd"])
    assert c.resolved is not None
    return c.resolved


def live_from(name: str) -> dict:
    return json.loads((FIX / name).read_text(encoding="utf-8"))


def findings(rf, doc: dict) -> list[tuple[str, str, str]]:
    live = parse_live([("live.json", json.dumps(doc))])
    return sorted((d.code, d.severity.value, d.message) for d in verify(rf, live, planned_quotas(rf)).diagnostics)


@pytest.mark.slow
def test_cluster_as_planned_exits_0():
    r = run_gpuplan("verify-cluster", SPEC, "--live", str(FIX / "fleet-live.json"))
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert "pool train-a100: 4/4 nodes as planned (4 planned)" in r.stdout
    assert "pool burst-h100: 1/1 nodes as planned (autoscaled)" in r.stdout


def test_drift_is_reported_per_node_at_the_planning_line():
    r = run_gpuplan("verify-cluster", SPEC, "--live", str(FIX / "fleet-live-drift.json"), "--format", "json")
    assert r.returncode == 6, r.stderr
    diags = json.loads(r.stdout)["diagnostics"]
    got = sorted((d["code"], d["severity"], d["path"]) for d in diags)
    assert got == sorted([
        ("GP871", "error", "spec.pools[0].nodes[1]"),          # gpu-a100-02 gone
        ("GP873", "error", "spec.pools[0]"),                   # gpu-a100-03 lost its taint
        ("GP878", "warning", "spec.pools[0].nodes"),           # gpu-a100-09 claims train-a100
        ("GP874", "error", "spec.pools[1]"),                   # gpu-a100-05 capacity 3g.40gb: 3
        ("GP874", "error", "spec.pools[1]"),                   # ... and allocatable
        ("GP875", "error", "spec.pools[1].sharing"),           # gpu-a100-05 failed
        ("GP875", "warning", "spec.pools[1].sharing"),         # gpu-a100-06 pending
        ("GP872", "error", "spec.pools[2]"),                   # gpu-a100-07 device-plugin.config
        ("GP879", "warning", "spec.pools[2]"),                 # gpu-a100-07 advertises nvidia.com/gpu
        ("GP877", "error", "spec.tenants[0].quotas.vision-train"),
        ("GP876", "error", "spec.tenants[1].quotas.nlp-notebooks"),
    ])
    by_code = {d["code"]: d for d in diags}
    assert by_code["GP871"]["message"] == "node gpu-a100-02 of pool train-a100 is not in the cluster"
    assert by_code["GP877"]["message"] == ("ResourceQuota vision-train/gpuplan-gpus hard differs: "
                                           "requests.nvidia.com/gpu: 32 (planned 24)")
    assert all(d["file"] == SPEC and d["line"] for d in diags)


@pytest.mark.slow
def test_text_output_points_at_fleet_yaml_and_summarises_pools():
    r = run_gpuplan("verify-cluster", SPEC, "--live", str(FIX / "fleet-live-drift.json"))
    assert r.returncode == 6
    assert f"{SPEC}:37:28: error[GP871]: node gpu-a100-02 of pool train-a100 is not in the cluster" in r.stderr
    assert "Traceback" not in r.stderr
    assert "pool train-a100: 2/3 nodes as planned (4 planned)" in r.stdout


def test_nodes_only_from_stdin_leaves_quotas_unchecked():
    r = run_gpuplan("verify-cluster", SPEC, "--live", "-", input=(FIX / "fleet-nodes.json").read_text())
    assert r.returncode == 0, r.stderr
    assert "ResourceQuotas: none in the input, not checked" in r.stdout


@pytest.mark.slow
def test_warnings_fail_only_with_strict(rf):
    doc = live_from("fleet-live.json")
    for item in doc["items"]:
        if item["metadata"]["name"] == "gpu-a100-06":
            del item["metadata"]["labels"]["nvidia.com/mig.config.state"]
    assert findings(rf, doc) == [("GP875", "warning", "node gpu-a100-06 (pool infer-a100) "
                                  "nvidia.com/mig.config.state=(absent); planned layout gpuplan-infer-a100-08b64895 "
                                  "is not applied")]
    text = json.dumps(doc)
    assert run_gpuplan("verify-cluster", SPEC, "--live", "-", input=text).returncode == 0
    assert run_gpuplan("verify-cluster", SPEC, "--live", "-", "--strict", input=text).returncode == 6


def test_karpenter_node_checked_by_its_nodepool_label(rf):
    doc = live_from("fleet-live.json")
    [node] = [i for i in doc["items"] if i["metadata"]["name"].startswith("ip-")]
    node["spec"]["taints"] = []
    node["status"]["capacity"]["nvidia.com/gpu"] = "7"
    got = findings(rf, doc)
    # both planned taints missing (the GPU taint and the pool's binding taint), then capacity
    assert [c for c, _, _ in got] == ["GP873", "GP873", "GP874"]
    assert any("lacks taint nvidia.com/gpu=present:NoSchedule" in m for _, _, m in got[:2])
    assert any("lacks taint gpuplan.dev/pool=burst-h100:NoSchedule" in m for _, _, m in got[:2])
    assert "capacity nvidia.com/gpu: 7, planned 8" in got[2][2]


def test_node_of_unknown_pool_and_changed_scope(rf):
    doc = live_from("fleet-live.json")
    stray = copy.deepcopy(next(i for i in doc["items"] if i["kind"] == "Node"))
    stray["metadata"]["name"] = "gpu-x"
    stray["metadata"]["labels"]["gpuplan.dev/pool"] = "gone-pool"
    doc["items"].append(stray)
    quota = next(i for i in doc["items"] if i["metadata"]["name"] == "gpuplan-tier-training")
    quota["spec"]["scopeSelector"]["matchExpressions"][0]["values"] = ["someone-elses-class"]
    got = findings(rf, doc)
    assert [c for c, _, _ in got] == ["GP877", "GP878"]
    assert "scopeSelector differs" in got[0][2] and "gone-pool" in got[1][2]


def test_quantities_compare_as_numbers(rf):
    doc = live_from("fleet-live.json")
    quota = next(i for i in doc["items"] if i["kind"] == "ResourceQuota" and i["spec"]["hard"].get(
        "requests.nvidia.com/gpu.shared") == "16")
    quota["spec"]["hard"]["requests.nvidia.com/gpu.shared"] = "16.0"  # not an integer quantity
    assert [c for c, _, _ in findings(rf, doc)] == ["GP877"]
    quota["spec"]["hard"]["requests.nvidia.com/gpu.shared"] = "16"
    assert findings(rf, doc) == []


@pytest.mark.parametrize("text,where", [
    ("{not json", "<stdin>:1:2: error[GP870]"),
    ('{"kind": "Node", "metadata": {"name": "a"}}', "<stdin>: error[GP870]"),
    # an item that is not an object is named by its JSON path (GP882)
    ('{"kind": "List", "items": [42]}', "<stdin>: error[GP882]: items[0]"),
])
@pytest.mark.slow
def test_unreadable_input_is_exit_1_with_gp870(text, where):
    r = run_gpuplan("verify-cluster", SPEC, "--live", "-", input=text)
    assert r.returncode == 1
    assert where in r.stderr
    assert "Traceback" not in r.stderr


def test_missing_live_option_is_usage_error():
    r = run_gpuplan("verify-cluster", SPEC)
    assert r.returncode == 2


def test_empty_live_reports_nothing_missing(rf):
    """No Node objects at all (e.g. `kubectl get resourcequotas` only): nodes are not judged missing."""
    assert verify(rf, Live(), planned_quotas(rf)).diagnostics == []
