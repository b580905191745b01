"""NVIDIA's KAI Scheduler admits gangs on the test control plane (tests/e2e/kai.py).

On KWOK nodes with ``nvidia.com/gpu`` capacity, with hand-written KAI objects (a parent Queue,
leaf Queues with ``gpu`` quota and limit, PodGroups of N pods with ``minMember`` N): KAI's
scheduler, binder and pod grouper, as the chart's ServiceAccounts, bind a gang that fits, leave
a gang that does not fit wholly unbound, hold what a queue's limit does not allow, and give a
pod that names no queue the pod grouper's ``default-queue``."""

from __future__ import annotations

import shutil
import sys

import pytest

from tests.e2e.cluster import sleep_until
from tests.e2e.kai import (DEFAULT_QUEUE, POD_GROUP_ANNOTATION, QUEUE_LABEL, SCHEDULER_NAME, TOPOLOGY_UNSERVED, cycled,
                           scheduler_log, start_kai, use_kai_topology_crd)

pytestmark = pytest.mark.slow

GPU = "nvidia.com/gpu"
NODES, GPUS_PER_NODE = 2, 4
PARENT = "gpuplan-research"
UNLIMITED = {"quota": -1, "limit": -1, "overQuotaWeight": 1}


@pytest.fixture(scope="module")
def kai_bin() -> object:
    if shutil.which("go") is None:
        pytest.skip("Go is not installed: the KAI Scheduler is built from tests/cluster/kai/go.mod "
                    "(README, Quickstart)")
    from controlplane import build_kai, kai_built

    return kai_built() or build_kai(log=lambda line: print(f"kai build: {line}", file=sys.stderr, flush=True))


def _node(i: int) -> dict:
    capacity = {"cpu": "32", "memory": "256Gi", "pods": "110", GPU: str(GPUS_PER_NODE)}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"gpu-{i}", "labels": {"kubernetes.io/hostname": f"gpu-{i}", "type": "kwok"},
                         "annotations": {"kwok.x-k8s.io/node": "fake"}},
            "status": {"capacity": capacity, "allocatable": dict(capacity),
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "kubelet is posting ready status"}]}}


def queue(name: str, gpu: dict, parent: str | None = PARENT, **resources) -> dict:
    spec: dict = {"resources": {"gpu": gpu, **resources}}
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


@pytest.fixture(scope="module")
def kai(clusters, kai_bin):
    cp = clusters.start("kai-engine")
    try:
        for i in range(NODES):
            code, body = cp.create(_node(i))
            assert code == 201, body.get("message")
        # the parent: cluster-wide GPUs, no limit; CPU and memory unlimited (an unset limit is 0)
        code, body = cp.apply(queue(PARENT, {"quota": NODES * GPUS_PER_NODE, "limit": -1, "overQuotaWeight": 1},
                                    parent=None, cpu=UNLIMITED, memory=UNLIMITED))
        assert code < 300, body.get("message")
        # first with the control plane's Topology CRD (Kueue v0.19.2's): the scheduler's cache
        # waits on Kueue's v1alpha1 Topology, which that CRD does not serve
        start_kai(cp, kai_bin, wait=False)
        cp.wait(lambda: TOPOLOGY_UNSERVED.search(scheduler_log(cp)), 120,
                "the KAI scheduler listing Kueue's v1alpha1 Topology")
        cp.__dict__["kai_cycled_with_kueue_topology"] = cycled(cp)
        use_kai_topology_crd(cp)
        cp.wait(lambda: cycled(cp), 180, "the KAI scheduler's first scheduling cycle")
        yield cp
    finally:
        clusters.stop(cp)


def _namespace(cp, name: str) -> str:
    code, body = cp.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    assert code < 300, body
    cp.wait(lambda: cp.get(f"/api/v1/namespaces/{name}/serviceaccounts/default") is not None, 60,
            f"the default ServiceAccount of {name}")
    return name


def pod(ns: str, name: str, gpus: int, queue_name: str | None, group: str | None = None,
        cpu: str | None = None) -> dict:
    labels = {QUEUE_LABEL: queue_name} if queue_name else {}
    limits = {GPU: str(gpus)}
    requests = {"cpu": cpu} if cpu else {}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels,
                         "annotations": {POD_GROUP_ANNOTATION: group} if group else {}},
            "spec": {"schedulerName": SCHEDULER_NAME, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"limits": limits, **({"requests": requests} if requests else {})}}]}}


