"""Kueue flavors per capacity type: examples/kueue.yaml with burst-h100 allowing spot and
on-demand (an on-demand floor for the training tier) and a preemptible batch tier beside it.

Sources: kueue v0.19.2 pkg/scheduler/flavorassigner/flavorassigner.go:1088-1091 (a queue's
flavors are tried in its order) and :1243-1252 (a flavor whose nodeLabels contradict the pod's
node selector is skipped); the ClusterQueue CRD's flavorFungibility default whenCanBorrow
MayStopSearch (gpuplan/upstream/crds/kueue.x-k8s.io/clusterqueue_v1beta2.json);
aws/karpenter-provider-aws v1.14.1 website/content/en/docs/concepts/scheduling.md:211-219
(Karpenter honours a pod's karpenter.sh/capacity-type selector)."""

from __future__ import annotations

import pytest

from gpuplan.identity import CAPACITY_TYPE_LABEL, POOL_LABEL
from tests.outputkit import REPO, compile_ok, docs

SRC = (REPO / "examples" / "kueue.yaml").read_text(encoding="utf-8")


def _variant() -> str:
    text = SRC.replace("        capacityTypes: [on-demand]\n        maxGPUs: 32\n",
                       "        capacityTypes: [spot, on-demand]\n        maxGPUs: 48\n        guaranteedGPUs: 32\n")
    text = text.replace("    - name: inference\n      pool: infer-a100\n",
                        "    - name: burst-batch\n      pool: burst-h100\n      workload: batch\n      priority: 5000\n"
                        "      preemption: Never\n      maxGPUsPerPod: 8\n      enforcePriority: true\n"
                        "    - name: inference\n      pool: infer-a100\n")
    text = text.replace("research: {batch: 4}", "research: {batch: 4, burst-batch: 16}")
    assert text.count("burst-batch") == 2 and "guaranteedGPUs: 32" in text
    return text


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    p = tmp_path_factory.mktemp("spot") / "kueue-spot.yaml"
    p.write_text(_variant(), encoding="utf-8")
    return compile_ok(p)


def _kind(c, path, kind):
    return {d["metadata"]["name"]: d for d in docs(c.files[path]) if d["kind"] == kind}


def test_a_pool_with_spot_and_on_demand_gets_a_flavor_per_capacity_type(compiled):
    flavors = _kind(compiled, "kueue/resourceflavors.yaml", "ResourceFlavor")
    assert set(flavors) == {"gpuplan-train-h100", "gpuplan-burst-h100-spot", "gpuplan-burst-h100-on-demand"}
    assert flavors["gpuplan-burst-h100-spot"]["spec"]["nodeLabels"] == {POOL_LABEL: "burst-h100",
                                                                        CAPACITY_TYPE_LABEL: "spot"}
    assert flavors["gpuplan-burst-h100-on-demand"]["spec"]["nodeLabels"] == {POOL_LABEL: "burst-h100",
                                                                             CAPACITY_TYPE_LABEL: "on-demand"}
    # a flavor's tolerations are injected into admitted pods: never the on-demand floor's taint
    for f in flavors.values():
        assert all(t["key"] != "gpuplan.dev/guaranteed" for t in f["spec"].get("tolerations", []))
    # the unsplit example keeps one flavor per pool
    plain = compile_ok(REPO / "examples" / "kueue.yaml")
    assert "gpuplan-burst-h100" in _kind(plain, "kueue/resourceflavors.yaml", "ResourceFlavor")


def test_queues_list_spot_first_and_pinned_tiers_only_on_demand(compiled):
    queues = _kind(compiled, "kueue/clusterqueues.yaml", "ClusterQueue")

    def flavors(name):
        return [(f["name"], {r["name"]: r for r in f["resources"]}) for g in queues[name]["spec"]["resourceGroups"]
                for f in g["flavors"]]

    research = flavors("gpuplan-research")
    assert [n for n, _ in research] == ["gpuplan-train-h100", "gpuplan-burst-h100-spot",
                                        "gpuplan-burst-h100-on-demand"]
    # burst-batch's 16 on spot; on-demand: no quota of its own, borrowing (burst-training's limit 8)
    assert research[1][1]["nvidia.com/gpu"]["nominalQuota"] == "16"
    assert research[2][1]["nvidia.com/gpu"]["nominalQuota"] == "0"
    assert research[2][1]["nvidia.com/gpu"]["borrowingLimit"] == "8"
    # vision and nlp hold only burst-training (training: pinned to on-demand) on that pool
    for q in ("gpuplan-vision", "gpuplan-nlp"):
        names = [n for n, _ in flavors(q)]
        assert "gpuplan-burst-h100-on-demand" in names and "gpuplan-burst-h100-spot" not in names


