"""The tenancy boundary, proved against every pod someone could write - not only the
contract pod (docs/placement.md "Threat model").

Over the generated objects, as :mod:`gpuplan.placement` reads them, this enumerates the
pods a tenant or a stranger could create and the namespaces they could create them in:

- namespace states: each generated namespace (once per shape), one gpuplan does not
  manage (``default``), one that copied a tenant namespace's labels, and one of a removed
  tenant (labels kept, quotas pruned) - the last two without quota;
- classes: each tier's PriorityClass, none (the cluster default), and a high class of
  the cluster's own (``system-cluster-critical``);
- per class: the tier's own pod; one unit of every GPU resource gpuplan advertises and
  of the implicit DRA names (``deviceclass.resource.kubernetes.io/<class>``); more than
  ``maxGPUsPerPod`` in the containers, and in a sidecar; no GPU at all (with and
  without ``NVIDIA_VISIBLE_DEVICES``) on its pool, on every other pool, and with a keyless
  ``Exists`` toleration; for a queued tier's class, created by a tenant directly, by the
  controller of a Kueue-managed workload, and held by Kueue's gate (with Volcano: created by a
  tenant for the default scheduler, and for Volcano's);
- ResourceClaims of every GPU DeviceClass (DRA fleets).

Each goes through the API server's admission as gpuplan models it (ExtendedResourceToleration,
the policies by their bindings, ResourceQuota) and, where admitted, through node fit. A
*breach* is an admitted pod that can use GPU capacity outside its namespace's grants:
on a pool other than its tier's, a resource its tier does not hand out, uncharged by any
quota, above what the namespace was granted (a queued tier's borrow ceiling counts only
for workloads its queueing engine holds), above ``maxGPUsPerPod``, or any GPU node for a pod that is no
tier's. Admission is evaluated once per pod and namespace shape; the CEL once per pod.

Stage: check-objects (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuplan.dra.claims import IMPLICIT_DRA_PREFIX
from gpuplan.resolve import ResolvedFleet, is_gpu_name
from gpuplan.units import class_scoped

SYSTEM_CLASS = "system-cluster-critical"
# the class the kubelet makes room for, evicting other pods (pkg/kubelet/preemption/preemption.go)
NODE_CRITICAL_CLASS = "system-node-critical"
COPIED_NAMESPACE = "copied-labels"
REMOVED_NAMESPACE = "removed-tenant"


@dataclass(frozen=True)
class Breach:
    namespace: str
    pod: str  # what the pod is, in words
    escape: str  # what it gets


@dataclass(frozen=True)
class Access:
    """Who can run on a pool: a class, the namespaces that admit its pods, the quota each allows."""

    pool: str
    priority_class: str
    namespaces: tuple[tuple[str, int], ...]  # (namespace, units its quotas let the class hold)
    resource: str


@dataclass(frozen=True)
class Case:
    """One enumerated pod in one namespace state and the proof's admission verdict: what a
    real API server (tests/cluster) is asked, to judge the proof."""

    words: str
    pod: dict[str, Any]  # as the tenant (or controller) writes it, before any mutating admission
    request: dict[str, Any]  # the admission request's operation and userInfo
    namespace: str
    admitted: bool
    namespace_labels: dict[str, str] = field(default_factory=dict)


@dataclass
class Boundary:
    checked: int = 0  # pod x namespace-shape pairs
    pods: int = 0
    namespace_shapes: int = 0
    breaches: list[Breach] = field(default_factory=list)
    access: list[Access] = field(default_factory=list)
    cases: list[Case] = field(default_factory=list)  # only with prove_boundary(record=True)
    tried: dict[str, int] = field(default_factory=dict)  # shape enumerated (words) -> pods of it, first seen first
    not_covered: tuple[str, ...] = ()  # what no enumerated shape stands for


def _pod(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"}, "spec": spec}


def _container(res: dict[str, int], env: bool = False, name: str = "main") -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "registry.example/cuda:12"}
    if res:
        q = {k: str(v) for k, v in res.items()}
        c["resources"] = {"requests": dict(q), "limits": dict(q)}
    if env:
        c["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    return c


def _spec(pc: str, placement: tuple[str | None, list[dict[str, Any]]], res: dict[str, int], *,
          sidecar: dict[str, int] | None = None, env: bool = False, held: str | None = None) -> dict[str, Any]:
    """A pod spec; ``held``: how a queueing engine holds the pod - ``"kueue"`` (Kueue's scheduling
    gate) or ``"volcano"`` (the Volcano scheduler's)."""
    selector, tols = placement
    s: dict[str, Any] = {"containers": [_container(res, env)]}
    if pc:
        s["priorityClassName"] = pc
    if selector is not None:
        s["nodeSelector"] = {"gpuplan.dev/pool": selector} if isinstance(selector, str) else dict(selector)
    if tols:
        s["tolerations"] = tols
    if sidecar:
        s["initContainers"] = [{**_container(sidecar, name="sidecar"), "restartPolicy": "Always"}]
    if held == "kueue":
        from gpuplan.queues import KUEUE_GATE

        s["schedulingGates"] = [{"name": KUEUE_GATE}]
    elif held == "volcano":
        from gpuplan.queueing.volcano.names import SCHEDULER

        s["schedulerName"] = SCHEDULER
    return s


def _pool_fabric(rf: ResolvedFleet, tiers, selector: Any) -> dict[str, int]:
    """The fabric a pod of these tiers (one class) requests on the pool ``selector`` names
    (:func:`gpuplan.identity.pool_gang_resources`), where every tier of the class there is a gang
    tier: what its admission policy requires (lower/admission.py ``_gang_fabric_validations``)."""
    from gpuplan.identity import POOL_LABEL, pool_gang_resources

    pool = selector.get(POOL_LABEL) if isinstance(selector, dict) else selector
    on = [t for t in tiers if t.pool == pool]
    if not on or any(t.gang is None for t in on):
        return {}
    return pool_gang_resources(rf, rf.pool_by_name[pool])


def _add_fabric(rf: ResolvedFleet, tiers, spec: dict[str, Any], gpu) -> None:
    """Add the pool's fabric (:func:`_pool_fabric`) to the first container of ``spec`` that
    requests a GPU (``gpu``: the GPU part of a request), requests = limits."""
    need = _pool_fabric(rf, tiers, (spec.get("nodeSelector") or {}))
    for c in spec["containers"] if need else ():
        res = c.get("resources") or {}
        if gpu({k: int(v) for k, v in (res.get("limits") or {}).items() if "/" in k}):  # extended: whole numbers
            for part in ("requests", "limits"):
                res[part].update((k, str(v)) for k, v in need.items())
            return


def _tolerations(taints) -> list[dict[str, Any]]:
    return [{"key": k, "operator": "Equal", "value": v, "effect": e} if v else
            {"key": k, "operator": "Exists", "effect": e} for k, v, e in taints]


def prove_boundary(rf: ResolvedFleet, docs: list[dict[str, Any]], record: bool = False, *,
                   extra_classes: tuple[str, ...] = (), defined: frozenset[str] | None = None,
                   exhaustive: bool = False) -> Boundary:
    """The proof; with ``record``, every pod's admission verdict in every namespace state
    (:class:`Case`), for a real API server to judge.

    For a state between two trees (:mod:`gpuplan.placement.steps`): ``extra_classes``, classes
    of tiers the spec no longer has, tried like any class of no tier; ``defined``, the
    PriorityClasses the cluster holds at that step: a pod of a tier's class (or an extra
    one) that is not among them is refused at its creation by the Priority admission plugin
    (kubernetes v1.36.3 plugin/pkg/admission/priority/admission.go:168-172, 294-299).

    A pod's policy verdict is one per pod (no gpuplan policy reads the namespace), so the shapes
    it is refused in are the union of its refusing policies' shapes (``Cluster.policy_masks``)
    and only the others are visited; ``exhaustive`` asks every shape instead, the same answer
    at pods x shapes cost (a test holds the two to the same result)."""
    from gpuplan.dra.claims import CHART_CLASSES, any_dra, claim_template_name, tier_claims
    from gpuplan.pergpu import unit_share
    from gpuplan.identity import (
        CAPACITY_TYPE_LABEL, PRIORITY_LABEL, QUEUE_LABEL, capacity_pin, kept_gpu_resources, pod_annotations,
        priority_class_name,
        quota_cap, workload_priority_class_name,
    )
    from gpuplan.placement.simulate import (
        Cluster, PoolIndex, cluster_namespaces, ert_enabled, extended_resource_toleration, fits, kubelet_admits,
        pools_from_objects, quota_denials, refused_shapes, requests, shape_bits)
    from gpuplan.queues import JOB_CONTROLLER, namespace_ceilings, namespace_grants, queue_controllers, queued_tiers

    pools = pools_from_objects(rf, docs)
    index = PoolIndex(pools)
    by_pool = {p.name: p for p in pools}
    cluster = Cluster(rf, docs)
    out = Boundary()

    # --- namespace states ---------------------------------------------------------------
    generated = cluster_namespaces(docs)
    managed = [n for n in generated if n["metadata"]["name"] != "default"]
    states = list(generated)
    # the node agents' namespaces: a DaemonSet there may tolerate every pool (trusted, as the exempt
    # namespaces are); every other pod shape is tried there like anywhere
    for name in rf.fleet.spec.cluster.admission.node_agent_namespaces:
        if name not in {n["metadata"]["name"] for n in states}:
            states.append({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}})
    if managed:
        labels = {k: v for k, v in managed[0]["metadata"].get("labels", {}).items() if k != "kubernetes.io/metadata.name"}
        for name in (COPIED_NAMESPACE, REMOVED_NAMESPACE):
            states.append({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": name, "labels": {**labels, "kubernetes.io/metadata.name": name}}})
    # the trusted namespaces: those no binding selects (the GPU Operator's, the system ones, ...)
    every = frozenset(range(len(cluster.bindings)))
    exempt = {n["metadata"]["name"] for n in states if cluster.bindings and cluster.selected(n) == every}
    shapes: dict[tuple, list[dict[str, Any]]] = {}
    for ns_obj in states:
        if ns_obj["metadata"]["name"] not in exempt:
            shapes.setdefault(cluster.shape(ns_obj), []).append(ns_obj)
    out.namespace_shapes = len(shapes)
    groups = list(shapes.values())
    selected = [cluster.selected(g[0]) for g in groups]
    covering = cluster.covering(selected)  # a refusal by one of these holds in every state

    # --- what the spec grants ------------------------------------------------------------
    tenant_of: dict[str, Any] = {}
    for tn in rf.fleet.spec.tenants:
        for ns in tn.namespaces:
            tenant_of[ns] = tn
    queued = set(queued_tiers(rf))
    tiers_of: dict[str, list] = {}
    for t in rf.fleet.spec.tiers:
        if rf.tier_resource(t) is not None and t.pool in rf.pool_by_name:
            tiers_of.setdefault(priority_class_name(t), []).append(t)
    held = {t.name for t in rf.fleet.spec.tiers if class_scoped(rf, t) or t.name in queued}
    # the Kueue priority each class may name: its own queued tiers' WorkloadPriorityClasses
    own_priority = {pc: {workload_priority_class_name(t) for t in ts if t.name in queued} for pc, ts in tiers_of.items()}

    def allowance(ns: str, pc: str, res: str, kueue_held: bool) -> int | None:
        """Units of ``res`` the spec lets pods of ``pc`` hold in ``ns`` (None: not granted)."""
        tn = tenant_of.get(ns)
        if tn is None:
            return None
        grants = tn.quotas.get(ns, {})
        allowed = namespace_grants(rf).get(ns, frozenset())
        mine = [t for t in tiers_of.get(pc, ()) if t.name in allowed and rf.tier_resource(t) == res]
        if not mine:
            return None
        t = mine[0]
        if t.name in queued and kueue_held:
            ceil = (namespace_ceilings(rf, tn) or {}).get((t.pool, res))
            if ceil is not None:
                return ceil
        if t.name in held:
            return sum(grants.get(x.name, 0) for x in mine)
        # tiers not held to their class share the namespace's units of the resource, on their own
        # pool only: a grant is of a tier, and so of its pool's GPUs (units.class_scoped holds every
        # tier whose resource is on other pools too to its class)
        return sum(u for name, u in grants.items() if name not in held and name in rf.tier_by_name
                   and rf.tier_resource(rf.tier_by_name[name]) == res and rf.tier_by_name[name].pool == t.pool)

    gpu_names = set(rf.gpu_resources)

    def gpu(req: dict[str, int]) -> dict[str, int]:
        return {k: v for k, v in req.items()
                if v > 0 and (k in gpu_names or is_gpu_name(k) or k.startswith(IMPLICIT_DRA_PREFIX))}

    # --- admission and fit -----------------------------------------------------------------
    ert = ert_enabled(rf)
    access: dict[tuple[str, str, str], dict[str, int]] = {}
    gated_classes = {*tiers_of, *extra_classes}
    # the shapes each policy is bound in (None: a policy reads the namespace; or ``exhaustive``:
    # every shape asked through Cluster.policy_denials, as a test compares)
    masks = None if exhaustive else cluster.policy_masks(selected)
    every_shape = (1 << len(groups)) - 1

    def judge(words: str, pod: dict[str, Any], req: dict[str, Any], kueue_held: bool, escape: str | None) -> None:
        """Every namespace state's verdict on ``pod`` (``escape``: why no namespace may admit it)."""
        admitted_pod = extended_resource_toleration(pod) if ert else pod
        pc = pod["spec"].get("priorityClassName", "")

        def note(ns_obj: dict[str, Any], admitted: bool) -> None:
            if record:
                out.cases.append(Case(words, pod, req, ns_obj["metadata"]["name"], admitted,
                                      dict(ns_obj["metadata"].get("labels") or {})))
        # refused in every namespace state: a class the cluster has no PriorityClass of (yet, or any
        # more: the Priority admission plugin, before any policy), or a policy bound everywhere
        unknown = defined is not None and pc in gated_classes and pc not in defined
        verdicts = {} if unknown else cluster.verdicts(admitted_pod, req, covering)
        if unknown or any(msgs for name, msgs in verdicts.items() if name in covering):
            out.checked += len(groups)
            if record:
                for group in groups:
                    for ns_obj in group:
                        note(ns_obj, False)
            return
        all_requests = requests(admitted_pod)
        want = gpu(all_requests)
        landing: list[str] | None = None
        out.checked += len(groups)
        refused = refused_shapes(masks, verdicts)
        for g in range(len(groups)) if (record or refused is None) else shape_bits(every_shape & ~refused):
            group = groups[g]
            if (refused >> g & 1 if refused is not None
                    else cluster.policy_denials(admitted_pod, group[0], selected[g], req, verdicts)):
                for ns_obj in group:
                    note(ns_obj, False)
                continue
            if landing is None:
                node = admitted_pod["spec"].get("nodeName")
                landing = [p.name for p in index.candidates(admitted_pod)
                           if (kubelet_admits(admitted_pod, p) and p.name == node_pool[node] if node else fits(admitted_pod, p))]
            for ns_obj in group:
                ns = ns_obj["metadata"]["name"]
                quotas = cluster.quotas.get(ns, [])
                if quota_denials(admitted_pod, quotas, all_requests):
                    note(ns_obj, False)
                    continue
                note(ns_obj, True)
                if escape is not None:
                    out.breaches.append(Breach(ns, words, escape))
                label = (pod["metadata"].get("labels") or {}).get(PRIORITY_LABEL)
                if label and label not in own_priority.get(pc, ()):
                    out.breaches.append(Breach(ns, words, f"takes Kueue priority {label}, not its own tier's"))
                for esc in _escapes(rf, pc, want, landing, ns, kueue_held, tiers_of, allowance, quotas, by_pool,
                                    admitted_pod):
                    out.breaches.append(Breach(ns, words, esc))
                if want and pc in tiers_of:
                    for pool in landing:
                        for res in want:
                            c = quota_cap(quotas, pc, res)
                            if c is not None:
                                key = (by_pool[pool].owner, pc, res)
                                access.setdefault(key, {})[ns] = max(access.get(key, {}).get(ns, 0), c)

    # --- the pods ------------------------------------------------------------------------
    claim_of = {c.tier: c for c in tier_claims(rf)} if any_dra(rf) else {}
    implicit = [f"{IMPLICIT_DRA_PREFIX}{c}" for c in
                sorted({*CHART_CLASSES, *(c.class_name for c in claim_of.values())} if any_dra(rf) else {"gpu.nvidia.com"})]
    # and the names a change dropped that the quotas keep at 0 (identity.kept_gpu_resources)
    resources = [*rf.gpu_resources, *kept_gpu_resources(rf), *implicit]
    # a device-plugin name this tree does not advertise: one a change dropped (a MIG profile, a
    # renamed share) stays on the pool's nodes until they are repartitioned, charged by no quota
    dropped = next(n for n in ("nvidia.com/mig-1g.5gb", "nvidia.com/mig-1g.10gb", "nvidia.com/gpu.shared")
                   if n not in gpu_names)
    keyless = (None, [{"operator": "Exists"}])
    pool_place = {p.name: (p.name, _tolerations(p.taints)) for p in pools if p.owner == p.name}
    # a pool's on-demand floor (identity.floor_nodes): its NodePool's taints, the floor taint included
    floor_place = {p.owner: (p.owner, _tolerations(p.taints)) for p in pools if p.owner != p.name}
    ctrl = queue_controllers(rf)
    q = rf.fleet.spec.queueing
    volcano = q is not None and q.engine == "volcano"
    pod_gate = q is not None and not volcano and any(i in q.integrations for i in ("pod", "deployment", "statefulset"))
    tenant_req = {"operation": "CREATE", "userInfo": {"username": "tenant"}}
    ctrl_req = {"operation": "CREATE", "userInfo": {"username": JOB_CONTROLLER if JOB_CONTROLLER in ctrl else
                                                    (ctrl[0] if ctrl else "tenant")}}
    node_pool: dict[str, str] = {}  # spec.nodeName of the shapes bound by name -> its pool
    unbounded: set[str] = set()  # pools with no CPU and memory share per GPU (gpuplan.pergpu)

    def add(words: str, spec: dict[str, Any], req: dict[str, Any] = tenant_req, kueue_held: bool = False,
            labels: dict[str, str] | None = None, *, shape: str, escape: str | None = None,
            fabric: bool = True) -> None:
        out.tried[shape] = out.tried.get(shape, 0) + 1
        if fabric:  # a gang tier's pod asks for its pool's fabric beside its GPUs, as its tenant's would
            _add_fabric(rf, tiers_of.get(spec.get("priorityClassName", ""), ()), spec, gpu)
        if req is not tenant_req:
            out.tried[CONTROLLER_SHAPE] = out.tried.get(CONTROLLER_SHAPE, 0) + 1
        if (spec.get("schedulingGates") or []):
            out.tried[GATE_SHAPE] = out.tried.get(GATE_SHAPE, 0) + 1
        if spec.get("schedulerName") == "volcano":
            out.tried[VOLCANO_SHAPE] = out.tried.get(VOLCANO_SHAPE, 0) + 1
        pod = _pod(spec)
        if labels:
            pod["metadata"]["labels"] = labels
        tiers_ = tiers_of.get(spec.get("priorityClassName", ""), ())
        if tiers_ and pod_annotations(rf, tiers_[0]):  # annotations any tenant can write (do-not-disrupt)
            pod["metadata"]["annotations"] = pod_annotations(rf, tiers_[0])
        out.pods += 1
        judge(words, pod, req, kueue_held, escape)  # each pod is decided as it is made, and let go

    for pc in [*sorted(tiers_of), *sorted(set(extra_classes) - set(tiers_of)), "", SYSTEM_CLASS]:
        tiers = tiers_of.get(pc, [])
        who = f"class {pc or '(none)'}"
        own = [pool_place[t.pool] for t in tiers if t.pool in pool_place][:1]
        pin = capacity_pin(rf, tiers[0]) if tiers else None
        if own and pin is not None:  # its pods select the pool's guaranteed capacity type
            own = [({"gpuplan.dev/pool": own[0][0], CAPACITY_TYPE_LABEL: pin}, own[0][1])]
            add(f"{who}: 1 {rf.tier_resource(tiers[0])} without {CAPACITY_TYPE_LABEL}",
                _spec(pc, pool_place[tiers[0].pool], {rf.tier_resource(tiers[0]): 1}), shape="its tier's pod without its capacity-type pin")
        elif tiers and tiers[0].pool in floor_place:  # a preemptible class tolerating the floor's taint
            add(f"{who}: 1 {rf.tier_resource(tiers[0])} tolerating the on-demand floor of pool {tiers[0].pool}",
                _spec(pc, floor_place[tiers[0].pool], {rf.tier_resource(tiers[0]): 1}), shape="a preemptible tier's pod on the on-demand floor")
        places = own or [keyless]
        reqs: list[tuple[str, dict[str, Any], bool, dict[str, str] | None, str | None]] = [
            ("", tenant_req, False, None, None)]
        if any(t.name in queued for t in tiers) and volcano:
            reqs.append((" scheduled by Volcano", tenant_req, True, None, "volcano"))
        elif any(t.name in queued for t in tiers):
            reqs.append((f" created by {ctrl_req['userInfo']['username']}", ctrl_req, True, None, None))
            if pod_gate:
                reqs.append((" held by Kueue's gate", tenant_req, True, {QUEUE_LABEL: "default"}, "kueue"))
        if any(t.name in queued for t in tiers) and not volcano:
            # Kueue takes a workload's priority from its label (kueue v0.19.2 reconciler.go:1716-1719):
            # the class's pods labelled with the WorkloadPriorityClass of the queued tier ranked highest
            # that is not theirs (or any name, where every queued tier is theirs)
            others = sorted((t for t in rf.fleet.spec.tiers if t.name in queued and t not in tiers),
                            key=lambda t: -t.priority)
            foreign = workload_priority_class_name(others[0]) if others else f"{pc}-borrowed"
            rw, req, kh, labels, hold = reqs[-1]
            add(f"{who}{rw}: 1 {rf.tier_resource(tiers[0])}, {PRIORITY_LABEL}: {foreign}",
                _spec(pc, places[0], {rf.tier_resource(tiers[0]): 1}, held=hold), req, kh,
                {**(labels or {QUEUE_LABEL: "default"}), PRIORITY_LABEL: foreign}, shape="another queued tier's Kueue priority label")
        for rw, req, kh, labels, hold in reqs:
            for place in places:
                for res in resources:
                    add(f"{who}{rw}: 1 {res}", _spec(pc, place, {res: 1}, held=hold), req, kh, labels,
                        shape="one unit of every GPU resource and implicit DRA name")
                if tiers:  # a request of 0 units: charged nothing, placed by the class on its pool
                    r = rf.tier_resource(tiers[0])
                    add(f"{who}{rw}: 0 {r}", _spec(pc, place, {r: 0}, held=hold), req, kh, labels,
                        shape="zero units of its tier's resource")
                    add(f"{who}{rw}: 1 {r} and 1 {dropped} (a name this tree does not advertise)",
                        _spec(pc, place, {r: 1, dropped: 1}, held=hold), req, kh, labels,
                        shape="a GPU name the tree does not advertise")
                for t in tiers:
                    if t.max_gpus_per_pod is not None:
                        r = rf.tier_resource(t)
                        n = t.max_gpus_per_pod
                        add(f"{who}{rw}: {n + 1} {r}", _spec(pc, place, {r: n + 1}, held=hold), req, kh, labels,
                            shape="more than maxGPUsPerPod, in containers and in a sidecar")
                        add(f"{who}{rw}: {n} {r} and 1 in a sidecar",
                            _spec(pc, place, {r: n}, sidecar={r: 1}, held=hold), req, kh, labels,
                            shape="more than maxGPUsPerPod, in containers and in a sidecar")
        for place in [*(pool_place.values() if not tiers else places), keyless]:
            where = f"pool {place[0]}" if place[0] else "any node (keyless Exists)"
            add(f"{who}: no GPU, on {where}", _spec(pc, place, {}),
                shape="no GPU, on each pool and with a keyless Exists toleration")
            if pc == "" and place[0]:
                add(f"{who}: no GPU, NVIDIA_VISIBLE_DEVICES=all, on {where}", _spec(pc, place, {}, env=True),
                    shape="NVIDIA_VISIBLE_DEVICES set in the pod")
        # bound by name to a node of a pool, past the scheduler: the kubelet ignores NoSchedule taints.
        # Classes of no tier on every pool; a tier's class on its own pool and one other (the
        # policies read only whether a pod names a node, never which: one stands for all, and a
        # test holds every pool of the examples to the same verdict)
        named = [p for p in pools if p.owner == p.name]
        if tiers:
            mine = {t.pool for t in tiers}
            named = [p for p in named if p.name in mine][:1] + [p for p in named if p.name not in mine][:1]
        for p in named:
            node = f"{p.name}-node-0"
            node_pool[node] = p.name
            for klass in ([pc] if pc != SYSTEM_CLASS else [pc, NODE_CRITICAL_CLASS]):
                kw = f"class {klass or '(none)'}"
                add(f"{kw}: no GPU, spec.nodeName of a node of pool {p.name}",
                    {**_spec(klass, (None, []), {}), "nodeName": node}, shape="spec.nodeName to a node of each pool")
                if tiers:
                    add(f"{kw}: 1 {rf.tier_resource(tiers[0])}, spec.nodeName of a node of pool {p.name}",
                        {**_spec(klass, (None, []), {rf.tier_resource(tiers[0]): 1}), "nodeName": node},
                        shape="spec.nodeName to a node of each pool")
        template_tiers = [t for t in tiers if t.name in claim_of]
        if template_tiers and own:
            t = template_tiers[0]

            def claiming(*templates: str) -> dict[str, Any]:
                return {**_spec(pc, own[0], {}), "resourceClaims": [
                    {"name": f"gpu{i}", "resourceClaimTemplateName": n} for i, n in enumerate(templates)]}
            for other in [o for o in claim_of.values() if o.tier not in {x.name for x in tiers}][:1]:
                add(f"{who}: the claim template of tier {other.tier}", claiming(f"gpuplan-{other.tier}"),
                    shape=DRA_TEMPLATE_SHAPE, escape=f"claims tier {other.tier}'s devices under class {pc}")
            if t.max_gpus_per_pod is not None:
                many = claim_template_name(t.name, t.max_gpus_per_pod)
                add(f"{who}: two of its tier's claim templates", claiming(many, claim_template_name(t.name, 1)),
                    shape=DRA_TEMPLATE_SHAPE, escape=f"claims more than maxGPUsPerPod {t.max_gpus_per_pod} devices")
        for t in tiers[:1] if own else ():
            # a pod holding one unit and more than the unit's share of the node's CPU or memory
            # keeps the node's other GPUs from the pods granted them (gpuplan.pergpu)
            share = unit_share(rf, t)
            if share is None:
                unbounded.add(t.pool)
                continue
            r = rf.tier_resource(t)
            at = {k: v for k, v in (("cpu", share.cpu_milli), ("memory", share.memory)) if v is not None}
            over = {k: v + (1 if k == "cpu" else 2 ** 20) for k, v in at.items()}  # a thousandth of a CPU, a MiB
            shown = {"cpu": lambda m: f"{m}m", "memory": str}

            def sized(amounts: dict[str, int]) -> dict[str, Any]:
                return {r: 1, **{k: shown[k](v) for k, v in amounts.items()}}

            def words(amounts: dict[str, int]) -> str:
                return ", ".join(f"{shown[k](v)} {k}" for k, v in amounts.items())
            escape = (f"requests more than {share.describe()} per {r}: it keeps its node's other GPUs from the pods "
                      "granted them")
            add(f"{who}: 1 {r} and its share, {words(at)}", _spec(pc, own[0], sized(at)), shape=PER_GPU_SHAPE)
            add(f"{who}: 1 {r} and {words(over)}", _spec(pc, own[0], sized(over)), shape=PER_GPU_SHAPE, escape=escape)
            for k in over:  # each alone: the policy bounds both
                add(f"{who}: 1 {r} and {words({k: over[k]})}", _spec(pc, own[0], sized({k: over[k]})),
                    shape=PER_GPU_SHAPE, escape=escape)
        for t in tiers[:1] if own else ():
            # a gang tier's pod that leaves its pool's fabric out (EKS: vpc.amazonaws.com/efa), as the
            # controller of its workload would create it where the tier is queued
            need = _pool_fabric(rf, tiers, own[0][0])
            if need:
                rw, req, kh, labels, hold = reqs[1] if len(reqs) > 1 else reqs[0]
                r = rf.tier_resource(t)
                left = ", ".join(f"{k}: {v}" for k, v in sorted(need.items()))
                add(f"{who}{rw}: 1 {r} without {left}", _spec(pc, own[0], {r: 1}, held=hold), req, kh, labels,
                    shape=FABRIC_SHAPE, fabric=False,
                    escape=f"leaves out {left}: its multi-node job's traffic between nodes falls back to TCP sockets")
        if tiers:
            # the tier's resource on another pool: the class policy compares the pool selector
            # with a list of its pools, so one pool outside it stands for all (tests hold every
            # other pool of the examples to the same verdict)
            other = next((p for p in pools if p.owner not in {t.pool for t in tiers}), None)
            if other is not None:
                add(f"{who}: 1 {rf.tier_resource(tiers[0])} on pool {other.owner}",
                    _spec(pc, pool_place[other.owner], {rf.tier_resource(tiers[0]): 1}),
                    shape="its tier's resource on another pool")
    classes = [*sorted(tiers_of), *sorted(set(extra_classes) - set(tiers_of))]
    out.tried = {f"under {len(classes)} tier class{'es' if len(classes) != 1 else ''}, no class, "
                 f"{SYSTEM_CLASS} and {NODE_CRITICAL_CLASS}": out.pods,
                 f"in {len(states)} namespace states" + (" (the generated namespaces, one that copied a tenant's labels, "
                                                         "one of a removed tenant)" if managed else ""): len(groups),
                 **out.tried}
    from gpuplan.identity import exempt_namespaces

    trusted = sorted({*exempt_namespaces(rf), *exempt})
    out.not_covered = (*NOT_COVERED, *(() if not trusted else
                                       (f"pods of the {len(trusted)} exempt namespaces ({', '.join(trusted[:SHOWN])}"
                                        + (", ..." if len(trusted) > SHOWN else "") + ")",)),
                       *((DRA_NOT_COVERED,) if any_dra(rf) else ()),
                       *((f"CPU and memory per GPU on pools whose node size gpuplan does not know "
                          f"({', '.join(sorted(unbounded))}: set pools[].perGPU)",) if unbounded else ()))

    out.breaches += _claim_breaches(rf, cluster, states, exempt, tenant_of, out.cases if record else None)
    if volcano:
        from gpuplan.queueing.volcano.boundary import SHAPE, podgroup_breaches

        from gpuplan.placement.cel import TENANT_REQUEST

        pg_cases: list | None = [] if record else None
        found, tried = podgroup_breaches(rf, cluster, states, set(exempt), tenant_of, pg_cases)
        out.breaches += [Breach(*b) for b in found]
        out.cases += [Case(w, obj, TENANT_REQUEST, ns, ok, labels) for w, obj, ns, ok, labels in pg_cases or ()]
        out.tried[SHAPE] = tried
    if any_dra(rf):
        out.tried["a ResourceClaim of every GPU DeviceClass"] = len({*CHART_CLASSES, *(c.class_name for c in tier_claims(rf))})
        out.tried["ResourceClaims of a tier's DeviceClass not named for it, of every device, above maxGPUsPerPod"] = \
            len(tier_claims(rf))
    out.access = [Access(pool, pc, tuple(sorted(nss.items())), res) for (pool, pc, res), nss in sorted(access.items())]
    return out


def _escapes(rf, pc, want, landing, ns, kueue_held, tiers_of, allowance, quotas, by_pool, pod) -> list[str]:
    """What an admitted pod gets that its namespace was not granted."""
    from gpuplan.identity import CAPACITY_TYPE_LABEL, capacity_pin, quota_cap
    from gpuplan.units import preemptible_tier

    gpu_pools = [p for p in landing if any(by_pool[p].resources.values())]
    if not want:
        return [f"runs on GPU pool {p} without requesting a GPU" for p in gpu_pools]
    out = []
    tiers = tiers_of.get(pc, [])
    pools = {t.pool for t in tiers}
    if tiers and not any(preemptible_tier(t) for t in tiers):
        chosen = (pod["spec"].get("nodeSelector") or {}).get(CAPACITY_TYPE_LABEL)
        for p in landing:
            types = by_pool[p].labels.get(CAPACITY_TYPE_LABEL, ())
            if "spot" in ((chosen,) if chosen else types):
                out.append(f"can run on spot capacity of pool {by_pool[p].owner}, which its tier must not")
    elif tiers and not any(capacity_pin(rf, t) for t in tiers):
        for p in landing:
            if by_pool[p].owner != p:
                out.append(f"lands on the on-demand floor of pool {by_pool[p].owner}, held for the tiers that must "
                           "not be interrupted")
    for p in landing:
        if by_pool[p].owner not in pools:
            out.append(f"lands on pool {by_pool[p].owner}, which is not its tier's")
    for res, n in want.items():
        granted = allowance(ns, pc, res, kueue_held)
        c = quota_cap(quotas, pc, res)
        if granted is None:
            out.append(f"gets {res} in a namespace not granted it under class {pc or '(none)'}"
                       + (", uncharged by any ResourceQuota" if c is None else ""))
            continue
        if c is None:
            out.append(f"gets {res} uncharged by any ResourceQuota")
        elif c > granted:
            out.append(f"can hold {c} {res} (quota) where the namespace is granted {granted}")
        limits = [t.max_gpus_per_pod for t in tiers if rf.tier_resource(t) == res and t.max_gpus_per_pod is not None]
        if limits and n > max(limits):
            out.append(f"requests {n} {res}, above maxGPUsPerPod {max(limits)}")
    return out


# kubernetes v1.36.3 pkg/apis/resource/types.go:1621: what the quota charges an ``All`` request
ALLOCATION_RESULTS_MAX_SIZE = 32
CLAIM_COUNT_KEY = "count/resourceclaims.resource.k8s.io"


def _claim_quota_admits(cluster, ns: str, claim: dict[str, Any]) -> bool:
    """Whether the namespace's quotas admit the claim, made in an otherwise empty namespace: it is
    charged 1 object and, per request, its count of devices of its class (an ``All`` request: the
    most a claim can hold) under ``<class>.deviceclass.resource.k8s.io/devices`` (kubernetes
    v1.36.3 pkg/quota/v1/evaluator/core/resource_claims.go:235, 269-285)."""
    charged: dict[str, int] = {CLAIM_COUNT_KEY: 1}
    for r in claim["spec"]["devices"]["requests"]:
        ex = r.get("exactly") or {}
        n = ALLOCATION_RESULTS_MAX_SIZE if ex.get("allocationMode") == "All" else int(ex.get("count", 1))
        key = f"{ex.get('deviceClassName')}.deviceclass.resource.k8s.io/devices"
        charged[key] = charged.get(key, 0) + n
        charged[f"requests.{key}"] = charged[key]
    return all(int(v) >= charged[k] for q in cluster.quotas.get(ns, []) for k, v in q["spec"].get("hard", {}).items()
               if k in charged)


def _claim_breaches(rf, cluster, states, exempt, tenant_of, cases: list | None = None) -> list[Breach]:
    """A ResourceClaim of every GPU DeviceClass in every namespace state: admitted only where
    a DRA tier of that class is granted, and charged there to the class's quota key; and the
    shapes of a tier's class no namespace admits (not named for the tier, every device of a
    node, above ``maxGPUsPerPod``: lower/admission.py ``_claim_shape_policy``). With ``cases``,
    each claim's verdict in each namespace state a tenant writes to (its policies, then its
    quotas), for a real API server to judge."""
    from gpuplan.dra.claims import CHART_CLASSES, any_dra, tier_claims
    from gpuplan.k8s_features_dra import RESOURCE_API
    from gpuplan.placement.cel import TENANT_REQUEST

    if not any_dra(rf):
        return []
    claims = {c.class_name: c for c in tier_claims(rf)}
    out = []

    def note(words: str, obj: dict[str, Any], ns_obj: dict[str, Any], policy_admits: bool) -> None:
        if cases is not None:
            ns = ns_obj["metadata"]["name"]
            cases.append(Case(words, obj, TENANT_REQUEST, ns, policy_admits and _claim_quota_admits(cluster, ns, obj),
                              dict(ns_obj["metadata"].get("labels") or {})))

    def claim(cls: str, name: str, **exactly: Any) -> dict[str, Any]:
        return {"apiVersion": RESOURCE_API, "kind": "ResourceClaim", "metadata": {"name": name},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls, **exactly}}]}}}

    # the shapes a tier's class is claimed in only through its own templates, bounded: refused in
    # every namespace a tenant writes to (lower/admission.py _claim_shape_policy)
    for cls, c in sorted(claims.items()):
        n = rf.tier_by_name[c.tier].max_gpus_per_pod
        shapes = [(f"a ResourceClaim of DeviceClass {cls} not named for tier {c.tier}", claim(cls, "probe"),
                   "claims a tier's devices outside its templates"),
                  (f"a ResourceClaim gpuplan-{c.tier} of all the devices of DeviceClass {cls}",
                   claim(cls, f"gpuplan-{c.tier}", allocationMode="All"), "claims every device of a node")]
        if n is not None:
            shapes.append((f"a ResourceClaim gpuplan-{c.tier} of {n + 1} devices of DeviceClass {cls}",
                           claim(cls, f"gpuplan-{c.tier}", allocationMode="ExactCount", count=n + 1),
                           f"claims {n + 1} devices, above maxGPUsPerPod {n}"))
        for words, obj, escape in shapes:
            verdicts = cluster.verdicts(obj)
            for ns_obj in states:
                ns = ns_obj["metadata"]["name"]
                if ns in exempt:
                    continue
                admits = not cluster.policy_denials(obj, ns_obj, cluster.selected(ns_obj), None, verdicts)
                note(words, obj, ns_obj, admits)
                if admits:
                    out.append(Breach(ns, words, escape))
    for cls in sorted({*CHART_CLASSES, *claims}):
        # a tier's class named as its templates are (gpuplan-<tier>): what the quota then holds
        name = f"gpuplan-{claims[cls].tier}" if cls in claims else "probe"
        claim_ = claim(cls, name)
        verdicts = cluster.verdicts(claim_)
        for ns_obj in states:
            ns = ns_obj["metadata"]["name"]
            if ns in exempt:
                continue
            admits = not cluster.policy_denials(claim_, ns_obj, cluster.selected(ns_obj), None, verdicts)
            note(f"a ResourceClaim {name} of DeviceClass {cls}", claim_, ns_obj, admits)
            if not admits:
                continue
            tn = tenant_of.get(ns)
            grant = (tn.quotas.get(ns, {}).get(claims[cls].tier, 0) if tn is not None and cls in claims else 0)
            key = f"requests.{cls}.deviceclass.resource.k8s.io/devices"
            hards = [int(q["spec"]["hard"][k]) for q in cluster.quotas.get(ns, []) for k in q["spec"].get("hard", {})
                     if k in (key, key.removeprefix("requests."))]
            if not hards:
                out.append(Breach(ns, f"a ResourceClaim of DeviceClass {cls}", "claims devices uncharged by any quota"))
            elif min(hards) > grant:
                out.append(Breach(ns, f"a ResourceClaim of DeviceClass {cls}",
                                  f"can claim {min(hards)} devices where the namespace is granted {grant}"))
    return out



