"""Real Kueue admits what the tenant pages promise (examples with ``spec.queueing``).

On the example's tree, applied to a control plane of its own with the nodes its pools register
and the Kueue manager gpuplan pins running with the tree's own configuration: every tenant
page's queued Job is admitted by Kueue (its Workload gets quota), started, and its pods are
bound to nodes of the tier's pool; a Job beyond what the tenant's ClusterQueue may admit stays
suspended with its Workload pending."""

from __future__ import annotations

import copy

import pytest

from gpuplan.compiler import check_fleet, placement_docs
from gpuplan.identity import POOL_LABEL
from gpuplan.placement.simulate import ert_enabled
from gpuplan.queues import queued_tiers
from tests.e2e.cluster import deploy, deployed_outside_root, sleep_until, tenant_page_objects, wait_scheduled
from tests.e2e.kueue import start_kueue
from tests.golden.refresh import targets

pytestmark = pytest.mark.slow

def _kueue(spec) -> bool:
    """The example queues with Kueue (``queueing`` without another ``engine``)."""
    import yaml

    q = (yaml.safe_load(spec.read_text(encoding="utf-8"))["spec"] or {}).get("queueing")
    return q is not None and (q or {}).get("engine", "kueue") == "kueue"


QUEUED = [(s, t) for s, t in targets() if _kueue(s)]


@pytest.fixture(scope="module", params=QUEUED, ids=[s.stem for s, _ in QUEUED])
def queued(request, clusters):
    spec, tree = request.param
    checked = check_fleet(spec)
    rf = checked.resolved
    cp = clusters.start(f"kueue-{spec.stem}", ("ExtendedResourceToleration",) if ert_enabled(rf) else ())
    try:
        d = deploy(cp, tree)
        d.refusals += deployed_outside_root(d)
        assert not d.refusals, "\n".join(map(str, d.refusals))
        from gpuplan.provisioning.pools import static_nodes
        from gpuplan.report.nodes import fleet_nodes

        # static pools' nodes are there from the start; an autoscaled pool's come up only once an
        # admitted Job's pods need them: Kueue admits burst tiers with zero nodes up
        nodes = Nodes(cp, fleet_nodes(rf, placement_docs(rf), kwok=True))
        nodes.up([p.name for p in rf.fleet.spec.pools if static_nodes(p)])
        start_kueue(cp, tree, rf)
        yield rf, tree, d, nodes
    finally:
        clusters.stop(cp)


class Nodes:
    def __init__(self, cp, nodes: list[dict]):
        self.cp, self.nodes = cp, nodes
        self.pool_of = {n["metadata"]["name"]: n["metadata"]["labels"].get(POOL_LABEL, "") for n in nodes}
        self.created: set[str] = set()

    def up(self, pools) -> None:
        for n in self.nodes:
            name = n["metadata"]["name"]
            if self.pool_of[name] in pools and name not in self.created:
                code, body = self.cp.create(n)
                assert code == 201, body.get("message")
                self.created.add(name)

    def count(self, pool: str) -> int:
        return sum(1 for n in self.created if self.pool_of[n] == pool)


def test_queued_examples_exist():
    assert QUEUED, "an example with spec.queueing (examples/kueue.yaml)"


