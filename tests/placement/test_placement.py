"""The placement proof on every example, the admission policy's CEL evaluated by
gpuplan's CEL engine against pods that must be admitted and pods that must be refused, and the
rules (GP520-GP524) that fail a fleet whose tiers are not bound to their pools."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from gpuplan.compiler import check_fleet, compile_fleet, placement_docs
from gpuplan.lower import admission
from gpuplan.identity import POOL_LABEL
from gpuplan.identity import contract_pod
from gpuplan.placement.simulate import admit, fits, karpenter_order, namespace_object, pools_from_objects, prove
from gpuplan.placement.cel import evaluate_policy, program
from tests.rules.helpers import BASE, edit, only

EXAMPLES = sorted(Path(__file__).parents[2].joinpath("examples").glob("*.yaml"))


def _rf(path):
    c = check_fleet(path)
    assert c.resolved is not None
    return c.resolved


def _rf_text(tmp_path, text):
    p = tmp_path / "fleet.yaml"
    p.write_text(text, encoding="utf-8")
    c = check_fleet(p)
    assert c.resolved is not None, c.diagnostics
    return c


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_each_tier_lands_only_on_its_pool_and_is_admitted_exactly_where_granted(path):
    rf = _rf(path)
    proof = prove(rf, placement_docs(rf))
    assert proof.verdicts, "every example has tiers"
    from gpuplan.dra.claims import is_dra

    proved = {v.tier for v in proof.verdicts}
    for t in rf.fleet.spec.tiers:
        if rf.tier_resource(t) is not None and not is_dra(rf, rf.pool_by_name[t.pool]):
            assert t.name in proved
    from gpuplan.queues import queue_ledger, queued_namespaces

    ledger = queue_ledger(rf) if rf.fleet.spec.queueing else None
    for v in proof.verdicts:
        granted = any(v.namespace in tn.namespaces and tn.quotas.get(v.namespace, {}).get(v.tier, 0) > 0
                      for tn in rf.fleet.spec.tenants)
        # a queue's namespace may also run the tiers its ClusterQueue can only borrow
        granted = granted or any(v.namespace in queued_namespaces(ledger, tn) and any(
            v.tier in q.tiers for q in ledger.queue(tn.name).quotas) for tn in rf.fleet.spec.tenants
            if ledger is not None and ledger.queue(tn.name) is not None)
        assert v.granted == granted
        assert v.admitted == granted, (v.tier, v.namespace, v.denied_by)
        assert v.pools == [v.expected_pool], (v.tier, v.namespace, v.pools)
    assert not proof.twins
    # and the fleet validates without placement findings
    assert not [d for d in check_fleet(path).diagnostics if d.code in ("GP520", "GP521", "GP522", "GP523")]


def _with_policy():
    """The examples whose Kubernetes version has ValidatingAdmissionPolicy (>= 1.30)."""
    return [p for p in EXAMPLES if admission.enabled(_rf(p))]


@pytest.mark.parametrize("path", _with_policy(), ids=lambda p: p.name)
def test_every_policy_expression_compiles(path):
    rf = _rf(path)
    exprs = []
    for pol in admission.policies(rf):
        for part in ("matchConditions", "variables", "validations"):
            exprs += [v["expression"] for v in pol["spec"].get(part, [])]
    assert len(exprs) >= 9
    for e in exprs:
        program(e)  # raises CelError when it does not compile


@pytest.mark.slow
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_policies_and_contract_objects_pass_kubernetes_validate_strict(path, tmp_path):
    import kubernetes_validate

    rf = _rf(path)
    version = rf.fleet.spec.cluster.kubernetes_version + ".0"
    c = compile_fleet(path, out_dir=tmp_path)
    docs = [d for d in yaml.safe_load_all(c.files["cluster/admission-policy.yaml"]) if d]
    kinds = [d["kind"] for d in docs]
    assert kinds == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"] * (len(kinds) // 2)
    assert len(kinds) >= 4  # the namespace policy and one per tier class, each bound
    pages = [f for f in c.files if re.fullmatch(r"tenants/[^/]+/README\.md", f)]
    assert len(pages) == len(rf.fleet.spec.tenants)
    examples = []
    for f in pages:
        text = c.files[f].decode()
        examples += [e for b in re.findall(r"```yaml\n(.*?)```", text, re.S) for e in yaml.safe_load_all(b)]
    assert any(e["kind"] == "Pod" for e in examples) or rf.fleet.spec.queueing is not None
    # Kubernetes' own kinds; a queueing engine's (Volcano's PodGroup and Job) against its pinned CRDs
    # in tests/volcano, and its admission policy with the others
    core = [e for e in examples if "." not in e["apiVersion"].rpartition("/")[0]]
    assert core
    extra = [d for d in yaml.safe_load_all(c.files.get("cluster/admission-volcano.yaml", b"")) if d]
    for d in docs + extra + core:
        kubernetes_validate.validate(d, version, strict=True)


# --- the policy, evaluated ----------------------------------------------------------------

AWS = Path(__file__).parents[2] / "examples" / "aws-burst.yaml"


@pytest.fixture(scope="module")
def aws():
    rf = _rf(AWS)
    docs = placement_docs(rf)
    ns = {d["metadata"]["name"]: namespace_object(d) for d in docs if d["kind"] == "Namespace"}
    ns["default"] = namespace_object({"metadata": {"name": "default"}})
    ns["gpu-operator"] = namespace_object({"metadata": {"name": "gpu-operator"}})
    return rf, docs, ns


def _denials(aws, pod, namespace):
    rf, docs, ns = aws
    pod = copy.deepcopy(pod)
    pod["metadata"]["namespace"] = namespace
    return admit(rf, pod, ns[namespace], docs)[1]


def _tier(rf, name):
    return rf.tier_by_name[name]


def test_contract_pod_is_admitted_in_its_granted_namespace(aws):
    rf = aws[0]
    assert _denials(aws, contract_pod(rf, _tier(rf, "serving-l40s"), "ads-serve"), "ads-serve") == []
    assert _denials(aws, contract_pod(rf, _tier(rf, "training"), "search-train"), "search-train") == []


def test_pod_without_the_pool_selector_is_refused(aws):
    rf = aws[0]
    pod = contract_pod(rf, _tier(rf, "serving-l40s"), "ads-serve")
    del pod["spec"]["nodeSelector"]
    assert any("must select their pool" in m for m in _denials(aws, pod, "ads-serve"))
    pod["spec"]["nodeSelector"] = {POOL_LABEL: "train-h100"}  # another pool
    assert any("must select their pool" in m for m in _denials(aws, pod, "ads-serve"))


def test_pod_without_the_pool_toleration_is_refused(aws):
    rf = aws[0]
    pod = contract_pod(rf, _tier(rf, "serving-l40s"), "ads-serve")
    pod["spec"]["tolerations"] = [t for t in pod["spec"]["tolerations"] if t["key"] != POOL_LABEL]
    assert any("tolerate its taint" in m for m in _denials(aws, pod, "ads-serve"))


def test_pod_with_another_tiers_class_is_refused(aws):
    rf = aws[0]
    # ads-serve has serving-small and serving-l40s, not serving-large (value 300000)
    pod = contract_pod(rf, _tier(rf, "serving-large"), "ads-serve")
    assert any("(tier serving-large) is granted only to namespaces search-serve" in m
               for m in _denials(aws, pod, "ads-serve"))


def test_a_class_outside_the_tiers_cannot_escape_them(aws):
    rf = aws[0]
    pod = contract_pod(rf, _tier(rf, "serving-l40s"), "ads-serve")
    pod["spec"]["priorityClassName"] = "system-cluster-critical"
    assert any("GPU resources only under the PriorityClass of a gpuplan tier" in m
               for m in _denials(aws, pod, "ads-serve"))
    del pod["spec"]["priorityClassName"]
    assert any("GPU resources only under the PriorityClass of a gpuplan tier" in m
               for m in _denials(aws, pod, "ads-serve"))


def test_over_max_gpus_per_pod_is_refused_summed_over_containers(aws):
    rf = aws[0]
    pod = contract_pod(rf, _tier(rf, "serving-l40s"), "ads-serve")  # maxGPUsPerPod 4
    c = pod["spec"]["containers"][0]
    c["resources"] = {"limits": {"nvidia.com/gpu": "4"}}
    assert not [m for m in _denials(aws, pod, "ads-serve") if "at most" in m]
    c["resources"] = {"limits": {"nvidia.com/gpu": "5"}}
    assert any("at most 4 nvidia.com/gpu" in m for m in _denials(aws, pod, "ads-serve"))
    c["resources"] = {"limits": {"nvidia.com/gpu": "3"}}
    pod["spec"]["containers"].append({"name": "side", "image": "x", "resources": {"requests": {"nvidia.com/gpu": "2"},
                                                                                "limits": {"nvidia.com/gpu": "2"}}})
    assert any("at most 4 nvidia.com/gpu" in m for m in _denials(aws, pod, "ads-serve"))  # 3 + 2
    pod["spec"]["containers"].pop()
    pod["spec"]["initContainers"] = [{"name": "init", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "6"}}}]
    assert any("at most 4 nvidia.com/gpu" in m for m in _denials(aws, pod, "ads-serve"))


def test_gpu_pod_in_an_unmanaged_namespace_is_refused_and_exempt_ones_are_not_checked(aws):
    rf = aws[0]
    pod = contract_pod(rf, _tier(rf, "serving-l40s"), "default")
    assert any("is granted only to namespaces" in m for m in _denials(aws, pod, "default"))
    pod["spec"].pop("priorityClassName")
    assert any("GPU resources only under the PriorityClass" in m for m in _denials(aws, pod, "default"))
    # the GPU Operator's validator pods request a GPU: the binding leaves its namespace out
    assert _denials(aws, pod, "gpu-operator") == []
    cpu = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
           "spec": {"containers": [{"name": "web", "image": "nginx"}]}}
    assert _denials(aws, cpu, "default") == []


def test_a_non_integer_quantity_fails_closed(aws):
    rf = aws[0]
    pod = contract_pod(rf, _tier(rf, "serving-l40s"), "ads-serve")
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1k"}}
    pol = next(p for p in admission.policies(rf) if p["metadata"]["name"].endswith("gpuplan-serving-l40s"))
    ns = aws[2]["ads-serve"]
    assert any("at most" in m for m in evaluate_policy(pol, pod, ns))
    pod["spec"]["priorityClassName"] = "gpuplan-training"  # the class policy does not match this pod
    assert evaluate_policy(pol, pod, ns) == []


def test_l40s_pod_no_longer_launches_a_p5(aws):
    """Before: every pool had only nvidia.com/gpu=present:NoSchedule, which EKS's
    ExtendedResourceToleration tolerates for any pod requesting nvidia.com/gpu, and no
    NodePool had a weight: Karpenter tried train-h100 (name descending) first, a p5.48xlarge."""
    rf, docs, _ = aws
    l40s = contract_pod(rf, _tier(rf, "serving-l40s"), "ads-serve")
    old = copy.deepcopy(l40s)
    del old["spec"]["nodeSelector"]
    old["spec"]["tolerations"] = []
    before = copy.deepcopy(docs)
    for d in before:
        if d["kind"] == "NodePool":
            d["spec"].pop("weight")
            t = d["spec"]["template"]
            t["spec"]["taints"] = [x for x in t["spec"]["taints"] if x["key"] == "nvidia.com/gpu"]
    from gpuplan.placement.simulate import extended_resource_toleration

    old = extended_resource_toleration(old)
    pools_before = pools_from_objects(rf, before)
    fit_before = [p.name for p in karpenter_order(pools_before) if fits(old, p)]
    assert fit_before[0] == "train-h100"  # the p5
    assert "infer-l40s" in fit_before
    # now: the contract pod fits the L40S pool only, and the cheapest pool is tried first
    pools = pools_from_objects(rf, docs)
    admitted = admit(rf, l40s, namespace_object({"metadata": {"name": "ads-serve", "labels": {}}}), [])[0]
    assert [p.name for p in pools if fits(admitted, p)] == ["infer-l40s"]
    assert [p.name for p in karpenter_order(pools)][0] == "infer-l40s"
    assert [p.name for p in pools if fits(old, p)] == []  # a pod without the contract fits no pool


def test_karpenter_order_is_weight_then_name_descending():
    from gpuplan.placement.simulate import PoolNodes

    def p(n, w):
        return PoolNodes(n, {}, (), {}, True, w)
    got = [x.name for x in karpenter_order([p("a", 0), p("ab", 0), p("b", 0), p("z", 5)])]
    assert got == ["z", "b", "ab", "a"]  # Go: nps[a].Name > nps[b].Name


def test_weights_follow_node_price(aws):
    rf, docs, _ = aws
    w = {d["metadata"]["name"]: d["spec"]["weight"] for d in docs if d["kind"] == "NodePool"}
    # node-hours: l40s 4 x 1.10 < a100 8 x 2.70 < h100 8 x 3.90
    assert w["infer-l40s"] > w["mig-a100"] > w["train-h100"] >= 1


def test_extended_resource_toleration_is_a_cluster_fact(tmp_path):
    from gpuplan.placement.simulate import ert_enabled

    c = _rf_text(tmp_path, BASE)
    assert not ert_enabled(c.resolved)  # no aws
    c = _rf_text(tmp_path, edit(BASE, 'kubernetesVersion: "1.33"',
                                'kubernetesVersion: "1.33"\n    extendedResourceToleration: true'))
    assert ert_enabled(c.resolved)
    assert ert_enabled(_rf(AWS))


# --- rules ------------------------------------------------------------------------------


def test_static_fleet_binds_tiers_through_nfd_taints(tmp_path):
    c = _rf_text(tmp_path, BASE)
    proof = prove(c.resolved, placement_docs(c.resolved))
    assert all(v.ok for v in proof.verdicts), [(v.tier, v.namespace, v.pools, v.denied_by) for v in proof.verdicts]
    assert {p.name: [t for t in p.taints if t[0] == POOL_LABEL] for p in proof.pools} == {
        n: [(POOL_LABEL, n, "NoSchedule")] for n in ("dev", "infer", "train")}


def test_without_admission_policy_other_namespaces_are_not_kept_off(tmp_path):
    c = _rf_text(tmp_path, edit(BASE, 'kubernetesVersion: "1.33"', 'kubernetesVersion: "1.29"'))
    codes = [d.code for d in c.diagnostics]
    assert "GP522" in codes and "GP520" not in codes and "GP521" not in codes
    c2 = _rf_text(tmp_path, BASE)
    assert "GP522" not in [d.code for d in c2.diagnostics]


TWO_TRAIN = edit(BASE, "  tiers:\n", "    - name: train2\n      gpu: A100-SXM4-80GB\n      gpusPerNode: 4\n"
                 "      nodes: [n9]\n  tiers:\n")


def test_lost_binding_is_found(tmp_path, monkeypatch):
    import gpuplan.objchecks.driver as objchecks

    assert not [d for d in _rf_text(tmp_path, TWO_TRAIN).diagnostics if d.code.startswith("GP52")]
    real = objchecks.collect

    def lost(artifacts, family=None):  # unslimmed, unshared objects: the test edits them
        docs = real(artifacts)
        for d in docs:
            if d["kind"] == "NodeFeatureRule" and d["metadata"]["name"] == "gpuplan-pool-train2":
                r = d["spec"]["rules"][0]
                r["labels"][POOL_LABEL] = "train"  # train2's nodes now look like train's
                r.pop("taints", None)
        return docs

    monkeypatch.setattr(objchecks, "collect", lost)
    c = _rf_text(tmp_path, TWO_TRAIN)
    d = only(c.diagnostics, "GP520")
    assert d.message == "tier 'training': its pod in namespace 'alpha-ns' fits train, train2, not only its pool 'train'"
    assert d.line is not None


def test_refused_in_granted_namespace_is_found(tmp_path, monkeypatch):
    import gpuplan.objchecks.driver as objchecks

    real = objchecks.collect

    def ungranted(artifacts, family=None):  # unslimmed, unshared objects: the test edits them  # the grant's binding now also selects the namespaces granted serve
        docs = real(artifacts)
        for d in docs:
            if d["kind"] == "ValidatingAdmissionPolicyBinding" and d["metadata"]["name"].endswith("gpuplan-serve-grant"):
                d["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]["values"] = ["gpu-operator"]
        return docs

    monkeypatch.setattr(objchecks, "collect", ungranted)
    c = _rf_text(tmp_path, BASE)
    d = [x for x in c.diagnostics if x.code == "GP521"][0]
    assert "serve" in d.message and "(tier serve) is granted only to namespaces" in d.message


def test_twin_pools_are_found(tmp_path):
    rf = _rf_text(tmp_path, TWO_TRAIN).resolved
    docs = placement_docs(rf)
    assert not prove(rf, docs).twins  # the binding tells them apart
    rules = {d["metadata"]["labels"][POOL_LABEL]: d for d in docs if d["kind"] == "NodeFeatureRule"}
    rules["train2"]["spec"]["rules"][0]["labels"] = dict(rules["train"]["spec"]["rules"][0]["labels"])
    rules["train2"]["spec"]["rules"][0]["taints"] = list(rules["train"]["spec"]["rules"][0]["taints"])
    assert prove(rf, docs).twins == [("train", "train2")]


# --- adoption ---------------------------------------------------------------------------


def test_a_tier_adopts_an_existing_priority_class(tmp_path):
    text = edit(BASE, "{name: training, pool: train, workload: training, priority: 1000}",
                "{name: training, pool: train, workload: training, priority: 1000, priorityClassName: high}")
    c = _rf_text(tmp_path, text)
    rf = c.resolved
    assert not [d for d in c.diagnostics if d.code.startswith("GP52")]
    pod = contract_pod(rf, rf.tier_by_name["training"], "alpha-ns")
    assert pod["spec"]["priorityClassName"] == "high"
    names = [p["metadata"]["name"] for p in admission.policies(rf)]
    assert "gpuplan-small-gpu-pods-high" in names
    assert any('"high"' in v["expression"] for p in admission.policies(rf) for v in p["spec"]["validations"])
    assert all(v.ok for v in prove(rf, placement_docs(rf)).verdicts)
    out = compile_fleet(tmp_path / "fleet.yaml", out_dir=tmp_path / "out")
    pcs = [d["metadata"]["name"] for d in yaml.safe_load_all(out.files["cluster/priorityclasses.yaml"]) if d]
    assert "high" in pcs and "gpuplan-training" not in pcs
    assert "priorityClassName: high" in out.files["tenants/alpha/README.md"].decode()


def test_tiers_sharing_a_class_must_agree(tmp_path):
    text = edit(BASE, "{name: training, pool: train, workload: training, priority: 1000}",
                "{name: training, pool: train, workload: training, priority: 1000, priorityClassName: high}")
    text = edit(text, "{name: serve, pool: infer, profile: 1g.10gb, workload: inference, priority: 5000}",
                "{name: serve, pool: infer, profile: 1g.10gb, workload: inference, priority: 5000, "
                "priorityClassName: high}")
    c = _rf_text(tmp_path, text)
    only(c.diagnostics, "GP524")
