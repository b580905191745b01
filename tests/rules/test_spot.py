"""GP413-GP416: preemptible (spot) capacity, and the interruption ledger of the capacity report.

Sources: aws/karpenter-provider-aws v1.14.1 website/content/en/docs/concepts/nodepools.md:276
(with several capacity types allowed Karpenter takes reserved, then spot, then on-demand) and
disruption.md:122,130 (spot-to-spot consolidation: feature gate, at least 15 instance types)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplan.compiler import check_fleet, placement_docs
from tests.rules.helpers import position

REPO = Path(__file__).parents[2]
BURST = (REPO / "examples" / "aws-burst.yaml").read_text()
SPOT = (REPO / "examples" / "aws-spot.yaml").read_text()


def _check(tmp_path, text):
    p = tmp_path / "fleet.yaml"
    p.write_text(text, encoding="utf-8")
    return check_fleet(p)


def _codes(c, code):
    return [d for d in c.diagnostics if d.code == code]


def test_inference_quota_on_a_spot_only_pool_is_refused(tmp_path):
    text = BURST.replace("capacityTypes: [on-demand]   # serving", "capacityTypes: [spot]   # serving")
    [d] = _codes(_check(tmp_path, text), "GP413")
    assert "serving-l40s" in d.message and "24 nvidia.com/gpu" in d.message and "guaranteed capacity is 0" in d.message
    assert (d.line, d.col) == position(text, "infer-l40s\n      workload: inference", 0)
    assert not _codes(_check(tmp_path, BURST), "GP413")


def test_on_a_pool_that_allows_spot_and_on_demand_serving_is_pinned_to_on_demand(tmp_path):
    """aws-burst used to serve L40S inference from `capacityTypes: [spot, on-demand]`, where Karpenter
    takes spot first: now the serving tier's pods select on-demand, and the policy requires it."""
    from gpuplan.identity import CAPACITY_TYPE_LABEL, contract_pod
    from gpuplan.placement import Cluster, cluster_namespaces

    text = BURST.replace("capacityTypes: [on-demand]   # serving", "capacityTypes: [spot, on-demand]   # serving")
    c = _check(tmp_path, text)
    assert not [d for d in c.diagnostics if d.code in ("GP413", "GP520", "GP521", "GP527")]
    rf = c.resolved
    pod = contract_pod(rf, rf.tier_by_name["serving-l40s"], "ads-serve")
    assert pod["spec"]["nodeSelector"][CAPACITY_TYPE_LABEL] == "on-demand"
    docs = placement_docs(rf)
    cluster = Cluster(rf, docs)
    ns = next(n for n in cluster_namespaces(docs) if n["metadata"]["name"] == "ads-serve")
    assert cluster.denials(pod, ns) == []
    del pod["spec"]["nodeSelector"][CAPACITY_TYPE_LABEL]
    assert any("must not be interrupted" in m for m in cluster.denials(pod, ns))


def test_the_boundary_finds_an_unpinned_tier_on_spot(tmp_path, monkeypatch):
    import gpuplan.objchecks as objchecks

    real = objchecks.collect

    def unpinned(artifacts):
        docs = real(artifacts)
        for d in docs:
            if d["kind"] == "ValidatingAdmissionPolicy":
                d["spec"]["validations"] = [v for v in d["spec"].get("validations", [])
                                            if "karpenter.sh/capacity-type" not in v["expression"]]
        return docs

    monkeypatch.setattr(objchecks, "collect", unpinned)
    text = BURST.replace("capacityTypes: [on-demand]   # serving", "capacityTypes: [spot, on-demand]   # serving")
    found = [d for d in _check(tmp_path, text).diagnostics if d.code == "GP527"]
    assert any("can run on spot capacity of pool infer-l40s" in d.message for d in found)


def test_a_preemptible_tier_may_hold_spot_quota_but_not_an_inference_one(tmp_path):
    text = BURST.replace("capacityTypes: [on-demand]   # serving", "capacityTypes: [spot]   # serving")
    text = text.replace("      maxGPUsPerPod: 4\n      enforcePriority: true\n",
                        "      maxGPUsPerPod: 4\n      enforcePriority: true\n      preemptible: true\n")
    c = _check(tmp_path, text)
    assert not _codes(c, "GP413")
    [d] = _codes(c, "GP414")
    assert "serving-l40s" in d.message and d.line == position(text, "preemptible: true")[0]


def test_batch_and_notebooks_may_use_spot_and_a_gang_is_warned(tmp_path):
    c = _check(tmp_path, SPOT)
    assert not [d for d in c.diagnostics if d.code in ("GP413", "GP414", "GP415")]
    gang = SPOT.replace("      workload: batch\n", "      workload: batch\n      gang: {nodesPerJob: 2}\n")
    c = _check(tmp_path, gang)  # on infer-l40s (spot and on-demand) a gang is pinned to on-demand
    assert not [d for d in c.diagnostics if d.code in ("GP413", "GP415")]
    spot_only = gang.replace("    - name: batch\n      pool: infer-l40s", "    - name: batch\n      pool: batch-l40s")
    c = _check(tmp_path, spot_only)
    [d] = _codes(c, "GP413")  # a gang is not preemptible by default
    [w] = _codes(c, "GP415")
    assert "gangs of 2 nodes" in w.message and "batch-l40s" in w.message


