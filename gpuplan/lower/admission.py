"""cluster/admission-policy.yaml: the ValidatingAdmissionPolicies that keep every pod,
not only a tier's contract pod, inside the tenancy boundary (docs/placement.md "Threat
model"), each with its binding.

``admissionregistration.k8s.io/v1`` ValidatingAdmissionPolicy is GA (on by default) from
Kubernetes 1.30 (KEP-3488, kubernetes/kubernetes CHANGELOG-1.30). Pods are checked, not
mutated: MutatingAdmissionPolicy is beta and off by default until 1.36 (KEP-3962), and a
pod spec that states its pool is one its owner can read, diff and reason about.

**Grants are namespace names, never labels.** A label can be copied onto any namespace
and outlives a removed tenant (its quotas are pruned, the Namespace is kept); the name
is set by the API server and so is ``kubernetes.io/metadata.name`` (NamespaceDefaultLabelName,
kept equal to the name by the API server since 1.21). So a tier's class is refused by a
policy whose *binding* selects every namespace whose name is not granted the tier.

Every pod (and every pod template of the workload kinds tenants submit: Deployment,
ReplicaSet, StatefulSet, DaemonSet, Job, CronJob, and the Kueue integrations that carry
pod templates), outside the GPU Operator's namespace and
``cluster.admission.unmanagedNamespaces``:

- requests a GPU resource (an advertised name, or any implicit DRA name
  ``deviceclass.resource.kubernetes.io/<class>``, KEP-5004) only under a tier's class;
- tolerates the pool binding taint ``gpuplan.dev/pool`` (by key, or by a keyless
  ``Exists``) only under a tier's class: pods that are not tier pods stay off GPU nodes;
- sets no ``NVIDIA_VISIBLE_DEVICES`` (with the device plugin's ``envvar`` strategy the
  container toolkit would expose the GPUs it names);
- under a tier's class: selects the tier's pool and tolerates its binding taint, requests
  no GPU resource but the tier's, at most ``maxGPUsPerPod`` of it (the pod's effective
  request: containers and restartable init containers add up, each other init container
  with the sidecars beside it), and, for a queued tier, comes from a Kueue-managed
  workload (docs/placement.md "Kueue").

Quantities are read with ``int()`` (extended resources are whole numbers; anything else
fails evaluation and ``failurePolicy: Fail`` denies the pod); ``sum()`` is the Kubernetes
CEL lists library's (k8s.io/apiserver/pkg/cel/library/lists.go, on since 1.28).

Stage: lower (docs/architecture.md)."""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

from gpuplan.artifacts import Artifact, Produced
from gpuplan.dra.claims import IMPLICIT_DRA_PREFIX
from gpuplan.identity import exempt_namespaces as identity_exempt
from gpuplan.identity import POOL_LABEL, POOL_TAINT_KEY, PRIORITY_LABEL, QUEUE_LABEL, content_name
from gpuplan.lower.common import metadata, obj
from gpuplan.queues import kueue_on
from gpuplan.resolve import ResolvedFleet

API = "admissionregistration.k8s.io/v1"
# ValidatingAdmissionPolicy v1: GA in Kubernetes 1.30 (KEP-3488; CHANGELOG-1.30.md "graduated to GA").
VAP_MIN_VERSION = (1, 30)
# MutatingAdmissionPolicy: alpha 1.32, beta (off by default) 1.34, GA 1.36 (KEP-3962) - not used.
MAP_GA_VERSION = (1, 36)
PATH = "cluster/admission-policy.yaml"
NAME_LABEL = "kubernetes.io/metadata.name"
VISIBLE_DEVICES_ENV = "NVIDIA_VISIBLE_DEVICES"
DAEMONSET_CONTROLLER = "system:serviceaccount:kube-system:daemon-set-controller"
# a kubelet's user, system:node:<name> (kubernetes/kubernetes v1.36.3 pkg/auth/nodeidentifier/default.go:37):
# it creates the mirror pods of its static pods, bound to itself (NodeRestriction admits no other)
NODE_USER_PREFIX = "system:node:"

# kind -> (API group, resource, CEL from the object to its list of pod specs)
WORKLOADS: dict[str, tuple[str, str, str]] = {
    "Pod": ("", "pods", "[object.spec]"),
    "Deployment": ("apps", "deployments", "[object.spec.template.spec]"),
    "ReplicaSet": ("apps", "replicasets", "[object.spec.template.spec]"),
    "StatefulSet": ("apps", "statefulsets", "[object.spec.template.spec]"),
    "DaemonSet": ("apps", "daemonsets", "[object.spec.template.spec]"),
    "Job": ("batch", "jobs", "[object.spec.template.spec]"),
    "CronJob": ("batch", "cronjobs", "[object.spec.jobTemplate.spec.template.spec]"),
}
# Kueue integrations whose objects carry pod templates, and where (apis of their CRDs)
INTEGRATION_WORKLOADS: dict[str, tuple[str, tuple[str, str, str]]] = {
    "jobset.x-k8s.io/jobset": ("JobSet", ("jobset.x-k8s.io", "jobsets",
                                          "object.spec.replicatedJobs.map(r, r.template.spec.template.spec)")),
    **{f"kubeflow.org/{k.lower()}": (k, ("kubeflow.org", f"{k.lower()}s",
                                         f"object.spec.{f}.map(r, object.spec.{f}[r].template.spec)"))
       for k, f in (("PyTorchJob", "pytorchReplicaSpecs"), ("TFJob", "tfReplicaSpecs"),
                    ("XGBoostJob", "xgbReplicaSpecs"), ("PaddleJob", "paddleReplicaSpecs"),
                    ("JAXJob", "jaxReplicaSpecs"), ("MPIJob", "mpiReplicaSpecs"))},
}
# kinds whose spec.suspend (Kubeflow: spec.runPolicy.suspend) Kueue holds until admission
SUSPENDED_BY_SPEC = ("Job", "JobSet")


def policy_name(rf: ResolvedFleet) -> str:
    return f"gpuplan-{rf.fleet.metadata.name}-gpu-pods"


def version(rf: ResolvedFleet) -> tuple[int, int]:
    major, minor = rf.fleet.spec.cluster.kubernetes_version.split(".")
    return int(major), int(minor)


def enabled(rf: ResolvedFleet) -> bool:
    return (rf.fleet.spec.cluster.admission.enabled and version(rf) >= VAP_MIN_VERSION
            and bool(rf.fleet.spec.tiers))


def exempt_namespaces(rf: ResolvedFleet) -> list[str]:
    """Namespaces no binding selects (gpuplan.identity.exempt_namespaces says why)."""
    return list(identity_exempt(rf))


# JSON writes a character beyond the Basic Multilingual Plane as a UTF-16 surrogate pair
# ("\ud83d\ude00"), which CEL refuses (cel-spec langdef.md "String and Bytes Values": \u
# takes a code point, and surrogates are none); CEL's own escape for it is \U and 8 hex digits
_SURROGATE_PAIR = re.compile(r"(?<!\\)((?:\\\\)*)\\u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})")


