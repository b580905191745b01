"""GP501-GP509: tenants, their namespaces and the priority order of tiers.

Already elsewhere: a namespace listed twice is GP106, a quota naming an unknown
tier or namespace is GP107, a priority above 1e9 is a schema error (GP109).

"Ordered as the tiers say" means, per pool and resource (tiers on different
pools, or with different MIG profiles, never compete for the same devices, so
neither can preempt the other):
- a tier that may preempt needs someone strictly below it on its pool, or its
  ``PreemptLowerPriority`` does nothing for GPUs (GP502, info);
- inference tiers serve users: a training or batch tier on the same pool with a
  higher priority can preempt them (GP503, warning).
A ``Never`` tier above a preempting tier is fine (it waits, but is not evicted).

Stage: check (docs/architecture.md)."""

from __future__ import annotations

from typing import Iterable, Iterator

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.identity import exempt_namespaces
from gpuplan.resolve import ResolvedFleet

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
KNOWN_ADDON_NAMESPACES = ("karpenter", "kueue-system", "nvidia-gpu-operator", "node-feature-discovery")

E_SYSTEM_NAMESPACE = Code(
    "GP501", "tenant namespace is a system namespace", Severity.ERROR,
    "gpuplan owns every tenant namespace: it emits the Namespace object (so GitOps prunes it when "
    "the tenant goes away) and ResourceQuotas in it. `default`, `kube-*`, the GPU Operator's "
    "namespace and the GitOps engine's namespace belong to the cluster; quotas there starve the "
    "operator's own pods and a prune would delete them.",
    bad="tenants:\n  - {name: ops, namespaces: [gpu-operator]}",
    good="tenants:\n  - {name: ops, namespaces: [ops-gpu]}",
    pain="#2 NVIDIA/gpu-operator #281 (operator namespace wiring confused with user objects)",
)
I_PREEMPTS_NOTHING = Code(
    "GP502", "preempting tier has no lower tier on its pool", Severity.INFO,
    "A tier with `preemption: PreemptLowerPriority` can only evict pods of strictly lower priority. "
    "When it has the lowest priority of the tiers on its pool, it can preempt none of them: "
    "`Never` says what really happens.",
    bad="tiers:\n  - {name: training, pool: a, priority: 100000}\n"
        "  - {name: notebooks, pool: a, priority: 1000}   # PreemptLowerPriority by default",
    good="  - {name: notebooks, pool: a, priority: 1000, preemption: Never}",
)
W_PRIORITY_INVERSION = Code(
    "GP503", "training outranks inference on the same pool", Severity.WARNING,
    "A training or batch tier with a higher priority than an inference tier on the same pool can "
    "preempt production serving to start a job.",
    bad="tiers:\n  - {name: serve, pool: a, workload: inference, priority: 1000}\n"
        "  - {name: train, pool: a, workload: training, priority: 100000}",
    good="tiers:\n  - {name: serve, pool: a, workload: inference, priority: 300000}\n"
         "  - {name: train, pool: a, workload: training, priority: 100000}",
)
W_EMPTY_TENANT = Code(
    "GP504", "tenant without quota", Severity.WARNING,
    "A tenant with no quota (or only zeros) gets namespaces in which no GPU tier can be used: "
    "either the quotas are missing or the tenant is.",
    bad="tenants:\n  - {name: audio, namespaces: [audio]}",
    good="tenants:\n  - {name: audio, namespaces: [audio], quotas: {audio: {notebooks: 4}}}",
)

E_OPERATOR_NAMESPACE = Code(
    "GP505", "GPU Operator namespace belongs to the cluster", Severity.ERROR,
    "gpuplan emits the GPU Operator's namespace as a Namespace object labelled for privileged pods, "
    "which the GitOps engine prunes when it leaves the tree. `default`, `kube-*`, the GitOps engine's "
    "own namespace and other add-ons' namespaces belong to the cluster: their pods would all be "
    "admitted as privileged, and a prune would delete the namespace with everything in it.",
    bad="gpuOperator: {namespace: argocd}",
    good="gpuOperator: {namespace: gpu-operator}",
)

