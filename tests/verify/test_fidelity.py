"""Issue #30: `gpuplan verify` answers as the API server would on objects as
clients send them (nulls, status, `kubectl get` output), with list-type
uniqueness, the Go validation of the core kinds, RE2 anchors and the
Kubernetes CEL library's semantics. Each test here failed before that change."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import yaml

from gpuplan.verify import cel
from gpuplan.verify.verifier import Options, Verifier, verify_paths

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def golden(rel: str, kind: str) -> dict:
    for d in yaml.safe_load_all((GOLDEN / rel).read_text()):
        if isinstance(d, dict) and d.get("kind") == kind:
            return d
    raise LookupError(kind)


def verdict(obj: dict, old: dict | None = None) -> list:
    """The diagnostics of one object (errors and warnings)."""
    v = Verifier(Options(kubernetes_version="1.33"))
    v.add(obj, "obj.yaml", lambda p, k: (None, None), old)
    return [d for d in v.result().diagnostics if d.severity.name in ("ERROR", "WARNING")]


def codes(obj: dict, old: dict | None = None) -> set[str]:
    return {d.code for d in verdict(obj, old) if d.is_error}


NODEPOOL = golden("aws-burst/pools/infer-l40s/nodepool.yaml", "NodePool")
EC2 = golden("aws-burst/pools/infer-l40s/ec2nodeclass.yaml", "EC2NodeClass")
CLUSTERQUEUE = golden("kueue/kueue/clusterqueues.yaml", "ClusterQueue")
PRIORITY = golden("aws-burst/cluster/priorityclasses.yaml", "PriorityClass")
QUOTA = golden("aws-burst/tenants/ads/resourcequotas.yaml", "ResourceQuota")


def test_the_golden_objects_are_accepted():
    for obj in (NODEPOOL, EC2, CLUSTERQUEUE, PRIORITY, QUOTA):
        assert codes(obj) == set(), obj["kind"]


# --- 1. nulls are pruned, or defaulted ------------------------------------------------------


def test_nulls_as_the_go_client_sends_them_are_pruned():
    ec2 = copy.deepcopy(EC2)
    ec2["metadata"]["creationTimestamp"] = None
    ec2["spec"]["capacityReservationSelectorTerms"] = None  # Karpenter's own client sends this
    ec2["spec"]["kubelet"] = None
    ec2["status"] = None
    assert codes(ec2) == set()
    np = copy.deepcopy(NODEPOOL)
    np["metadata"]["creationTimestamp"] = None
    np["spec"]["limits"] = None
    np["spec"]["template"]["spec"]["taints"] = None
    assert codes(np) == set()


def test_a_null_with_a_default_is_defaulted_and_the_rules_see_the_default():
    np = copy.deepcopy(NODEPOOL)
    np["spec"]["disruption"] = None  # default {consolidateAfter: 0s} (required inside)
    assert codes(np) == set()
    from gpuplan.upstream.pins import crd_schema
    from gpuplan.verify.schemas import prepare

    out = prepare("karpenter.sh", "NodePool", crd_schema("karpenter.sh", "NodePool", "v1"), np)
    assert out["spec"]["disruption"]["consolidateAfter"] == "0s"
    assert out["spec"]["disruption"]["budgets"] == [{"nodes": "10%"}]
    assert np["spec"]["disruption"] is None  # the caller's object is not changed


def test_a_null_required_field_is_still_missing():
    np = copy.deepcopy(NODEPOOL)
    np["spec"]["template"]["spec"]["nodeClassRef"] = None
    assert codes(np) == {"GP835"}


# --- 2. status of a status subresource is ignored ---------------------------------------------


def test_status_is_ignored_where_it_is_a_subresource():
    np = copy.deepcopy(NODEPOOL)
    np["status"] = {"conditions": [{"type": "Ready"}], "bogus": 1}  # both invalid as status
    assert codes(np) == set()


def test_status_is_validated_where_it_is_not_a_subresource():
    app = golden("aws-burst/delivery/bootstrap.yaml", "Application")
    assert codes(app) == set()
    app = copy.deepcopy(app)
    app["status"] = {"bogus": 1}  # Argo CD's Application has no status subresource
    assert codes(app) == {"GP835"}


# --- 3. list-type set and map ----------------------------------------------------------------


def test_duplicate_set_elements_are_rejected():
    np = copy.deepcopy(NODEPOOL)
    np["spec"]["disruption"] = {"consolidateAfter": "30s",
                                "budgets": [{"nodes": "10%", "reasons": ["Empty", "Drifted", "Empty"]}]}
    [d] = [d for d in verdict(np) if d.is_error]
    assert d.code == "GP835" and d.path == "spec.disruption.budgets[0].reasons[2]"


def test_duplicate_map_keys_are_rejected():
    cq = copy.deepcopy(CLUSTERQUEUE)
    flavors = cq["spec"]["resourceGroups"][0]["flavors"]
    flavors.append(copy.deepcopy(flavors[0]))
    [d] = [d for d in verdict(cq) if d.is_error]
    assert d.code == "GP835" and d.path == f"spec.resourceGroups[0].flavors[{len(flavors) - 1}]"


def test_set_elements_compare_as_go_compares_them():
    from gpuplan.verify.schemas import _list_key

    assert _list_key(1) != _list_key(True) and _list_key(1) != _list_key(1.0)
    assert _list_key({"a": 1, "b": 2}) == _list_key({"b": 2, "a": 1})


# --- 4. kinds of a pinned group that gpuplan does not pin --------------------------------------


def test_unpinned_kinds_of_a_pinned_group_are_not_verified_not_refused():
    claim = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "c"},
             "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "x"}}}
    feature = {"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature", "metadata": {"name": "n"}}
    for obj in (claim, feature):
        [d] = verdict(obj)
        assert (d.code, d.is_error) == ("GP834", False)
    # a pinned kind at a version its CRD does not serve is still "no matches for kind"
    old = copy.deepcopy(NODEPOOL)
    old["apiVersion"] = "karpenter.sh/v1beta1"
    assert codes(old) == {"GP833"}


# --- 5. the Go validation of core kinds, with --base ----------------------------------------


def test_resource_quota_go_validation():
    q = copy.deepcopy(QUOTA)
    assert codes(q) == set()
    bad = [({"pods": "-1"}, None), ({"pods": "1500m"}, None), ({"nvidia.com/gpu": "0.5"}, None),
           ({"gpus": "4"}, None), ({"pods": "4"}, ["BestEffort", "NotBestEffort"]),
           ({"requests.storage": "1Gi"}, ["BestEffort"])]
    for hard, scopes in bad:
        q["spec"] = {"hard": hard, **({"scopes": scopes} if scopes else {})}
        assert codes(q) == {"GP846"}, (hard, scopes)
    # fractional is fine for what is not counted; requests.<extended> is not checked as an integer upstream
    q["spec"] = {"hard": {"requests.cpu": "1500m", "requests.nvidia.com/gpu": "4", "count/pods": "3"}}
    assert codes(q) == set()


def test_priority_class_go_validation_and_update_with_base():
    pc = copy.deepcopy(PRIORITY)
    for name, value in (("system-gpu", 1000), (pc["metadata"]["name"], 1_000_000_001)):
        bad = {**pc, "metadata": {**pc["metadata"], "name": name}, "value": value}
        assert codes(bad) == {"GP846"}, (name, value)
    pc["metadata"].pop("annotations")  # applied in place, as kubectl apply does (no Replace=true)
    changed = {**pc, "value": pc["value"] + 1}
    assert codes(changed) == set()
    [d] = [d for d in verdict(changed, old=pc) if d.is_error]
    assert d.code == "GP846" and d.path == "value"


def test_a_replaced_object_is_created_again_not_updated():
    pc = copy.deepcopy(PRIORITY)
    assert "Replace=true" in pc["metadata"]["annotations"]["argocd.argoproj.io/sync-options"]
    assert codes({**pc, "value": pc["value"] + 1}, old=pc) == set()  # Argo CD deletes and creates it
    flux = {**pc, "metadata": {**pc["metadata"], "annotations": {"kustomize.toolkit.fluxcd.io/force": "enabled"}}}
    assert codes({**flux, "value": pc["value"] + 1}, old=flux) == set()


def test_an_object_whose_live_copy_asks_to_be_replaced_is_created_again():
    """The engines read the option on the live object too: Argo CD replaces an object whose live
    sync-options say Replace=true (argo-cd v3.5.1 gitops-engine/pkg/sync/sync_context.go:1400),
    Flux recreates one whose in-cluster copy says force: enabled (fluxcd/pkg/ssa v0.76.1
    manager_apply.go:522-533). A tree that drops the option is still created again, once."""
    pc = copy.deepcopy(PRIORITY)
    plain = {**pc, "metadata": {k: v for k, v in pc["metadata"].items() if k != "annotations"}}
    assert codes({**plain, "value": pc["value"] + 1}, old=pc) == set()
    flux = {**pc, "metadata": {**pc["metadata"], "annotations": {"kustomize.toolkit.fluxcd.io/force": "enabled"}}}
    assert codes({**plain, "value": pc["value"] + 1}, old=flux) == set()
    assert codes({**plain, "value": pc["value"] + 1}, old=plain) == {"GP846"}  # neither: an update


def test_base_reaches_core_kinds_through_verify_paths(tmp_path):
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    pc = copy.deepcopy(PRIORITY)
    pc["metadata"].pop("annotations")  # applied, not replaced
    (tmp_path / "old" / "pc.yaml").write_text(yaml.safe_dump(pc))
    pc["value"] += 5
    (tmp_path / "new" / "pc.yaml").write_text(yaml.safe_dump(pc))
    r = verify_paths([str(tmp_path / "new")], Options(), base=[str(tmp_path / "old")])
    assert [(d.code, d.line) for d in r.diagnostics if d.is_error] == [("GP846", pc_line(tmp_path / "new" / "pc.yaml"))]
    assert verify_paths([str(tmp_path / "new")], Options()).ok


def pc_line(p: Path) -> int:
    return next(i for i, line in enumerate(p.read_text().splitlines(), 1) if line.startswith("value:"))


def test_admission_policy_binding_go_validation():
    b = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": {"name": "b"}, "spec": {"policyName": "p", "validationActions": ["Deny"]}}
    assert codes(b) == set()
    for actions in (["Deny", "Warn"], ["Deny", "Deny"], []):
        assert codes({**b, "spec": {**b["spec"], "validationActions": actions}}) == {"GP846"}, actions
    ref = {"name": "x", "selector": {}, "parameterNotFoundAction": "Deny"}
    assert codes({**b, "spec": {**b["spec"], "paramRef": ref}}) == {"GP846"}


# --- 6. pattern anchors with RE2 semantics ---------------------------------------------------


def test_a_trailing_newline_does_not_match_a_dollar_anchor():
    np = copy.deepcopy(NODEPOOL)
    np["spec"]["disruption"] = {"consolidateAfter": "30s", "budgets": [{"nodes": "10%\n"}]}
    [d] = [d for d in verdict(np) if d.is_error]
    assert d.code == "GP835" and d.path == "spec.disruption.budgets[0].nodes"
    np["spec"]["disruption"]["budgets"][0]["nodes"] = "10%"
    assert codes(np) == set()


# --- 7. CEL: size() in code points, exists()/all() absorb errors -------------------------------


def _tree(rule: str):
    schema = {"type": "object", "properties": {"v": {"x-kubernetes-validations": [{"rule": rule, "message": "m"}]}}}
    return cel._tree(schema, "test/v1 T", "$")


def _eval(rule: str, value) -> list:
    return list(cel.evaluate(_tree(rule), {"v": value}))


def test_string_size_counts_code_points():
    assert _eval("size(self) == 5", "héllo") == []
    assert _eval("self.size() <= 2", "éé") == []
    assert len(_eval("size(self) == 6", "héllo")) == 1
    assert cel.run(cel.expression("size(self)"), {"self": "日本"}) == 2
    assert cel.run(cel.expression("size(self)"), {"self": [1, 2, 3]}) == 3


def test_exists_is_true_when_any_element_matches_even_if_another_fails():
    assert _eval("self.exists(x, int(x) == 1)", ["a", "1"]) == []
    assert _eval("self.exists(x, int(x) == 1)", ["1", "a"]) == []
    [f] = _eval("self.exists(x, int(x) == 1)", ["a", "2"])  # no match and an error: an error
    assert f.error is not None


def test_all_is_false_when_any_element_fails_even_if_another_errors():
    [f] = _eval("self.all(x, int(x) == 1)", ["a", "2"])
    assert f.error is None  # false, the rule's message, not an evaluation error
    assert _eval("self.all(k, size(k) < 3)", {"ab": 1, "é": 2}) == []


# --- kubectl get -o yaml / -o json ---------------------------------------------------------------


def _as_kubectl_returns(obj: dict, uid: str) -> dict:
    obj = copy.deepcopy(obj)
    obj["metadata"].update({
        "creationTimestamp": "2026-01-02T03:04:05Z", "generation": 1, "resourceVersion": "123456", "uid": uid,
        "managedFields": [{"apiVersion": obj["apiVersion"], "fieldsType": "FieldsV1", "manager": "kubectl",
                           "operation": "Apply", "time": "2026-01-02T03:04:05Z",
                           "fieldsV1": {"f:metadata": {"f:labels": {".": {}}}}}]})
    obj["metadata"].pop("annotations", None)
    return obj


def test_kubectl_get_list_output_verifies_without_false_errors(tmp_path):
    items = [_as_kubectl_returns(NODEPOOL, "1"), _as_kubectl_returns(EC2, "2"), _as_kubectl_returns(QUOTA, "3"),
             _as_kubectl_returns(PRIORITY, "4")]
    items[0]["status"] = {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                                          "lastTransitionTime": "2026-01-02T03:04:05Z"}], "resources": {"cpu": "0"}}
    items[1]["spec"]["capacityReservationSelectorTerms"] = None
    items[2]["status"] = {"hard": items[2]["spec"]["hard"], "used": {}}
    lst = {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}
    (tmp_path / "get.yaml").write_text(yaml.safe_dump(lst))
    (tmp_path / "get.json").write_text(json.dumps(lst, indent=2))
    r = verify_paths([str(tmp_path)], Options())
    assert [d for d in r.diagnostics if d.severity.name in ("ERROR", "WARNING")] == []
    assert r.stats.objects == 8 and r.stats.crd_objects == 4 and r.stats.core_objects == 4


def test_an_error_inside_a_list_points_at_the_item(tmp_path):
    bad = _as_kubectl_returns(PRIORITY, "9")
    bad["metadata"]["name"] = "system-x"
    lst = {"apiVersion": "v1", "kind": "List", "items": [_as_kubectl_returns(QUOTA, "8"), bad]}
    p = tmp_path / "get.yaml"
    p.write_text(yaml.safe_dump(lst, sort_keys=False))
    r = verify_paths([str(p)], Options())
    [d] = [d for d in r.diagnostics if d.is_error]
    line = p.read_text().splitlines()[d.line - 1]
    assert d.code == "GP846" and line.strip() == "name: system-x"
