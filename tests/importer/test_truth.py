"""`gpuplan import` tells what the draft would change: a cluster built by gpuplan from an
example, then changed the way a hand-run cluster differs (tests/importer/snapshot.py), gives
a difference at the input object's line, and values the cluster states come back."""

from __future__ import annotations

import copy

import yaml

from gpuplan.importer.pipeline import import_cluster
from tests.importer.snapshot import REPO, dump, generated_objects, snapshot

BURST = ("aws-burst.yaml", REPO / "tests/golden/aws-burst")
FLEET = ("fleet.yaml", REPO / "generated")


def _items(example=BURST, extra_kinds=()):
    items = snapshot(*example)["items"]
    items += [o for o in generated_objects(example[1]) if o["kind"] in extra_kinds]
    return items


def _one(items, kind, name):
    return next(o for o in items if o["kind"] == kind and o["metadata"]["name"] == name)


def _run(items):
    r = import_cluster(["-"], stdin=dump({"apiVersion": "v1", "kind": "List", "items": items}))
    assert r.text is not None and r.round_trip.built, r.diagnostics
    return r, yaml.safe_load(r.text)["spec"]


def _codes(r):
    return {d.code for d in r.diagnostics}


def test_gpuplans_own_cluster_has_no_difference():
    r, _ = _run(_items())
    assert not r.round_trip.unexplained


def test_nodeclass_change_drifts_nodes():
    items = copy.deepcopy(_items())
    nc = _one(items, "EC2NodeClass", "train-h100")
    nc["spec"]["blockDeviceMappings"][-1]["ebs"]["volumeSize"] = "2000Gi"
    r, _ = _run(items)
    drift = [d for d in r.diagnostics if d.code == "GP966"]
    assert len(drift) == 1 and "spec.blockDeviceMappings" in drift[0].message
    assert drift[0].file and drift[0].line  # at the input object
    assert any("unexplained differences: 1 (GP966" in line for line in r.round_trip.summary_lines())


def test_requirement_change_drifts_nodes():
    items = copy.deepcopy(_items())
    reqs = _one(items, "NodePool", "train-h100")["spec"]["template"]["spec"]["requirements"]
    gpu_count = next(q for q in reqs if q["key"] == "karpenter.k8s.aws/instance-gpu-count")
    gpu_count["values"] = ["4", "8"]
    r, _ = _run(items)
    assert any(d.code == "GP966" and "instance-gpu-count" in d.message for d in r.diagnostics)


def test_training_disruption_is_read_and_a_foreign_one_is_a_difference():
    _, spec = _run(_items())
    assert next(t for t in spec["tiers"] if t["name"] == "training")["workload"] == "training"
    items = copy.deepcopy(_items())
    _one(items, "NodePool", "train-h100")["spec"]["disruption"] = {
        "consolidationPolicy": "WhenEmpty", "consolidateAfter": "30m", "budgets": [{"nodes": "0"}]}
    r, spec = _run(items)
    assert any(d.code == "GP967" for d in r.diagnostics)
    todo = [d for d in r.diagnostics if d.code == "GP958" and "train-h100" in d.message and d.line]
    assert todo
    pool = next(p for p in spec["pools"] if p["name"] == "train-h100")
    assert pool["karpenter"]["consolidateAfter"] == "30m"


def test_argo_cd_source_and_chart_version_are_read():
    want = yaml.safe_load((REPO / "examples" / BURST[0]).read_text())["spec"]["cluster"]["gitops"]
    items = copy.deepcopy(_items())
    op_app = next(o for o in items if o["kind"] == "Application" and o["metadata"]["name"].endswith("gpu-operator"))
    op_app["spec"]["sources"][0]["targetRevision"] = "v26.3.1"
    r, spec = _run(items)
    assert spec["cluster"]["gitops"]["repoURL"] == want["repoURL"]
    assert spec["cluster"]["gpuOperator"]["chartVersion"] == "v26.3.1"
    root = next(o for o in items if o["kind"] == "Application" and o["spec"].get("source", {}).get("path")
                and "delivery" not in o["spec"]["source"]["path"])
    root["spec"]["source"]["targetRevision"] = "release-1"
    r, _ = _run(items)
    assert any(d.code == "GP968" and "targetRevision" in d.message for d in r.diagnostics)


