"""The tenancy boundary against pods that are not the contract pod: each escape a review
found, decided by the emitted ValidatingAdmissionPolicies (their CEL evaluated by gpuplan's
CEL engine), the emitted ResourceQuotas and the adversarial proof (GP527)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from gpuplan.compiler import check_fleet, placement_docs
from gpuplan.identity import POOL_LABEL, contract_pod
from gpuplan.placement.simulate import Cluster, cluster_namespaces, namespace_object, requests
from gpuplan.placement.boundary import COPIED_NAMESPACE, REMOVED_NAMESPACE, prove_boundary
from tests.rules.helpers import BASE, edit

REPO = Path(__file__).parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
TENANT = {"operation": "CREATE", "userInfo": {"username": "alice"}}
JOBS = {"operation": "CREATE", "userInfo": {"username": "system:serviceaccount:kube-system:job-controller"}}


def _rf(path):
    c = check_fleet(path)
    assert c.resolved is not None, c.diagnostics
    return c.resolved


def _rf_text(tmp_path, text, name="fleet.yaml"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return check_fleet(p)


class World:
    """A fleet's generated admission objects and the namespaces a pod can be created in."""

    def __init__(self, rf):
        self.rf = rf
        self.docs = placement_docs(rf)
        self.cluster = Cluster(rf, self.docs)
        self.ns = {n["metadata"]["name"]: n for n in cluster_namespaces(self.docs)}

    def namespace(self, name, labels_of=None):
        if name in self.ns:
            return self.ns[name]
        labels = dict(self.ns[labels_of]["metadata"]["labels"]) if labels_of else {}
        return namespace_object({"metadata": {"name": name, "labels": labels}})

    def denials(self, obj, ns, request=None, labels_of=None):
        return self.cluster.denials(obj, self.namespace(ns, labels_of), request or TENANT)


@pytest.fixture(scope="module")
def kueue():
    return World(_rf(REPO / "examples" / "kueue.yaml"))


@pytest.fixture(scope="module")
def fleet():
    return World(_rf(REPO / "examples" / "fleet.yaml"))


def _pod(spec):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


def _contract(w, tier, ns=""):
    pod = contract_pod(w.rf, w.rf.tier_by_name[tier], ns)
    pod["metadata"].pop("namespace")
    return pod


# --- every example: no breach, every state covered ---------------------------------------------


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_no_pod_anyone_can_write_escapes_the_boundary(path):
    rf = _rf(path)
    b = prove_boundary(rf, placement_docs(rf))
    assert b.breaches == []
    assert b.pods > 10 * len(rf.fleet.spec.tiers) // 2
    # the states a stranger can make: labels copied onto a new namespace, a removed tenant's namespace
    assert b.checked == b.pods * b.namespace_shapes
    assert b.access, "the boundary lists who can run where"
    granted = {(a.priority_class, ns) for a in b.access for ns, _ in a.namespaces}
    assert not any(ns in ("default", COPIED_NAMESPACE, REMOVED_NAMESPACE) for _, ns in granted)


# --- 1. Kueue ceilings are spendable only through Kueue -------------------------------------------


def test_a_queued_class_pod_outside_kueue_is_refused_and_a_kueue_job_is_not(kueue):
    pod = _contract(kueue, "training")
    assert any("created by the controller of a Kueue-managed workload" in m
               for m in kueue.denials(pod, "vision-train", TENANT))
    assert kueue.denials(pod, "vision-train", JOBS) == []


def test_workloads_of_a_queued_class_must_be_held_by_kueue(kueue):
    from gpuplan.identity import QUEUE_LABEL

    contract = _contract(kueue, "training")
    spec = contract["spec"]
    # the template as the tenant page writes it: the contract pod's annotations (the topology it asks Kueue for)
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
           "spec": {"template": {"metadata": copy.deepcopy(contract["metadata"].get("annotations") and
                                                           {"annotations": contract["metadata"]["annotations"]}) or {},
                                 "spec": copy.deepcopy(spec)}}}
    assert any("names its queue" in m for m in kueue.denials(job, "vision-train"))
    job["metadata"]["labels"] = {QUEUE_LABEL: "default"}
    assert any("names its queue" in m for m in kueue.denials(job, "vision-train"))  # not suspended
    job["spec"]["suspend"] = True
    assert kueue.denials(job, "vision-train") == []
    # the tenant cannot start it; Kueue can
    started = copy.deepcopy(job)
    started["spec"]["suspend"] = False
    upd = {"operation": "UPDATE", "userInfo": {"username": "alice"}}
    from gpuplan.placement.cel import evaluate_policy

    pol = kueue.cluster.policies["gpuplan-kueue-lab-gpu-pods-gpuplan-training"]
    assert any("only Kueue starts" in m for m in evaluate_policy(pol, started, None, upd, old=job))
    kueue_upd = {"operation": "UPDATE", "userInfo": {"username": "system:serviceaccount:kueue-system:kueue-controller-manager"}}
    assert evaluate_policy(pol, started, None, kueue_upd, old=job) == []
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
              "spec": {"template": {"spec": copy.deepcopy(spec)}}}
    assert any("not as a Deployment" in m for m in kueue.denials(deploy, "vision-train"))