def _workload(cp, ns: str, job: str) -> dict | None:
    body = cp.get(f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads")
    for w in (body or {}).get("items", []):
        if any(o.get("name") == job for o in w["metadata"].get("ownerReferences", [])):
            return w
    return None


def _admitted(w: dict | None) -> bool:
    return w is not None and any(c["type"] == "Admitted" and c["status"] == "True"
                                 for c in w.get("status", {}).get("conditions", []))


def _submit(cp, job: dict, name: str) -> dict:
    job = copy.deepcopy(job)
    job["metadata"].pop("generateName", None)
    job["metadata"]["name"] = name
    code, body = cp.create(job, impersonate="tenant", groups=("system:authenticated",))
    assert code == 201, (name, code, body.get("message"))
    return body


def test_kueue_admits_every_tenant_pages_queued_job(queued):
    rf, tree, d, nodes = queued
    cp = d.cp
    pool_of = nodes.pool_of
    admitted_without_nodes = []
    queued_classes = {f"gpuplan-{t}" for t in queued_tiers(rf)}
    pool_of_class = {f"gpuplan-{t.name}": t.pool for t in rf.fleet.spec.tiers}
    jobs = [(p, o) for p, o in tenant_page_objects(tree)
            if o["kind"] == "Job" and o["spec"]["template"]["spec"].get("priorityClassName") in queued_classes]
    assert jobs, "the tenant pages of a queued fleet show queued Jobs"
    d.wait_quotas()
    problems = []
    for i, (page, o) in enumerate(jobs):
        ns = o["metadata"]["namespace"]
        d.wait_default_service_account(ns)
        name = f"queued-{i}"
        _submit(cp, o, name)
        if not sleep_until(lambda: _admitted(_workload(cp, ns, name)), 45):
            w = _workload(cp, ns, name)
            problems.append(f"{page}: Job {ns}/{name} not admitted by Kueue: "
                            f"{(w or {}).get('status', {}).get('conditions')}")
            continue
        want = pool_of_class[o["spec"]["template"]["spec"]["priorityClassName"]]
        if nodes.count(want) == 0:
            admitted_without_nodes.append(want)
        nodes.up([want])
        pods: list = []

        def created() -> bool:
            body = cp.get(f"/api/v1/namespaces/{ns}/pods?labelSelector=job-name%3D{name}") or {}
            pods[:] = body.get("items", [])
            return len(pods) == int(o["spec"].get("parallelism", 1))
        if not sleep_until(created, 60):
            job = cp.get(f"/apis/batch/v1/namespaces/{ns}/jobs/{name}")
            problems.append(f"{page}: admitted Job {ns}/{name} created {len(pods)} pods: {job.get('status')}")
            continue
        for p in pods:
            bound = wait_scheduled(cp, ns, p["metadata"]["name"], 60)
            if pool_of.get(bound["spec"]["nodeName"]) != want:
                problems.append(f"{page}: a pod of Job {ns}/{name} is on {bound['spec']['nodeName']}, not pool {want}")
        cp.delete({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns}})
        # the next page's Job may need the same nodes: wait until this one's pods are gone too
        sleep_until(lambda: _workload(cp, ns, name) is None and not (
            cp.get(f"/api/v1/namespaces/{ns}/pods?labelSelector=job-name%3D{name}") or {}).get("items"), 60)
    assert not problems, "\n".join(problems)
    autoscaled = {t.pool for t in rf.fleet.spec.tiers if t.name in queued_tiers(rf)} - {
        p.name for p in rf.fleet.spec.pools if p.nodes}
    assert set(admitted_without_nodes) == autoscaled, "Kueue admits a burst tier's Job with none of its nodes up"


def test_kueue_holds_a_job_beyond_its_queues_quota(queued):
    """The tenant page's Job with ten times the pods: more than the tenant's ClusterQueue may
    admit, borrowing included; Kueue evaluates it (QuotaReserved False, Pending) and the Job stays
    suspended, with no pod."""
    rf, tree, d, nodes = queued
    cp = d.cp
    queued_classes = {f"gpuplan-{t}" for t in queued_tiers(rf)}
    page, job = next((p, o) for p, o in tenant_page_objects(tree) if o["kind"] == "Job"
                     and o["spec"]["template"]["spec"].get("priorityClassName") in queued_classes)
    job = copy.deepcopy(job)
    n = 10 * int(job["spec"].get("parallelism", 1))
    job["spec"]["parallelism"] = job["spec"]["completions"] = n
    ns = job["metadata"]["namespace"]
    d.wait_default_service_account(ns)
    _submit(cp, job, "beyond-quota")

    def evaluated() -> bool:
        w = _workload(cp, ns, "beyond-quota")
        return w is not None and any(c["type"] == "QuotaReserved" and c["status"] == "False" and c["reason"] == "Pending"
                                     for c in w.get("status", {}).get("conditions", []))
    assert sleep_until(evaluated, 60), _workload(cp, ns, "beyond-quota")
    assert not _admitted(_workload(cp, ns, "beyond-quota"))
    j = cp.get(f"/apis/batch/v1/namespaces/{ns}/jobs/beyond-quota")
    assert j["spec"]["suspend"] is True
    assert not (cp.get(f"/api/v1/namespaces/{ns}/pods?labelSelector=job-name%3Dbeyond-quota") or {}).get("items")


def test_a_job_takes_only_its_own_tiers_queue_priority(queued):
    """The tenant page's queued Job under the WorkloadPriorityClass of the highest other queued tier
    is refused by the API server; under its own, Kueue's Workload takes its tier's priority (kueue
    v0.19.2 reconciler.go:1716-1719); relabelling the submitted Job to the other class is refused
    (Kueue would re-read it: :1215 UpdateWorkloadPriority)."""
    from gpuplan.identity import PRIORITY_LABEL, workload_priority_class_name

    rf, tree, d, nodes = queued
    cp = d.cp
    tiers = {workload_priority_class_name(t): t for t in rf.fleet.spec.tiers if t.name in queued_tiers(rf)}
    page, job = next((p, o) for p, o in tenant_page_objects(tree) if o["kind"] == "Job"
                     and (o["metadata"].get("labels") or {}).get(PRIORITY_LABEL) in tiers)
    own = job["metadata"]["labels"][PRIORITY_LABEL]
    other = max((w for w in tiers if w != own), key=lambda w: tiers[w].priority)
    ns = job["metadata"]["namespace"]
    d.wait_default_service_account(ns)
    borrowed = copy.deepcopy(job)
    borrowed["metadata"].pop("generateName", None)
    borrowed["metadata"]["name"] = "borrowed-priority"
    borrowed["metadata"]["labels"][PRIORITY_LABEL] = other
    code, body = cp.create(borrowed, impersonate="tenant", groups=("system:authenticated",))
    assert code == 403 and PRIORITY_LABEL in (body.get("message") or ""), (page, other, code, body.get("message"))

    _submit(cp, job, "own-priority")
    try:
        assert sleep_until(lambda: _workload(cp, ns, "own-priority") is not None, 45), "Kueue made no Workload"
        w = _workload(cp, ns, "own-priority")
        assert w["spec"].get("priority") == tiers[own].priority, w["spec"]
        code, body = cp.request("PATCH", f"/apis/batch/v1/namespaces/{ns}/jobs/own-priority",
                                {"metadata": {"labels": {PRIORITY_LABEL: other}}},
                                content_type="application/merge-patch+json",
                                impersonate="tenant", groups=("system:authenticated",))
        assert code == 403 and PRIORITY_LABEL in (body.get("message") or ""), (code, body.get("message"))
    finally:
        cp.delete({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "own-priority", "namespace": ns}})
        sleep_until(lambda: _workload(cp, ns, "own-priority") is None, 60)


