"""`gpuplan import` of the Kueue setups Kueue's own documentation teaches, written from the pinned
v1beta2 schemas (gpuplan/upstream/crds/kueue.x-k8s.io, sigs.k8s.io/kueue@v0.19.2): one
ClusterQueue with `namespaceSelector: {}` shared by the teams' LocalQueues, a ResourceFlavor
without nodeLabels (it puts no node selector on the pods it admits: pkg/podset/podset.go), and
quotas on cpu and memory beside the GPUs, as Kubernetes quantities."""

from __future__ import annotations

import pytest

from tests.importer.test_foreign import _gfd, _run

KQ = "kueue.x-k8s.io/v1beta2"


def _queue(name, flavors, selector=None):
    return {"apiVersion": KQ, "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"namespaceSelector": selector if selector is not None else {},
                     "resourceGroups": [{"coveredResources": sorted({r["name"] for f in flavors for r in f["resources"]}),
                                         "flavors": flavors}]}}


def _local(ns, queue):
    return {"apiVersion": KQ, "kind": "LocalQueue", "metadata": {"name": "user-queue", "namespace": ns},
            "spec": {"clusterQueue": queue}}


def _ns(name):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


DEFAULT_FLAVOR = {"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}, "spec": {}}
H100 = [_gfd(f"h100-{i}", "NVIDIA-H100-80GB-HBM3", "8", None) for i in range(2)]
TEAMS = ("team-a", "team-b", "team-c")


def _single_queue_cluster(gpus=16, extra=()):
    flavor = {"name": "default-flavor", "resources": [
        {"name": "cpu", "nominalQuota": 96}, {"name": "memory", "nominalQuota": "512Gi"},
        {"name": "nvidia.com/gpu", "nominalQuota": gpus}, *extra]}
    return [*H100, DEFAULT_FLAVOR, _queue("cluster-queue", [flavor]),
            *(_local(t, "cluster-queue") for t in TEAMS), *(_ns(t) for t in TEAMS)]


def _grants(spec):
    return {t["name"]: sum(sum(q.values()) for q in t.get("quotas", {}).values()) for t in spec.get("tenants", ())}


def test_one_shared_cluster_queue_is_split_between_its_tenants_and_says_so():
    r, spec = _run(_single_queue_cluster())
    # the GPU quota is kept whole: 16 over three tenants, 6 + 5 + 5
    assert _grants(spec) == {"team-a": 6, "team-b": 5, "team-c": 5}
    [tier] = spec["tiers"]
    assert tier["pool"] == spec["pools"][0]["name"] and spec["queueing"]["tiers"] == [tier["name"]]
    [todo] = [d for d in r.diagnostics if d.code == "GP958" and "shared by tenants" in d.message]
    assert "team-a, team-b, team-c" in todo.message and "16 nvidia.com/gpu" in todo.message and todo.line
    rt = r.round_trip
    assert rt.built
    # one queue becomes three: listed, not silent
    listed = "\n".join(rt.unexplained)
    assert "ClusterQueue.kueue.x-k8s.io cluster-queue: removed" in listed
    for t in TEAMS:
        assert f"ClusterQueue.kueue.x-k8s.io gpuplan-{t}: added" in listed


def test_a_flavor_without_node_labels_keeps_its_gpu_quota():
    """With one pool advertising nvidia.com/gpu, the quota is that pool's; with two, the first, and
    a TODO names the other."""
    r, spec = _run(_single_queue_cluster())
    assert sum(_grants(spec).values()) == 16
    assert not [d for d in r.diagnostics if d.code == "GP963" and "nodeLabels select no" in d.message]
    a100 = [_gfd(f"a100-{i}", "NVIDIA-A100-SXM4-80GB", "8", None) for i in range(2)]
    r, spec = _run([*a100, *_single_queue_cluster()])
    assert sum(_grants(spec).values()) == 16
    [todo] = [d for d in r.diagnostics if d.code == "GP958" and "no nodeLabels" in d.message]
    pools = sorted(p["name"] for p in spec["pools"])
    assert all(p in todo.message for p in pools) and todo.line


def test_cpu_and_memory_quotas_are_read_as_quantities_and_named():
    r, _ = _run(_single_queue_cluster())
    [named] = [d for d in r.diagnostics if d.code == "GP963" and "also holds jobs to" in d.message]
    assert "cpu: 96" in named.message and "memory: 512Gi" in named.message and named.line
    assert not [d for d in r.diagnostics if "not a whole number" in d.message]  # 512Gi is a quantity


@pytest.mark.parametrize("bad,why", [("1.5", "not a whole number of units"), ("lots", "not a Kubernetes quantity")])
def test_a_gpu_quota_that_is_not_whole_units_is_a_finding(bad, why):
    r, spec = _run(_single_queue_cluster(gpus=bad))
    [d] = [d for d in r.diagnostics if d.code == "GP963" and why in d.message]
    assert "nvidia.com/gpu" in d.message or bad in d.message
    assert d.line
    assert sum(_grants(spec).values()) == 0  # nothing granted from a quota gpuplan cannot read