def test_quotas_give_the_borrow_ceiling_to_the_queued_class_only(kueue):
    q = {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in kueue.docs if d["kind"] == "ResourceQuota"}
    # before: vision-serve (no queued tier) held 64 nvidia.com/gpu, vision-train 64 for any class
    assert q[("vision-serve", "gpuplan-gpus")]["spec"]["hard"]["requests.nvidia.com/gpu"] == "0"
    other = q[("vision-train", "gpuplan-other-priorities")]["spec"]
    assert other["hard"]["requests.nvidia.com/gpu"] == "0"
    assert set(other["scopeSelector"]["matchExpressions"][0]["values"]) == {
        "gpuplan-training", "gpuplan-batch", "gpuplan-burst-training"}
    # a plain pod of another class with a GPU is charged to 0 there
    pod = _contract(kueue, "training")
    pod["spec"]["priorityClassName"] = "gpuplan-inference"
    from gpuplan.placement.simulate import quota_denials

    assert quota_denials(pod, [d for (ns, _), d in q.items() if ns == "vision-train"])


def test_the_cluster_queue_selects_namespaces_by_name(kueue):
    rf = kueue.rf
    from gpuplan.lower.kueue import cluster_queue
    from gpuplan.queues import queue_ledger

    ledger = queue_ledger(rf)
    cq = cluster_queue(rf, ledger, ledger.queue("vision"))
    assert cq["spec"]["namespaceSelector"] == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["vision-serve", "vision-train"]}]}


# --- 2. pods that are no tier's stay off GPU pools -------------------------------------------------