def _lit(v: Any) -> str:
    """A CEL literal (JSON strings and lists are CEL string and list literals, but for
    the escape of a character beyond U+FFFF)."""
    text = json.dumps(v, ensure_ascii=True)
    return _SURROGATE_PAIR.sub(lambda m: m[1] + "\\U%08x" % (0x10000 + ((int(m[2], 16) - 0xD800) << 10)
                                                            + int(m[3], 16) - 0xDC00), text)


def workloads(rf: ResolvedFleet) -> dict[str, tuple[str, str, str]]:
    """The kinds whose pod specs the policies read, this fleet's Kueue integrations included."""
    q = rf.fleet.spec.queueing
    out = dict(WORKLOADS)
    for i in (q.integrations if q is not None and kueue_on(rf) else ()):
        if i in INTEGRATION_WORKLOADS:
            kind, rule = INTEGRATION_WORKLOADS[i]
            out[kind] = rule
    return out


def specs_expression(rf: ResolvedFleet) -> str:
    """CEL: the pod specs of the object under review (one for a Pod, each template of a workload)."""
    kinds = workloads(rf)
    out = kinds["Pod"][2]
    for kind in sorted(k for k in kinds if k != "Pod"):
        out = f"object.kind == {_lit(kind)} ? {kinds[kind][2]} : ({out})"
    return out


def templates_expression(rf: ResolvedFleet) -> str:
    """CEL: the pod templates of the object under review (the Pod itself; each template of a
    workload, ``metadata`` beside ``spec``): :func:`specs_expression` one level up."""
    kinds = workloads(rf)
    up = {k: re.sub(r"\.spec([\])])$", r"\1", path) for k, (_, _, path) in kinds.items()}
    out = up["Pod"]
    for kind in sorted(k for k in kinds if k != "Pod"):
        out = f"object.kind == {_lit(kind)} ? {up[kind]} : ({out})"
    return out


def class_tiers(rf: ResolvedFleet) -> dict[str, list]:
    """PriorityClass name -> the tiers that use it (several when tiers adopt one name)."""
    from gpuplan.identity import priority_class_name

    out: dict[str, list] = {}
    for t in rf.fleet.spec.tiers:
        if rf.tier_resource(t) is not None and t.pool in rf.pool_by_name:
            out.setdefault(priority_class_name(t), []).append(t)
    return out


def class_namespaces(rf: ResolvedFleet, tiers: list) -> list[str]:
    """The namespaces granted any of ``tiers`` (:func:`gpuplan.queues.namespace_grants`)."""
    from gpuplan.queues import namespace_grants

    index = rf.__dict__.get("_granted_namespaces")
    if index is None:  # tier -> namespaces, once per fleet
        index = rf.__dict__["_granted_namespaces"] = {}
        for ns, tiers_ in namespace_grants(rf).items():
            for t in tiers_:
                index.setdefault(t, set()).add(ns)
    return sorted(set().union(*(index.get(t.name, ()) for t in tiers)))


# --- CEL pieces, over one pod spec ``s`` ------------------------------------------------------


def _containers(s: str) -> str:
    return f"({s}.containers + (has({s}.initContainers) ? {s}.initContainers : []))"


def _keys(c: str) -> str:
    return (f"((has({c}.resources) && has({c}.resources.limits) ? {c}.resources.limits.map(k, k) : []) + "
            f"(has({c}.resources) && has({c}.resources.requests) ? {c}.resources.requests.map(k, k) : []))")


def _gpu_key(k: str, rf: ResolvedFleet) -> str:
    from gpuplan.resolve import GPU, GPU_NAME_PREFIXES

    known = " || ".join(f"{k}.startsWith({_lit(p)})" for p in (IMPLICIT_DRA_PREFIX, *GPU_NAME_PREFIXES))
    return f"({k} in {_lit(sorted({*rf.gpu_resources, GPU}))} || {known})"


def uses_gpu(rf: ResolvedFleet, s: str) -> str:
    return f"{_containers(s)}.exists(c, {_keys('c')}.exists(k, {_gpu_key('k', rf)}))"


def _pc(s: str) -> str:
    return f"(has({s}.priorityClassName) ? {s}.priorityClassName : '')"


def tolerates_pool(s: str) -> str:
    """A toleration that tolerates some pool's binding taint (NoSchedule): by key, or keyless Exists
    (k8s.io/api core/v1 toleration.go ToleratesTaint)."""
    return tolerates_key(s, POOL_TAINT_KEY)


def tolerates_key(s: str, key: str) -> str:
    """A toleration that tolerates a NoSchedule taint of ``key`` (any value): by key, or keyless Exists."""
    return (f"(has({s}.tolerations) && {s}.tolerations.exists(t, "
            f"(!has(t.effect) || t.effect == '' || t.effect == 'NoSchedule') && "
            f"(has(t.key) && t.key != '' ? t.key == {_lit(key)} : "
            f"(has(t.operator) && t.operator == 'Exists'))))")


def _quantity(c: str, res: str) -> str:
    r = _lit(res)
    return (f"(has({c}.resources) && has({c}.resources.limits) && {r} in {c}.resources.limits ? "
            f"int({c}.resources.limits[{r}]) : (has({c}.resources) && has({c}.resources.requests) && "
            f"{r} in {c}.resources.requests ? int({c}.resources.requests[{r}]) : 0))")


def _at_most(s: str, res: str, n: int) -> str:
    """The pod's effective request of ``res`` is at most ``n`` (k8s.io/component-helpers
    resource/helpers.go PodRequests: containers and restartable init containers add up; an
    init container runs beside the sidecars started before it - here beside all of them, a
    bound that is never lower)."""
    return _effective_at_most(s, _quantity("c", res), str(n), "0")


def _effective_at_most(s: str, q: str, bound: str, zero: str) -> str:
    """:func:`_at_most` of the CEL quantity ``q`` of a container ``c``: an int (``zero`` 0), or a
    double (``zero`` 0.0: each sum then has a 0.0 term, so that an empty list sums to a double)."""
    def total(items: str) -> str:
        return f"{items}.sum()" if zero == "0" else f"({items} + [{zero}]).sum()"
    sidecars = f"(has({s}.initContainers) ? {total(f'{_sidecars(s)}.map(c, {q})')} : {zero})"
    return (f"{total(f'{s}.containers.map(c, {q})')} + {sidecars} <= {bound} && "
            f"(!has({s}.initContainers) || {s}.initContainers.all(c, "
            f"(has(c.restartPolicy) && c.restartPolicy == 'Always') || {q} + {sidecars} <= {bound}))")


def _requested(c: str, res: str) -> str:
    """CEL: container ``c``'s request of ``res`` (cpu, memory) as a double: its request, else its
    limit (the API server defaults a Pod's missing request to its limit, so the pod a template
    makes has it: kubernetes v1.36.3 pkg/apis/core/v1/defaults.go:164-191 ``SetDefaults_Pod``).
    Also a pod spec's own ``resources`` (pod-level requests, beta and on from 1.34:
    pkg/features/kube_features.go:1780-1783)."""
    r = _lit(res)
    return (f"(has({c}.resources) && has({c}.resources.requests) && {r} in {c}.resources.requests ? "
            f"quantity({c}.resources.requests[{r}]).asApproximateFloat() : "
            f"(has({c}.resources) && has({c}.resources.limits) && {r} in {c}.resources.limits ? "
            f"quantity({c}.resources.limits[{r}]).asApproximateFloat() : 0.0))")