def test_the_ledger_splits_the_pool_quota_and_keeps_its_totals(compiled):
    """Per pool and resource the queues' nominal quotas still add up to the tiers' quota (the
    GP410 number); per capacity type they are the grants of the tiers that hold it."""
    from gpuplan.queues import queue_ledger, tier_capacity

    rf = compiled.resolved
    ledger = queue_ledger(rf)
    assert ledger.flavor_types("burst-h100") == ("spot", "on-demand")
    assert ledger.flavor_types("train-h100") == (None,)
    assert tier_capacity(rf, rf.tier_by_name["burst-training"]) == "on-demand"
    assert tier_capacity(rf, rf.tier_by_name["burst-batch"]) == "spot"
    by_type: dict = {}
    for qp in ledger.queues:
        for q in qp.quotas:
            if q.pool == "burst-h100":
                by_type[q.capacity_type] = by_type.get(q.capacity_type, 0) + q.nominal
    assert by_type == {"on-demand": 32, "spot": 16}  # burst-training 16 + 16; burst-batch 16
    [fl] = [f for f in ledger.flavors if f.pool == "burst-h100"]
    assert fl.nominal == fl.resource_quota == 48
    assert fl.flavor == "gpuplan-burst-h100-spot + gpuplan-burst-h100-on-demand"


def test_the_namespace_quota_allows_what_kueue_admits_on_either_flavor(compiled):
    """The ResourceQuota of a queued tier never refuses a pod Kueue admitted: its ceiling is the
    sum of what the queue can be admitted on the pool's flavors."""
    from gpuplan.queues import namespace_ceilings, queue_ledger

    rf = compiled.resolved
    research = next(tn for tn in rf.fleet.spec.tenants if tn.name == "research")
    qp = queue_ledger(rf).queue("research")
    parts = [q.potential for q in qp.quotas if q.pool == "burst-h100"]
    assert len(parts) == 2 and namespace_ceilings(rf, research)[("burst-h100", "nvidia.com/gpu")] == sum(parts)


def test_a_pinned_pod_matches_only_the_on_demand_flavor(compiled):
    """Kueue's flavor match (flavorassigner.go:1243-1252), modelled on the flavors' nodeLabels and
    the contract pods' node selectors: the keys the flavors of the group name are compared."""
    from gpuplan.identity import contract_pod

    rf = compiled.resolved
    flavors = _kind(compiled, "kueue/resourceflavors.yaml", "ResourceFlavor")
    keys = {k for f in flavors.values() for k in f["spec"]["nodeLabels"]}

    def matching(tier):
        sel = contract_pod(rf, rf.tier_by_name[tier], "x")["spec"]["nodeSelector"]
        return [n for n, f in flavors.items()
                if all(sel[k] == v for k, v in f["spec"]["nodeLabels"].items() if k in keys and k in sel)]

    assert matching("burst-training") == ["gpuplan-burst-h100-on-demand"]
    assert matching("burst-batch") == ["gpuplan-burst-h100-spot", "gpuplan-burst-h100-on-demand"]
    assert not [d for d in compiled.diagnostics if d.code in ("GP520", "GP521", "GP527", "GP417", "GP431")]


def test_import_reads_the_capacity_type_flavors_back(compiled, tmp_path):
    """`gpuplan import` of the variant's cluster: a tier alone on the on-demand flavor with quota is
    pinned (not preemptible), one alone on the spot flavor preemptible; the rows of a split pool go
    to the tiers of their type, and the rebuilt tree matches the cluster with nothing unexplained."""
    import yaml

    from gpuplan.importer.pipeline import import_cluster
    from tests.importer.snapshot import dump, snapshot

    spec = tmp_path / "kueue-spot.yaml"
    spec.write_text(_variant(), encoding="utf-8")
    tree = tmp_path / "tree"
    for path, data in compiled.files.items():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_bytes(data if isinstance(data, bytes) else data.encode())
    r = import_cluster(["-"], stdin=dump(snapshot(str(spec), tree)))  # an absolute path: examples/ is not read
    assert r.round_trip.built and not r.round_trip.unexplained, r.round_trip.unexplained
    draft = yaml.safe_load(r.text)["spec"]
    tiers = {t["name"]: t for t in draft["tiers"]}
    assert tiers["burst-batch"].get("preemptible") is True and "preemptible" not in tiers["burst-training"]
    tenants = {t["name"]: t for t in draft["tenants"]}
    assert tenants["research"]["quotas"] == {"research": {"batch": 4, "burst-batch": 16}}
    assert tenants["research"]["queueing"]["borrowingLimit"]["burst-training"] == 8
    pool = next(p for p in draft["pools"] if p["name"] == "burst-h100")["karpenter"]
    assert (pool["maxGPUs"], pool["guaranteedGPUs"], pool["capacityTypes"]) == (48, 32, ["spot", "on-demand"])