def test_a_running_queued_job_keeps_the_pod_count_kueue_admitted(queued):
    """The tenant page's queued Job, admitted and started by Kueue: its owner's raise of its
    parallelism is refused by the API server (the Job controller would start the extra pods before
    Kueue suspends the Job: kueue v0.19.2 reconciler.go:1085-1106); lowering it passes."""
    rf, tree, d, nodes = queued
    cp = d.cp
    queued_classes = {f"gpuplan-{t}" for t in queued_tiers(rf)}
    page, job = next((p, o) for p, o in tenant_page_objects(tree) if o["kind"] == "Job"
                     and o["spec"]["template"]["spec"].get("priorityClassName") in queued_classes)
    ns = job["metadata"]["namespace"]
    d.wait_default_service_account(ns)
    d.wait_quotas()
    _submit(cp, job, "resized")
    path = f"/apis/batch/v1/namespaces/{ns}/jobs/resized"
    try:
        assert sleep_until(lambda: _admitted(_workload(cp, ns, "resized"))
                           and cp.get(path)["spec"].get("suspend") is False, 60), _workload(cp, ns, "resized")
        n = int(cp.get(path)["spec"].get("parallelism", 1))

        def resize(k: int) -> tuple[int, dict]:
            return cp.request("PATCH", path, {"spec": {"parallelism": k}}, content_type="application/merge-patch+json",
                              impersonate="tenant", groups=("system:authenticated",))
        code, body = resize(n + 1)
        assert code == 403 and "keeps the pod count" in (body.get("message") or ""), (page, code, body.get("message"))
        if n > 1:
            code, body = resize(n - 1)
            assert code == 200, (page, code, body.get("message"))
    finally:
        cp.delete({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "resized", "namespace": ns}})
        sleep_until(lambda: _workload(cp, ns, "resized") is None and not (
            cp.get(f"/api/v1/namespaces/{ns}/pods?labelSelector=job-name%3Dresized") or {}).get("items"), 60)


def test_a_job_on_a_topology_aware_pool_without_a_topology_request_is_refused(queued):
    """The tenant page's Job of a tier on a topology-aware pool, less its topology annotation: the
    API server refuses it (Kueue would give it only the flavors that are not topology-aware and it
    would wait for ever: kueue v0.19.2 tas_flavorassigner.go:166-203); as the page writes it, a
    dry run passes."""
    from gpuplan.lower.admission import TAS_ANNOTATIONS
    from gpuplan.queues import tas_pools

    rf, tree, d, nodes = queued
    cp = d.cp
    tas = tas_pools(rf)
    classes = {f"gpuplan-{t.name}" for t in rf.fleet.spec.tiers if t.name in queued_tiers(rf) and t.pool in tas}
    jobs = [(p, o) for p, o in tenant_page_objects(tree) if o["kind"] == "Job"
            and o["spec"]["template"]["spec"].get("priorityClassName") in classes]
    if not tas:
        assert not jobs
        return
    assert jobs, "a tenant page shows a Job of a tier on a topology-aware pool"
    page, job = jobs[0]
    ns = job["metadata"]["namespace"]
    d.wait_default_service_account(ns)
    d.wait_quotas()
    as_written = copy.deepcopy(job)
    as_written["metadata"].pop("generateName", None)
    as_written["metadata"]["name"] = "topology"
    annotations = as_written["spec"]["template"]["metadata"]["annotations"]
    asked = [k for k in TAS_ANNOTATIONS if k in annotations]
    assert asked, annotations  # unconstrained, or a gang's required level
    code, body = cp.create(as_written, dry_run=True, impersonate="tenant", groups=("system:authenticated",))
    assert code == 201, (page, code, body.get("message"))
    bare = copy.deepcopy(as_written)
    for k in asked:
        del bare["spec"]["template"]["metadata"]["annotations"][k]
    code, body = cp.create(bare, dry_run=True, impersonate="tenant", groups=("system:authenticated",))
    assert code in (403, 422) and "asks Kueue for topology" in (body.get("message") or ""), (page, code, body.get("message"))