def _per_gpu_validations(rf: ResolvedFleet, pc: str, tiers: list, mine: str) -> list[dict[str, str]]:
    """Pods of a tier's class request at most the pool's CPU and memory per GPU times the GPUs they
    request (:mod:`gpuplan.pergpu`): a pod that asks for more holds one GPU and keeps the node's
    others from the pods granted them (the scheduler fits CPU and memory requests too: kubernetes
    v1.36.3 pkg/scheduler/framework/plugins/noderesources/fit.go ``fitsRequest``). The bound is
    compared in doubles with half a thousandth of a CPU (half a byte) to spare, below what a
    quantity can state."""
    from gpuplan.pergpu import unit_share

    out = []
    sel = "s.nodeSelector"
    for t in tiers:
        share = unit_share(rf, t)
        if share is None:
            continue
        res = rf.tier_resource(t)
        units = f"double({_containers('s')}.map(c, {_quantity('c', res)}).sum())"
        checks = []
        for key, per_unit, spare in (("cpu", share.cpu_milli / 1000 if share.cpu_milli is not None else None, "0.0005"),
                                     ("memory", float(share.memory) if share.memory is not None else None, "0.5")):
            if per_unit is None:
                continue
            bound = f"{units} * {per_unit!r} + {spare}"
            checks.append(_effective_at_most("s", _requested("c", key), bound, "0.0"))
            checks.append(f"(!has(s.resources) || {_requested('s', key)} <= {bound})")
        on_pool = f"has({sel}) && {_lit(POOL_LABEL)} in {sel} && {sel}[{_lit(POOL_LABEL)}] == {_lit(t.pool)}"
        out.append({"expression": f"{mine}.all(s, !({on_pool}) || ({' && '.join(checks)}))",
                    "message": f"pods of PriorityClass {pc} on pool {t.pool} request at most {share.describe()} "
                               f"per {res} ({share.source}): more would keep the node's other GPUs from the pods "
                               "granted them",
                    "reason": "Invalid"})
    return out


def _sidecars(s: str) -> str:
    """CEL: the restartable init containers of pod spec ``s`` (sidecars, ``restartPolicy: Always``);
    only where ``s`` has init containers."""
    return f"{s}.initContainers.filter(c, has(c.restartPolicy) && c.restartPolicy == 'Always')"


def _running(s: str) -> str:
    """CEL: the containers of pod spec ``s`` that run side by side once it has started: its
    containers and its sidecars."""
    return f"({s}.containers + (has({s}.initContainers) ? {_sidecars(s)} : []))"


def _gang_fabric_validations(rf: ResolvedFleet, pc: str, tiers: list, mine: str) -> list[dict[str, str]]:
    """Pods of a gang tier's class on a pool with a fabric between nodes
    (:func:`gpuplan.identity.pool_gang_resources`; EKS: ``vpc.amazonaws.com/efa``) request it in the
    containers that use the GPUs: every container (or sidecar) that requests the tier's resource
    requests at least one, and together they request at least the pool's count.

    Per container, because the kubelet hands a device plugin's devices to the container that
    requests them (kubernetes v1.36.3 pkg/kubelet/cm/devicemanager/manager.go:366-400 ``Allocate``,
    one container at a time; a plain init container's devices go back to ``devicesToReuse`` for a
    later container that asks for them, a sidecar keeps its own): EFA requested by another
    container leaves NCCL in the GPU container on TCP sockets. Together, as the scheduler counts a
    pod: containers and sidecars add up (k8s.io/component-helpers@v0.36.3 resource/helpers.go:193-279
    ``AggregateContainerRequests``); a plain init container runs before them and is not counted
    here. At least, not exactly: a pool of mixed instance types asks for its smallest type's count
    (:func:`gpuplan.cloud.aws.gang_pod_resources`), and a pod may ask for a larger type's. Only
    where every tier of the class on the pool is a gang tier: the selector is all a pod shows of
    its tier."""
    from gpuplan.dra.claims import is_dra
    from gpuplan.identity import pool_gang_resources

    out = []
    sel = "s.nodeSelector"
    for pool in sorted({t.pool for t in tiers}):
        on = [t for t in tiers if t.pool == pool]
        pv = rf.pool_by_name[pool]
        need = pool_gang_resources(rf, pv)
        if not need or any(t.gang is None for t in on):
            continue
        gpus = sorted({rf.tier_resource(t) for t in on})
        uses = " || ".join(f"{_quantity('c', g)} >= 1" for g in gpus)
        if is_dra(rf, pv):  # or through the claims the container names
            uses += " || (has(c.resources) && has(c.resources.claims) && size(c.resources.claims) > 0)"
        users = f"{_running('s')}.filter(c, {uses})"
        on_pool = f"has({sel}) && {_lit(POOL_LABEL)} in {sel} && {sel}[{_lit(POOL_LABEL)}] == {_lit(pool)}"
        for res, n in sorted(need.items()):
            q = _quantity("c", res)
            out.append({
                "expression": f"{mine}.all(s, !({on_pool}) || ({users}.all(c, {q} >= 1) && "
                              f"{users}.map(c, {q}).sum() >= {n}))",
                "message": f"pods of gang PriorityClass {pc} on pool {pool} request {res}: {n} in the container "
                           f"that requests {' or '.join(gpus)} (with several such containers, each some, {n} in all): "
                           f"the pool's nodes give multi-node jobs {n} of them, and without them traffic between nodes "
                           f"falls back to TCP sockets. Add {res}: \"{n}\" to that container's resources.requests "
                           "and resources.limits",
                "reason": "Invalid"})
    return out


def class_condition(rf: ResolvedFleet, pc: str) -> str:
    """matchCondition: the object has a pod spec of class ``pc`` (the placement proof
    recognises this exact expression, docs/placement.md "The proof")."""
    return f"({specs_expression(rf)}).exists(s, has(s.priorityClassName) && s.priorityClassName == {_lit(pc)})"


def _suspended(o: str) -> str:
    """CEL: workload ``o`` is suspended (spec.suspend; Kubeflow's spec.runPolicy.suspend)."""
    spec = f"(has({o}.spec.suspend) && {o}.spec.suspend == true)"
    flow = f"(has({o}.spec.runPolicy) && has({o}.spec.runPolicy.suspend) && {o}.spec.runPolicy.suspend == true)"
    return f"({o}.kind in {_lit(list(SUSPENDED_BY_SPEC))} ? {spec} : {flow})"


def _replicas(r: str) -> str:
    return f"(has({r}.replicas) ? int({r}.replicas) : 1)"


def _parallelism(spec: str) -> str:
    return f"(has({spec}.parallelism) ? int({spec}.parallelism) : 1)"


