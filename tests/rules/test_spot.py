"""GP413-GP416: preemptible (spot) capacity, and the interruption ledger of the capacity report.

Sources: aws/karpenter-provider-aws v1.14.1 website/content/en/docs/concepts/nodepools.md:276
(with several capacity types allowed Karpenter takes reserved, then spot, then on-demand) and
disruption.md:122,130 (spot-to-spot consolidation: feature gate, at least 15 instance types)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplan.compiler import check_fleet, placement_docs
from tests.rules.helpers import check_text as _check, position, with_code as _codes

REPO = Path(__file__).parents[2]
BURST = (REPO / "examples" / "aws-burst.yaml").read_text()
SPOT = (REPO / "examples" / "aws-spot.yaml").read_text()


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
    from gpuplan.placement.simulate import Cluster, cluster_namespaces

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
    import gpuplan.objchecks.driver as objchecks

    real = objchecks.collect

    def unpinned(artifacts, family=None):  # unslimmed, unshared objects: the test edits them
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
    # infer-l40s: serving's 24 GPUs sit on its on-demand floor of 24 (guaranteedGPUs); batch-l40s has none
    assert capacity_split(report) == [("infer-l40s", ("spot", "on-demand"), 24, 8, 24),
                                      ("batch-l40s", ("spot",), 0, 8, 0)]


def test_no_tier_that_must_not_be_interrupted_lands_on_spot(tmp_path):
    """The placement proof's pools, from the generated NodePools: a tier that is not
    preemptible fits only pools whose NodePool allows no spot."""
    from gpuplan.units import preemptible_tier
    from gpuplan.placement.simulate import prove

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
    # a static pool's training pods: no do-not-disrupt (their Kueue topology request only)
    assert DO_NOT_DISRUPT not in contract_pod(kueue, kueue.tier_by_name["training"], "vision-train")["metadata"].get(
        "annotations", {})
    assert contract_pod(kueue, kueue.tier_by_name["burst-training"], "vision-train")["metadata"]["annotations"] == {
        DO_NOT_DISRUPT: "true"}


# --- the on-demand floor (karpenter.guaranteedGPUs) ------------------------------------------------

FLOOR_LINE = "        guaranteedGPUs: 24   # the on-demand floor: serving's 24 GPUs, in a NodePool of their own\n"


def test_the_floor_is_a_second_nodepool_that_only_pinned_tiers_use(tmp_path):
    """kubernetes-sigs/karpenter v1.14.1: NodePools are tried by weight, then name descending
    (provisioner.go:293, nodepool.go:157-170), a NodePool whose node limit is used up is skipped
    (scheduling/scheduler.go:709-714) and the first that fits wins (scheduler.go:756-760). So the
    floor NodePool, one weight up, takes the pinned pods first, and the spot NodePool keeps the rest
    of maxGPUs: together they never exceed it."""
    from gpuplan.identity import CAPACITY_TYPE_LABEL, contract_pod

    rf = _check(tmp_path, SPOT).resolved
    docs = [d for d in placement_docs(rf) if d.get("kind") == "NodePool"]
    by = {d["metadata"]["name"]: d["spec"] for d in docs}
    own, floor = by["infer-l40s"], by["infer-l40s-guaranteed"]

    def types(spec):
        return next(r["values"] for r in spec["template"]["spec"]["requirements"] if r["key"] == CAPACITY_TYPE_LABEL)

    assert types(own) == ["spot", "on-demand"] and types(floor) == ["on-demand"]
    # maxGPUs 32 = 8 nodes of 4 L40S: 6 for the floor (24 GPUs), 2 for the rest
    assert (floor["limits"]["nodes"], own["limits"]["nodes"]) == ("6", "2")
    assert floor["weight"] == own["weight"] + 1
    taint = {"key": "gpuplan.dev/guaranteed", "value": "infer-l40s", "effect": "NoSchedule"}
    assert taint in floor["template"]["spec"]["taints"] and taint not in own["template"]["spec"]["taints"]
    assert floor["template"]["metadata"]["labels"] == own["template"]["metadata"]["labels"]
    serving = contract_pod(rf, rf.tier_by_name["serving-l40s"], "x")["spec"]
    batch = contract_pod(rf, rf.tier_by_name["batch"], "x")["spec"]
    assert any(t.get("key") == "gpuplan.dev/guaranteed" for t in serving["tolerations"])
    assert not any(t.get("key") == "gpuplan.dev/guaranteed" for t in batch["tolerations"])
    # without a floor: one NodePool, the whole limit
    rf = _check(tmp_path, SPOT.replace(FLOOR_LINE, "")).resolved
    names = [d["metadata"]["name"] for d in placement_docs(rf) if d.get("kind") == "NodePool"]
    assert "infer-l40s-guaranteed" not in names


def test_the_placement_proof_sends_serving_to_the_floor_first_and_batch_never(tmp_path):
    from gpuplan.placement.simulate import fits, pools_from_objects
    from gpuplan.identity import contract_pod

    rf = _check(tmp_path, SPOT).resolved
    pools = {p.name: p for p in pools_from_objects(rf, placement_docs(rf))}
    floor = pools["infer-l40s-guaranteed"]
    assert floor.owner == "infer-l40s" and floor.labels["karpenter.sh/capacity-type"] == ("on-demand",)
    serving = contract_pod(rf, rf.tier_by_name["serving-l40s"], "x")
    batch = contract_pod(rf, rf.tier_by_name["batch"], "x")
    assert fits(serving, floor) and fits(serving, pools["infer-l40s"])
    assert not fits(batch, floor) and fits(batch, pools["infer-l40s"])


def test_a_preemptible_pod_that_tolerates_the_floor_is_refused(tmp_path):
    """The class policy of a preemptible tier on a pool with a floor refuses a toleration of the
    floor's taint, by key or keyless Exists (core/v1 toleration.go ToleratesTaint), evaluated by
    the CEL engine the placement proof uses."""
    from gpuplan.identity import contract_pod
    from gpuplan.placement.simulate import Cluster, cluster_namespaces

    rf = _check(tmp_path, SPOT).resolved
    docs = placement_docs(rf)
    cluster = Cluster(rf, docs)
    ns = next(n for n in cluster_namespaces(docs) if n["metadata"]["name"] == "search-train")
    pod = contract_pod(rf, rf.tier_by_name["batch"], "search-train")
    assert cluster.denials(pod, ns) == []
    for tol in ({"key": "gpuplan.dev/guaranteed", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "gpuplan.dev/guaranteed", "operator": "Equal", "value": "infer-l40s"},
                {"operator": "Exists"}):
        bad = {**pod, "spec": {**pod["spec"], "tolerations": [*pod["spec"]["tolerations"], tol]}}
        assert any("on-demand floor" in m for m in cluster.denials(bad, ns)), tol


def test_the_boundary_finds_a_preemptible_class_on_the_floor(tmp_path, monkeypatch):
    import gpuplan.objchecks.driver as objchecks

    real = objchecks.collect

    def open_floor(artifacts, family=None):  # unslimmed, unshared objects: the test edits them
        docs = real(artifacts)
        for d in docs:
            if d["kind"] == "ValidatingAdmissionPolicy":
                d["spec"]["validations"] = [v for v in d["spec"].get("validations", [])
                                            if "gpuplan.dev/guaranteed" not in v["expression"]]
        return docs

    assert not [d for d in _check(tmp_path, SPOT).diagnostics if d.code == "GP527"]
    monkeypatch.setattr(objchecks, "collect", open_floor)
    found = [d for d in _check(tmp_path, SPOT).diagnostics if d.code == "GP527"]
    assert any("lands on the on-demand floor of pool infer-l40s" in d.message for d in found)


def test_quotas_that_must_not_be_interrupted_must_fit_the_floor(tmp_path):
    text = SPOT.replace("guaranteedGPUs: 24 ", "guaranteedGPUs: 16 ")
    [d] = _codes(_check(tmp_path, text), "GP417")
    assert "serving-l40s" in d.message and "24 nvidia.com/gpu" in d.message and "floor of 16" in d.message
    assert "4 node(s) × 4" in d.message and "at least 24" in d.hint
    assert (d.line, d.col) == position(text, "16   # the on-demand floor", 0)  # the value
    assert not _codes(_check(tmp_path, SPOT), "GP417")


def test_a_floor_that_cannot_be_built_is_refused(tmp_path):
    cases = {
        "guaranteedGPUs: 6 ": "not a whole number of nodes",
        "guaranteedGPUs: 32 ": "leaves none of maxGPUs 32",
    }
    for repl, words in cases.items():
        [d] = _codes(_check(tmp_path, SPOT.replace("guaranteedGPUs: 24 ", repl)), "GP418")
        assert words in d.message, repl
    spot_only = SPOT.replace("        capacityTypes: [spot]\n        maxGPUs: 32\n",
                             "        capacityTypes: [spot]\n        maxGPUs: 32\n        guaranteedGPUs: 8\n")
    [d] = _codes(_check(tmp_path, spot_only), "GP418")
    assert "batch-l40s" in d.message and "spot and on-demand" in d.message
    rf = _check(tmp_path, spot_only).resolved
    assert "batch-l40s-guaranteed" not in {d["metadata"]["name"] for d in placement_docs(rf)
                                           if d.get("kind") == "NodePool"}


def test_without_a_floor_pinned_quota_is_warned(tmp_path):
    c = _check(tmp_path, SPOT.replace(FLOOR_LINE, ""))
    [w] = _codes(c, "GP431")
    assert "infer-l40s" in w.message and "serving-l40s" in w.message and "8 nodes" in w.message
    assert not _codes(_check(tmp_path, SPOT), "GP431")


def test_spot_labels_on_a_static_pool_are_refused(tmp_path):
    """Static pools list nodes by name and count as guaranteed; the labels with which Karpenter
    (pkg/apis/v1/labels.go:34,45), EKS managed node groups, GKE and AKS (azure-aks-docs
    articles/aks/spot-node-pool.md:41) mark spot nodes say otherwise."""
    from tests.rules.helpers import BASE

    for key, value in (("eks.amazonaws.com/capacityType", "SPOT"), ("karpenter.sh/capacity-type", "spot"),
                       ("kubernetes.azure.com/scalesetpriority", "spot")):
        text = BASE.replace("      nodes: [n1, n2]\n", f"      nodes: [n1, n2]\n      labels: {{{key}: {value}}}\n")
        [d] = _codes(_check(tmp_path, text), "GP419")
        assert "'train'" in d.message and d.line == position(text, key)[0]
    text = BASE.replace("      nodes: [n1, n2]\n", "      nodes: [n1, n2]\n      labels: {eks.amazonaws.com/capacityType: ON_DEMAND}\n")
    assert not _codes(_check(tmp_path, text), "GP419")


# --- do-not-disrupt and checkpoints ------------------------------------------------------------------

KUEUE = (REPO / "examples" / "kueue.yaml").read_text()
# the example's burst-training is a gang on its Karpenter pool; without the gang, a one-node tier
BURST_GANG = KUEUE
_GANG = KUEUE[KUEUE.index("      gang:                          # two-node jobs over EFA"):KUEUE.index("    - name: inference")]
NO_BURST_GANG = KUEUE.replace(_GANG, "")


def test_gang_pods_on_karpenter_must_carry_do_not_disrupt(tmp_path):
    """Karpenter reads the annotation on the Pod: a node with a running annotated pod is no
    consolidation or drift candidate (kubernetes-sigs/karpenter@v1.14.1 pkg/controllers/state/
    statenode.go:240-253) and its drain skips the pod (pkg/utils/pod/scheduling.go:58-62,
    terminator.go:112). One evicted pod restarts a gang, so the gang class's policy requires it;
    evaluated with the CEL engine of the placement proof."""
    from gpuplan.identity import DO_NOT_DISRUPT, contract_pod
    from gpuplan.placement.simulate import Cluster, cluster_namespaces, contract_request

    assert NO_BURST_GANG != KUEUE
    c = _check(tmp_path, BURST_GANG)
    rf = c.resolved
    tier = rf.tier_by_name["burst-training"]
    docs = placement_docs(rf)
    cluster = Cluster(rf, docs)
    ns = next(n for n in cluster_namespaces(docs) if n["metadata"]["name"] == "vision-train")
    pod = contract_pod(rf, tier, "vision-train")
    assert pod["metadata"]["annotations"] == {DO_NOT_DISRUPT: "true"}
    req = contract_request(rf, tier)
    assert cluster.denials(pod, ns, req) == []
    for ann in ({}, {DO_NOT_DISRUPT: "false"}, {DO_NOT_DISRUPT: "30m"}):
        bad = {**pod, "metadata": {**pod["metadata"], "annotations": ann}}
        assert any(DO_NOT_DISRUPT in m for m in cluster.denials(bad, ns, req)), ann
    # the static gang tier (no Karpenter) and the tier before it had a gang: no such rule
    rf0 = _check(tmp_path, NO_BURST_GANG).resolved
    from gpuplan.lower.admission import class_tiers, class_validations

    for r in (rf0, rf):
        for pc, tiers in class_tiers(r).items():
            has = any(DO_NOT_DISRUPT in v["expression"] for v in class_validations(r, pc, tiers))
            assert has == (pc == "gpuplan-burst-training" and r is rf), pc
    assert not [d for d in c.diagnostics if d.code in ("GP520", "GP521", "GP527")]


def test_a_gang_job_without_do_not_disrupt_is_refused_when_it_is_created(tmp_path):
    """The gang class's rule reads every pod template of the object, not only Pods: a Job whose
    template lacks the annotation is refused at creation (the API server evaluates the policy on
    the Job), instead of a Job controller retrying pods the policy refuses. Evaluated with the CEL
    engine of the placement proof on the class policy as generated."""
    from gpuplan.identity import DO_NOT_DISRUPT, contract_job
    from gpuplan.lower.admission import class_policy_name, objects
    from gpuplan.placement.cel import evaluate_policy

    rf = _check(tmp_path, BURST_GANG).resolved
    tier = rf.tier_by_name["burst-training"]
    name = class_policy_name(rf, "gpuplan-burst-training")
    [policy] = [o for o in objects(rf) if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"] == name]
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "vision-train",
                                                                "labels": {"kubernetes.io/metadata.name": "vision-train"}}}
    job = contract_job(rf, tier, "vision-train")
    assert job["spec"]["template"]["metadata"]["annotations"] == {DO_NOT_DISRUPT: "true"}

    def refusals(j):
        return [m for m in evaluate_policy(policy, j, ns) if DO_NOT_DISRUPT in m]

    assert refusals(job) == []
    for meta in ({}, {"annotations": {}}, {"annotations": {DO_NOT_DISRUPT: "false"}}):
        bad = {**job, "spec": {**job["spec"], "template": {**job["spec"]["template"], "metadata": meta}}}
        assert refusals(bad), meta
    cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c", "namespace": "vision-train"},
            "spec": {"schedule": "@daily", "jobTemplate": {"spec": {"template": {"spec": job["spec"]["template"]["spec"]}}}}}
    assert refusals(cron)


def test_pods_that_may_run_on_spot_do_not_ask_not_to_be_disrupted(tmp_path):
    """Karpenter's drain never evicts a pod with an active do-not-disrupt before the node's
    terminationGracePeriod (kubernetes-sigs/karpenter@v1.14.1 pkg/utils/pod/scheduling.go:58-62
    IsEvictable; pkg/controllers/node/termination/terminator/terminator.go:96-116), so on a spot
    interruption an annotated pod would get no SIGTERM inside the two-minute notice. A training or
    gang tier that may land on spot carries none and is not required to; pinned to on-demand, or on
    a pool without spot, it keeps it (and a gang class keeps the requirement)."""
    from gpuplan.identity import DO_NOT_DISRUPT, contract_pod
    from gpuplan.lower.admission import class_tiers, class_validations

    fleet = _check(tmp_path, (REPO / "examples" / "fleet.yaml").read_text()).resolved
    burst = fleet.tier_by_name["burst-training"]  # training, preemptible, on spot + on-demand
    assert "annotations" not in contract_pod(fleet, burst, "vision-train")["metadata"]
    gang = (REPO / "examples" / "fleet.yaml").read_text().replace(
        "    - name: burst-training\n", "    - name: burst-training\n      gang: {nodesPerJob: 2}\n", 1)
    rf = _check(tmp_path, gang).resolved
    assert rf.tier_by_name["burst-training"].gang is not None
    for pc, tiers in class_tiers(rf).items():
        assert not any(DO_NOT_DISRUPT in v["expression"] for v in class_validations(rf, pc, tiers)), pc
    pinned = gang.replace("      preemptible: true    # checkpointed", "      preemptible: false    # checkpointed", 1)
    assert pinned != gang
    rf = _check(tmp_path, pinned).resolved
    tier = rf.tier_by_name["burst-training"]
    assert contract_pod(rf, tier, "vision-train")["metadata"]["annotations"] == {DO_NOT_DISRUPT: "true"}
    assert any(DO_NOT_DISRUPT in v["expression"] for pc, tiers in class_tiers(rf).items()
               for v in class_validations(rf, pc, tiers) if pc == "gpuplan-burst-training")


def test_the_tenant_page_says_what_stops_a_pod_and_to_checkpoint(tmp_path):
    """do-not-disrupt does not exclude interruption or expiration (aws/karpenter-provider-aws
    v1.14.1 website/content/en/docs/concepts/disruption.md:422); spot has two minutes' notice
    (disruption.md:207)."""
    from gpuplan.lower.tenant_page import _interruption

    rf = _check(tmp_path, SPOT).resolved
    notes = {t.name: _interruption(rf, t) for t in rf.fleet.spec.tiers}
    assert "May run on spot" in notes["batch"] and "checkpoints" in notes["batch"]
    assert "do-not-disrupt" not in notes["batch"]  # a batch pod carries no annotation
    assert notes["serving-l40s"] is None  # pinned to on-demand, not annotated
    assert "do-not-disrupt" in notes["training"] and "at most 1h" in notes["training"]
    fleet = _check(tmp_path, (REPO / "examples" / "fleet.yaml").read_text()).resolved
    burst = _interruption(fleet, fleet.tier_by_name["burst-training"])  # training on spot, preemptible: true
    assert "May run on spot" in burst and "pods get SIGTERM" in burst
    from tests.outputkit import compile_ok

    def readme(example):
        text = compile_ok(REPO / "examples" / example).files["README.md"]
        return text.decode() if isinstance(text, bytes) else text

    assert "`karpenter.sh/do-not-disrupt` does not stop an interruption" in readme("aws-spot.yaml")
    assert "does not stop an interruption" not in readme("aws-burst.yaml")  # no pool of it allows spot


def test_import_reads_the_floor_back_into_its_pool(tmp_path):
    """`gpuplan import` folds the floor's NodePool (<pool>-guaranteed, tainted gpuplan.dev/guaranteed)
    into its pool: maxGPUs is both NodePools' node limits, guaranteedGPUs the floor's; the round trip
    rebuilds both NodePools with no unexplained difference."""
    import yaml

    from gpuplan.importer.pipeline import import_cluster
    from tests.importer.snapshot import dump, snapshot

    from tests.outputkit import compile_ok

    out = tmp_path / "tree"
    for path, data in compile_ok(REPO / "examples" / "aws-spot.yaml").files.items():
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        (out / path).write_bytes(data if isinstance(data, bytes) else data.encode())
    imported = import_cluster(["-"], stdin=dump(snapshot("aws-spot.yaml", out)))
    assert not [d for d in imported.diagnostics if d.is_error or d.code == "GP959"], imported.diagnostics
    assert imported.round_trip.built and not imported.round_trip.unexplained
    pools = {p["name"]: p for p in yaml.safe_load(imported.text)["spec"]["pools"]}
    assert "infer-l40s-guaranteed" not in pools
    k = pools["infer-l40s"]["karpenter"]
    assert (k["maxGPUs"], k["guaranteedGPUs"]) == (32, 24)
    assert "guaranteedGPUs" not in pools["batch-l40s"]["karpenter"]


def test_the_placement_table_names_the_capacity_types_each_tier_can_get(tmp_path):
    """`gpuplan plan`'s placement matrix, from the proof over the generated NodePools: on a pool
    that allows spot each cell names what the tier's pod can land on (Karpenter's order, reserved,
    spot, on-demand: karpenter-provider-aws v1.14.1 nodepools.md:276)."""
    from gpuplan.placement.simulate import matrix_rows, prove

    rf = _check(tmp_path, SPOT).resolved
    head, rows = matrix_rows(prove(rf, placement_docs(rf)))
    assert head.count("infer-l40s") == 1 and "infer-l40s-guaranteed" not in head  # a pool's NodePools: one column
    cell = {r[0]: dict(zip(head, r)) for r in rows}
    assert cell["serving-l40s"]["infer-l40s"] == "yes (on-demand)"
    assert cell["batch"]["infer-l40s"] == "yes (spot, on-demand)"
    assert cell["notebooks"]["batch-l40s"] == "yes (spot)"
    assert cell["training"]["train-h100"] == "yes"  # on-demand only: nothing to tell
