"""What the boundary proof tries against Volcano (gpuplan.placement.boundary): PodGroups.

A pod's GPUs are charged to its PodGroup's queue, so a PodGroup is the door to a queue's
capacity. In every namespace state a tenant writes to (the generated namespaces, one that copied
a tenant's labels, one of a removed tenant), a PodGroup naming: each of the namespace's tenant's
leaves, a leaf of another tenant, the tenant's own parent queue, and ``default`` (the queue
Volcano gives a PodGroup that names none, made by its controller). Each goes through the
policies that match PodGroups, as their bindings select the namespace. A *breach* is a PodGroup
admitted, in a namespace granted to tenant T, that names a queue other than T's leaves.

With ``cases``, each verdict is recorded for the real API server to judge (tests/cluster).

Stage: check-objects (docs/architecture.md)."""

from __future__ import annotations

from typing import Any

from gpuplan.queueing.volcano.queues import leaf_name, tenant_queue_name, volcano_plan
from gpuplan.resolve import ResolvedFleet

API = "scheduling.volcano.sh/v1beta1"
SHAPE = "a PodGroup naming each of its tenant's queues, another tenant's, its parent queue and default"


def podgroup(queue: str) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "PodGroup", "metadata": {"name": "probe"},
            "spec": {"minMember": 1, "queue": queue}}


def podgroup_breaches(rf: ResolvedFleet, cluster: Any, states: list[dict[str, Any]], exempt: set[str],
                      tenant_of: dict[str, Any], cases: list | None = None
                      ) -> tuple[list[tuple[str, str, str]], int]:
    """(breaches as (namespace, the PodGroup in words, what it gets), PodGroups tried); with
    ``cases``, (words, PodGroup, namespace, admitted, namespace labels) of each."""
    from gpuplan.placement.cel import evaluate_policy
    from gpuplan.placement.simulate import _matches

    plan = volcano_plan(rf)
    if plan is None:
        return [], 0
    probe = podgroup("default")
    policies = [(n, p) for n, p in cluster.policies.items() if _matches(p, probe, None)]
    bound = {n: [i for i, b in enumerate(cluster.bindings) if b["spec"]["policyName"] == n] for n, _ in policies}
    leaves: dict[str, list[str]] = {}
    for q in plan.queues:
        if q.leaf and q.tenant is not None:
            leaves.setdefault(q.tenant, []).append(q.name)
    tenants = sorted(leaves)
    out: list[tuple[str, str, str]] = []
    tried = 0
    seen_tenant: set[str] = set()
    for ns_obj in states:
        ns = ns_obj["metadata"]["name"]
        if ns in exempt:
            continue
        tn = tenant_of.get(ns)
        label = (ns_obj["metadata"].get("labels") or {}).get("gpuplan.dev/tenant")
        # one namespace per tenant stands for its others: the policy reads the tenant label and the
        # queue only, and every namespace of a tenant carries the same label (lower/tenancy.py)
        key = tn.name if tn is not None else None
        if key is not None and key in seen_tenant:
            continue
        if key is not None:
            seen_tenant.add(key)
        own = leaves.get(key or label or "", [])
        other = next((t for t in tenants if t not in (key, label)), None)
        queues = [*own, *([leaves[other][0]] if other else []),
                  *([tenant_queue_name(key or label)] if (key or label) else []), "default"]
        if not own and (key or label):
            queues.append(leaf_name(key or label, "pool"))
        unselected = cluster.selected(ns_obj)
        mine = set(leaves.get(tn.name, [])) if tn is not None else set()
        for queue in queues:
            pg = podgroup(queue)
            tried += 1
            admitted = not any(evaluate_policy(p, pg, ns_obj, None, first_only=True)
                               for n, p in policies if any(i not in unselected for i in bound[n]))
            if cases is not None:
                cases.append((f"a PodGroup in queue {queue}", pg, ns, admitted,
                              dict(ns_obj["metadata"].get("labels") or {})))
            if admitted and tn is not None and queue not in mine:
                out.append((ns, f"a PodGroup in queue {queue}",
                            f"charges its pods to queue {queue}, not one of tenant {tn.name}'s"))
    return out, tried
