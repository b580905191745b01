"""The boundary with Volcano: a queued tier's pods only through the Volcano scheduler, PodGroups
and Volcano Jobs only in their tenant's own leaves; the in-build proof finds the door when a
policy is taken away."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from gpuplan.compiler import check_fleet
from gpuplan.placement.boundary import COPIED_NAMESPACE, prove_boundary
from tests.placement.test_boundary import World

REPO = Path(__file__).parents[2]
VOLCANO = REPO / "examples" / "volcano.yaml"


@pytest.fixture(scope="module")
def w():
    c = check_fleet(VOLCANO)
    assert c.resolved is not None and not c.failed()
    return World(c.resolved)


def _pod(w, tier, scheduler=None):
    from gpuplan.identity import contract_pod

    pod = contract_pod(w.rf, w.rf.tier_by_name[tier], "")
    pod["metadata"].pop("namespace")
    if scheduler is None:
        pod["spec"].pop("schedulerName", None)
    else:
        pod["spec"]["schedulerName"] = scheduler
    return pod


def _group(queue, kind="PodGroup"):
    if kind == "Job":
        return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j"},
                "spec": {"queue": queue, "minAvailable": 1, "tasks": []}}
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "g"},
            "spec": {"minMember": 1, "queue": queue}}


def test_a_queued_tiers_pod_runs_only_under_the_volcano_scheduler(w):
    assert w.denials(_pod(w, "training", "volcano"), "vision-train") == []
    for scheduler in (None, "default-scheduler", "my-scheduler"):
        msgs = w.denials(_pod(w, "training", scheduler), "vision-train")
        assert any("scheduled by Volcano" in m for m in msgs), scheduler
    # a tier that is not queued is not held to it
    assert w.denials(_pod(w, "inference", None), "vision-serve") == []


@pytest.mark.parametrize("kind", ["PodGroup", "Job"])
def test_a_podgroup_names_only_its_own_tenants_leaves(w, kind):
    assert w.denials(_group("gpuplan-vision.train-h100", kind), "vision-train") == []
    assert w.denials(_group("gpuplan-vision.burst-h100", kind), "vision-serve") == []
    for queue in ("gpuplan-nlp.train-h100", "gpuplan-vision", "gpuplan.lab", "default", "root", "team-queue"):
        assert w.denials(_group(queue, kind), "vision-train"), queue
    # outside the tenants' namespaces: no gpuplan queue, any other is the cluster's business
    assert w.denials(_group("gpuplan-vision.train-h100", kind), "default")
    assert w.denials(_group("default", kind), "default") == []


def test_a_podgroup_without_a_queue_is_refused_in_a_tenant_namespace(w):
    pg = _group("x")
    del pg["spec"]["queue"]
    assert w.denials(pg, "nlp-train")


def test_the_proof_finds_no_door_and_tries_every_podgroup(w):
    b = prove_boundary(w.rf, w.docs)
    assert b.breaches == []
    tried = {k: v for k, v in b.tried.items() if "PodGroup" in k}
    assert tried and list(tried.values())[0] >= 3 * 4  # three tenants: own leaves, another's, parent, default
    assert any("scheduled by Volcano" in k for k in b.tried)


def _without(docs, words):
    """The docs with the validations whose message holds ``words`` taken out of their policies."""
    out = []
    for d in docs:
        if d.get("kind") == "ValidatingAdmissionPolicy":
            d = copy.deepcopy(d)
            d["spec"]["validations"] = [v for v in d["spec"]["validations"] if words not in v["message"]]
            if not d["spec"]["validations"]:
                d["spec"]["validations"] = [{"expression": "true", "message": "-"}]
        out.append(d)
    return out


def test_without_the_scheduler_rule_the_proof_finds_pods_outside_the_queues(w):
    b = prove_boundary(w.rf, _without(w.docs, "scheduled by Volcano"))
    over = [x for x in b.breaches if "granted" in x.escape]
    assert over, b.breaches
    assert all("scheduled by Volcano" not in x.pod for x in over)  # the Volcano pod stays inside


def test_without_the_queue_rule_the_proof_finds_podgroups_in_other_tenants_queues(w):
    b = prove_boundary(w.rf, _without(w.docs, "PodGroup or Volcano Job"))
    doors = [x for x in b.breaches if "charges its pods to queue" in x.escape]
    assert {x.namespace for x in doors} >= {"vision-train", "nlp-train", "research"}
    assert any("gpuplan-nlp." in x.pod for x in doors if x.namespace == "vision-train")


def test_a_namespace_that_copied_a_tenants_labels_gets_no_gpu_of_its_tiers(w):
    """It may name the tenant's leaves (the policy reads the label), but the class grants bind by
    name: no pod of a queued tier runs there, so the queue's capacity stays the tenant's."""
    assert w.denials(_group("gpuplan-vision.train-h100"), COPIED_NAMESPACE, labels_of="vision-train") == []
    assert w.denials(_pod(w, "training", "volcano"), COPIED_NAMESPACE, labels_of="vision-train")
