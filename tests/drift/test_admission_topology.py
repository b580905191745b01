"""`gpuplan verify-cluster` on the admission policies and bindings gpuplan writes (GP883,
GP884) and on the Kueue topology labels of nodes behind a topology-aware flavor (GP885)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from gpuplan.compiler import PLANNED_ADMISSION_AND_QUEUES, check_fleet, planned_objects, planned_quotas
from gpuplan.drift import parse_live, verify
from tests.outputkit import EXAMPLES, REPO


def _rf(path: Path):
    c = check_fleet(path)
    assert c.resolved is not None and not c.failed(), c.diagnostics
    return c.resolved


def _findings(rf, items: list[dict]) -> list[tuple[str, str]]:
    live = parse_live([("live.json", json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))])
    planned = planned_objects(rf, *PLANNED_ADMISSION_AND_QUEUES)
    return sorted((d.code, d.message) for d in verify(rf, live, planned_quotas(rf), planned).diagnostics)


@pytest.fixture(scope="module")
def fleet():
    rf = _rf(EXAMPLES["argocd"])
    kinds = frozenset({"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"})
    return rf, planned_objects(rf, ("gpuplan.lower.admission",), kinds)


def test_every_policy_and_binding_present_and_bound_is_clean(fleet):
    rf, admission = fleet
    assert {d["kind"] for d in admission} == {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    assert _findings(rf, copy.deepcopy(admission)) == []


def test_a_missing_binding_is_reported(fleet):
    rf, admission = fleet
    binding = next(d for d in admission if d["kind"] == "ValidatingAdmissionPolicyBinding")
    items = [copy.deepcopy(d) for d in admission if d is not binding]
    found = _findings(rf, items)
    assert [c for c, _ in found] == ["GP883"]
    assert binding["metadata"]["name"] in found[0][1]


def test_a_missing_policy_is_reported(fleet):
    rf, admission = fleet
    policy = next(d for d in admission if d["kind"] == "ValidatingAdmissionPolicy")
    found = _findings(rf, [copy.deepcopy(d) for d in admission if d is not policy])
    assert [c for c, _ in found] == ["GP883"] and policy["metadata"]["name"] in found[0][1]


def test_a_binding_to_another_policy_or_only_auditing_is_reported(fleet):
    rf, admission = fleet
    items = copy.deepcopy(admission)
    binding = next(d for d in items if d["kind"] == "ValidatingAdmissionPolicyBinding")
    binding["spec"]["validationActions"] = ["Audit"]
    assert [c for c, _ in _findings(rf, items)] == ["GP884"]


def test_admission_is_not_checked_without_admission_objects_in_the_input(fleet):
    rf, _ = fleet
    assert _findings(rf, []) == []


def test_binding_fields_of_the_wrong_type_refuse_the_input(fleet):
    from gpuplan.drift import LiveInputError

    bad = {"apiVersion": "v1", "kind": "List", "items": [
        {"kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "b"},
         "spec": {"policyName": 7, "validationActions": "Deny"}}]}
    with pytest.raises(LiveInputError) as exc:
        parse_live([("live.json", json.dumps(bad))])
    assert exc.value.diag.code == "GP882"


def test_nodes_behind_a_topology_aware_flavor_need_every_level_label():
    rf = _rf(REPO / "examples" / "kueue.yaml")
    planned = planned_objects(rf, *PLANNED_ADMISSION_AND_QUEUES)
    topo = [d for d in planned if d["kind"] == "Topology"]
    flavors = [d for d in planned if d["kind"] == "ResourceFlavor" and d["spec"].get("topologyName")]
    assert topo and flavors, "examples/kueue.yaml declares topology levels"
    levels = [lv["nodeLabel"] for lv in topo[0]["spec"]["levels"]]
    selector = flavors[0]["spec"]["nodeLabels"]

    def node(name: str, labels: dict) -> dict:
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {**selector, **labels}}}

    full = {lv: "x" for lv in levels}
    partial = {lv: "x" for lv in levels[1:]}
    found = [(c, m) for c, m in _findings(rf, [node("n-full", full), node("n-partial", partial)]) if c == "GP885"]
    assert len(found) == 1 and "n-partial" in found[0][1] and levels[0] in found[0][1]
