"""`gpuplan verify` checks an object against the schema and CEL rules of its own API version,
for every version the pinned release serves: Kueue's deprecated kueue.x-k8s.io/v1beta1 (served
beside v1beta2 by Kueue v0.19.2), Karpenter on Azure's karpenter.azure.com/v1alpha2 AKSNodeClass.
A deprecated version passes with its CRD's deprecation warning (GP848); a version the release
does not serve is GP833, listing the ones it does."""

from __future__ import annotations

import copy

import pytest

from gpuplan.upstream import crdread, pins
from gpuplan.verify.verifier import Options, Verifier, verify_paths

KUEUE = "kueue.x-k8s.io"

# written from the fields of the pinned v1beta1 schemas (crds/kueue.x-k8s.io/*_v1beta1.json):
# v1beta1 names the parent cohort `cohort` (v1beta2: `cohortName`)
FLAVOR = {"apiVersion": f"{KUEUE}/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "a100-80gb"},
          "spec": {"nodeLabels": {"cloud.google.com/gke-accelerator": "nvidia-a100-80gb"},
                   "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}
QUEUE = {"apiVersion": f"{KUEUE}/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "training"},
         "spec": {"cohort": "research", "namespaceSelector": {},
                  "resourceGroups": [{"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [
                      {"name": "a100-80gb", "resources": [{"name": "cpu", "nominalQuota": 96},
                                                          {"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]}}
LOCAL = {"apiVersion": f"{KUEUE}/v1beta1", "kind": "LocalQueue",
         "metadata": {"name": "training", "namespace": "team-a"}, "spec": {"clusterQueue": "training"}}
NODECLASS = {"apiVersion": "karpenter.azure.com/v1alpha2", "kind": "AKSNodeClass", "metadata": {"name": "gpu"},
             "spec": {"imageFamily": "Ubuntu2204", "osDiskSizeGB": 128}}


def verdict(obj: dict) -> list:
    v = Verifier(Options(kubernetes_version="1.33"))
    v.add(obj, "obj.yaml", lambda p, k: (None, None))
    return v.result().diagnostics


def found(obj: dict) -> dict[str, list]:
    out: dict[str, list] = {}
    for d in verdict(obj):
        out.setdefault(d.code, []).append(d)
    return out


@pytest.mark.parametrize("obj", [FLAVOR, QUEUE, LOCAL, NODECLASS], ids=lambda o: o["kind"])
def test_a_deprecated_served_version_passes_with_its_warning(obj):
    got = found(obj)
    assert not any(d.is_error for ds in got.values() for d in ds), got
    [w] = got["GP848"]
    group, _, version = obj["apiVersion"].rpartition("/")
    # the CRD's own deprecationWarning, and the version gpuplan writes
    assert pins.deprecation_warning(group, obj["kind"], version) in w.message
    current = {KUEUE: f"{KUEUE}/v1beta2", "karpenter.azure.com": "karpenter.azure.com/v1beta1"}[group]
    assert current in w.hint


@pytest.mark.parametrize("obj,field", [(QUEUE, "cohortName"), (LOCAL, "queueName"),
                                       (FLAVOR, "nodeSelector"), (NODECLASS, "imageVersion")],
                         ids=lambda x: x if isinstance(x, str) else x["kind"])
def test_a_deprecated_version_is_validated_against_its_own_schema(obj, field):
    bad = copy.deepcopy(obj)
    bad["spec"][field] = "x"  # not a field of this version (cohortName is v1beta2's name for cohort)
    got = found(bad)
    assert [d.path for d in got["GP835"]] == [f"spec.{field}"]
    assert "GP848" in got  # still reported as deprecated


def test_the_v1beta2_schema_does_not_check_a_v1beta1_object():
    """The same ClusterQueue at v1beta2 breaks v1beta2's schema: the field was renamed."""
    v2 = copy.deepcopy(QUEUE)
    v2["apiVersion"] = f"{KUEUE}/v1beta2"
    got = found(v2)
    assert [d.path for d in got["GP835"]] == ["spec.cohort"]
    assert "GP848" not in got


def test_a_deprecated_version_runs_its_own_cel_rules():
    """v1beta1's rule "borrowingLimit must be nil when cohort is empty" reads v1beta1's `cohort`
    (v1beta2's reads `cohortName`): a borrowing limit with a cohort passes, without one it fails."""
    borrowing = copy.deepcopy(QUEUE)
    borrowing["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1]["borrowingLimit"] = 4
    assert not any(d.is_error for d in verdict(borrowing))
    del borrowing["spec"]["cohort"]
    [d] = found(borrowing)["GP840"]
    assert "borrowingLimit must be nil when cohort is empty" in d.message


def test_an_unserved_version_lists_the_served_ones():
    old = copy.deepcopy(QUEUE)
    old["apiVersion"] = f"{KUEUE}/v1alpha1"
    [d] = verdict(old)
    assert d.code == "GP833" and d.is_error
    assert f"{KUEUE}/v1beta1" in d.message and f"{KUEUE}/v1beta2" in d.message
    assert f"{KUEUE}/v1beta2" in d.hint


def test_the_cli_exits_0_on_a_v1beta1_kueue_tree(tmp_path):
    import yaml

    (tmp_path / "kueue.yaml").write_text(yaml.safe_dump_all([FLAVOR, QUEUE, LOCAL]), encoding="utf-8")
    r = verify_paths([str(tmp_path)], Options(kubernetes_version="1.33"))
    assert r.ok and [d.code for d in r.diagnostics if d.code.startswith("GP8")].count("GP848") == 3


def test_every_served_version_of_a_pinned_crd_is_pinned():
    """Kueue v0.19.2 and karpenter-provider-azure v1.14.2 serve two versions of each kind."""
    for kind in ("ClusterQueue", "Cohort", "LocalQueue", "ResourceFlavor", "WorkloadPriorityClass", "Topology",
                 "AdmissionCheck", "MultiKueueConfig", "MultiKueueCluster", "ProvisioningRequestConfig"):
        assert sorted(pins.served_versions(KUEUE, kind)) == ["v1beta1", "v1beta2"]
        assert pins.deprecation_warning(KUEUE, kind, "v1beta2") is None
    assert sorted(pins.served_versions("karpenter.azure.com", "AKSNodeClass")) == ["v1alpha2", "v1beta1"]


# a MultiKueue manager's admission check, written from the pinned v1beta2 schemas
# (config/components/crd/bases/kueue.x-k8s.io_multikueue*.yaml at kueue v0.19.2)
MULTIKUEUE = [
    {"apiVersion": f"{KUEUE}/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": "dispatch"},
     "spec": {"controllerName": "kueue.x-k8s.io/multikueue",
              "parameters": {"apiGroup": KUEUE, "kind": "MultiKueueConfig", "name": "workers"}}},
    {"apiVersion": f"{KUEUE}/v1beta2", "kind": "MultiKueueConfig", "metadata": {"name": "workers"},
     "spec": {"clusters": ["worker-1", "worker-2"]}},
    {"apiVersion": f"{KUEUE}/v1beta2", "kind": "MultiKueueCluster", "metadata": {"name": "worker-1"},
     "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": "worker-1"}}}},
]


def test_kueue_admission_check_kinds_are_verified_not_skipped():
    """Kueue's own multi-cluster setups write these beside the queues: each is checked against its
    pinned schema and CEL rules (no GP834 "not verified"), and a broken one is refused."""
    for obj in MULTIKUEUE:
        got = found(obj)
        assert set(got) <= {"GP842"}, got  # at most: the transition rule (oldSelf) has no old object
    twice = copy.deepcopy(MULTIKUEUE[1])
    twice["spec"]["clusters"].append("worker-1")
    assert "must be unique" in found(twice)["GP840"][0].message
    neither = copy.deepcopy(MULTIKUEUE[2])
    neither["spec"]["clusterSource"] = {}
    assert "exactly one of the fields" in found(neither)["GP840"][0].message


def test_every_served_aso_agent_pool_version_is_checked_against_its_own_schema():
    """Azure Service Operator v2.17.0 serves ManagedClustersAgentPool at every Azure API version it
    generated, with a `...storage` hub beside each (config/aso/crds.yaml): an agent pool written at
    v1api20240901 (common in CAPZ-era trees) passes; that version has no `gpuProfile` (added in the
    2025-08-01 API), so gpuplan's field is unknown there."""
    import yaml

    from tests.conftest import REPO

    group = "containerservice.azure.com"
    assert len(pins.served_versions(group, "ManagedClustersAgentPool")) == 10
    [pool] = [d for d in yaml.safe_load_all((REPO / "tests/golden/aks/provisioning/aks/infer-a100/agentpool.yaml")
                                              .read_text(encoding="utf-8")) if d]
    old = copy.deepcopy(pool)
    old["apiVersion"] = f"{group}/v1api20240901"
    assert [d.path for d in found(old)["GP835"]] == ["spec.gpuProfile"]
    del old["spec"]["gpuProfile"]
    assert not any(d.is_error for d in verdict(old))
    assert not any(d.is_error for d in verdict(pool))


def test_schemas_load_per_version_on_first_use(monkeypatch):
    """Only the schema of the object's own version is read (no loading every version up front)."""
    from gpuplan.verify import schemas

    read = []
    path = pins.crd_schema_path
    monkeypatch.setattr(pins, "crd_schema_path", lambda *key: read.append(key) or path(*key))
    pins.crd_schema.cache_clear()
    schemas.crd_validator.cache_clear()
    try:
        found(QUEUE)
    finally:
        pins.crd_schema.cache_clear()
        schemas.crd_validator.cache_clear()
    assert read == [(KUEUE, "ClusterQueue", "v1beta1")]


# --- the refresh side: served versions and deprecation warnings from a CRD ----------------------


def _crd(*versions: dict) -> dict:
    return {"spec": {"group": "example.com", "names": {"kind": "Widget"}, "versions": list(versions)}}


def test_refresh_pins_served_versions_only_with_the_crd_warning():
    crd = _crd({"name": "v1alpha1", "served": False}, {"name": "v1beta1", "served": True, "deprecated": True,
                                                         "deprecationWarning": "use v1"},
               {"name": "v1", "served": True})
    got = crdread.served_versions(crd)
    assert [(v["name"], v["deprecationWarning"]) for v in got] == [("v1beta1", "use v1"), ("v1", None)]


def test_refresh_records_the_api_servers_default_warning():
    """No deprecationWarning: the API server's default names the newest served, not deprecated,
    newer version (a GA version above any beta, whatever the numbers)."""
    crd = _crd({"name": "v2beta3", "served": True, "deprecated": True}, {"name": "v1", "served": True},
               {"name": "v2beta4", "served": True}, {"name": "v3alpha1", "served": True})
    [old, *_] = crdread.served_versions(crd)
    assert old["deprecationWarning"] == "example.com/v2beta3 Widget is deprecated; use example.com/v1 Widget"
    alone = _crd({"name": "v1beta1", "served": True, "deprecated": True}, {"name": "v1alpha1", "served": True})
    assert crdread.served_versions(alone)[0]["deprecationWarning"] == "example.com/v1beta1 Widget is deprecated"
