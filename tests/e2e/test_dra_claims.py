"""DRA tiers' claims on the API server (the examples/dra.yaml tree, tests/golden/dra): a tier's
DeviceClass is claimed only through claims and templates named for the tier, bounded by its
maxGPUsPerPod, and a pod of one tier's class names only its own tier's templates, at most one
where the tier bounds GPUs per pod (lower/admission.py ``_claim_shape_policy``,
``_tier_claim_validations``). The in-build proof tries the same shapes
(tests/placement/test_dra_claims.py; the pods are also among the boundary cases that
tests/e2e/test_examples.py submits)."""

from __future__ import annotations

import pytest

from gpuplan.compiler import check_fleet
from gpuplan.identity import contract_pod, contract_pod_spec
from gpuplan.lower.admission import CLAIM_CONTROLLERS
from tests.conftest import REPO
from tests.e2e.cluster import deploy
from tests.placement.test_dra_claims import _claim  # claims in vision-serve, as NS

pytestmark = pytest.mark.slow

NS = "vision-serve"  # granted inference-large and inference-small (examples/dra.yaml)
SMALL, LARGE = "gpuplan-inference-small", "gpuplan-inference-large"


@pytest.fixture(scope="module")
def dra(clusters):
    rf = check_fleet(REPO / "examples" / "dra.yaml").resolved
    cp = clusters.start("dra-claims")
    try:
        d = deploy(cp, REPO / "tests" / "golden" / "dra")
        assert not d.refusals, [str(r) for r in d.refusals]
        d.wait_default_service_account(NS)
        d.wait_quotas()
        # a policy is in force a moment after it is created (the API server's policy informer)
        probe = _claim("probe", SMALL, allocationMode="ExactCount", count=1)
        cp.wait(lambda: _code(cp, probe) != 201, 60, "the claim policies in force")
        yield rf, cp
    finally:
        clusters.stop(cp)


def _code(cp, obj, user="tenant") -> int:
    return cp.create(obj, dry_run=True, impersonate=user, groups=("system:authenticated",))[0]


@pytest.mark.parametrize("name,kind,cls,exactly,admitted", [
    # (the tree's own templates, gpuplan-inference-small and -x2, exist already)
    (f"{SMALL}-x9", "ResourceClaimTemplate", SMALL, {"allocationMode": "ExactCount", "count": 2}, True),
    (f"{SMALL}-x3", "ResourceClaimTemplate", SMALL, {"allocationMode": "ExactCount", "count": 3}, False),
    ("mine", "ResourceClaim", SMALL, {"allocationMode": "ExactCount", "count": 1}, False),
    (LARGE, "ResourceClaim", SMALL, {"allocationMode": "ExactCount", "count": 1}, False),
    (SMALL, "ResourceClaim", SMALL, {"allocationMode": "All"}, False),
    (SMALL, "ResourceClaim", SMALL, {"allocationMode": "ExactCount", "count": 1}, True),
])
def test_a_tier_s_class_is_claimed_only_as_its_templates_are(dra, name, kind, cls, exactly, admitted):
    _, cp = dra
    code = _code(cp, _claim(name, cls, kind, **exactly))
    assert (code == 201) == admitted and code in (201, 403, 422), code


def test_the_claim_controller_makes_a_pod_s_claim_from_its_template(dra):
    _, cp = dra
    code = _code(cp, _claim("job-0-gpu-x7k2p", SMALL, allocationMode="ExactCount", count=2), user=CLAIM_CONTROLLERS[0])
    assert code == 201


def test_a_pod_names_only_its_own_tier_s_templates_and_one_of_them(dra):
    rf, cp = dra
    tier = rf.tier_by_name["inference-small"]
    pod = contract_pod(rf, tier, NS, contract_pod_spec(rf, tier, rf.tier_resource(tier), 1))
    for c in pod["spec"]["containers"]:
        c.pop("resources", None)

    def with_claims(*templates: str) -> dict:
        p = {**pod, "spec": {**pod["spec"], "resourceClaims": [
            {"name": f"gpu{i}", "resourceClaimTemplateName": t} for i, t in enumerate(templates)]}}
        return p

    assert _code(cp, with_claims(f"{SMALL}-x2")) == 201
    assert _code(cp, with_claims(LARGE)) in (403, 422)
    assert _code(cp, with_claims(f"{SMALL}-x2", SMALL)) in (403, 422)