E_EXEMPT_NAMESPACE = Code(
    "GP506", "tenant namespace is exempt from the admission policies", Severity.ERROR,
    "No admission binding selects the namespaces gpuplan's own components and the cluster's trusted "
    "agents run in (`admission.unmanagedNamespaces`, `admission.systemNamespaces`, the monitoring, "
    "Kueue and DRA driver namespaces; docs/placement.md \"Threat model\"). A tenant namespace among "
    "them is outside the boundary: its pods may request any GPU, tolerate every pool and skip Kueue, "
    "while its tenant page describes a contract nothing enforces.",
    bad="cluster: {admission: {unmanagedNamespaces: [vision]}}\ntenants:\n  - {name: vision, namespaces: [vision]}",
    good="cluster: {admission: {unmanagedNamespaces: [logging]}}\ntenants:\n  - {name: vision, namespaces: [vision]}",
)
W_PRIVILEGED_TENANT = Code(
    "GP507", "tenant namespaces admit privileged pods", Severity.WARNING,
    "`podSecurity: privileged` lets the tenant's pods run privileged containers, mount host paths and "
    "use the host's namespaces: a privileged container on a GPU node sees every GPU of the node "
    "(`/dev/nvidia*`), whatever it requested, and can change the node's MIG layout. Only for a tenant "
    "trusted like a node agent.",
    bad="tenants:\n  - {name: vision, namespaces: [vision], podSecurity: privileged}",
    good="tenants:\n  - {name: vision, namespaces: [vision]}   # baseline",
)
W_UNTRUSTED_CONTROLLER = Code(
    "GP508", "queueing.controllers names a user a tenant controls", Severity.WARNING,
    "`queueing.controllers` are the users that may create pods of a queued tier outside Kueue's gate. "
    "A tenant namespace's service account (`system:serviceaccount:<tenant namespace>:<name>`) is a "
    "user the tenant can act as, and `system:anonymous` is every unauthenticated request the cluster "
    "admits: either lets a tenant run a queued tier's pods past its ClusterQueue's quota.",
    bad="queueing: {controllers: [system:serviceaccount:vision:default]}",
    good="queueing: {controllers: [system:serviceaccount:kube-system:job-controller]}",
)
E_AGENT_NAMESPACE = Code(
    "GP509", "tenant namespace is a node agents' namespace", Severity.ERROR,
    "In `admission.nodeAgentNamespaces` a DaemonSet may tolerate every taint, the GPU pools' binding "
    "taint included (docs/placement.md). A tenant namespace there lets the tenant run a pod on every GPU "
    "node of the cluster, outside every grant: its CPU, memory and node-local devices. Node agents are "
    "the platform's, never a tenant's.",
    bad="cluster: {admission: {nodeAgentNamespaces: [vision]}}\ntenants:\n  - {name: vision, namespaces: [vision]}",
    good="cluster: {admission: {nodeAgentNamespaces: [logging]}}\ntenants:\n  - {name: vision, namespaces: [vision]}",
)

CODES = (E_SYSTEM_NAMESPACE, I_PREEMPTS_NOTHING, W_PRIORITY_INVERSION, W_EMPTY_TENANT, E_OPERATOR_NAMESPACE,
         E_EXEMPT_NAMESPACE, W_PRIVILEGED_TENANT, W_UNTRUSTED_CONTROLLER, E_AGENT_NAMESPACE)


def reserved_namespaces(rf: ResolvedFleet) -> dict[str, str]:
    """namespace -> why it is reserved."""
    cluster = rf.fleet.spec.cluster
    out = {ns: "a Kubernetes system namespace" for ns in SYSTEM_NAMESPACES}
    for ns in KNOWN_ADDON_NAMESPACES:
        out[ns] = "the namespace of a cluster add-on"
    out[cluster.gpu_operator.namespace] = "the GPU Operator's namespace"
    gitops_ns = cluster.gitops.namespace or ("flux-system" if cluster.gitops.engine == "flux" else "argocd")
    out[gitops_ns] = f"the {'Flux' if cluster.gitops.engine == 'flux' else 'Argo CD'} namespace"
    return out


def check(rf: ResolvedFleet) -> Iterable[Diagnostic]:
    yield from _operator_namespace(rf)
    yield from _namespaces(rf)
    yield from _trust(rf)
    yield from _priorities(rf)
    yield from _empty(rf)


