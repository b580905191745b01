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


# ---------------------------------------------------------------- what the round trip says changes
#
# gpuplan writes one ClusterQueue per tenant: a cluster's queue under another name is removed, and
# the round trip says what its jobs get instead, each at the line of the cluster's ClusterQueue.
# The ClusterQueue's fields and their defaults: sigs.k8s.io/kueue@v0.19.2
# apis/kueue/v1beta2/clusterqueue_types.go (cohortName :78-91, queueingStrategy :105-107,
# admissionChecks :173, nominalQuota/borrowingLimit/lendingLimit :310-342, preemption :517-585).


def _changes(r, queue):
    """The round trip's lines about the cluster's ClusterQueue ``queue``, with their input lines."""
    rt = r.round_trip
    head = f"ClusterQueue.kueue.x-k8s.io {queue}: "
    return {text[len(head):]: at for text, at in zip(rt.unexplained, rt.where) if text.startswith(head)}


def test_the_round_trip_says_one_shared_queue_becomes_one_per_tenant():
    r, _ = _run(_single_queue_cluster())
    lines = _changes(r, "cluster-queue")
    [split] = [t for t in lines if t.startswith("one queue of 16 nvidia.com/gpu")]
    assert "shared by tenants team-a, team-b, team-c" in split
    assert "(gpuplan-team-a 6, gpuplan-team-b 5, gpuplan-team-c 5)" in split
    assert "borrowing what the others leave idle in cohort gpuplan-imported" in split
    assert lines[split][1]  # at the quota's line in the input
    # the shared queue had no cohort: its tenants' queues now lend to and borrow from each other
    [cohort] = [t for t in lines if t.startswith("spec.cohortName none -> gpuplan-imported")]
    assert "gpuplan-team-a, gpuplan-team-b, gpuplan-team-c" in cohort


def test_the_round_trip_lists_a_shared_queues_limits_it_cannot_keep():
    flavor = {"name": "default-flavor", "resources": [
        {"name": "nvidia.com/gpu", "nominalQuota": 12, "borrowingLimit": 4, "lendingLimit": "2"}]}
    q = _queue("cluster-queue", [flavor])
    q["spec"]["cohortName"] = "org"
    r, spec = _run([*H100, DEFAULT_FLAVOR, q, *(_local(t, "cluster-queue") for t in TEAMS),
                    *(_ns(t) for t in TEAMS)])
    assert _grants(spec) == {"team-a": 4, "team-b": 4, "team-c": 4}
    assert spec["queueing"]["cohort"] == "org"
    # a shared queue's limits bound the three teams together; no tenant's queue can say that
    assert not [t for t in spec["tenants"] if (t.get("queueing") or {}).get("borrowingLimit")]
    lines = _changes(r, "cluster-queue")
    queues = "(gpuplan-team-a, gpuplan-team-b, gpuplan-team-c)"
    assert f"nvidia.com/gpu on pool {spec['pools'][0]['name']}: borrowingLimit 4 -> none {queues}" in lines
    assert f"nvidia.com/gpu on pool {spec['pools'][0]['name']}: lendingLimit 2 -> none {queues}" in lines
    assert not [t for t in lines if t.startswith("spec.cohortName")]  # the cohort is kept


def test_the_round_trip_names_the_cpu_and_memory_quotas_kueue_stops_holding():
    r, _ = _run(_single_queue_cluster())
    lines = _changes(r, "cluster-queue")
    for res, raw in (("cpu", "96"), ("memory", "512Gi")):
        [line] = [t for t in lines if t.startswith(f"{res}: {raw} is no longer held by Kueue")]
        assert "IgnoreUndeclared" in line and lines[line][1]
    assert not [t for t in lines if t.startswith("nvidia.com/gpu: ")]  # the GPU quota is carried


def test_a_gpu_resource_no_tier_hands_out_is_a_finding_and_a_difference():
    """A flavor selecting the H100 nodes by GFD's product label (no gpuplan pool label) with a quota on
    a MIG resource those nodes do not advertise."""
    rf = {"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "h100"},
          "spec": {"nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}}
    flavor = {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8"},
                                            {"name": "nvidia.com/mig-1g.10gb", "nominalQuota": 7}]}
    q = _queue("team-a-cq", [flavor], {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}})
    r, spec = _run([*H100, rf, q, _local("team-a", "team-a-cq"), _ns("team-a")])
    assert _grants(spec) == {"team-a": 8}
    assert [d for d in r.diagnostics if d.code == "GP963" and "nvidia.com/mig-1g.10gb" in d.message]
    lines = _changes(r, "team-a-cq")
    [line] = [t for t in lines if t.startswith("nvidia.com/mig-1g.10gb: 7 is no longer held by Kueue")]
    assert lines[line][1]


def test_a_queues_limits_are_kept_and_its_other_settings_listed():
    """team-a's queue: limits (carried into the tenant's queueing), preemption while borrowing and
    StrictFIFO (gpuplan writes neither), an admission check, and the fields the API server defaults
    written out as an export has them (the same as gpuplan's: not listed). team-b's queue leaves
    preemption at Kueue's defaults (Never), gpuplan's differ."""
    fl_a = {"name": "default-flavor", "resources": [
        {"name": "nvidia.com/gpu", "nominalQuota": 8, "borrowingLimit": "4", "lendingLimit": 2}]}
    a = _queue("team-a-cq", [fl_a], {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}})
    a["spec"].update({"cohortName": "all", "queueingStrategy": "StrictFIFO", "admissionChecks": ["prov"],
                      "stopPolicy": "None",
                      "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
                      "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                                     "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100}}})
    b = _queue("team-b-cq", [{"name": "default-flavor", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}],
               {"matchLabels": {"kubernetes.io/metadata.name": "team-b"}})
    b["spec"]["cohortName"] = "all"
    r, spec = _run([*H100, DEFAULT_FLAVOR, a, b, _local("team-a", "team-a-cq"), _local("team-b", "team-b-cq"),
                    _ns("team-a"), _ns("team-b")])
    [tier] = spec["tiers"]
    team_a = next(t for t in spec["tenants"] if t["name"] == "team-a")
    assert team_a["queueing"] == {"borrowingLimit": {tier["name"]: 4}, "lendingLimit": {tier["name"]: 2}}
    assert _grants(spec) == {"team-a": 8, "team-b": 8}
    lines = _changes(r, "team-a-cq")
    assert set(lines) == {
        "removed (gpuplan does not write it)",
        "spec.queueingStrategy StrictFIFO -> BestEffortFIFO (gpuplan-team-a)",
        "spec.preemption.borrowWithinCohort.policy LowerPriority -> Never (gpuplan-team-a)",
        "spec.preemption.borrowWithinCohort.maxPriorityThreshold 100 -> none (gpuplan-team-a)",
        "spec.admissionChecks removed: gpuplan does not write it"}
    assert all(at[1] for t, at in lines.items() if t.startswith("spec."))
    lines = _changes(r, "team-b-cq")
    assert "spec.preemption.withinClusterQueue Never -> LowerPriority (gpuplan-team-b)" in lines
    assert "spec.preemption.reclaimWithinCohort Never -> Any (gpuplan-team-b)" in lines
