"""Every example tree on a real control plane (tests/cluster): kube-apiserver, the controller
manager, the scheduler and KWOK, built from the Go module proxy at the pinned release.

Per example, on a control plane of its own with the admission plugins of the spec's platform:

- every generated object is applied in the engine's order (server-side apply) and accepted,
  and every ValidatingAdmissionPolicy's type check (``status.typeChecking``) has no warning;
- every pod the in-build boundary proof enumerates (GP527) is submitted (dry run) in every
  namespace state the proof considers, as the user the proof assumes, and the API server's
  verdict equals the proof's;
- the nodes each pool registers (``gpuplan nodes``) are created as KWOK nodes; every tenant
  page's example Pod and Job is admitted and bound by the real scheduler to a node of its own
  pool, and a pod over its namespace's grant is refused."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpuplan.compiler import check_fleet, placement_docs
from gpuplan.identity import POOL_LABEL
from gpuplan.placement.simulate import ert_enabled
from gpuplan.placement.boundary import prove_boundary
from gpuplan.queues import queued_tiers
from tests.e2e.cluster import (
    Deployed, case_namespaces, deploy, deployed_outside_root, disagreements, dra_slices, job_pod, sleep_until,
    tenant_page_objects, wait_scheduled,
)
from tests.golden.refresh import targets

pytestmark = pytest.mark.slow

CASES = targets()


@dataclass
class Example:
    spec: Path
    tree: Path
    rf: Any
    deployed: Deployed

    @property
    def cp(self):
        return self.deployed.cp


@pytest.fixture(scope="module", params=CASES, ids=[s.stem for s, _ in CASES])
def example(request, clusters) -> Example:
    spec, tree = request.param
    checked = check_fleet(spec)
    assert checked.resolved is not None and not checked.failed()
    rf = checked.resolved
    plugins = ("ExtendedResourceToleration",) if ert_enabled(rf) else ()
    cp = clusters.start(spec.stem, plugins)
    try:
        d = deploy(cp, tree)
        d.refusals += deployed_outside_root(d)
        yield Example(spec, tree, rf, d)
    finally:
        clusters.stop(cp)


def test_every_object_is_accepted(example):
    assert example.deployed.applied > 0
    assert not example.deployed.refusals, "\n".join(map(str, example.deployed.refusals))


def test_admission_policies_type_check_without_warnings(example):
    cp = example.cp
    names = [o["metadata"]["name"] for o in example.deployed.tree.objects.values()
             if o["kind"] == "ValidatingAdmissionPolicy"]
    if not names:
        assert example.rf.fleet.spec.cluster.kubernetes_version < "1.30" or not example.rf.fleet.spec.tenants
        return
    status: dict[str, Any] = {}

    def checked() -> bool:
        for n in names:
            p = cp.get(f"/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/{n}")
            if p is None or p.get("status", {}).get("observedGeneration") != p["metadata"]["generation"]:
                return False
            status[n] = p["status"]
        return True
    cp.wait(checked, 60, "the API server's type check of every ValidatingAdmissionPolicy")
    warnings = {n: s.get("typeChecking", {}).get("expressionWarnings") for n, s in status.items()
                if s.get("typeChecking", {}).get("expressionWarnings")}
    assert not warnings, warnings


def test_the_boundary_proof_agrees_with_the_api_server(example):
    """GP527's verdict on every pod it enumerates, in every namespace state, is the API server's."""
    b = prove_boundary(example.rf, placement_docs(example.rf), record=True)
    if not b.cases:
        assert not example.rf.fleet.spec.tenants
        return
    case_namespaces(example.deployed, b.cases)
    disagree = disagreements(example.cp, b.cases)
    assert not disagree, f"{len(disagree)} of {len(b.cases)} verdicts differ:\n" + "\n".join(disagree)


def _create_nodes(example: Example) -> dict[str, str]:
    """The Nodes `gpuplan nodes --kwok` writes for the fleet, created; node name -> pool."""
    from gpuplan.report.nodes import fleet_nodes

    cp = example.cp
    nodes = fleet_nodes(example.rf, placement_docs(example.rf), kwok=True)
    pool_of = {}
    for n in nodes:
        code, body = cp.create(n)
        assert code == 201, (n["metadata"]["name"], body.get("message"))
        pool_of[n["metadata"]["name"]] = n["metadata"]["labels"].get(POOL_LABEL, "")

    def ready() -> bool:
        body = cp.get("/api/v1/nodes") or {"items": []}
        up = {n["metadata"]["name"] for n in body["items"]
              if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))}
        return set(pool_of) <= up
    cp.wait(ready, 60, "KWOK to report every node Ready")
    for sl in dra_slices(example.rf, pool_of):
        code, body = cp.create(sl)
        assert code == 201, (sl["metadata"]["name"], body.get("message"))
    return pool_of


def test_tenant_pages_pods_and_jobs_run_on_their_own_pools(example):
    objs = tenant_page_objects(example.tree)
    queued = {f"gpuplan-{t}" for t in queued_tiers(example.rf)}
    pool_of_tier = {f"gpuplan-{t.name}": t.pool for t in example.rf.fleet.spec.tiers}
    runnable = [(page, o) for page, o in objs if _template(o).get("priorityClassName") not in queued]
    if not runnable:
        assert example.rf.fleet.spec.queueing is not None  # every page's Job is Kueue's (tests/e2e/test_kueue.py)
        return
    pool_of = _create_nodes(example)
    d = example.deployed
    for ns in sorted({o["metadata"]["namespace"] for _, o in runnable}):
        d.wait_default_service_account(ns)
    d.wait_quotas()
    problems = []
    for i, (page, o) in enumerate(runnable):
        o = copy.deepcopy(o)
        ns = o["metadata"]["namespace"]
        if o["kind"] == "Job":
            o["metadata"].pop("generateName", None)
            o["metadata"]["name"] = f"page-job-{i}"
        code, body = example.cp.create(o, impersonate="tenant", groups=("system:authenticated",))
        if code != 201:
            problems.append(f"{page}: {o['kind']} {ns}/{o['metadata'].get('name')} refused ({code}): {body.get('message')}")
            continue
        name = body["metadata"]["name"]
        pod = job_pod(example.cp, ns, name) if o["kind"] == "Job" else body
        bound = wait_scheduled(example.cp, ns, pod["metadata"]["name"])
        want = pool_of_tier[_template(o)["priorityClassName"]]
        got = pool_of.get(bound["spec"]["nodeName"])
        if got != want:
            problems.append(f"{page}: {o['kind']} in {ns} bound to {bound['spec']['nodeName']} of pool {got}, "
                            f"not its tier's pool {want}")
        # free the units again: the next page's pod may share the namespace's grant
        example.cp.delete(o if o["kind"] == "Pod" else {**o, "metadata": {**o["metadata"], "name": name}})
    assert not problems, "\n".join(problems)


def test_tenant_pages_volcano_objects_are_admitted_and_other_queues_refused(example):
    """With Volcano, each page's Volcano Job, PodGroup and its first pod pass the API server as the
    tenant writes them (the pinned CRDs and the policies), in the page's namespace; the same PodGroup
    in another tenant's leaf is refused. Every other engine's pages show none of them."""
    import re

    import yaml

    found = []
    for page in sorted((example.tree / "tenants").glob("*/README.md")):
        for block in re.findall(r"```yaml\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
            for o in yaml.safe_load_all(block):
                if o.get("apiVersion", "").split("/")[0] in ("scheduling.volcano.sh", "batch.volcano.sh") or (
                        o.get("kind") == "Pod" and o["spec"].get("schedulerName") == "volcano"):
                    found.append((page.parent.name, o))
    q = example.rf.fleet.spec.queueing
    if q is None or q.engine != "volcano":
        assert not found
        return
    assert {o["kind"] for _, o in found} == {"Job", "PodGroup", "Pod"}
    d = example.deployed
    tenants = sorted({t for t, _ in found})
    for tenant, o in found:
        o = copy.deepcopy(o)
        ns = o["metadata"]["namespace"]
        d.wait_default_service_account(ns)
        d.wait_quotas()
        if "generateName" in o["metadata"]:
            o["metadata"]["name"] = o["metadata"].pop("generateName") + "page"
        code, body = example.cp.create(o, dry_run=True, impersonate="tenant", groups=("system:authenticated",))
        assert code == 201, (tenant, o["kind"], ns, code, body.get("message"))
        if o["kind"] == "PodGroup":
            other = next(t for t in tenants if t != tenant)
            o["spec"]["queue"] = f"gpuplan-{other}." + o["spec"]["queue"].split(".", 1)[1]
            code, body = example.cp.create(o, dry_run=True, impersonate="tenant", groups=("system:authenticated",))
            assert code == 403, (tenant, o["spec"]["queue"], code, body.get("message"))


def test_a_pod_over_its_namespace_grant_is_refused(example):
    rf = example.rf
    d = example.deployed
    queued = set(queued_tiers(rf))
    tried = 0
    for tn in rf.fleet.spec.tenants:
        for ns, grants in sorted(tn.quotas.items()):
            for tier_name, units in sorted(grants.items()):
                t = rf.tier_by_name.get(tier_name)
                if t is None or t.name in queued or rf.tier_resource(t) is None or units <= 0:
                    continue
                from gpuplan.identity import contract_pod, contract_pod_spec

                spec = contract_pod_spec(rf, t, rf.tier_resource(t), units + 1)
                pod = contract_pod(rf, t, ns, spec)
                d.wait_default_service_account(ns)
                d.wait_quotas()
                code, body = example.cp.create(pod, dry_run=True, impersonate="tenant", groups=("system:authenticated",))
                tried += 1
                assert code in (403, 422), (ns, tier_name, units + 1, code, body.get("message"))
    if not tried:
        pytest.skip("no tenant holds a grant of a tier outside Kueue")


def test_a_gang_pod_without_its_pools_fabric_is_refused(example):
    """A gang tier's contract pod on a pool whose multi-node jobs use EFA
    (identity.tier_gang_resources) is admitted with its ``vpc.amazonaws.com/efa`` and refused
    without it, as whoever creates the tier's pods (simulate.contract_request)."""
    from gpuplan.identity import contract_pod, tier_gang_resources
    from gpuplan.placement.simulate import contract_request
    from tests.e2e.cluster import submit_pod

    rf = example.rf
    d = example.deployed
    tried = 0
    for t in rf.fleet.spec.tiers:
        need = tier_gang_resources(rf, t)
        ns = next((n for tn in rf.fleet.spec.tenants for n, g in sorted(tn.quotas.items()) if g.get(t.name)), None)
        if not need or ns is None:
            continue
        request = contract_request(rf, t) or {"operation": "CREATE", "userInfo": {"username": "tenant"}}
        pod = contract_pod(rf, t, ns)
        d.wait_default_service_account(ns)
        d.wait_quotas()
        code, body = submit_pod(example.cp, pod, ns, request)
        assert code == 201, (t.name, ns, code, body.get("message"))
        without = copy.deepcopy(pod)
        for c in without["spec"]["containers"]:
            for part in ("requests", "limits"):
                for res in need:
                    c["resources"][part].pop(res, None)
        code, body = submit_pod(example.cp, without, ns, request)
        tried += 1
        assert code in (403, 422) and all(res in body.get("message", "") for res in need), (t.name, code, body)
    if not tried:  # nothing to submit: no granted gang tier on a pool whose multi-node jobs use a fabric
        assert not any(tier_gang_resources(rf, t) and any(g.get(t.name) for tn in rf.fleet.spec.tenants
                                                        for g in tn.quotas.values())
                       for t in rf.fleet.spec.tiers)