def test_a_pod_without_a_gpu_that_tolerates_everything_is_refused(fleet):
    pod = _pod({"tolerations": [{"operator": "Exists"}], "nodeSelector": {POOL_LABEL: "train-a100"},
                "containers": [{"name": "x", "image": "cuda"}]})
    assert any("may tolerate the GPU pools' taint" in m for m in fleet.denials(pod, "default"))
    pod["spec"]["tolerations"] = [{"key": POOL_LABEL, "operator": "Exists"}]
    assert any("may tolerate the GPU pools' taint" in m for m in fleet.denials(pod, "default"))
    pod["spec"]["tolerations"] = [{"key": POOL_LABEL, "operator": "Exists", "effect": "NoExecute"}]
    assert fleet.denials(pod, "default") == []  # tolerates no NoSchedule taint: lands on no GPU pool
    pod["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    assert fleet.denials(pod, "default") == []


def test_a_tier_pod_must_use_its_gpus_and_no_pod_sets_visible_devices(fleet):
    pod = _contract(fleet, "training")
    pod["spec"]["containers"][0].pop("resources")
    assert any("a tier's class is for pods that use its GPUs" in m for m in fleet.denials(pod, "vision-train"))
    # 0 units: the quota charges nothing, the class's toleration and selector put it on the pool
    zero = _contract(fleet, "training")
    for c in zero["spec"]["containers"]:
        for part in c.get("resources", {}).values():
            for k in part:
                part[k] = "0"
    assert any("a tier's class is for pods that use its GPUs" in m for m in fleet.denials(zero, "vision-train"))
    pod = _contract(fleet, "training")
    pod["spec"]["containers"][0]["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    assert any("NVIDIA_VISIBLE_DEVICES" in m for m in fleet.denials(pod, "vision-train"))


# --- 3, 4. labels grant nothing: copied, or left behind by a removed tenant ------------------------


def test_copied_labels_grant_nothing(fleet):
    pod = _contract(fleet, "training")
    assert fleet.denials(pod, "vision-train") == []
    assert any("is granted only to namespaces" in m
               for m in fleet.denials(pod, "self-service", labels_of="vision-train"))


def test_a_removed_tenants_namespace_grants_nothing(tmp_path):
    text = edit(BASE, "        alpha-ns: {training: 8, serve: 8, notebooks: 16}\n",
                "        alpha-ns: {training: 8, serve: 8, notebooks: 16}\n"
                "    - name: beta\n      namespaces: [beta-ns]\n      quotas:\n        beta-ns: {training: 4}\n")
    before = World(_rf_text(tmp_path, text, "before.yaml").resolved)
    after = World(_rf_text(tmp_path, BASE, "after.yaml").resolved)
    kept = before.ns["beta-ns"]  # Argo CD keeps the Namespace (Prune=confirm) with its labels; quotas go
    assert "tier.gpuplan.dev/training" in kept["metadata"]["labels"]
    pod = _contract(after, "training")
    assert before.denials(pod, "beta-ns") == []
    assert any("is granted only to namespaces alpha-ns" in m
               for m in after.cluster.denials(pod, kept, TENANT))


# --- 5. a class pins its resource ------------------------------------------------------------------


def test_a_tier_class_admits_only_its_own_resource(fleet):
    pod = _contract(fleet, "inference-small", "vision-serve")  # nvidia.com/mig-1g.10gb
    res = pod["spec"]["containers"][0]["resources"]
    res["limits"] = res["requests"] = {"nvidia.com/gpu": "1"}
    assert any("may request only nvidia.com/mig-1g.10gb" in m for m in fleet.denials(pod, "vision-serve"))


# --- 6. DRA: implicit names and claims -----------------------------------------------------------------


def test_implicit_dra_names_are_gpu_resources(fleet):
    pod = _contract(fleet, "training")
    res = pod["spec"]["containers"][0]["resources"]
    res["limits"] = res["requests"] = {"deviceclass.resource.kubernetes.io/gpu.nvidia.com": "1"}
    assert any("may request only nvidia.com/gpu" in m for m in fleet.denials(pod, "vision-train"))
    pod["spec"].pop("priorityClassName")
    assert any("GPU resources only under the PriorityClass" in m for m in fleet.denials(pod, "default"))


def test_gpu_claims_only_in_namespaces_granted_a_dra_tier():
    w = World(_rf(REPO / "examples" / "dra.yaml"))
    from gpuplan.k8s_features_dra import RESOURCE_API

    claim = {"apiVersion": RESOURCE_API, "kind": "ResourceClaim", "metadata": {"name": "c"},
             "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}
    assert any("GPU DeviceClasses may be claimed only" in m for m in w.denials(claim, "default"))
    granted = next(ns for ns in w.ns if ns != "default" and not w.denials(claim, ns))
    assert any(d["kind"] == "ResourceQuota" and d["metadata"]["namespace"] == granted
               and d["spec"]["hard"].get("gpu.nvidia.com.deviceclass.resource.k8s.io/devices") == "0"
               for d in w.docs)  # the chart's class is held to 0 there; the tier's own class to its grant


# --- 7. sidecars count -----------------------------------------------------------------------------


def test_sidecars_count_toward_max_gpus_per_pod(fleet):
    pod = _contract(fleet, "training")
    most = fleet.rf.tier_by_name["training"].max_gpus_per_pod
    main = pod["spec"]["containers"][0]["resources"]
    main["limits"] = main["requests"] = {"nvidia.com/gpu": str(most)}
    assert fleet.denials(pod, "vision-train") == []
    pod["spec"]["initContainers"] = [{"name": "side", "image": "x", "restartPolicy": "Always",
                                      "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
    assert requests(pod)["nvidia.com/gpu"] == most + 1
    assert any(f"at most {most} nvidia.com/gpu" in m for m in fleet.denials(pod, "vision-train"))


def test_effective_request_follows_pod_requests():
    """k8s.io/component-helpers resource/helpers.go PodRequests."""
    def c(n, sidecar=False):
        out = {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": str(n)}}}
        return {**out, "restartPolicy": "Always"} if sidecar else out

    pod = {"spec": {"containers": [c(2)], "initContainers": [c(1, True), c(4), c(1, True)]}}
    # containers 2 + sidecars 1 + 1 = 4; the init container 4 runs beside the first sidecar: 5
    assert requests(pod) == {"nvidia.com/gpu": 5}
    pod = {"spec": {"containers": [c(3)], "initContainers": [c(2), c(1, True)]}}
    assert requests(pod) == {"nvidia.com/gpu": 4}  # max(3 + 1, 2)


# --- shared classes, Pod Security, templates ------------------------------------------------------


def test_a_class_shared_across_pools_or_held_tiers_is_an_error(tmp_path):
    text = edit(BASE, "{name: training, pool: train, workload: training, priority: 1000}",
                "{name: training, pool: train, workload: training, priority: 5000, priorityClassName: high}")
    text = edit(text, "{name: serve, pool: infer, profile: 1g.10gb, workload: inference, priority: 5000}",
                "{name: serve, pool: infer, profile: 1g.10gb, workload: inference, priority: 5000, "
                "priorityClassName: high}")
    d = [x for x in _rf_text(tmp_path, text).diagnostics if x.code == "GP528"]
    assert len(d) == 1 and "pools 'train' and 'infer'" in d[0].message and d[0].line is not None


def test_tenant_namespaces_enforce_a_pod_security_level(tmp_path, fleet):
    assert all(n["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
               for n in fleet.ns.values() if n["metadata"]["name"] != "default")
    text = edit(BASE, "    - name: alpha\n", "    - name: alpha\n      podSecurity: restricted\n")
    w = World(_rf_text(tmp_path, text).resolved)
    assert w.ns["alpha-ns"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


@pytest.mark.parametrize("kind,wrap", [
    ("Deployment", lambda s: {"apiVersion": "apps/v1", "spec": {"template": {"spec": s}}}),
    ("StatefulSet", lambda s: {"apiVersion": "apps/v1", "spec": {"template": {"spec": s}}}),
    ("Job", lambda s: {"apiVersion": "batch/v1", "spec": {"template": {"spec": s}}}),
    ("CronJob", lambda s: {"apiVersion": "batch/v1", "spec": {"jobTemplate": {"spec": {"template": {"spec": s}}}}}),
])
def test_workload_templates_are_held_to_the_same_rules(fleet, kind, wrap):
    good = _contract(fleet, "inference-small")["spec"]
    obj = {**wrap(copy.deepcopy(good)), "kind": kind, "metadata": {"name": "w"}}
    assert fleet.denials(obj, "vision-serve") == []
    bad = copy.deepcopy(good)
    bad["nodeSelector"] = {POOL_LABEL: "train-a100"}
    obj = {**wrap(bad), "kind": kind, "metadata": {"name": "w"}}
    assert any("must select their pool" in m for m in fleet.denials(obj, "vision-serve"))


# --- the proof finds what a weaker tree lets through -----------------------------------------------


def _weaken(monkeypatch, change):
    import gpuplan.objchecks.driver as objchecks

    real = objchecks.collect

    def weakened(artifacts, family=None):  # unslimmed, unshared objects: the test edits them
        docs = real(artifacts)
        change(docs)
        return docs

    monkeypatch.setattr(objchecks, "collect", weakened)


def _drop_validations(monkeypatch, dropped):
    """The generated policies without the validations ``dropped(validation)`` picks."""
    def drop(docs):
        for d in docs:
            if d["kind"] == "ValidatingAdmissionPolicy":
                d["spec"]["validations"] = [v for v in d["spec"]["validations"] if not dropped(v)]
    _weaken(monkeypatch, drop)


def test_the_proof_finds_a_pod_that_squats_a_gpu_pool(tmp_path, monkeypatch):
    def drop_toleration_rule(docs):
        for d in docs:
            if d["kind"] == "ValidatingAdmissionPolicy" and d["metadata"]["name"] == "gpuplan-small-gpu-pods":
                d["spec"]["validations"] = [v for v in d["spec"]["validations"] if "tolerations" not in v["expression"]]
    _weaken(monkeypatch, drop_toleration_rule)
    found = [d for d in _rf_text(tmp_path, BASE).diagnostics if d.code == "GP527"]
    assert any("runs on GPU pool" in d.message and "default" in d.message for d in found)
    assert any(COPIED_NAMESPACE in d.message or "more pods" in d.message for d in found)


def test_the_proof_finds_a_quota_above_the_grant(tmp_path, monkeypatch):
    def raise_quota(docs):
        for d in docs:
            if d["kind"] == "ResourceQuota" and d["metadata"]["name"] == "gpuplan-gpus":
                d["spec"]["hard"]["requests.nvidia.com/gpu"] = "64"
    _weaken(monkeypatch, raise_quota)
    found = [d for d in _rf_text(tmp_path, BASE).diagnostics if d.code == "GP527"]
    assert any("can hold 64 nvidia.com/gpu" in d.message and "granted 8" in d.message for d in found)


def test_the_proof_finds_an_uncharged_resource(tmp_path, monkeypatch):
    def drop_key(docs):
        for d in docs:
            if d["kind"] == "ResourceQuota":
                d["spec"]["hard"].pop("requests.nvidia.com/mig-1g.10gb", None)
    _weaken(monkeypatch, drop_key)
    found = [d for d in _rf_text(tmp_path, BASE).diagnostics if d.code == "GP527"]
    assert any("uncharged by any ResourceQuota" in d.message for d in found)


# --- the proof's shortcuts hold ------------------------------------------------------------------------


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_the_class_shortcut_agrees_with_full_evaluation(path):
    """The proof skips a class policy for pods of another class; evaluating it in full gives
    the same (no refusal) for every tier's contract pod."""
    from gpuplan.placement.cel import evaluate_policy
    from gpuplan.placement.simulate import _matches

    w = World(_rf(path))
    for tier in w.rf.fleet.spec.tiers:
        if w.rf.tier_resource(tier) is None:
            continue
        pod = _contract(w, tier.name)
        applies = w.cluster.verdicts(pod, JOBS)
        for name, policy in w.cluster.policies.items():
            # a policy whose resourceRules take no Pod (Volcano's PodGroup queues) is no class shortcut
            if name not in applies and _matches(policy, pod, JOBS):
                assert evaluate_policy(policy, pod, None, JOBS) == [], (tier.name, name)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_other_pool_gets_the_same_verdict(path):
    """The proof tries a tier's pod on one pool outside its own: every other pool is refused alike."""
    from gpuplan.placement.simulate import pools_from_objects

    w = World(_rf(path))
    pools = pools_from_objects(w.rf, w.docs)
    for tier in w.rf.fleet.spec.tiers:
        if w.rf.tier_resource(tier) is None:
            continue
        verdicts = set()
        for p in pools:
            if p.name == tier.pool:
                continue
            pod = _contract(w, tier.name)
            pod["spec"]["nodeSelector"] = {POOL_LABEL: p.name}
            verdicts.add(tuple(w.cluster.policy_denials(pod, w.ns["default"], w.cluster.selected(w.ns["default"]), JOBS)))
        assert len(verdicts) <= 1, (tier.name, verdicts)


# --- the tenant pages say what the cluster enforces ------------------------------------------------


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_tenant_pages_state_the_quotas_the_cluster_enforces(path, tmp_path):
    """Every "Enforced by ResourceQuota" number on a tenant page is what the generated
    ResourceQuotas let that class hold in that namespace."""
    import re

    import yaml

    from gpuplan.compiler import compile_fleet
    from gpuplan.identity import quota_cap

    c = compile_fleet(path, out_dir=tmp_path / "out")
    quotas: dict[str, list] = {}
    for f, data in c.files.items():
        if f.endswith("resourcequotas.yaml"):
            for d in yaml.safe_load_all(data):
                if d:
                    quotas.setdefault(d["metadata"]["namespace"], []).append(d)
    seen = 0
    for f, data in c.files.items():
        if not re.fullmatch(r"tenants/[^/]+/README\.md", f):
            continue
        text = data.decode()
        for section in text.split("\n## Tier ")[1:]:
            res = re.search(r"resource `([^`]+)`", section).group(1)
            m = re.search(r"Enforced by ResourceQuota, for pods of `([^`]+)`: (.*)\n", section)
            if not m:
                continue
            for ns, cap in re.findall(r"`([^`]+)` at most (\d+)", m.group(2)):
                assert quota_cap(quotas[ns], m.group(1), res) == int(cap), (f, ns)
                seen += 1
    assert seen > 0


def test_the_proof_finds_a_gpu_claim_outside_the_grants(tmp_path, monkeypatch):
    def drop_claims_policy(docs):
        docs[:] = [d for d in docs if not (d["kind"].startswith("ValidatingAdmissionPolicy")
                                           and d["metadata"]["name"].endswith("-claims"))]
    _weaken(monkeypatch, drop_claims_policy)
    text = (REPO / "examples" / "dra.yaml").read_text()
    found = [d for d in _rf_text(tmp_path, text).diagnostics if d.code == "GP527"]
    assert any("ResourceClaim of DeviceClass gpu.nvidia.com" in d.message and "'default'" in d.message
               and "uncharged" in d.message for d in found)



def test_system_namespaces_are_left_alone_and_old_daemonsets_keep_their_pods(fleet):
    """kube-proxy, CNI and CSI node plugins tolerate every taint: the cluster's system namespaces
    and the namespaces of what gpuplan installs are in no binding; a DaemonSet's pod is created by
    its controller (the DaemonSet was held to the template rule), a tenant's own pod is not."""
    from gpuplan.lower.admission import exempt_namespaces

    exempt = set(exempt_namespaces(fleet.rf))
    assert {"kube-system", "kube-node-lease", "kube-public", "gpu-operator", "argocd"} <= exempt
    agent = _pod({"tolerations": [{"operator": "Exists"}], "containers": [{"name": "agent", "image": "fluent-bit"}]})
    assert fleet.denials(agent, "kube-system") == []
    assert any("may tolerate the GPU pools' taint" in m for m in fleet.denials(agent, "logging"))
    ds = {"operation": "CREATE", "userInfo": {"username": "system:serviceaccount:kube-system:daemon-set-controller"}}
    assert fleet.denials(agent, "logging", ds) == []
    daemonset = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
                 "spec": {"template": {"spec": copy.deepcopy(agent["spec"])}}}
    assert any("may tolerate the GPU pools' taint" in m for m in fleet.denials(daemonset, "logging"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_on_the_tenant_pages_is_admitted_where_it_says(path, tmp_path):
    """The Pods and Jobs a tenant page shows pass the emitted admission policies in the namespace
    the page puts them in (a page never shows an object the cluster would refuse)."""
    import re

    import yaml

    from gpuplan.compiler import compile_fleet

    c = compile_fleet(path, out_dir=tmp_path / "out")
    w = World(c.resolved)
    assert w.cluster.policies  # every example runs Kubernetes >= 1.30
    seen = 0
    for f, data in c.files.items():
        if not re.fullmatch(r"tenants/[^/]+/README\.md", f):
            continue
        for block in re.findall(r"```yaml\n(.*?)```", data.decode(), re.S):
            for obj in yaml.safe_load_all(block):  # a PodGroup with its first pod (Volcano)
                if obj.get("kind") not in ("Pod", "Job", "PodGroup"):
                    continue
                ns = obj["metadata"].pop("namespace")
                assert w.denials(obj, ns) == [], (f, obj["kind"], ns)
                seen += 1
    assert seen


# --- pods bound by name, controller updates --------------------------------------------------------


def test_a_pod_that_names_its_node_is_refused_and_the_proof_tries_one_on_every_pool(fleet):
    """The kubelet admits a pod bound by ``spec.nodeName`` whatever the node's NoSchedule taints: the
    policy refuses such pods outside the exempt namespaces, whatever their class; a kubelet's mirror
    pod and an exempt namespace pass; the proof tries one on a node of each pool."""
    from gpuplan.compiler import placement_docs as docs_of

    squat = _pod({"nodeName": "train-a100-node-0", "priorityClassName": "system-node-critical",
                  "containers": [{"name": "c", "image": "busybox"}]})
    assert any("spec.nodeName" in m for m in fleet.denials(squat, "default"))
    assert any("spec.nodeName" in m for m in fleet.denials(squat, "vision-serve"))
    tier = _contract(fleet, "inference-small")
    tier["spec"]["nodeName"] = "serve-l4-node-0"
    assert any("spec.nodeName" in m for m in fleet.denials(tier, "vision-serve"))
    mirror = {"operation": "CREATE", "userInfo": {"username": "system:node:serve-l4-node-0"}}
    assert not any("spec.nodeName" in m for m in fleet.denials(squat, "vision-serve", mirror))
    assert fleet.denials(squat, "kube-system") == []
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w"},
                  "spec": {"template": {"spec": copy.deepcopy(squat["spec"])}}}
    assert any("spec.nodeName" in m for m in fleet.denials(deployment, "vision-serve"))

    b = prove_boundary(fleet.rf, docs_of(fleet.rf), record=True)
    named = [c for c in b.cases if c.pod["spec"].get("nodeName")]
    unclassed = {c.pod["spec"]["nodeName"] for c in named if not c.pod["spec"].get("priorityClassName")}
    assert unclassed == {f"{p.name}-node-0" for p in fleet.rf.fleet.spec.pools}
    assert {c.pod["spec"].get("priorityClassName") for c in named} >= {"system-node-critical", "gpuplan-inference-small"}
    assert not any(c.admitted for c in named)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_a_tier_pod_naming_a_node_gets_the_same_verdict_on_every_pool(path):
    """The proof tries a tier's class bound by name on its own pool and one other: the policies read
    only whether a pod names a node, so each class's pod is refused alike on every pool's node."""
    from gpuplan.queues import namespace_grants

    w = World(_rf(path))
    if not w.cluster.policies:
        return
    grants = namespace_grants(w.rf)
    for t in w.rf.fleet.spec.tiers:
        ns = next((n for n, g in sorted(grants.items()) if t.name in g), None)
        if w.rf.tier_resource(t) is None or ns is None:
            continue
        verdicts = set()
        for p in w.rf.fleet.spec.pools:
            pod = _contract(w, t.name)
            pod["spec"]["nodeName"] = f"{p.name}-node-0"
            verdicts.add(tuple(m for m in w.denials(pod, ns) if "spec.nodeName" in m))
        assert len(verdicts) == 1 and all(verdicts), (t.name, ns, verdicts)


def test_the_proof_finds_a_pod_bound_by_name_onto_a_gpu_pool(tmp_path, monkeypatch):
    _drop_validations(monkeypatch, lambda v: "nodeName" in v["expression"])
    found = [d for d in _rf_text(tmp_path, BASE).diagnostics if d.code == "GP527"]
    assert any("spec.nodeName" in d.message and "runs on GPU pool" in d.message for d in found), \
        [d.message for d in found]


@pytest.mark.parametrize("kind", ["ReplicaSet", "Deployment", "StatefulSet", "Job"])
def test_a_controller_scales_a_workload_of_a_revoked_class_but_no_template_change_passes(fleet, kind):
    """After a tier is revoked or renamed, the workloads of its class are left to the rules of the day:
    an UPDATE that changes only their scale (the Deployment controller's ``scaleReplicaSet``) passes,
    one that changes their pod template is checked, and each pod they create is a Pod CREATE."""
    from gpuplan.placement.cel import evaluate_policy

    old_spec = _contract(fleet, "inference-small")["spec"]
    old_spec["priorityClassName"] = "gpuplan-retired-tier"  # a class no tier has any more
    group = "batch/v1" if kind == "Job" else "apps/v1"
    old = {"apiVersion": group, "kind": kind, "metadata": {"name": "w", "namespace": "vision-serve"},
           "spec": {"replicas": 3, "template": {"spec": old_spec}}}
    ns = fleet.namespace("vision-serve")
    scaled = copy.deepcopy(old)
    scaled["spec"]["replicas"] = 1
    upd = {"operation": "UPDATE", "userInfo": {"username": "system:serviceaccount:kube-system:deployment-controller"}}

    def refusals(obj, request, previous):
        return [m for p in fleet.cluster.policies.values()
                for m in evaluate_policy(p, obj, ns, request, previous)]
    assert refusals(old, TENANT, None), "a workload of a class no tier has is refused on CREATE"
    assert refusals(scaled, upd, old) == []
    changed = copy.deepcopy(scaled)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.example/cuda:13"
    assert any("GPU resources only under" in m for m in refusals(changed, upd, old))
    pod = _pod(copy.deepcopy(old_spec))
    assert any("GPU resources only under" in m for m in fleet.denials(pod, "vision-serve"))


def test_a_job_unsuspended_by_anyone_but_kueue_is_still_refused(kueue):
    """Only the suspension changes (no template change): the queued class's rule still reads it."""
    from gpuplan.placement.cel import evaluate_policy
    from gpuplan.queues import namespace_grants, queued_tiers

    tier = next(t for t in kueue.rf.fleet.spec.tiers if t.name in queued_tiers(kueue.rf))
    ns = kueue.namespace(next(n for n, g in sorted(namespace_grants(kueue.rf).items()) if tier.name in g))
    spec = _contract(kueue, tier.name)["spec"]
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "j", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
           "spec": {"suspend": True, "template": {"spec": spec}}}
    started = copy.deepcopy(job)
    started["spec"]["suspend"] = False
    msgs = [m for p in kueue.cluster.policies.values()
            for m in evaluate_policy(p, started, ns, {"operation": "UPDATE", "userInfo": {"username": "alice"}}, job)]
    assert any("only Kueue starts a suspended workload" in m for m in msgs), msgs


def test_a_running_queued_job_keeps_the_pod_count_kueue_admitted(kueue):
    """The Job controller starts the pods of a raised parallelism at once, before Kueue suspends the
    Job whose Workload no longer matches (kueue v0.19.2 reconciler.go:1085-1106): a running queued
    Job's owner may lower it, or raise it while suspended; Kueue and the controllers may change it."""
    from gpuplan.placement.cel import evaluate_policy
    from gpuplan.queues import kueue_user, namespace_grants, queued_tiers

    tier = next(t for t in kueue.rf.fleet.spec.tiers if t.name in queued_tiers(kueue.rf))
    ns = kueue.namespace(next(n for n, g in sorted(namespace_grants(kueue.rf).items()) if tier.name in g))
    spec = _contract(kueue, tier.name)["spec"]
    running = {"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": "j", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
               "spec": {"suspend": False, "parallelism": 2, "template": {"spec": spec}}}

    def refused(new, old, user="alice"):
        req = {"operation": "UPDATE", "userInfo": {"username": user}}
        return [m for p in kueue.cluster.policies.values() for m in evaluate_policy(p, new, ns, req, old)
                if "keeps the pod count" in m]

    def with_(job, **spec):
        out = copy.deepcopy(job)
        out["spec"].update(spec)
        return out
    assert refused(with_(running, parallelism=3), running)
    unset = copy.deepcopy(running)
    del unset["spec"]["parallelism"]  # the API server's default: 1
    assert refused(with_(running, parallelism=2), unset)
    assert refused(with_(running, parallelism=1), running) == []
    assert refused(with_(running, parallelism=3), with_(running, suspend=True)) == []  # resized while suspended
    assert refused(with_(running, parallelism=3), running, kueue_user(kueue.rf)) == []
    # a JobSet's pods are its replicas times its Jobs' parallelism; a PyTorchJob's, its replicas
    job_set = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
               "metadata": {"name": "js", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
               "spec": {"suspend": False, "replicatedJobs": [
                   {"name": "w", "replicas": 2, "template": {"spec": {"parallelism": 1, "template": {"spec": spec}}}}]}}
    wider = copy.deepcopy(job_set)
    wider["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] = 2
    assert refused(wider, job_set)
    torch = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
             "metadata": {"name": "pt", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
             "spec": {"runPolicy": {"suspend": False}, "pytorchReplicaSpecs": {
                 "Master": {"replicas": 1, "template": {"spec": spec}},
                 "Worker": {"replicas": 2, "template": {"spec": spec}}}}}
    more = copy.deepcopy(torch)
    more["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 3
    assert refused(more, torch)
    assert refused(torch, more) == []
    # the same raise on a Job of a tier that is not queued is not this rule's
    other = next(t for t in kueue.rf.fleet.spec.tiers if t.name not in queued_tiers(kueue.rf)
                 and kueue.rf.tier_resource(t) is not None)
    plain = with_(running, template={"spec": _contract(kueue, other.name)["spec"]})
    assert refused(with_(plain, parallelism=3), plain) == []


def test_a_queued_job_on_a_topology_aware_pool_asks_kueue_for_topology(kueue):
    """On a fleet whose queues have topology-aware flavors beside others, Kueue gives a pod set that
    does not ask for TAS only the others (kueue v0.19.2 tas_flavorassigner.go:166-203): a Job of a
    tier on a topology-aware pool without a topology annotation would wait for ever, so it is
    refused; with the one the tenant pages write, or a required topology, it passes; a tier on a
    pool that is not topology-aware needs none."""
    from gpuplan.identity import QUEUE_LABEL, UNCONSTRAINED_TOPOLOGY
    from gpuplan.queues import namespace_grants, queued_tiers, tas_pools

    rf = kueue.rf
    tas = tas_pools(rf)
    tier = next(t for t in rf.fleet.spec.tiers if t.name in queued_tiers(rf) and t.pool in tas)
    other = next(t for t in rf.fleet.spec.tiers if t.name in queued_tiers(rf) and t.pool not in tas)

    def job(t, annotations):
        ns = next(n for n, g in sorted(namespace_grants(rf).items()) if t.name in g)
        spec = _contract(kueue, t.name)["spec"]
        tmpl = {"spec": copy.deepcopy(spec), **({"metadata": {"annotations": annotations}} if annotations else {})}
        return ns, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "labels": {QUEUE_LABEL: "default"}},
                    "spec": {"suspend": True, "template": tmpl}}

    def refused(t, annotations):
        ns, j = job(t, annotations)
        return any("asks Kueue for topology" in m for m in kueue.denials(j, ns))
    assert refused(tier, None)
    assert refused(tier, {"example.com/other": "x"})
    assert not refused(tier, {UNCONSTRAINED_TOPOLOGY: "true"})
    assert not refused(tier, {"kueue.x-k8s.io/podset-required-topology": "topology.example.com/rack"})
    assert not refused(other, None)


def test_a_queued_job_takes_only_its_own_tiers_queue_priority(kueue):
    """Kueue takes a Job's priority from its ``kueue.x-k8s.io/priority-class`` label (kueue v0.19.2
    reconciler.go:1716-1719) and lets a running Job change it (:1215): a Job of one queued tier is
    refused another tier's WorkloadPriorityClass, on CREATE and on UPDATE; its own, or none, pass;
    and tiers that are not queued have no WorkloadPriorityClass at all."""
    from gpuplan.identity import PRIORITY_LABEL, QUEUE_LABEL, workload_priority_class_name
    from gpuplan.placement.cel import evaluate_policy
    from gpuplan.queues import namespace_grants, queued_tiers

    rf = kueue.rf
    queued = queued_tiers(rf)
    low, high = sorted((rf.tier_by_name[n] for n in queued), key=lambda t: t.priority)[::len(queued) - 1]
    ns_name = next(n for n, g in sorted(namespace_grants(rf).items()) if low.name in g)
    spec = _contract(kueue, low.name)["spec"]

    def job(label):
        labels = {QUEUE_LABEL: "default", **({PRIORITY_LABEL: label} if label is not None else {})}
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "labels": labels},
                "spec": {"suspend": True, "template": {"spec": copy.deepcopy(spec)}}}

    def refused(msgs):
        return any(PRIORITY_LABEL in m for m in msgs)
    assert not refused(kueue.denials(job(None), ns_name))
    assert not refused(kueue.denials(job(workload_priority_class_name(low)), ns_name))
    assert refused(kueue.denials(job(workload_priority_class_name(high)), ns_name))
    assert refused(kueue.denials(job("some-other-class"), ns_name))
    # a CPU-only Job may not borrow a queued tier's priority either
    cpu = job(workload_priority_class_name(high))
    cpu["spec"]["template"]["spec"] = {"containers": [{"name": "c", "image": "busybox"}]}
    assert refused(kueue.denials(cpu, ns_name))
    # a running Job relabelled by its owner: re-checked, though its template is unchanged
    before, after = job(workload_priority_class_name(low)), job(workload_priority_class_name(high))
    ns = kueue.namespace(ns_name)
    upd = {"operation": "UPDATE", "userInfo": {"username": "alice"}}
    msgs = [m for p in kueue.cluster.policies.values() for m in evaluate_policy(p, after, ns, upd, before)]
    assert refused(msgs), msgs
    # the CronJob's jobs carry the label of its jobTemplate
    cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
            "spec": {"schedule": "@daily", "jobTemplate": {"metadata": job(workload_priority_class_name(high))["metadata"],
                                                           "spec": job(None)["spec"]}}}
    assert refused(kueue.denials(cron, ns_name))
    from gpuplan.lower.driver import iter_artifacts

    names = {d["metadata"]["name"] for a in iter_artifacts(rf, only=("gpuplan.lower.kueue",)) for d in a.documents or ()
             if d.get("kind") == "WorkloadPriorityClass"}
    assert names == {workload_priority_class_name(n) for n in queued}
    assert names != {workload_priority_class_name(t) for t in rf.fleet.spec.tiers}, "the example has unqueued tiers"


def test_the_proof_finds_a_job_under_another_tiers_queue_priority(tmp_path, monkeypatch):
    from gpuplan.identity import PRIORITY_LABEL

    _drop_validations(monkeypatch, lambda v: PRIORITY_LABEL in v["message"])
    text = (REPO / "examples" / "kueue.yaml").read_text(encoding="utf-8")
    found = [d for d in _rf_text(tmp_path, text, "kueue.yaml").diagnostics if d.code == "GP527"]
    assert any("takes Kueue priority gpuplan-" in d.message for d in found), [d.message for d in found]


def test_the_proof_finds_a_tier_pod_of_zero_units_on_its_pool(tmp_path, monkeypatch):
    _drop_validations(monkeypatch, lambda v: "request at least 1" in v["message"])
    found = [d for d in _rf_text(tmp_path, BASE).diagnostics if d.code == "GP527"]
    assert any(": 0 nvidia.com/" in d.message and "runs on GPU pool" in d.message for d in found), \
        [d.message for d in found]


def test_a_tiers_grant_is_charged_to_its_own_pool(tmp_path, monkeypatch):
    """Two tiers of nvidia.com/gpu on different pools: a ResourceQuota counts the name whatever
    the pool, so each tier's grant is a quota scoped to its class; the proof reads a grant as its
    tier's pool's and finds the unscoped quota that let one tier spend the other's units."""
    text = edit(BASE, "sharing: {mode: time-slicing, replicas: 4}", "sharing: {mode: exclusive}")
    text = edit(text, "alpha-ns: {training: 8, serve: 8, notebooks: 16}", "alpha-ns: {training: 8, serve: 8, notebooks: 4}")
    checked = _rf_text(tmp_path, text)
    assert not [d for d in checked.diagnostics if d.code == "GP527"]
    assert [d.severity.value for d in checked.diagnostics if d.code == "GP405"] == ["info"]
    rf = checked.resolved
    quotas = {d["metadata"]["name"]: d["spec"] for d in placement_docs(rf)
              if d["kind"] == "ResourceQuota" and d["metadata"]["namespace"] == "alpha-ns"}
    assert quotas["gpuplan-tier-training"]["hard"] == {"requests.nvidia.com/gpu": "8"}
    assert quotas["gpuplan-tier-notebooks"]["hard"] == {"requests.nvidia.com/gpu": "4"}
    assert quotas["gpuplan-tier-training"]["scopeSelector"]["matchExpressions"][0]["values"] == ["gpuplan-training"]

    import gpuplan.lower.tenancy as tenancy

    monkeypatch.setattr(tenancy, "class_scoped", lambda rf, t: t.enforce_priority)  # the quotas before
    found = [d for d in _rf_text(tmp_path, text).diagnostics if d.code == "GP527"]
    assert any("can hold 12 nvidia.com/gpu (quota) where the namespace is granted 8" in d.message for d in found), \
        [d.message for d in found]


def test_a_gpu_name_the_tree_does_not_advertise_is_still_a_gpu(fleet, tmp_path, monkeypatch):
    """A MIG profile or renamed share a change dropped stays on the nodes until they are
    repartitioned, and no quota of the new tree charges it: every name NVIDIA's device plugin can
    advertise is a GPU resource to the policies, and the proof tries one this tree lacks."""
    from gpuplan.lower import admission
    from gpuplan.resolve import is_gpu_name

    dropped = "nvidia.com/mig-1g.5gb"
    assert dropped not in fleet.rf.gpu_resources and is_gpu_name(dropped)
    assert not is_gpu_name("nvidia.com/rdma_shared_device_a")  # NVIDIA's network resources are not GPUs
    bare = _pod({"containers": [{"name": "c", "image": "cuda", "resources": {"limits": {dropped: "1"}}}]})
    assert any("GPU resources only under" in m for m in fleet.denials(bare, "vision-train"))
    tier = _contract(fleet, "training")
    tier["spec"]["containers"][0]["resources"] = {"limits": {dropped: "1"}}
    assert fleet.denials(tier, "vision-train"), "a tier's class may request only its own resource"

    def old_gpu_key(k, rf):  # the names of this tree only
        return f"({k} in {admission._lit(list(rf.gpu_resources))} || {k}.startsWith({admission._lit(admission.IMPLICIT_DRA_PREFIX)}))"
    monkeypatch.setattr(admission, "_gpu_key", old_gpu_key)
    found = [d for d in _rf_text(tmp_path, BASE).diagnostics if d.code == "GP527"]
    assert any("nvidia.com/mig-1g.5gb" in d.message for d in found), [d.message for d in found]


# --- the headline: what the proof tried, from the shapes it enumerated -------------------------


@pytest.mark.parametrize("name", ["fleet.yaml", "dra.yaml", "kueue.yaml"])
def test_headline_lists_the_shapes_it_enumerated(name):
    from gpuplan.dra.claims import any_dra
    from gpuplan.identity import exempt_namespaces
    from gpuplan.placement.boundary import CONTROLLER_SHAPE, DRA_NOT_COVERED, coverage
    from gpuplan.queues import queued_tiers

    rf = _rf(REPO / "examples" / name)
    b = prove_boundary(rf, placement_docs(rf), record=True)
    tried, not_covered = coverage(b)
    assert all(k in tried for k in b.tried) and all(x in not_covered for x in b.not_covered)
    # a shape is listed exactly when pods of it were enumerated
    nodename = sum("spec.nodeName" in c.words for c in b.cases) // max(1, b.namespace_shapes)
    assert ("spec.nodeName to a node of each pool" in b.tried) == (nodename > 0)
    capped = any(t.max_gpus_per_pod is not None for t in rf.fleet.spec.tiers)
    assert ("more than maxGPUsPerPod, in containers and in a sidecar" in b.tried) == capped
    assert (CONTROLLER_SHAPE in b.tried) == bool(queued_tiers(rf))
    assert ("a ResourceClaim of every GPU DeviceClass" in b.tried) == any_dra(rf)
    assert (DRA_NOT_COVERED in b.not_covered) == any_dra(rf)
    assert all(ns in not_covered for ns in sorted(exempt_namespaces(rf))[:6])
    assert "updates of running pods" in not_covered  # every enumerated request is a CREATE
    assert {c.request["operation"] for c in b.cases} == {"CREATE"}