def _namespaces(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    reserved = reserved_namespaces(rf)
    for i, tn in enumerate(rf.fleet.spec.tenants):
        for j, ns in enumerate(tn.namespaces):
            why = reserved.get(ns) or ("reserved for Kubernetes (kube- prefix)" if ns.startswith("kube-") else None)
            if why:
                yield rf.diag(E_SYSTEM_NAMESPACE,
                              f"tenant {tn.name!r} claims namespace {ns!r}, {why}",
                              ("spec", "tenants", i, "namespaces", j),
                              hint=f"give the tenant its own namespace, e.g. {tn.name}-{ns.removeprefix('kube-')}"
                              if not ns.startswith(tn.name) else "give the tenant its own namespace")


def _trust(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    """Exemptions and trust the spec grants a tenant: a namespace no policy binds, privileged
    pods, a controller user the tenant can act as."""
    reserved = reserved_namespaces(rf)
    exempt = exempt_namespaces(rf)
    agents = set(rf.fleet.spec.cluster.admission.node_agent_namespaces)
    tenant_ns: dict[str, str] = {}
    for i, tn in enumerate(rf.fleet.spec.tenants):
        for j, ns in enumerate(tn.namespaces):
            tenant_ns.setdefault(ns, tn.name)
            why = exempt.get(ns)
            if why and ns not in reserved and not ns.startswith("kube-"):  # those are GP501
                yield rf.diag(E_EXEMPT_NAMESPACE,
                              f"tenant {tn.name!r} claims namespace {ns!r}, which no admission policy binds: "
                              f"it is {why}", ("spec", "tenants", i, "namespaces", j),
                              hint="give the tenant a namespace of its own, or drop it from the exempt list")
            elif ns in agents:
                yield rf.diag(E_AGENT_NAMESPACE,
                              f"tenant {tn.name!r} claims namespace {ns!r}, a node agents' namespace: its "
                              "DaemonSets may tolerate every GPU pool", ("spec", "tenants", i, "namespaces", j),
                              hint="give the tenant a namespace of its own, or drop it from "
                                   "cluster.admission.nodeAgentNamespaces")
        if tn.pod_security == "privileged":
            yield rf.diag(W_PRIVILEGED_TENANT,
                          f"tenant {tn.name!r} runs with podSecurity: privileged: its containers may be "
                          "privileged and see every GPU of the node they run on",
                          ("spec", "tenants", i, "podSecurity"),
                          hint="drop podSecurity (baseline), unless the tenant is trusted like a node agent")
    q = rf.fleet.spec.queueing
    for k, user in enumerate(q.controllers or () if q is not None and q.engine == "kueue" else ()):
        parts = user.split(":")
        owner = tenant_ns.get(parts[2]) if len(parts) == 4 and parts[:2] == ["system", "serviceaccount"] \
            else None
        if user == "system:anonymous":
            why = "every unauthenticated request the cluster admits"
        elif owner is not None:
            why = f"a service account of tenant {owner!r}'s namespace {parts[2]!r}, which the tenant can act as"
        else:
            continue
        yield rf.diag(W_UNTRUSTED_CONTROLLER,
                      f"queueing.controllers names {user!r}, {why}: it may create pods of queued tiers past "
                      "Kueue's quota", ("spec", "queueing", "controllers", k),
                      hint="list only the controllers' own users, e.g. "
                           "system:serviceaccount:kube-system:job-controller")


def _operator_namespace(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    cluster = rf.fleet.spec.cluster
    ns = cluster.gpu_operator.namespace
    gitops_ns = cluster.gitops.namespace or ("flux-system" if cluster.gitops.engine == "flux" else "argocd")
    if ns in SYSTEM_NAMESPACES or ns.startswith("kube-"):
        why = "a Kubernetes system namespace"
    elif ns == gitops_ns:
        why = f"the {'Flux' if cluster.gitops.engine == 'flux' else 'Argo CD'} namespace"
    elif ns in KNOWN_ADDON_NAMESPACES and ns != "nvidia-gpu-operator":  # that one is the operator's own
        why = "the namespace of another cluster add-on"
    else:
        why = None
    if why:
        path = ("spec", "cluster", "gpuOperator", "namespace")
        yield rf.diag(E_OPERATOR_NAMESPACE,
                      f"the GPU Operator's namespace {ns!r} is {why}; gpuplan would emit it as a privileged, "
                      "pruned Namespace",
                      path, hint="give the operator its own namespace, e.g. gpu-operator")


def _priorities(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    tiers = rf.fleet.spec.tiers
    by_pool: dict[tuple[str, str | None], list[int]] = {}
    for i, t in enumerate(tiers):
        by_pool.setdefault((t.pool, rf.tier_resource(t)), []).append(i)
    for (pool, _res), idx in by_pool.items():
        if len(idx) < 2:
            continue
        for i in idx:
            t = tiers[i]
            others = [tiers[j] for j in idx if j != i]
            if t.preemption == "PreemptLowerPriority" and all(o.priority >= t.priority for o in others):
                yield rf.diag(I_PREEMPTS_NOTHING,
                              f"tier {t.name!r} (priority {t.priority}) may preempt, but no other tier on pool "
                              f"{pool!r} has a lower priority",
                              ("spec", "tiers", i, "name"),
                              hint="set `preemption: Never` to say so, or give it a priority above the tiers "
                                   "it should preempt")
            if t.workload == "inference":
                above = [o for o in others if o.workload in ("training", "batch") and o.priority > t.priority
                         and o.preemption == "PreemptLowerPriority"]
                if above:
                    o = max(above, key=lambda x: (x.priority, x.name))
                    yield rf.diag(W_PRIORITY_INVERSION,
                                  f"inference tier {t.name!r} (priority {t.priority}) is below {o.workload} tier "
                                  f"{o.name!r} (priority {o.priority}) on pool {pool!r}: jobs can preempt serving",
                                  ("spec", "tiers", i, "priority") if "priority" in _keys(rf, i) else ("spec", "tiers", i, "name"),
                                  hint=f"raise {t.name}'s priority above {o.priority}, or set "
                                       f"`preemption: Never` on {o.name}")


def _keys(rf: ResolvedFleet, i: int) -> set:
    data = rf.doc.data
    try:
        return set(data["spec"]["tiers"][i])
    except (KeyError, IndexError, TypeError):
        return set()


def _empty(rf: ResolvedFleet) -> Iterator[Diagnostic]:
    for i, tn in enumerate(rf.fleet.spec.tenants):
        if not any(u for per_tier in tn.quotas.values() for u in per_tier.values()):
            yield rf.diag(W_EMPTY_TENANT,
                          f"tenant {tn.name!r} has no GPU quota in any of its namespaces",
                          ("spec", "tenants", i, "name"),
                          hint="add quotas: {namespace: {tier: units}}, or remove the tenant")
