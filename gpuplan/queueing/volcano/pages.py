"""The tenant pages' Volcano examples (gpuplan.lower.tenant_page): per queued tier, a Volcano
Job of its gang in the tenant's leaf queue of the tier's pool, and a PodGroup with its first pod
for pods a tenant writes itself; and what the page says of the leaf queue.

Stage: lower (docs/architecture.md)."""

from __future__ import annotations

from typing import Any

from gpuplan.queueing.volcano.names import GROUP_ANNOTATION, SCHEDULER
from gpuplan.queueing.volcano.queues import VolcanoPlan, leaf_name
from gpuplan.resolve import ResolvedFleet

API = "scheduling.volcano.sh/v1beta1"
JOB_API = "batch.volcano.sh/v1alpha1"



def example_job(rf: ResolvedFleet, tier, namespace: str, resource: str, units: int, pods: int,
                tenant: str) -> dict[str, Any]:
    """A Volcano Job of ``pods`` pods of ``units`` each, all-or-nothing (``minAvailable``), in the
    tenant's leaf queue of the tier's pool; its pods are the tier's contract pod."""
    from gpuplan.identity import contract_pod_spec, pod_annotations, priority_class_name

    pod = contract_pod_spec(rf, tier, resource, units)
    annotations = dict(pod_annotations(rf, tier))
    template: dict[str, Any] = {"metadata": {"annotations": annotations}, "spec": pod} if annotations else {"spec": pod}
    return {
        "apiVersion": JOB_API,
        "kind": "Job",
        "metadata": {"generateName": f"{tier.name}-", "namespace": namespace},
        "spec": {"schedulerName": SCHEDULER, "queue": leaf_name(tenant, tier.pool), "minAvailable": pods,
                 "priorityClassName": priority_class_name(tier),
                 "tasks": [{"name": "worker", "replicas": pods, "template": template}]},
    }


def example_podgroup(rf: ResolvedFleet, tier, namespace: str, pods: int, tenant: str) -> list[dict[str, Any]]:
    """A PodGroup and the first of its pods, for pods a tenant writes itself: the pods name the
    group (``scheduling.k8s.io/group-name``) and Volcano as their scheduler."""
    from gpuplan.identity import contract_pod_spec, pod_annotations, priority_class_name

    res = rf.tier_resource(tier)
    group = f"{tier.name}-group"
    pg = {"apiVersion": API, "kind": "PodGroup", "metadata": {"name": group, "namespace": namespace},
          "spec": {"minMember": pods, "queue": leaf_name(tenant, tier.pool), "priorityClassName": priority_class_name(tier)}}
    spec = contract_pod_spec(rf, tier, res, max(1, tier.max_gpus_per_pod or 1) if pods > 1 else 1)
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"{tier.name}-0", "namespace": namespace,
                        "annotations": {**pod_annotations(rf, tier), GROUP_ANNOTATION: group}},
           "spec": spec}
    return [pg, pod]


def page_facts(plan: VolcanoPlan, tenant: str, tier) -> dict[str, Any] | None:
    """What a tenant page says of a queued tier's leaf queue."""
    leaf = plan.leaf(tenant, tier.pool)
    if leaf is None:
        return None
    return {"queue": leaf.name, "parent": leaf.parent, "deserved": dict(leaf.deserved),
            "capability": {k: v for k, v in leaf.capability if v}, "guarantee": dict(leaf.guarantee)}