def test_a_pod_resized_past_its_share_is_refused(example):
    """A tier's pod at its pool's CPU share per GPU, created; growing its CPU in place
    (``pods/resize``) past the share is refused by the API server, and a resize within it passes
    (gpuplan.pergpu; lower/admission.py ``POD_RESIZE``). Examples with no bounded tier outside
    Kueue have nothing to resize."""
    from gpuplan.identity import contract_pod, contract_pod_spec
    from gpuplan.pergpu import unit_share
    from gpuplan.queues import namespace_grants

    rf, d, cp = example.rf, example.deployed, example.cp
    queued = set(queued_tiers(rf))
    grants = namespace_grants(rf)
    found = [(t, s, ns) for t in rf.fleet.spec.tiers if t.name not in queued and rf.tier_resource(t) is not None
             and (s := unit_share(rf, t)) is not None and s.cpu_milli is not None
             for ns in sorted(n for n, g in grants.items() if t.name in g)[:1]]
    if not found:
        assert not any(unit_share(rf, t) for t in rf.fleet.spec.tiers if t.name not in queued)
        return
    t, share, ns = found[0]
    pod = contract_pod(rf, t, ns, contract_pod_spec(rf, t, rf.tier_resource(t), 1))
    pod["metadata"]["name"] = "resized"
    pod["spec"]["containers"][0]["resources"].setdefault("requests", {})["cpu"] = f"{share.cpu_milli // 2}m"
    d.wait_default_service_account(ns)
    d.wait_quotas()
    code, body = cp.create(pod, impersonate="tenant", groups=("system:authenticated",))
    assert code == 201, body.get("message")
    path = f"/api/v1/namespaces/{ns}/pods/resized/resize"
    name = pod["spec"]["containers"][0]["name"]

    def resize(milli: int) -> tuple[int, dict]:
        return cp.request("PATCH", path, {"spec": {"containers": [{"name": name, "resources": {"requests": {
            "cpu": f"{milli}m"}}}]}}, content_type="application/strategic-merge-patch+json",
            impersonate="tenant", groups=("system:authenticated",))
    try:
        code, body = resize(share.cpu_milli + 1000)
        assert code in (403, 422) and f"per {rf.tier_resource(t)}" in (body.get("message") or ""), \
            (code, body.get("message"))
        code, body = resize(share.cpu_milli)
        assert code == 200, (code, body.get("message"))
    finally:
        cp.delete(pod)


