"""A DRA tier's devices are claimed only through its own templates (lower/admission.py
``_tier_claim_validations``, ``_claim_shape_policy``): a pod of one tier's class that names another
tier's claim template, two of its own where the tier bounds GPUs per pod, a claim of a tier's
DeviceClass not named for the tier, of every device of a node, or of more than maxGPUsPerPod, are
refused in every namespace; the boundary proof tries each shape and says which gets past."""

from __future__ import annotations

import pytest

import gpuplan.lower.admission as admission
from gpuplan.compiler import check_fleet, placement_docs
from gpuplan.placement.boundary import prove_boundary
from gpuplan.placement.cel import evaluate_policy
from tests.conftest import REPO

DRA = REPO / "examples" / "dra.yaml"
SHAPES = ("the claim template of tier", "two of its tier's claim templates", "not named for tier",
          "of all the devices", "devices of DeviceClass")


@pytest.fixture(scope="module")
def rf():
    checked = check_fleet(DRA)
    assert checked.resolved is not None and not checked.failed()
    return checked.resolved


def _shape_breaches(b) -> set[str]:
    return {next(s for s in SHAPES if s in x.pod) for x in b.breaches if any(s in x.pod for s in SHAPES)}


def test_every_claim_shape_is_refused_in_every_namespace(rf):
    b = prove_boundary(rf, placement_docs(rf), record=True)
    assert b.breaches == []
    tried = [c for c in b.cases if any(s in c.words for s in SHAPES)]
    assert {s for s in SHAPES[:2] if any(s in c.words for c in tried)} == set(SHAPES[:2])
    assert tried and not [c for c in tried if c.admitted]


def test_without_the_rules_the_proof_finds_each_shape(monkeypatch):
    """The proof is not blind to them: with the pod rule and the claim policy taken out, every
    shape gets past, and the proof says so."""
    monkeypatch.setattr(admission, "_tier_claim_validations", lambda *a: [])
    monkeypatch.setattr(admission, "_claim_shape_policy", lambda rf_: [])
    rf = check_fleet(DRA).resolved  # lowered afresh, without them
    b = prove_boundary(rf, placement_docs(rf))
    assert _shape_breaches(b) == set(SHAPES)


def _shape_policy(rf):
    [policy] = [d for d in admission.objects(rf) if d["kind"] == "ValidatingAdmissionPolicy"
                and d["metadata"]["name"] == admission.class_policy_name(rf, "claim-shapes")]
    return policy


def _claim(name: str, cls: str, kind: str = "ResourceClaim", **exactly) -> dict:
    spec = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls, **exactly}}]}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": {"name": name, "namespace": "vision-serve"},
            "spec": {"spec": spec} if kind == "ResourceClaimTemplate" else spec}


@pytest.mark.parametrize("obj,user,ok", [
    (_claim("gpuplan-inference-small-x2", "gpuplan-inference-small", "ResourceClaimTemplate",
            allocationMode="ExactCount", count=2), "tenant", True),
    (_claim("gpuplan-inference-small-x3", "gpuplan-inference-small", "ResourceClaimTemplate",
            allocationMode="ExactCount", count=3), "tenant", False),
    (_claim("mine", "gpuplan-inference-small", allocationMode="ExactCount", count=1), "tenant", False),
    (_claim("gpuplan-inference-large", "gpuplan-inference-small", allocationMode="ExactCount", count=1), "tenant", False),
    (_claim("gpuplan-inference-small", "gpuplan-inference-small", allocationMode="All"), "tenant", False),
    (_claim("mine", "example.com-nic"), "tenant", True),  # a class of no tier: not this policy's
    # the claim the controller makes from a template, named after the pod
    (_claim("job-0-gpu-x7k2p", "gpuplan-inference-small", allocationMode="ExactCount", count=2),
     "system:serviceaccount:kube-system:resource-claim-controller", True),
])
def test_the_claim_policy_admits_only_the_tier_s_own_bounded_claims(rf, obj, user, ok):
    request = {"operation": "CREATE", "userInfo": {"username": user}}
    denied = evaluate_policy(_shape_policy(rf), obj, None, request=request)
    assert (not denied) == ok, denied