def gang(cp, ns: str, name: str, queue_name: str, members: int, gpus: int, cpu: str | None = None,
         priority: str = "train") -> list[str]:
    """A PodGroup of ``members`` pods (minMember ``members``) of ``gpus`` GPUs each, in
    ``queue_name``, at the chart's PriorityClass ``priority``."""
    pg = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
          "metadata": {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: queue_name}},
          "spec": {"minMember": members, "queue": queue_name, "priorityClassName": priority}}
    code, body = cp.create(pg)
    assert code == 201, body.get("message")
    names = [f"{name}-{i}" for i in range(members)]
    for n in names:
        code, body = cp.create(pod(ns, n, gpus, queue_name, group=name, cpu=cpu))
        assert code == 201, body.get("message")
    return names


def node_of(cp, ns: str, name: str) -> str | None:
    p = cp.get(f"/api/v1/namespaces/{ns}/pods/{name}")
    return (p or {}).get("spec", {}).get("nodeName")


def all_bound(cp, ns: str, names: list[str], timeout: float = 60) -> dict[str, str]:
    got: dict[str, str | None] = {}

    def bound() -> bool:
        got.update({n: node_of(cp, ns, n) for n in names})
        return all(got.values())
    assert sleep_until(bound, timeout), f"not all bound: {got}; {scheduler_view(cp, ns)}"
    return got  # type: ignore[return-value]


def scheduling_reasons(cp, ns: str, group: str) -> list[str]:
    """The reasons KAI's scheduler wrote on the PodGroup's status for why it is not scheduled."""
    pg = cp.get(f"/apis/scheduling.run.ai/v2alpha2/namespaces/{ns}/podgroups/{group}") or {}
    out = []
    for c in (pg.get("status") or {}).get("schedulingConditions") or []:
        out += [r.get("reason", "") for r in c.get("reasons") or []] + [c.get("reason", "")]
    return [r for r in out if r]


def scheduler_view(cp, ns: str) -> str:
    pgs = (cp.get(f"/apis/scheduling.run.ai/v2alpha2/namespaces/{ns}/podgroups") or {}).get("items", [])
    return "; ".join(f"{p['metadata']['name']}: {(p.get('status') or {}).get('schedulingConditions')}" for p in pgs)


def clean(cp, ns: str) -> None:
    cp.request("DELETE", f"/api/v1/namespaces/{ns}/pods?gracePeriodSeconds=0")
    cp.request("DELETE", f"/apis/scheduling.run.ai/v2alpha2/namespaces/{ns}/podgroups")
    cp.wait(lambda: not (cp.get(f"/api/v1/namespaces/{ns}/pods") or {}).get("items"), 60, f"the pods of {ns} gone")


def test_kai_needs_kueues_v1alpha1_topology(kai):
    """KAI v0.20.1's scheduler lists Kueue's Topology at v1alpha1 and waits for that list before
    its first cycle; Kueue v0.19.2's CRD (what gpuplan pins, and every test control plane has)
    serves v1beta1 and v1beta2 only, so with it KAI schedules nothing. With KAI's own copy of the
    CRD (v1alpha1) in its place the scheduler runs."""
    assert kai.__dict__["kai_cycled_with_kueue_topology"] is False
    assert cycled(kai)


def test_a_gang_that_fits_is_bound_by_kai(kai):
    """Two pods of two GPUs each, minMember 2: KAI's scheduler writes a BindRequest per pod and
    KAI's binder binds each to the node the BindRequest names (kube-scheduler never touches a
    pod of another schedulerName)."""
    cp = kai
    ns = _namespace(cp, "kai-fits")
    cp.apply(queue("fits", {"quota": 4, "limit": 4, "overQuotaWeight": 1}, cpu=UNLIMITED, memory=UNLIMITED))
    names = gang(cp, ns, "fits", "fits", 2, 2)
    nodes = all_bound(cp, ns, names)
    by_pod: dict[str, dict] = {}

    def succeeded() -> bool:
        items = (cp.get(f"/apis/scheduling.run.ai/v1alpha2/namespaces/{ns}/bindrequests") or {}).get("items", [])
        by_pod.clear()
        by_pod.update({r["spec"]["podName"]: r for r in items})
        return set(by_pod) == set(names) and all(
            (r.get("status") or {}).get("phase") == "Succeeded" for r in by_pod.values())
    assert sleep_until(succeeded, 30), by_pod
    assert {n: by_pod[n]["spec"]["selectedNode"] for n in names} == nodes
    # the events: KAI's scheduler placed each pod, KAI's binder bound it
    seen = {(e["involvedObject"]["name"], e["reason"], e["source"].get("component"))
            for e in (cp.get(f"/api/v1/namespaces/{ns}/events") or {}).get("items", [])}
    for n in names:
        assert {(n, "Scheduled", "kai-scheduler"), (n, "Bound", "binder")} <= seen, seen
    clean(cp, ns)