def _template(o: dict[str, Any]) -> dict[str, Any]:
    return o["spec"]["template"]["spec"] if o["kind"] == "Job" else o["spec"]


def _claims(o: dict[str, Any]) -> bool:
    return bool(_template(o).get("resourceClaims"))


def test_a_revoked_class_s_workloads_scale_down_and_change_no_template(example):
    """A Deployment of a tier's class, admitted; then the grant is revoked (the namespace leaves the
    grant's binding, as a new tree does): the real Deployment controller still scales its ReplicaSet
    down (a full UPDATE of ``spec.replicas``, kubernetes/kubernetes v1.36.3
    pkg/controller/deployment/sync.go:408 ``scaleReplicaSet``), and a change of its pod template is
    refused."""
    from gpuplan.identity import contract_pod, contract_pod_spec, priority_class_name
    from gpuplan.lower.admission import class_policy_name, enabled

    rf = example.rf
    queued = set(queued_tiers(rf))
    pick = next(((tn, ns, rf.tier_by_name[name]) for tn in rf.fleet.spec.tenants
                 for ns, grants in sorted(tn.quotas.items()) for name, units in sorted(grants.items())
                 if units > 0 and name in rf.tier_by_name and name not in queued
                 and rf.tier_resource(rf.tier_by_name[name]) is not None), None)
    if pick is None or not enabled(rf):
        assert pick is None or rf.fleet.spec.cluster.kubernetes_version < "1.30"
        return
    _, ns, t = pick
    cp, d = example.cp, example.deployed
    d.wait_default_service_account(ns)
    d.wait_quotas()
    pod = contract_pod(rf, t, ns, contract_pod_spec(rf, t, rf.tier_resource(t), 1))
    pod["spec"]["restartPolicy"] = "Always"  # a Deployment's pods restart
    labels = {"app": "revoked-class"}
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "revoked-class", "namespace": ns},
           "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                    "template": {"metadata": {"labels": labels, **({"annotations": pod["metadata"]["annotations"]}
                                                                  if pod["metadata"].get("annotations") else {})},
                                 "spec": pod["spec"]}}}
    code, body = cp.create(dep)
    assert code == 201, body.get("message")
    rs_path = f"/apis/apps/v1/namespaces/{ns}/replicasets?labelSelector=app%3Drevoked-class"

    def replica_sets() -> list[dict]:
        return (cp.get(rs_path) or {}).get("items", [])
    cp.wait(lambda: any(r["spec"].get("replicas") == 1 for r in replica_sets()), 60,
            "the Deployment controller to create the ReplicaSet")

    grant = class_policy_name(rf, priority_class_name(t), "-grant")
    bpath = f"/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/{grant}"
    before = cp.get(bpath)
    assert before is not None, grant
    values = before["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]["values"]
    revoked = [v for v in values if v != ns]
    try:
        code, body = cp.request("PATCH", bpath, [{"op": "replace", "path": "/spec/matchResources/namespaceSelector/"
                                                  "matchExpressions/0/values", "value": revoked}],
                                content_type="application/json-patch+json")
        assert code == 200, body.get("message")
        probe = copy.deepcopy(pod)
        probe["metadata"]["name"] = "revoked-probe"
        # refused by the grant itself (the quota, which the Deployment's pod may fill, refuses too)
        cp.wait(lambda: grant in (cp.create(probe, dry_run=True)[1].get("message") or ""), 30,
                f"the grant of {ns} revoked")

        code, body = cp.request("PATCH", f"/apis/apps/v1/namespaces/{ns}/deployments/revoked-class",
                                {"spec": {"replicas": 0}}, content_type="application/merge-patch+json")
        assert code == 200, f"scaling the Deployment down: {code} {body.get('message')}"
        scaled = sleep_until(lambda: all(r["spec"].get("replicas") == 0 for r in replica_sets()), 60)
        assert scaled, (f"the Deployment controller did not scale the ReplicaSet down: "
                        f"{[(r['metadata']['name'], r['spec'].get('replicas')) for r in replica_sets()]}")
        changed = {"spec": {"template": {"metadata": {"labels": {**labels, "rollout": "2"}}}}}
        code, body = cp.request("PATCH", f"/apis/apps/v1/namespaces/{ns}/deployments/revoked-class",
                                changed, content_type="application/merge-patch+json")
        assert code == 403 and grant in (body.get("message") or ""), \
            f"a pod template change of a revoked class: {code} {body.get('message')}"
    finally:
        cp.request("PATCH", bpath, [{"op": "replace", "path": "/spec/matchResources/namespaceSelector/"
                                     "matchExpressions/0/values", "value": values}],
                   content_type="application/json-patch+json")
        cp.request("DELETE", f"/apis/apps/v1/namespaces/{ns}/deployments/revoked-class", {"propagationPolicy": "Background"})

