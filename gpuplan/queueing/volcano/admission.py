"""Admission with Volcano: a queued tier's capacity is reachable only through the Volcano
scheduler (:mod:`gpuplan.queueing.volcano.podrules`, in each queued class's own policy), and only
through its tenant's own leaf queues (docs/volcano.md "The boundary"):

- one policy on ``PodGroup`` (``scheduling.volcano.sh``) and Volcano ``Job`` (``batch.volcano.sh``):
  in a namespace of tenant T (label ``gpuplan.dev/tenant``) the queue is one of T's leaves,
  ``gpuplan-T.<pool>``; elsewhere it is no gpuplan queue. Volcano charges a pod to its PodGroup's
  queue (a plain pod gets a PodGroup from Volcano's controller with the pod's
  ``scheduling.volcano.sh/queue-name``, else ``default``: volcano-sh/volcano v1.15.1
  ``pkg/controllers/podgroup/pg_controller_handler.go:400``); the PodGroup is created through
  the API server, by that controller or by a tenant, and the rule holds for both. A namespace
  that copied a tenant's labels may name the tenant's queues, but the class grants bind by
  namespace name (lower/admission.py), so no pod there holds a GPU of that tenant's tiers.

Stage: lower (docs/architecture.md)."""

from __future__ import annotations

from typing import Any, Sequence

from gpuplan.artifacts import Artifact, Produced
from gpuplan.identity import TENANT_LABEL
from gpuplan.lower import admission
from gpuplan.queueing.volcano.queues import volcano_plan
from gpuplan.resolve import ResolvedFleet

PATH = "cluster/admission-volcano.yaml"
QUEUE_RULES = [
    {"apiGroups": ["scheduling.volcano.sh"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
     "resources": ["podgroups"]},
    {"apiGroups": ["batch.volcano.sh"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
     "resources": ["jobs"]},
]


def queue_validation() -> dict[str, str]:
    lit = admission._lit
    tenant = (f"(has(namespaceObject.metadata.labels) && {lit(TENANT_LABEL)} in namespaceObject.metadata.labels ? "
              f"namespaceObject.metadata.labels[{lit(TENANT_LABEL)}] : '')")
    queue = "(has(object.spec.queue) ? object.spec.queue : 'default')"
    return {"expression": f"{tenant} == '' ? !({queue}.startsWith('gpuplan-') || {queue}.startsWith('gpuplan.')) : "
                          f"{queue}.startsWith('gpuplan-' + {tenant} + '.')",
            "message": "a PodGroup or Volcano Job names one of its tenant's queues, gpuplan-<tenant>.<pool> (the "
                       "tenant page lists them); outside a tenant's namespaces, no gpuplan queue",
            "reason": "Forbidden"}


# The policy and its binding sync with the Namespaces, the first wave: a PodGroup admitted before
# the binding holds stays admitted, and once its queue exists Volcano charges its pods there. The
# binding selects namespaces by name and the policy reads their labels at admission, so neither
# waits for anything (the chart's CRD only makes PodGroups possible; nothing checks them then).
WAVE = "-2"


def objects(rf: ResolvedFleet) -> list[dict[str, Any]]:
    from gpuplan.lower.common import ARGO_WAVE

    p = admission._policy(rf, admission.class_policy_name(rf, "volcano-queues"), {
        "validations": [queue_validation()],
    }, rules=QUEUE_RULES)
    out = [p, admission._binding(rf, p, admission.exempt_namespaces(rf))]
    for d in out:
        if ARGO_WAVE in d["metadata"].get("annotations", {}):
            d["metadata"]["annotations"][ARGO_WAVE] = WAVE
    return out


def enabled(rf: ResolvedFleet) -> bool:
    return volcano_plan(rf) is not None and admission.enabled(rf)


def lower(rf: ResolvedFleet, produced: Sequence[Produced]) -> list[Artifact]:
    if not enabled(rf):
        return []
    return [Artifact(PATH, documents=tuple(objects(rf)),
                     description="ValidatingAdmissionPolicy of Volcano: PodGroups and Volcano Jobs name their "
                                 "tenant's queues")]