def test_a_gang_that_does_not_fit_stays_wholly_unbound(kai):
    """Three pods of four GPUs, minMember 3, on two nodes of four GPUs: two would fit, none is
    bound; KAI says why on the PodGroup. Once a third node is there the gang is bound whole."""
    cp = kai
    ns = _namespace(cp, "kai-gang")
    cp.apply(queue("roomy", UNLIMITED, cpu=UNLIMITED, memory=UNLIMITED))
    names = gang(cp, ns, "too-big", "roomy", 3, GPUS_PER_NODE)
    assert sleep_until(lambda: scheduling_reasons(cp, ns, "too-big"), 60), scheduler_view(cp, ns)
    assert {n: node_of(cp, ns, n) for n in names} == dict.fromkeys(names), "no partial binding of a gang"
    assert not (cp.get(f"/apis/scheduling.run.ai/v1alpha2/namespaces/{ns}/bindrequests") or {}).get("items")
    code, body = cp.create(_node(NODES))
    assert code == 201, body.get("message")
    try:
        nodes = all_bound(cp, ns, names)
        assert len(set(nodes.values())) == 3, nodes
    finally:
        clean(cp, ns)
        cp.delete({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"gpu-{NODES}"}})


def test_a_queues_gpu_limit_holds_what_is_beyond_it(kai):
    """A leaf Queue with gpu quota 2 and limit 4 and three PodGroups of one two-GPU pod: two run
    (over quota, within the limit, on idle GPUs), the third stays pending with KAI's OverLimit
    reason though the nodes have room; when one finishes, the third is bound."""
    cp = kai
    ns = _namespace(cp, "kai-limit")
    cp.apply(queue("capped", {"quota": 2, "limit": 4, "overQuotaWeight": 1}, cpu=UNLIMITED, memory=UNLIMITED))
    first = gang(cp, ns, "job-a", "capped", 1, 2) + gang(cp, ns, "job-b", "capped", 1, 2)
    all_bound(cp, ns, first)
    third = gang(cp, ns, "job-c", "capped", 1, 2)
    assert sleep_until(lambda: "OverLimit" in scheduling_reasons(cp, ns, "job-c"), 60), scheduler_view(cp, ns)
    assert node_of(cp, ns, third[0]) is None
    cp.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{first[0]}?gracePeriodSeconds=0")
    all_bound(cp, ns, third)
    clean(cp, ns)


def test_an_unset_cpu_limit_is_a_zero_limit(kai):
    """A Queue that gives only ``gpu``: its cpu ``limit`` is 0, not unlimited (KAI reads the
    absent field as 0 and holds any request of it), so a pod that requests CPU stays pending
    with OverLimit while a GPU-only pod of the same queue is bound."""
    cp = kai
    ns = _namespace(cp, "kai-cpu")
    cp.apply(queue("gpu-only", {"quota": 2, "limit": 2, "overQuotaWeight": 1}))
    gpu_only = gang(cp, ns, "gpu-only", "gpu-only", 1, 1)
    all_bound(cp, ns, gpu_only)
    with_cpu = gang(cp, ns, "with-cpu", "gpu-only", 1, 1, cpu="100m")
    assert sleep_until(lambda: "OverLimit" in scheduling_reasons(cp, ns, "with-cpu"), 60), scheduler_view(cp, ns)
    assert node_of(cp, ns, with_cpu[0]) is None
    clean(cp, ns)