def test_git_source_without_gpuplan_charts_is_read():
    items = [o for o in _items() if o["kind"] != "Application"]
    items.append({"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
                  "metadata": {"name": "gpu", "namespace": "argocd"},
                  "spec": {"source": {"repoURL": "https://git.corp/ml/infra.git", "targetRevision": "prod",
                                      "path": "clusters/prod/gpu"}}})
    r, spec = _run(items)
    assert spec["cluster"]["gitops"] == {"engine": "argocd", "repoURL": "https://git.corp/ml/infra.git",
                                         "revision": "prod", "path": "clusters/prod/gpu"}
    assert any(d.code == "GP958" and "Application argocd/gpu" in d.message for d in r.diagnostics)


NODECONFIG = """--//gpuplan-nodeconfig//
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    config:
      cpuManagerPolicy: static
      topologyManagerPolicy: single-numa-node
      topologyManagerScope: pod

--//gpuplan-nodeconfig//--"""


def test_kubelet_topology_from_userdata_and_todo_for_nodeclass_kubelet():
    items = copy.deepcopy(_items())
    nc = _one(items, "EC2NodeClass", "train-h100")
    nc["spec"]["userData"] = nc["spec"]["userData"].rstrip().rsplit("\n", 1)[0] + "\n" + NODECONFIG + "\n"
    nc["spec"]["kubelet"] = {"maxPods": 110}
    r, spec = _run(items)
    pool = next(p for p in spec["pools"] if p["name"] == "train-h100")
    assert {k: pool["topology"].get(k) for k in ("cpuManagerPolicy", "policy", "scope")} == \
        {"cpuManagerPolicy": "static", "policy": "single-numa-node", "scope": "pod"}
    todo = [d for d in r.diagnostics if d.code == "GP958" and "maxPods" in d.message]
    assert todo and todo[0].line
    assert "TODO: kubelet maxPods" in r.text


def test_driver_version_from_nvidiadrivers_and_max_gpus_per_pod_from_admission():
    want = yaml.safe_load((REPO / "examples" / FLEET[0]).read_text())["spec"]
    r, spec = _run(_items(FLEET, ("NVIDIADriver", "ValidatingAdmissionPolicy")))
    assert spec["cluster"]["gpuOperator"]["driverVersion"] == want["cluster"]["gpuOperator"]["driverVersion"]
    limits = {t["name"]: t.get("maxGPUsPerPod") for t in want["tiers"]}
    assert {t["name"]: t.get("maxGPUsPerPod") for t in spec["tiers"]} == limits
    assert "requiresNVLink: no cluster object says" in r.text


def test_driver_version_from_operator_helm_values():
    items = [o for o in _items(FLEET) if o["kind"] != "NVIDIADriver"]
    app = next(o for o in items if o["kind"] == "Application" and o["metadata"]["name"].endswith("gpu-operator"))
    app["spec"]["sources"][0]["helm"]["valuesObject"] = {"driver": {"version": "580.95.05"}}
    _, spec = _run(items)
    assert spec["cluster"]["gpuOperator"]["driverVersion"] == "580.95.05"


def test_driver_versions_per_static_pool_from_their_nvidiadrivers():
    """Pools whose drivers differ: gpuplan writes one NVIDIADriver per static pool, selecting its
    nodes by gpuplan.dev/pool; each version comes back as that pool's driverVersion, none as a TODO."""
    items = copy.deepcopy(_items(FLEET, ("NVIDIADriver",)))
    drivers = [o for o in items if o["kind"] == "NVIDIADriver"]
    dev = next(o for o in drivers if o["spec"]["nodeSelector"] == {"gpuplan.dev/pool": "dev-a100"})
    assert dev["spec"]["version"] != "580.95.05"
    dev["spec"]["version"] = "580.95.05"
    r, spec = _run(items)
    versions = {p["name"]: p.get("driverVersion") for p in spec["pools"] if "nodes" in p}
    assert versions["dev-a100"] == "580.95.05"
    others = {o["spec"]["nodeSelector"]["gpuplan.dev/pool"]: o["spec"]["version"] for o in drivers if o is not dev}
    assert all(versions[p] == v for p, v in others.items()) and others
    assert not [d for d in r.diagnostics if d.code == "GP958" and "NVIDIADriver" in d.message]
    assert "from NVIDIADriver" in r.text