def test_a_narrow_spot_pool_is_told_spot_to_spot_consolidation_never_runs(tmp_path):
    found = {d.message.split("'")[1]: d for d in _codes(_check(tmp_path, SPOT), "GP416")}
    assert set(found) == {"infer-l40s", "batch-l40s"}
    assert "2 instance type(s)" in found["batch-l40s"].message and "needs 15" in found["batch-l40s"].message
    assert not _codes(_check(tmp_path, BURST), "GP416")  # no pool of aws-burst allows spot


def test_the_ledger_shows_gpu_hours_open_to_interruption_at_both_prices(tmp_path):
    from gpuplan.capacity import capacity_split, exposure

    report = _check(tmp_path, SPOT).resolved.capacity
    tiers, tenants = exposure(report)
    by = {e.name: e for e in tiers}
    # batch: 8 whole L40S x 730 h; on-demand 1.10/h, spot 0.45/h
    assert (by["batch"].units, by["batch"].gpu_hours_per_month) == (8, 8 * 730)
    assert (by["batch"].on_demand_cost, by["batch"].spot_cost) == (6424.0, 2628.0)
    # training and serving hold no spot capacity: serving shares infer-l40s, pinned to on-demand
    assert set(by) == {"batch", "notebooks"}
    assert {e.name: e.units for e in tenants} == {"search": 12, "ads": 4}
    assert sum(e.gpu_hours_per_month for e in tenants) == sum(e.gpu_hours_per_month for e in tiers)
    assert capacity_split(report) == [("infer-l40s", ("spot", "on-demand"), 24, 8), ("batch-l40s", ("spot",), 0, 8)]


def test_no_tier_that_must_not_be_interrupted_lands_on_spot(tmp_path):
    """The placement proof's pools, from the generated NodePools: a tier that is not
    preemptible fits only pools whose NodePool allows no spot."""
    from gpuplan.units import preemptible_tier
    from gpuplan.placement import prove

    rf = _check(tmp_path, SPOT).resolved
    docs = placement_docs(rf)
    spot = {d["metadata"]["name"] for d in docs if d.get("kind") == "NodePool"
            and any(r["key"] == "karpenter.sh/capacity-type" and "spot" in r["values"]
                    for r in d["spec"]["template"]["spec"]["requirements"])}
    assert spot == {"batch-l40s", "infer-l40s"}
    from gpuplan.identity import CAPACITY_TYPE_LABEL, contract_pod

    proof = prove(rf, docs)
    pools = {p.name: p for p in proof.pools}
    checked = 0
    for g in proof.groups:
        tier = rf.tier_by_name[g.tier]
        if g.granted and not g.denied_by and not preemptible_tier(tier):
            pod = contract_pod(rf, tier, "x")
            for p in g.pools:  # a pool that allows spot is reached only through the on-demand pin
                if p in spot:
                    chosen = pod["spec"]["nodeSelector"].get(CAPACITY_TYPE_LABEL)
                    assert chosen == "on-demand" and chosen in pools[p].labels[CAPACITY_TYPE_LABEL], g.tier
                    checked += 1
    assert checked  # serving-l40s on infer-l40s


@pytest.mark.parametrize("workload,gang,expected", [
    ("batch", False, True), ("interactive", False, True), ("inference", False, False),
    ("training", False, False), ("batch", True, False), (None, False, False),
])
def test_default_preemptibility_by_workload(workload, gang, expected):
    from gpuplan.units import preemptible_tier
    from gpuplan.spec.models import Tier

    t = Tier.model_validate({"name": "t", "pool": "p", "workload": workload,
                             **({"gang": {"nodesPerJob": 2}} if gang else {})})
    assert preemptible_tier(t) is expected


def test_training_pods_on_karpenter_pools_ask_not_to_be_disrupted(tmp_path):
    """karpenter.sh/do-not-disrupt keeps Karpenter from consolidating or drifting the node under a
    running training pod (karpenter-provider-aws v1.14.1 docs/concepts/disruption.md:354-372); it
    is on the training tier's contract pod and Job, not on serving's, nor on static pools."""
    from gpuplan.identity import DO_NOT_DISRUPT, contract_job, contract_pod

    rf = _check(tmp_path, BURST).resolved
    train = contract_pod(rf, rf.tier_by_name["training"], "search-train")
    assert train["metadata"]["annotations"] == {DO_NOT_DISRUPT: "true"}
    assert contract_job(rf, rf.tier_by_name["training"], "search-train")["spec"]["template"]["metadata"] == {
        "annotations": {DO_NOT_DISRUPT: "true"}}
    assert "annotations" not in contract_pod(rf, rf.tier_by_name["serving-l40s"], "ads-serve")["metadata"]
    kueue = check_fleet(REPO / "examples" / "kueue.yaml").resolved
    assert "annotations" not in contract_pod(kueue, kueue.tier_by_name["training"], "vision-train")["metadata"]
    assert contract_pod(kueue, kueue.tier_by_name["burst-training"], "vision-train")["metadata"]["annotations"] == {
        DO_NOT_DISRUPT: "true"}