def pods_expression(rf: ResolvedFleet, o: str) -> str:
    """CEL: how many pods workload ``o`` runs at once, for the kinds Kueue admits by their pod
    counts: a Job's parallelism, a JobSet's replicas times its Jobs' parallelism, a Kubeflow
    job's replicas; -1 for any other kind (kueue v0.19.2 pkg/controller/jobs/job/job_controller.go:356-361
    ``PodSets``: a PodSet's ``Count`` is the Job's parallelism, :451-458 ``podsCount``)."""
    kinds = workloads(rf)
    out = "-1"
    if "Job" in kinds:
        out = f"{o}.kind == 'Job' ? {_parallelism(f'{o}.spec')} : {out}"
    if "JobSet" in kinds:
        rj = f"{o}.spec.replicatedJobs"
        out = (f"{o}.kind == 'JobSet' ? {rj}.map(r, {_replicas('r')} * {_parallelism('r.template.spec')}).sum() : "
               f"({out})")
    for i, (kind, (_, _, specs)) in INTEGRATION_WORKLOADS.items():
        if i.startswith("kubeflow.org/") and kind in kinds:
            field = re.match(r"object\.spec\.(\w+)\.map", specs)[1]
            m = f"{o}.spec.{field}"
            out = f"{o}.kind == {_lit(kind)} ? {m}.map(r, {_replicas(f'{m}[r]')}).sum() : ({out})"
    return f"({out})"


def grows(rf: ResolvedFleet) -> str:
    """CEL: an UPDATE that raises how many pods a running workload runs at once. The Job
    controller starts the extra pods at once, beyond what Kueue admitted; Kueue stops the Job only
    on its next reconcile, when no Workload matches it any more (kueue v0.19.2
    pkg/controller/jobframework/reconciler.go:1085-1106 ``ensureOneWorkload``: "job with no
    matching workload, suspending"); its webhook forbids the change only under partial admission
    (pkg/controller/jobs/job/job_webhook.go:228-231)."""
    return (f"request.operation == 'UPDATE' && has(oldObject.spec) && !{_suspended('oldObject')} && "
            f"{pods_expression(rf, 'object')} > {pods_expression(rf, 'oldObject')}")


def priority_label(o: str) -> str:
    """CEL: the Kueue priority label of object ``o`` ('' without one), where Kueue reads it:
    on the object itself (kueue v0.19.2 pkg/controller/jobframework/reconciler.go:1716-1719
    ``ExtractPriority``, utils.go:208-213 ``WorkloadPriorityClassName``: the object's labels),
    and for a CronJob on the Jobs it creates."""
    lab = _lit(PRIORITY_LABEL)
    own = f"(has({o}.metadata.labels) && {lab} in {o}.metadata.labels ? {o}.metadata.labels[{lab}] : '')"
    jt = f"{o}.spec.jobTemplate.metadata"
    cron = f"(has({jt}) && has({jt}.labels) && {lab} in {jt}.labels ? {jt}.labels[{lab}] : '')"
    return f"({o}.kind == 'CronJob' ? {cron} : {own})"


def workload_priorities(rf: ResolvedFleet) -> dict[str, str]:
    """WorkloadPriorityClass -> the PriorityClass of its queued tier (those gpuplan emits)."""
    from gpuplan.identity import priority_class_name, workload_priority_class_name
    from gpuplan.queues import queued_tiers

    queued = set(queued_tiers(rf))
    return {workload_priority_class_name(t): priority_class_name(t)
            for tiers in class_tiers(rf).values() for t in tiers if t.name in queued}


def changed(rf: ResolvedFleet) -> dict[str, str]:
    """matchCondition: a CREATE, or an UPDATE that changes what the policies read - a Pod's
    spec; a workload's pod templates (metadata and spec) or its suspension. A controller's
    update of anything else passes untouched: the Deployment controller scales a ReplicaSet
    with a full UPDATE of ``spec.replicas`` (kubernetes/kubernetes v1.36.3
    pkg/controller/deployment/sync.go:408 ``scaleReplicaSet``), which must pass after the
    ReplicaSet's class is renamed or revoked, or the rollout sticks with the old pods on their
    GPUs. Each pod the workload then creates is a Pod CREATE, held to today's rules."""
    old = re.sub(r"\bobject\b", "oldObject", templates_expression(rf))
    # Kueue re-reads a running Job's priority label (kueue v0.19.2 reconciler.go:1215
    # UpdateWorkloadPriority): a change of it is re-checked too
    label = (f" || {priority_label('object')} != {priority_label('oldObject')} || ({grows(rf)})"
             if kueue_on(rf) else "")
    return {"name": "changed", "expression": (
        "request.operation != 'UPDATE' || !has(oldObject.spec) || "
        f"(object.kind == 'Pod' ? object.spec != oldObject.spec : "
        f"(({templates_expression(rf)}) != ({old}) || {_suspended('object')} != {_suspended('oldObject')}))"
        + label)}


def _specs(rf: ResolvedFleet) -> dict[str, str]:
    return {"name": "specs", "expression": specs_expression(rf)}


# --- the policies ------------------------------------------------------------------------------


def namespace_validations(rf: ResolvedFleet) -> list[dict[str, str]]:
    """What every pod spec outside the exempt namespaces must satisfy."""
    classes = _lit(sorted(class_tiers(rf)))
    env = _lit(VISIBLE_DEVICES_ENV)
    return [
        {"expression": f"variables.specs.all(s, !({uses_gpu(rf, 's')}) || {_pc('s')} in {classes})",
         "message": "GPU resources only under the PriorityClass of a gpuplan tier granted to this namespace "
                    "(see the tenant page of the namespace's tenant)",
         "reason": "Forbidden"},
        pool_toleration(rf),
        # the kubelet admits a pod bound by name whatever the node's NoSchedule taints ("Kubelet is only
        # interested in the NoExecute taint": kubernetes/kubernetes v1.36.3 pkg/kubelet/lifecycle/
        # predicate.go:454 generalFilter), so a pod that names its node would pass every pool's binding taint;
        # the scheduler binds through pods/binding, which no rule matches; a kubelet's mirror pods are its own
        {"expression": "(object.kind == 'Pod' && request.operation != 'CREATE') || "
                       f"request.userInfo.username.startsWith({_lit(NODE_USER_PREFIX)}) || "
                       "variables.specs.all(s, !has(s.nodeName) || s.nodeName == '')",
         "message": "pods name no node (spec.nodeName): the scheduler places them, so the GPU pools' taints, "
                    "node selectors and quotas hold (the kubelet enforces only NoExecute taints)",
         "reason": "Forbidden"},
        {"expression": f"variables.specs.all(s, !{_containers('s')}.exists(c, has(c.env) && "
                       f"c.env.exists(e, e.name == {env})))",
         "message": f"{VISIBLE_DEVICES_ENV} is set by the device plugin, not by a pod",
         "reason": "Forbidden"},
    ] + _priority_validations(rf)