def test_a_pod_without_a_queue_goes_to_default_queue(kai):
    """A bare pod for ``kai-scheduler`` with no queue label: the pod grouper makes its PodGroup
    with queue ``default-queue``; while no such Queue exists the pod is never bound (the
    scheduler skips a PodGroup of an unknown queue), nor is one that names a missing queue or a
    top-level queue, while a pod of a leaf queue submitted after them is bound. Once
    ``default-queue`` exists (a leaf) the queueless pod is bound."""
    cp = kai
    ns = _namespace(cp, "kai-noqueue")
    cp.apply(queue("leaf", UNLIMITED, cpu=UNLIMITED, memory=UNLIMITED))
    for name, q in (("no-queue", None), ("missing-queue", "no-such-queue"), ("top-queue", PARENT)):
        code, body = cp.create(pod(ns, name, 1, q))
        assert code == 201, body.get("message")
    groups: dict[str, dict] = {}

    def grouped() -> bool:
        items = (cp.get(f"/apis/scheduling.run.ai/v2alpha2/namespaces/{ns}/podgroups") or {}).get("items", [])
        for p in (cp.get(f"/api/v1/namespaces/{ns}/pods") or {}).get("items", []):
            g = (p["metadata"].get("annotations") or {}).get(POD_GROUP_ANNOTATION)
            match = [x for x in items if x["metadata"]["name"] == g]
            if match:
                groups[p["metadata"]["name"]] = match[0]
        return len(groups) == 3
    assert sleep_until(grouped, 60), groups
    assert {n: g["spec"]["queue"] for n, g in groups.items()} == {
        "no-queue": DEFAULT_QUEUE, "missing-queue": "no-such-queue", "top-queue": PARENT}
    assert all(g["spec"]["minMember"] == 1 for g in groups.values())
    code, body = cp.create(pod(ns, "control", 1, "leaf"))
    assert code == 201, body.get("message")
    all_bound(cp, ns, ["control"])
    assert {n: node_of(cp, ns, n) for n in groups} == dict.fromkeys(groups), scheduler_view(cp, ns)
    code, body = cp.apply(queue(DEFAULT_QUEUE, UNLIMITED, cpu=UNLIMITED, memory=UNLIMITED))
    assert code < 300, body.get("message")
    all_bound(cp, ns, ["no-queue"])
    assert node_of(cp, ns, "missing-queue") is None and node_of(cp, ns, "top-queue") is None
    clean(cp, ns)


def _bound_in(cp, ns: str, prefix: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in (cp.get(f"/api/v1/namespaces/{ns}/pods") or {}).get("items", [])
                  if p["metadata"]["name"].startswith(prefix) and p["spec"].get("nodeName")
                  and not p["metadata"].get("deletionTimestamp"))


def test_a_queue_under_quota_reclaims_from_one_over_it(kai):
    """Two leaf Queues with gpu quota 4 each: team A's four preemptible (``train``, 50) two-GPU
    jobs take all eight GPUs, over its quota; team B's four-GPU job then reclaims: KAI evicts two
    of A's (an Evict event on their PodGroups), A keeps its quota's worth, B's job is bound."""
    cp = kai
    ns = _namespace(cp, "kai-reclaim")
    for q in ("team-a", "team-b"):
        cp.apply(queue(q, {"quota": 4, "limit": -1, "overQuotaWeight": 1}, cpu=UNLIMITED, memory=UNLIMITED))
    a = [n for i in range(4) for n in gang(cp, ns, f"a{i}", "team-a", 1, 2)]
    all_bound(cp, ns, a)
    b = gang(cp, ns, "b0", "team-b", 1, GPUS_PER_NODE)
    all_bound(cp, ns, b, timeout=90)
    assert sleep_until(lambda: len(_bound_in(cp, ns, "a")) == 2, 60), _bound_in(cp, ns, "a")
    evicted = {e["involvedObject"]["name"] for e in (cp.get(f"/api/v1/namespaces/{ns}/events") or {}).get("items", [])
               if e["reason"] == "Evict" and e["involvedObject"]["kind"] == "PodGroup"}
    assert len(evicted) == 2 and evicted <= {"a0", "a1", "a2", "a3"}, evicted
    clean(cp, ns)


def test_a_non_preemptible_job_stays_within_its_queues_quota(kai):
    """PriorityClass ``build`` (100) makes a PodGroup non-preemptible (KAI: priority >= 100): in a
    Queue with gpu quota 2 and no limit, a second two-GPU ``build`` job stays pending
    (NonPreemptibleOverQuota) with six GPUs idle, while a preemptible ``train`` job of the same
    queue is bound over the quota."""
    cp = kai
    ns = _namespace(cp, "kai-nonpreempt")
    cp.apply(queue("builds", {"quota": 2, "limit": -1, "overQuotaWeight": 1}, cpu=UNLIMITED, memory=UNLIMITED))
    all_bound(cp, ns, gang(cp, ns, "build-a", "builds", 1, 2, priority="build"))
    held = gang(cp, ns, "build-b", "builds", 1, 2, priority="build")
    assert sleep_until(lambda: "NonPreemptibleOverQuota" in scheduling_reasons(cp, ns, "build-b"), 60), \
        scheduler_view(cp, ns)
    all_bound(cp, ns, gang(cp, ns, "train-a", "builds", 1, 2, priority="train"))
    assert node_of(cp, ns, held[0]) is None
    clean(cp, ns)
