"""Volcano's objects (``queueing.engine: volcano``): docs/volcano.md.

- ``volcano/queues.yaml``: the hierarchical ``scheduling.volcano.sh/v1beta1`` Queues of
  :mod:`gpuplan.queueing.volcano.queues` (cluster-scoped; after the chart, which installs the
  CRD and the webhook that validates them);
- ``volcano/values.yaml``: the chart's values; ``custom.scheduler_config_override`` is the
  scheduler configuration (the chart writes it to ``<release>-scheduler-configmap``:
  volcano-sh/volcano v1.15.1 ``installer/helm/chart/volcano/templates/scheduler.yaml:18-20``);
- the chart (``https://volcano-sh.github.io/helm-charts``, chart ``volcano``) as an Argo CD
  Application or a Flux HelmRelease beside the GPU Operator's;
- the tenant pages (gpuplan.lower.tenant_page), whose example of each queued tier is a Volcano
  Job in the tenant's leaf queue of the tier's pool, and a PodGroup for pods the tenant writes
  itself (:mod:`gpuplan.queueing.volcano.pages`).

The scheduler configuration: ``enqueue, allocate, preempt, reclaim, backfill``; ``priority``,
``gang`` and ``conformance`` first; then ``drf``, ``predicates``, ``capacity`` (deserved,
capability and guarantee per queue, ``enableHierarchy``), ``nodegroup`` (strict: a queue's pods
run only on its node groups, ``enableHierarchy``), ``nodeorder`` and ``binpack``. ``capacity``
replaces the chart default's ``proportion`` (the two divide queues' shares in different ways and
are not used together: docs/user-guide/how_to_use_capacity_plugin.md), and ``overcommit`` is left
out: it lets jobs into a queue beyond what the cluster holds.

Stage: lower (docs/architecture.md)."""

from __future__ import annotations

from typing import Any, Iterator, Sequence

from gpuplan.artifacts import Artifact, Produced
from gpuplan.identity import TENANT_LABEL, volcano_app_name
from gpuplan.lower.common import ARGO_SYNC_OPTIONS, ARGO_WAVE, FLUX_OPERATOR_DIR, engine, metadata, obj, object_annotations
from gpuplan.lower.gitops import argo_chart_application, flux_chart_objects
from gpuplan.queueing.volcano.queues import VolcanoQueue, volcano_plan
from gpuplan.resolve import ResolvedFleet

API = "scheduling.volcano.sh/v1beta1"
CHART_REPO = "https://volcano-sh.github.io/helm-charts"
CHART = "volcano"
RELEASE = "volcano"
VALUES_PATH = "volcano/values.yaml"
QUEUES_PATH = "volcano/queues.yaml"
ARGO_APP_PATH = "delivery/volcano.yaml"
FLUX_PATH = f"{FLUX_OPERATOR_DIR}/volcano.yaml"
# the Queues need the chart's CRDs and its webhook: after the Application (wave -1) and the namespaces.
# Volcano's webhook refuses a queue whose parent does not exist yet (docs/volcano.md), so each level
# of the hierarchy has a wave of its own: cohorts, then tenants, then leaves (pruned in reverse)
WAVES = {"cohort": "1", "tenant": "2", "leaf": "3"}

ACTIONS = "enqueue, allocate, preempt, reclaim, backfill"


def scheduler_config() -> dict[str, Any]:
    return {
        "actions": ACTIONS,
        "tiers": [
            {"plugins": [{"name": "priority"}, {"name": "gang", "enablePreemptable": False}, {"name": "conformance"}]},
            {"plugins": [{"name": "drf", "enablePreemptable": False}, {"name": "predicates"},
                         {"name": "capacity", "enableHierarchy": True},
                         {"name": "nodegroup", "enableHierarchy": True},
                         {"name": "nodeorder"}, {"name": "binpack"}]},
        ],
    }


def helm_values(rf: ResolvedFleet) -> dict[str, Any]:
    from gpuplan.render.yamlwriter import dump

    return {"custom": {"scheduler_config_override": dump(scheduler_config()).rstrip("\n")}}


def _annotations(rf: ResolvedFleet, vq: VolcanoQueue) -> dict[str, str]:
    out = object_annotations(rf, "Queue")
    if ARGO_WAVE in out:
        out[ARGO_WAVE] = WAVES["leaf" if vq.leaf else "tenant" if vq.tenant else "cohort"]
        out[ARGO_SYNC_OPTIONS] = "SkipDryRunOnMissingResource=true"
    return out


def _resources(rows: tuple[tuple[str, int], ...]) -> dict[str, str]:
    return {name: str(units) for name, units in rows}


def queue(rf: ResolvedFleet, vq: VolcanoQueue) -> dict[str, Any]:
    spec: dict[str, Any] = {"parent": vq.parent, "reclaimable": True, "capability": _resources(vq.capability)}
    if vq.deserved:
        spec["deserved"] = _resources(vq.deserved)
    if vq.guarantee:
        spec["guarantee"] = {"resource": _resources(vq.guarantee)}
    if vq.pool is not None:
        spec["affinity"] = {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [vq.pool]}}
    labels = {TENANT_LABEL: vq.tenant} if vq.tenant else None
    return obj(API, "Queue", metadata(rf, vq.name, extra_labels=labels, annotations=_annotations(rf, vq)), spec=spec)


def argo_application(rf: ResolvedFleet) -> dict[str, Any]:
    v = rf.fleet.spec.queueing.volcano  # type: ignore[union-attr]
    chart = {"repoURL": CHART_REPO, "chart": CHART, "targetRevision": v.chart_version}
    return argo_chart_application(rf, volcano_app_name(rf), chart, RELEASE, VALUES_PATH, v.namespace)


def flux_objects(rf: ResolvedFleet) -> list[dict[str, Any]]:
    v = rf.fleet.spec.queueing.volcano  # type: ignore[union-attr]
    return flux_chart_objects(rf, "volcano", CHART_REPO, CHART, RELEASE, v.chart_version, v.namespace, helm_values(rf))


# --- target ------------------------------------------------------------------------------------


def lower(rf: ResolvedFleet, produced: Sequence[Produced]) -> Iterator[Artifact]:
    plan = volcano_plan(rf)
    if plan is None:
        return
    from gpuplan.lower.tenant_page import tenant_pages
    from gpuplan.queues import queue_ledger

    if plan.queues:
        yield Artifact(QUEUES_PATH, documents=tuple(queue(rf, vq) for vq in plan.queues),
                       description="Volcano Queues: per tenant, and a leaf per tenant and pool that PodGroups name")
    yield Artifact(VALUES_PATH, documents=(helm_values(rf),), kustomize=False,
                   description="Helm values of the Volcano chart (the scheduler configuration)")
    if engine(rf) == "argocd":
        yield Artifact(ARGO_APP_PATH, documents=(argo_application(rf),),
                       description="Argo CD Application: the Volcano Helm chart, values from volcano/values.yaml")
    else:
        yield Artifact(FLUX_PATH, documents=tuple(flux_objects(rf)), kustomize=False,
                       description="Flux HelmRepository + HelmRelease of Volcano, values = volcano/values.yaml")
    yield from tenant_pages(rf, queue_ledger(rf))