def pool_toleration(rf: ResolvedFleet, daemonsets: bool = False) -> dict[str, str]:
    """Only pods of a tier tolerate the pools' taint. A DaemonSet's pods are created by its
    controller: the DaemonSet itself was held to this rule when it was created or changed (its
    template), so a DaemonSet that predates the policy keeps working. ``daemonsets``: the rule of
    the node agents' namespaces (``admission.nodeAgentNamespaces``), where a DaemonSet may
    tolerate every taint (logging, monitoring and security agents run on every node) and every
    other rule holds: no GPU resource, no tier class, no node by name."""
    classes = _lit(sorted(class_tiers(rf)))
    agents = "object.kind == 'DaemonSet' || " if daemonsets else ""
    return {"expression": f"{agents}request.userInfo.username == {_lit(DAEMONSET_CONTROLLER)} || "
                          f"variables.specs.all(s, !{tolerates_pool('s')} || {_pc('s')} in {classes})",
            "message": f"only pods of a gpuplan tier may tolerate the GPU pools' taint {POOL_TAINT_KEY} "
                       "(a toleration with that key, or a keyless Exists)"
                       + ("; in a node agents' namespace, DaemonSets too" if daemonsets else ""),
            "reason": "Forbidden"}


def _priority_validations(rf: ResolvedFleet) -> list[dict[str, str]]:
    """With Kueue: a workload's priority label names the WorkloadPriorityClass of its own
    queued tier, or none (Kueue then takes the pods' PriorityClass: reconciler.go:1716-1719).
    A Job of one tier labelled with another's would take that tier's queue priority, preempt
    by it and block reclaim; Kueue lets a running Job change the label (validation.go:219-232)."""
    if not kueue_on(rf):
        return []
    own = workload_priorities(rf)
    label = priority_label("object")
    return [{
        "expression": f"{label} == '' || ({label} in {_lit(own)} && "
                      f"variables.specs.exists(s, {_pc('s')} == {_lit(own)}[{label}]) && "
                      f"variables.specs.all(s, {_pc('s')} in ['', {_lit(own)}[{label}]]))",
        "message": f"a workload's {PRIORITY_LABEL} names the WorkloadPriorityClass of its own queued tier "
                   f"(gpuplan-<tier> of its pods' PriorityClass: "
                   + (", ".join(f"{w} for {pc}" for w, pc in sorted(own.items())[:5])
                      + (f" and {len(own) - 5} more" if len(own) > 5 else "")) + ") or none",
        "reason": "Forbidden"}]


def _queued_validations(rf: ResolvedFleet, pc: str) -> list[dict[str, str]]:
    """A queued tier's pods come from workloads Kueue holds: its pods from the controllers
    of Kueue-managed kinds (or gated by Kueue), its suspendable workloads labelled for a
    queue and suspended at creation, released only by Kueue (docs/placement.md "Kueue")."""
    from gpuplan.queues import KUEUE_GATE, kueue_user, queue_controllers

    q = rf.fleet.spec.queueing
    assert q is not None
    ctrl = _lit(list(queue_controllers(rf)))
    kueue = _lit(kueue_user(rf))
    user = "request.userInfo.username"
    ql = _lit(QUEUE_LABEL)
    labelled = f"(has(object.metadata.labels) && {ql} in object.metadata.labels)"
    gated_by_kueue = any(i in q.integrations for i in ("pod", "deployment", "statefulset"))

    def gated(o: str) -> str:
        return f"(has({o}.spec.schedulingGates) && {o}.spec.schedulingGates.exists(g, g.name == {_lit(KUEUE_GATE)}))"

    kinds = workloads(rf)
    suspendable = sorted(k for k in kinds if k in SUSPENDED_BY_SPEC or k in
                         {v[0] for i, v in INTEGRATION_WORKLOADS.items() if i.startswith("kubeflow.org/")})

    suspended = _suspended

    pod_ok = f"{user} in {ctrl}" + (f" || ({labelled} && {gated('object')})" if gated_by_kueue else "")
    unmanaged = [k for k in ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet")
                 if not ((k in ("Deployment", "ReplicaSet") and "deployment" in q.integrations)
                         or (k == "StatefulSet" and "statefulset" in q.integrations))]
    out = [
        {"expression": f"object.kind != 'Pod' || request.operation != 'CREATE' || {pod_ok}",
         "message": f"pods of queued PriorityClass {pc} are created by the controller of a Kueue-managed "
                    f"workload (label a Job {QUEUE_LABEL}: <queue>), not directly",
         "reason": "Forbidden"},
        {"expression": f"object.kind != 'Pod' || request.operation != 'UPDATE' || !{gated('oldObject')} || "
                       f"{gated('object')} || {user} == {kueue}",
         "message": f"only Kueue lifts its admission gate from a pod of queued PriorityClass {pc}",
         "reason": "Forbidden"},
        {"expression": f"!(object.kind in {_lit(suspendable)}) || request.operation != 'CREATE' || "
                       f"{user} in {ctrl} || ({labelled} && {suspended('object')})",
         "message": f"a workload of queued PriorityClass {pc} names its queue (label {QUEUE_LABEL}) and is "
                    "created suspended; Kueue starts it on admission",
         "reason": "Forbidden"},
        {"expression": f"!(object.kind in {_lit(suspendable)}) || request.operation != 'UPDATE' || "
                       f"!{suspended('oldObject')} || {suspended('object')} || {user} in {ctrl} || {user} == {kueue}",
         "message": f"only Kueue starts a suspended workload of queued PriorityClass {pc}",
         "reason": "Forbidden"},
        {"expression": f"!({grows(rf)}) || {user} in {ctrl} || {user} == {kueue}",
         "message": f"a running workload of queued PriorityClass {pc} keeps the pod count Kueue admitted "
                    "(parallelism, replicas): suspend it to resize it, and Kueue admits the new size",
         "reason": "Forbidden"},
        {"expression": "object.kind != 'CronJob' || (has(object.spec.jobTemplate.metadata) && "
                       f"has(object.spec.jobTemplate.metadata.labels) && {ql} in object.spec.jobTemplate.metadata.labels)",
         "message": f"a CronJob of queued PriorityClass {pc} labels its jobs {QUEUE_LABEL}: <queue>",
         "reason": "Forbidden"},
    ]
    if unmanaged:
        out.append({"expression": f"!(object.kind in {_lit(unmanaged)})",
                    "message": f"PriorityClass {pc} is a queued tier's: its pods run as Kueue-managed jobs, "
                               f"not as a {'/'.join(unmanaged)}",
                    "reason": "Forbidden"})
    return out


