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


def test_inference_quota_on_a_pool_that_allows_spot_is_refused(tmp_path):
    """aws-burst used to serve L40S inference from `capacityTypes: [spot, on-demand]`."""
    text = BURST.replace("capacityTypes: [on-demand]   # serving", "capacityTypes: [spot, on-demand]   # serving")
    [d] = _codes(_check(tmp_path, text), "GP413")
    assert "serving-l40s" in d.message and "24 nvidia.com/gpu" in d.message and "guaranteed capacity is 0" in d.message
    assert (d.line, d.col) == position(text, "infer-l40s\n      workload: inference", 0)
    assert not _codes(_check(tmp_path, BURST), "GP413")


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
    text = SPOT.replace("      workload: batch\n", "      workload: batch\n      gang: {nodesPerJob: 2}\n")
    c = _check(tmp_path, text)
    [d] = _codes(c, "GP413")  # a gang is not preemptible by default
    [w] = _codes(c, "GP415")
    assert "gangs of 2 nodes" in w.message


def test_a_narrow_spot_pool_is_told_spot_to_spot_consolidation_never_runs(tmp_path):
    [d] = _codes(_check(tmp_path, SPOT), "GP416")
    assert "batch-l40s" in d.message and "2 instance type(s)" in d.message and "needs 15" in d.message


def test_the_ledger_shows_gpu_hours_open_to_interruption_at_both_prices(tmp_path):
    from gpuplan.capacity import exposure

    report = _check(tmp_path, SPOT).resolved.capacity
    tiers, tenants = exposure(report)
    by = {e.name: e for e in tiers}
    # batch: 16 whole L40S x 730 h; on-demand 1.10/h, spot 0.45/h
    assert (by["batch"].units, by["batch"].gpu_hours_per_month) == (16, 16 * 730)
    assert (by["batch"].on_demand_cost, by["batch"].spot_cost) == (12848.0, 5256.0)
    assert set(by) == {"batch", "notebooks"}  # training and serving hold no spot capacity
    assert {e.name: e.units for e in tenants} == {"search": 20, "ads": 4}
    assert sum(e.gpu_hours_per_month for e in tenants) == sum(e.gpu_hours_per_month for e in tiers)


def test_no_tier_that_must_not_be_interrupted_lands_on_spot(tmp_path):
    """The placement proof's pools, from the generated NodePools: a tier that is not
    preemptible fits only pools whose NodePool allows no spot."""
    from gpuplan.capacity import preemptible_tier
    from gpuplan.placement import prove

    rf = _check(tmp_path, SPOT).resolved
    docs = placement_docs(rf)
    spot = {d["metadata"]["name"] for d in docs if d.get("kind") == "NodePool"
            and any(r["key"] == "karpenter.sh/capacity-type" and "spot" in r["values"]
                    for r in d["spec"]["template"]["spec"]["requirements"])}
    assert spot == {"batch-l40s"}
    proof = prove(rf, docs)
    for g in proof.groups:
        tier = rf.tier_by_name[g.tier]
        if g.granted and not g.denied_by and not preemptible_tier(tier):
            assert not set(g.pools) & spot, (g.tier, g.pools)


@pytest.mark.parametrize("workload,gang,expected", [
    ("batch", False, True), ("interactive", False, True), ("inference", False, False),
    ("training", False, False), ("batch", True, False), (None, False, False),
])
def test_default_preemptibility_by_workload(workload, gang, expected):
    from gpuplan.capacity import preemptible_tier
    from gpuplan.spec.models import Tier

    t = Tier.model_validate({"name": "t", "pool": "p", "workload": workload,
                             **({"gang": {"nodesPerJob": 2}} if gang else {})})
    assert preemptible_tier(t) is expected