def boundary(rf: ResolvedFleet, docs: list[dict[str, Any]]) -> Boundary:
    """The boundary proof of the fleet over ``docs``, computed once (the object checks and
    the capacity report share it)."""
    cached = rf.__dict__.get("_boundary_proof")
    if cached is None:
        cached = rf.__dict__["_boundary_proof"] = prove_boundary(rf, docs)
    return cached


def boundary_rows(b: Boundary) -> tuple[list[str], list[list[str]]]:
    """The table of `gpuplan plan`: per pool, which class can run there, from which
    namespaces, and how much the namespace's quotas let that class hold."""
    from gpuplan.placement.simulate import SHOWN_NAMESPACES

    head = ["pool", "class", "resource", "namespaces (quota)"]
    rows = []
    for a in b.access:
        shown = ", ".join(f"{ns} ({cap})" for ns, cap in a.namespaces[:SHOWN_NAMESPACES])
        more = len(a.namespaces) - SHOWN_NAMESPACES
        rows.append([a.pool, a.priority_class, a.resource, shown + (f" and {more} more" if more > 0 else "")])
    return head, rows


def summary(b: Boundary) -> str:
    """The proof's verdict in one sentence; :func:`coverage` lists what it tried and what not."""
    found = f"{len(b.breaches)} break the boundary" if b.breaches else "none breaks the boundary"
    squat = any("without requesting a GPU" in x.escape for x in b.breaches)
    return (f"{b.pods} pod shapes a tenant or a stranger could write, in {b.namespace_shapes} namespace shapes "
            f"({b.checked} checked): {found}." + ("" if squat else " Pods of no tier run on no GPU pool."))