def class_validations(rf: ResolvedFleet, pc: str, tiers: list) -> list[dict[str, str]]:
    """What a pod spec of PriorityClass ``pc`` must satisfy (its policy matches only objects
    with such a spec; each validation reads the specs of that class)."""
    from gpuplan.queues import queued_tiers

    pools = sorted({t.pool for t in tiers})
    allowed = sorted({rf.tier_resource(t) for t in tiers})
    from gpuplan.dra.claims import is_dra

    dra = any(is_dra(rf, rf.pool_by_name[t.pool]) for t in tiers)
    mine = f"variables.specs.filter(s, {_pc('s')} == {_lit(pc)})"
    sel = "s.nodeSelector"
    out = [
        {"expression": f"{mine}.all(s, has({sel}) && {_lit(POOL_LABEL)} in {sel} && "
                       f"{sel}[{_lit(POOL_LABEL)}] in {_lit(pools)} && has(s.tolerations) && "
                       f"s.tolerations.exists(t, has(t.key) && t.key == {_lit(POOL_TAINT_KEY)} && "
                       f"((has(t.operator) && t.operator == 'Exists') || "
                       f"(has(t.value) && t.value == {sel}[{_lit(POOL_LABEL)}]))))",
         "message": f"pods of PriorityClass {pc} must select their pool with nodeSelector "
                    f"{POOL_LABEL}: {' or '.join(pools)} and tolerate its taint {POOL_TAINT_KEY}",
         "reason": "Invalid"},
        {"expression": f"{mine}.all(s, {_containers('s')}.all(c, {_keys('c')}.all(k, "
                       f"!{_gpu_key('k', rf)} || k in {_lit(allowed)})))",
         "message": f"pods of PriorityClass {pc} may request only {' or '.join(allowed)} of the GPU resources",
         "reason": "Forbidden"},
        # at least one unit: a request of 0 is charged nothing by the quota and would let the class's
        # toleration and selector place a GPU-less pod on the pool
        {"expression": f"{mine}.all(s, {_containers('s')}.exists(c, "
                       + " || ".join(f"{_quantity('c', r)} >= 1" for r in allowed) + ")"
                       + (" || (has(s.resourceClaims) && size(s.resourceClaims) > 0))" if dra else ")"),
         "message": f"pods of PriorityClass {pc} request at least 1 {' or '.join(allowed)}"
                    + (" (or claim it)" if dra else "") + ": a tier's class is for pods that use its GPUs",
         "reason": "Invalid"},
    ]
    from gpuplan.identity import CAPACITY_TYPE_LABEL, capacity_pin

    pins = {capacity_pin(rf, t) for t in tiers}
    if len(pins) == 1 and None not in pins:
        pin = pins.pop()
        cap = _lit(CAPACITY_TYPE_LABEL)
        # Karpenter takes spot before on-demand on a pool that allows both (nodepools.md:276); the
        # selector makes it launch, and the scheduler place, the pod on the guaranteed type
        out.append({"expression": f"{mine}.all(s, has({sel}) && {cap} in {sel} && {sel}[{cap}] == {_lit(pin)})",
                    "message": f"pods of PriorityClass {pc} must not be interrupted: they select nodeSelector "
                               f"{CAPACITY_TYPE_LABEL}: {pin} (their pool also allows spot)",
                    "reason": "Invalid"})
    from gpuplan.identity import DO_NOT_DISRUPT, GUARANTEED_TAINT_KEY, floor_nodes, pod_annotations

    if any(t.gang is not None for t in tiers) and all(pod_annotations(rf, t).get(DO_NOT_DISRUPT) for t in tiers):
        # Karpenter neither consolidates nor drifts a node under a running pod with the annotation, and its
        # drain (expiry, a deleted NodeClaim) leaves the pod until the NodePool's terminationGracePeriod
        # (kubernetes-sigs/karpenter@v1.14.1 pkg/controllers/state/statenode.go:240-253, pkg/utils/pod/
        # scheduling.go:58-62, pkg/controllers/node/termination/terminator/terminator.go:112): one evicted
        # pod restarts a whole gang. Read on the Pod, where Karpenter reads it; it does not stop a spot
        # interruption (aws/karpenter-provider-aws v1.14.1 website/content/en/docs/concepts/disruption.md:422).
        # Checked on every template of the class too, so a Job without it is refused when it is
        # created, not left retrying pods the policy refuses.
        dnd = _lit(DO_NOT_DISRUPT)
        out.append({"expression": f"({templates_expression(rf)}).filter(t, {_pc('t.spec')} == {_lit(pc)})"
                                  f".all(t, has(t.metadata) && has(t.metadata.annotations) && {dnd} in "
                                  f"t.metadata.annotations && t.metadata.annotations[{dnd}] == 'true')",
                    "message": f"pods of gang PriorityClass {pc} carry the annotation {DO_NOT_DISRUPT}: \"true\" "
                               "(in the pod template): Karpenter then does not take their node away under a running "
                               "gang (it does not stop a spot interruption: checkpoint)",
                    "reason": "Invalid"})

    if pins == {None} and any(floor_nodes(rf.pool_by_name[t.pool]) for t in tiers):
        # the pool's on-demand floor is held for its pinned tiers: no toleration of its taint
        # (by key, or a keyless Exists: core/v1 toleration.go ToleratesTaint)
        out.append({"expression": f"{mine}.all(s, !{tolerates_key('s', GUARANTEED_TAINT_KEY)})",
                    "message": f"pods of PriorityClass {pc} may run on spot: they do not tolerate the taint "
                               f"{GUARANTEED_TAINT_KEY} of the on-demand floor, held for tiers that must not be "
                               "interrupted",
                    "reason": "Forbidden"})
    out += _tier_claim_validations(rf, pc, tiers, mine)
    out += _per_gpu_validations(rf, pc, tiers, mine)
    out += _gang_fabric_validations(rf, pc, tiers, mine)
    for t in tiers:
        if t.max_gpus_per_pod is None:
            continue
        res = rf.tier_resource(t)
        out.append({
            "expression": f"{mine}.all(s, {_at_most('s', res, t.max_gpus_per_pod)})",
            "message": f"pods of PriorityClass {pc} may request at most {t.max_gpus_per_pod} "
                       f"{res} (tier {t.name} maxGPUsPerPod; sidecars count)",
            "reason": "Invalid"})
    if any(t.name in set(queued_tiers(rf)) for t in tiers):
        if kueue_on(rf):
            out += _queued_validations(rf, pc)
            out += _topology_validations(rf, pc, tiers)
        elif rf.fleet.spec.queueing.engine == "volcano":  # type: ignore[union-attr]
            from gpuplan.queueing.volcano.podrules import queued_validations

            out += queued_validations(pc)
    return out


# kueue v0.19.2 apis/kueue/v1beta2/topology_types.go:28-53: a pod set that states any of them asks for TAS
TAS_ANNOTATIONS = ("kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology",
                   "kueue.x-k8s.io/podset-unconstrained-topology", "kueue.x-k8s.io/podset-slice-required-topology")


def _topology_validations(rf: ResolvedFleet, pc: str, tiers: list) -> list[dict[str, str]]:
    """A queued tier on a topology-aware pool, where the fleet's queues also have flavors that are
    not: each pod template of its class asks Kueue for topology-aware scheduling. Kueue gives a
    pod set that does not ask for it only flavors that are not topology-aware when a ClusterQueue
    has both (kueue v0.19.2 pkg/scheduler/flavorassigner/tas_flavorassigner.go:166-203,
    ``isTASImplied`` :220-221), so such a Job is accepted and waits for ever. Asking is an
    annotation on the template (pkg/controller/jobframework/tas.go:59-86; an unconstrained
    ``"true"`` is what the tenant pages write)."""
    from gpuplan.queues import queued_tiers, tas_pools

    tas = tas_pools(rf)
    queued = set(queued_tiers(rf))
    mixed = any(rf.tier_by_name[n].pool not in tas for n in queued)
    if not tas or not mixed or not any(t.pool in tas and t.name in queued for t in tiers):
        return []
    keys = _lit(list(TAS_ANNOTATIONS))
    return [{"expression": f"({templates_expression(rf)}).filter(t, {_pc('t.spec')} == {_lit(pc)})"
                           f".all(t, has(t.metadata) && has(t.metadata.annotations) && "
                           f"{keys}.exists(k, k in t.metadata.annotations))",
             "message": f"pods of PriorityClass {pc} run on a topology-aware pool: their pod template asks Kueue for "
                        f"topology (annotation {TAS_ANNOTATIONS[2]}: \"true\", or a required or preferred topology); "
                        "without it Kueue gives them only flavors that are not topology-aware, and they wait for ever",
             "reason": "Invalid"}]


def claim_name_pattern(tiers: list) -> str:
    """RE2 of the claim and template names a DRA tier's devices may be claimed through: gpuplan's
    own templates (``gpuplan-<tier>``, ``gpuplan-<tier>-x<N>``: dra.claims.claim_template_name)."""
    import re

    names = "|".join(re.escape(f"gpuplan-{t.name}") for t in tiers)
    return f"^({names})(-x[0-9]+)?$"


def _claim_ref(c: str) -> str:
    """The claim a pod's ``resourceClaims`` entry names: its template's, or the claim's own."""
    return (f"(has({c}.resourceClaimTemplateName) ? {c}.resourceClaimTemplateName : "
            f"(has({c}.resourceClaimName) ? {c}.resourceClaimName : ''))")


def _tier_claim_validations(rf: ResolvedFleet, pc: str, tiers: list, mine: str) -> list[dict[str, str]]:
    """Pods of a DRA tier's class claim its devices only through the tier's own templates, and
    at most one of them where the tier bounds GPUs per pod. A tier class's devices can be claimed
    only through claims named for the tier (:func:`_claim_shape_policy`), so every claim whose
    name starts ``gpuplan-`` is one of some tier's: a pod of class A that names tier B's template
    would take B's grant at A's priority, and two of its own templates would hold twice
    ``maxGPUsPerPod``. A pod can only name claims of its own namespace, and the claim's spec is
    immutable once made (kubernetes v1.36.3 pkg/apis/resource/validation/validation.go
    ValidateResourceClaimUpdate / ValidateResourceClaimTemplateUpdate)."""
    from gpuplan.dra.claims import tier_claim

    dra = [t for t in tiers if tier_claim(rf, t) is not None]
    if not dra:
        return []
    ref = _claim_ref("c")
    tiered = f"{ref}.startsWith('gpuplan-')"
    out = [{"expression": f"{mine}.all(s, !has(s.resourceClaims) || s.resourceClaims.all(c, !{tiered} || "
                          f"{ref}.matches({_lit(claim_name_pattern(dra))})))",
            "message": f"pods of PriorityClass {pc} claim GPUs only through the claim templates of their tier "
                       f"({', '.join('gpuplan-' + t.name for t in dra)}…), not another tier's",
            "reason": "Forbidden"}]
    if all(t.max_gpus_per_pod is not None for t in dra):
        out.append({"expression": f"{mine}.all(s, !has(s.resourceClaims) || "
                                  f"s.resourceClaims.filter(c, {tiered}).size() <= 1)",
                    "message": f"pods of PriorityClass {pc} name at most one of their tier's claim templates "
                               "(maxGPUsPerPod: the template's count is the pod's GPUs)",
                    "reason": "Invalid"})
    return out


def class_policy_name(rf: ResolvedFleet, pc: str, suffix: str = "") -> str:
    name = f"{policy_name(rf)}-{pc}{suffix}"
    return name if len(name) <= 253 else content_name(f"{policy_name(rf)}-class", pc + suffix, limit=253)


# A pod's CPU and memory change in place through its resize subresource (InPlacePodVerticalScaling,
# on from 1.33: kubernetes v1.36.3 pkg/features/kube_features.go:1534-1537), an UPDATE of the Pod
# that a rule on ``pods`` alone does not match: the CPU and memory per GPU hold there too.
POD_RESIZE = "pods/resize"