def coverage(b: Boundary) -> list[str]:
    """What the verdict covers, from the shapes the proof enumerated, and what it does not."""
    return ["Tried: " + "; ".join(b.tried) + ".", "Not covered: " + "; ".join(b.not_covered) + "."]


SHOWN = 6  # exempt namespaces named in the headline
CONTROLLER_SHAPE = "a queued tier's pod created by its Kueue-managed controller"
GATE_SHAPE = "a pod held by Kueue's scheduling gate"
VOLCANO_SHAPE = "a queued tier's pod scheduled by Volcano"
DRA_TEMPLATE_SHAPE = "a DRA tier's pod naming another tier's claim template, or two of its own"
PER_GPU_SHAPE = "its tier's pod at and just over its pool's CPU and memory share per GPU"
FABRIC_SHAPE = "a gang tier's pod without its pool's fabric (vpc.amazonaws.com/efa)"
# What no enumerated shape stands for (docs/placement.md "Threat model", out of scope): said with the verdict
NOT_COVERED = ("cluster-admin", "a tenant with node or kubelet access", "impersonation or RBAC that creates pods "
               "as a controller", "NVIDIA_VISIBLE_DEVICES from envFrom or env of a ConfigMap",
               "updates of running pods and controllers (scale, rollout): pods are created, never updated",
               "other admission webhooks, LimitRanges, PodNodeSelector",
               "the moments between sync steps (proved by build from the existing tree: GP529)")
DRA_NOT_COVERED = ("DRA device selection beyond which DeviceClass a claim names and the quota that charges it "
                   "(selectors: the DRA proof, docs/dra.md)")