def _rules(rf: ResolvedFleet) -> list[dict[str, Any]]:
    by_group: dict[str, list[str]] = {}
    for group, resource, _ in workloads(rf).values():
        by_group.setdefault(group, []).append(resource)
    by_group[""].append(POD_RESIZE)
    return [{"apiGroups": [g], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": sorted(r)}
            for g, r in sorted(by_group.items())]


def _policy(rf: ResolvedFleet, name: str, spec: dict[str, Any], rules: list[dict[str, Any]] | None = None
            ) -> dict[str, Any]:
    from gpuplan.lower.common import object_annotations

    meta = metadata(rf, name, annotations=object_annotations(rf, "ValidatingAdmissionPolicy"))
    return obj(API, "ValidatingAdmissionPolicy", meta, spec={
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": rules if rules is not None else _rules(rf)},
        **spec,
    })


def _binding(rf: ResolvedFleet, policy: dict[str, Any], outside: list[str], *, within: bool = False
             ) -> dict[str, Any]:
    """The policy's binding: every namespace whose name is not in ``outside`` (``within``: only
    the namespaces named there)."""
    from gpuplan.lower.common import object_annotations

    name = policy["metadata"]["name"]
    meta = metadata(rf, name, annotations=object_annotations(rf, "ValidatingAdmissionPolicyBinding"))
    return obj(API, "ValidatingAdmissionPolicyBinding", meta, spec={
        "policyName": name,
        "validationActions": ["Deny"],
        "matchResources": {"namespaceSelector": {"matchExpressions": [
            {"key": NAME_LABEL, "operator": "In" if within else "NotIn", "values": sorted(set(outside))},
        ]}},
    })


# the device requests of a ResourceClaim or a ResourceClaimTemplate (its spec.spec), and the
# DeviceClasses one request ``r`` names (exactly, firstAvailable; v1beta1's own deviceClassName)
_CLAIM_REQUESTS = {"name": "requests", "expression": "object.kind == 'ResourceClaimTemplate' ? "
                   "(has(object.spec.spec) && has(object.spec.spec.devices) && has(object.spec.spec.devices.requests) ? "
                   "object.spec.spec.devices.requests : []) : "
                   "(has(object.spec.devices) && has(object.spec.devices.requests) ? object.spec.devices.requests : [])"}
_REQUEST_CLASSES = ("(has(r.exactly) ? [r.exactly.deviceClassName] : []) + "
                    "(has(r.firstAvailable) ? r.firstAvailable.map(x, x.deviceClassName) : []) + "
                    "(has(r.deviceClassName) ? [r.deviceClassName] : [])")


def _claim_rules() -> list[dict[str, Any]]:
    from gpuplan.k8s_features_dra import RESOURCE_API

    return [{"apiGroups": [RESOURCE_API.split("/")[0]], "apiVersions": ["*"], "operations": ["CREATE"],
             "resources": ["resourceclaims", "resourceclaimtemplates"]}]


def _claims_policy(rf: ResolvedFleet) -> list[dict[str, Any]]:
    """ResourceClaims and their templates name a GPU DeviceClass only in namespaces granted a
    DRA tier (there each class's quota key holds it to the grant: lower/dra.py quota_hard)."""
    from gpuplan.dra.claims import CHART_CLASSES, any_dra, tier_claims

    if not any_dra(rf):
        return []
    claims = tier_claims(rf)
    classes = _lit(sorted({*CHART_CLASSES, *(c.class_name for c in claims)}))
    granted = class_namespaces(rf, [rf.tier_by_name[c.tier] for c in claims])
    p = _policy(rf, class_policy_name(rf, "claims"), {
        "variables": [dict(_CLAIM_REQUESTS)],
        "validations": [{
            "expression": f"variables.requests.all(r, ({_REQUEST_CLASSES}).all(n, !(n in {classes})))",
            "message": "GPU DeviceClasses may be claimed only in namespaces granted a DRA tier",
            "reason": "Forbidden"}],
    }, rules=_claim_rules())
    return [p, _binding(rf, p, [*granted, *exempt_namespaces(rf)]), *_claim_shape_policy(rf)]


# who makes claims for pods: the resource claim controller, from a pod's templates (kubernetes v1.36.3
# cmd/kube-controller-manager/app/resource.go:72-81: client "resource-claim-controller", a service
# account of its own with --use-service-account-credentials, the controller manager's user without),
# and the scheduler, for a pod's extended resources backed by a DeviceClass (KEP-5004:
# pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go:182-190, 534-551, named
# <pod>-extended-resources-*; the pod's count is bounded by its class policy's maxGPUsPerPod)
CLAIM_CONTROLLERS = ("system:serviceaccount:kube-system:resource-claim-controller", "system:kube-controller-manager",
                     "system:kube-scheduler")


def _claim_shape_policy(rf: ResolvedFleet) -> list[dict[str, Any]]:
    """A DRA tier's DeviceClass is claimed only through claims and templates named for the tier
    (:func:`claim_name_pattern`), one request of it per claim, ``ExactCount`` and, where the tier
    sets ``maxGPUsPerPod``, at most that many devices: with :func:`_tier_claim_validations` a pod
    holds its tier's devices only through one of its tier's templates. In every namespace but the
    exempt ones; the claims the resource claim controller makes from a template are the template's
    (already checked) and pass."""
    from gpuplan.dra.claims import tier_claims

    claims = tier_claims(rf)
    if not claims:
        return []
    users = _lit(list(CLAIM_CONTROLLERS))

    def shaped(x: str, cls: str, n: int | None) -> str:  # a request (or subrequest) of class cls is bounded
        bound = f" && (!has({x}.count) || {x}.count <= {n})" if n is not None else ""
        return (f"(!has({x}.deviceClassName) || {x}.deviceClassName != {_lit(cls)} || "
                f"((!has({x}.allocationMode) || {x}.allocationMode == 'ExactCount'){bound}))")

    validations = []
    for c in claims:
        tier = rf.tier_by_name[c.tier]
        cls, n = c.class_name, tier.max_gpus_per_pod
        mine = f"variables.requests.filter(r, ({_REQUEST_CLASSES}).exists(n, n == {_lit(cls)}))"
        validations += [
            {"expression": f"{mine}.size() == 0 || object.metadata.name.matches({_lit(claim_name_pattern([tier]))})",
             "message": f"DeviceClass {cls} is claimed only through claims and templates named gpuplan-{c.tier} "
                        f"or gpuplan-{c.tier}-x<N> (tier {c.tier}'s; its pods name no other)",
             "reason": "Forbidden"},
            {"expression": f"{mine}.size() <= 1 && {mine}.all(r, (!has(r.exactly) || {shaped('r.exactly', cls, n)}) && "
                           f"(!has(r.firstAvailable) || r.firstAvailable.all(x, {shaped('x', cls, n)})) && "
                           f"{shaped('r', cls, n)})",
             "message": f"a claim of DeviceClass {cls} makes one request of it, of an exact count"
                        + (f" of at most {n} devices (tier {c.tier} maxGPUsPerPod)" if n is not None else ""),
             "reason": "Invalid"},
        ]
    p = _policy(rf, class_policy_name(rf, "claim-shapes"), {
        "matchConditions": [{"name": "not-the-claim-controller",
                             "expression": f"!(request.userInfo.username in {users})"}],
        "variables": [dict(_CLAIM_REQUESTS)],
        "validations": validations,
    }, rules=_claim_rules())
    return [p, _binding(rf, p, exempt_namespaces(rf))]


def objects(rf: ResolvedFleet) -> list[dict[str, Any]]:
    """The namespace policy, then per tier PriorityClass its rules and its grant (bound to the
    namespaces not granted), then the claims policy; each followed by its binding."""
    exempt = exempt_namespaces(rf)
    agents = sorted(set(rf.fleet.spec.cluster.admission.node_agent_namespaces) - set(exempt))
    validations = namespace_validations(rf)
    if agents:  # the pools' toleration rule in a policy of its own, with the node agents' own binding
        shared = pool_toleration(rf)
        validations = [v for v in validations if v != shared]
    first = _policy(rf, policy_name(rf), {
        "matchConditions": [changed(rf)],
        "variables": [_specs(rf)],
        "validations": validations,
    })
    out = [first, _binding(rf, first, exempt)]
    if agents:
        for suffix, daemonsets in (("pool-tolerations", False), ("node-agents", True)):
            p = _policy(rf, class_policy_name(rf, suffix), {
                "matchConditions": [changed(rf)],
                "variables": [_specs(rf)],
                "validations": [pool_toleration(rf, daemonsets)],
            })
            out += [p, _binding(rf, p, [*exempt, *agents]) if not daemonsets else _binding(rf, p, agents, within=True)]
    for pc, tiers in sorted(class_tiers(rf).items()):
        cond = {"name": "tier-class", "expression": class_condition(rf, pc)}
        rules = _policy(rf, class_policy_name(rf, pc), {
            "matchConditions": [changed(rf), cond],
            "variables": [_specs(rf)],
            "validations": class_validations(rf, pc, tiers),
        })
        granted = class_namespaces(rf, tiers)
        shown = ", ".join(granted[:5]) + (f" and {len(granted) - 5} more" if len(granted) > 5 else "")
        grant = _policy(rf, class_policy_name(rf, pc, "-grant"), {
            "matchConditions": [changed(rf), cond],
            "validations": [{
                "expression": "false",
                "message": f"PriorityClass {pc} (tier {' or '.join(t.name for t in tiers)}) is granted only to "
                           f"namespaces {shown or '(none)'}",
                "reason": "Forbidden"}],
        })
        out += [rules, _binding(rf, rules, exempt), grant, _binding(rf, grant, [*granted, *exempt])]
    return out + _claims_policy(rf)


def policies(rf: ResolvedFleet) -> list[dict[str, Any]]:
    """The policies of :func:`objects`, without their bindings."""
    return [d for d in objects(rf) if d["kind"] == "ValidatingAdmissionPolicy"]


def lower(rf: ResolvedFleet, produced: Sequence[Produced]) -> list[Artifact]:
    if not enabled(rf):
        return []
    return [Artifact(PATH, documents=tuple(objects(rf)),
                     description="ValidatingAdmissionPolicies: the tenancy boundary of every pod")]
