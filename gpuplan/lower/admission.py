"""cluster/admission-policy.yaml: the ValidatingAdmissionPolicy that holds tiers to their
pools and namespaces, and its binding (docs/placement.md).

``admissionregistration.k8s.io/v1`` ValidatingAdmissionPolicy is GA (on by default) from
Kubernetes 1.30 (KEP-3488, kubernetes/kubernetes CHANGELOG-1.30). Pods are checked, not
mutated: MutatingAdmissionPolicy is beta and off by default until 1.36 (KEP-3962), and a
pod spec that states its pool is one its owner can read, diff and reason about; a
mutation would make the same manifest schedule differently with and without the policy.

What a CREATEd pod must satisfy (each one validation, one message):

- it requests an advertised GPU resource only in a namespace gpuplan manages (label
  ``gpuplan.dev/tenant``) — the binding leaves out the GPU Operator's namespace (its
  validator pods request a GPU) and ``cluster.admission.unmanagedNamespaces``;
- in a managed namespace, a GPU pod names the PriorityClass of a tier, and only of a tier
  the namespace was granted (label ``tier.gpuplan.dev/<tier>``): a namespace cannot take
  another tier's class, nor escape a ``preemption: Never`` tier with a higher class;
- a pod of a tier's class selects the tier's pool (``nodeSelector``
  ``gpuplan.dev/pool``), tolerates the pool's binding taint, and requests at most the
  tier's ``maxGPUsPerPod`` of its resource.

Quantities are read with ``int()`` (extended resources are whole numbers; anything else
fails evaluation and ``failurePolicy: Fail`` denies the pod); ``sum()`` is the Kubernetes
CEL lists library's (k8s.io/apiserver/pkg/cel/library/lists.go, on since 1.28)."""

from __future__ import annotations

import json
from typing import Any, Sequence

from gpuplan.lower import Artifact
from gpuplan.lower.common import POOL_LABEL, POOL_TAINT_KEY, TENANT_LABEL, metadata, obj
from gpuplan.resolve import ResolvedFleet

API = "admissionregistration.k8s.io/v1"
# ValidatingAdmissionPolicy v1: GA in Kubernetes 1.30 (KEP-3488; CHANGELOG-1.30.md "graduated to GA").
VAP_MIN_VERSION = (1, 30)
# MutatingAdmissionPolicy: alpha 1.32, beta (off by default) 1.34, GA 1.36 (KEP-3962) - not used.
MAP_GA_VERSION = (1, 36)
PATH = "cluster/admission-policy.yaml"


def policy_name(rf: ResolvedFleet) -> str:
    return f"gpuplan-{rf.fleet.metadata.name}-gpu-pods"


def version(rf: ResolvedFleet) -> tuple[int, int]:
    major, minor = rf.fleet.spec.cluster.kubernetes_version.split(".")
    return int(major), int(minor)


def enabled(rf: ResolvedFleet) -> bool:
    return (rf.fleet.spec.cluster.admission.enabled and version(rf) >= VAP_MIN_VERSION
            and bool(rf.fleet.spec.tiers))


def exempt_namespaces(rf: ResolvedFleet) -> list[str]:
    c = rf.fleet.spec.cluster
    return sorted({c.gpu_operator.namespace, *c.admission.unmanaged_namespaces})


def _lit(v: Any) -> str:
    """A CEL literal (JSON strings and lists are CEL string and list literals)."""
    return json.dumps(v, ensure_ascii=True)


def _quantity(c: str, res: str) -> str:
    r = _lit(res)
    return (f"(has({c}.resources) && has({c}.resources.limits) && {r} in {c}.resources.limits ? "
            f"int({c}.resources.limits[{r}]) : (has({c}.resources) && has({c}.resources.requests) && "
            f"{r} in {c}.resources.requests ? int({c}.resources.requests[{r}]) : 0))")


def class_tiers(rf: ResolvedFleet) -> dict[str, list]:
    """PriorityClass name -> the tiers that use it (several when tiers adopt one name)."""
    from gpuplan.lower.tenancy import priority_class_name

    out: dict[str, list] = {}
    for t in rf.fleet.spec.tiers:
        if rf.tier_resource(t) is not None and t.pool in rf.pool_by_name:
            out.setdefault(priority_class_name(t), []).append(t)
    return out


def variables(rf: ResolvedFleet) -> list[dict[str, str]]:
    gpu = _lit(list(rf.gpu_resources))
    return [
        {"name": "containers", "expression": "object.spec.containers + "
                                             "(has(object.spec.initContainers) ? object.spec.initContainers : [])"},
        {"name": "gpu", "expression": f"variables.containers.exists(c, has(c.resources) && ("
                                      f"(has(c.resources.limits) && c.resources.limits.exists(k, k in {gpu})) || "
                                      f"(has(c.resources.requests) && c.resources.requests.exists(k, k in {gpu}))))"},
        {"name": "nsLabels", "expression": "has(namespaceObject.metadata.labels) ? namespaceObject.metadata.labels : {}"},
        {"name": "managed", "expression": f"{_lit(TENANT_LABEL)} in variables.nsLabels"},
        {"name": "pc", "expression": "has(object.spec.priorityClassName) ? object.spec.priorityClassName : ''"},
        {"name": "selector", "expression": "has(object.spec.nodeSelector) ? object.spec.nodeSelector : {}"},
        {"name": "tolerations", "expression": "has(object.spec.tolerations) ? object.spec.tolerations : []"},
    ]


def validations(rf: ResolvedFleet) -> list[dict[str, str]]:
    from gpuplan.lower.tenancy import tier_namespace_label

    classes = class_tiers(rf)
    out = [
        {"expression": "!variables.gpu || variables.managed",
         "message": "GPU resources may be requested only in namespaces gpuplan manages (label "
                    f"{TENANT_LABEL}); see the tenant page of the namespace's tenant",
         "reason": "Forbidden"},
        {"expression": f"!variables.gpu || !variables.managed || variables.pc in {_lit(sorted(classes))}",
         "message": f"a GPU pod in a gpuplan namespace must name the PriorityClass of one of its tiers: "
                    f"{', '.join(sorted(classes))}",
         "reason": "Forbidden"},
    ]
    for pc, tiers in sorted(classes.items()):
        labels = sorted({tier_namespace_label(t.name) for t in tiers})
        pools = sorted({t.pool for t in tiers})
        pc_l = _lit(pc)
        out.append({
            "expression": f"variables.pc != {pc_l} || {_lit(labels)}.exists(l, l in variables.nsLabels && "
                          f"variables.nsLabels[l] == 'true')",
            "message": f"PriorityClass {pc} is only for namespaces granted tier "
                       f"{' or '.join(t.name for t in tiers)}",
            "reason": "Forbidden"})
        out.append({
            "expression": f"variables.pc != {pc_l} || ({_lit(POOL_LABEL)} in variables.selector && "
                          f"variables.selector[{_lit(POOL_LABEL)}] in {_lit(pools)} && "
                          f"variables.tolerations.exists(t, has(t.key) && t.key == {_lit(POOL_TAINT_KEY)} && "
                          f"((has(t.operator) && t.operator == 'Exists') || "
                          f"(has(t.value) && t.value == variables.selector[{_lit(POOL_LABEL)}]))))",
            "message": f"pods of PriorityClass {pc} must select their pool with nodeSelector "
                       f"{POOL_LABEL}: {' or '.join(pools)} and tolerate its taint {POOL_TAINT_KEY}",
            "reason": "Invalid"})
        for t in tiers:
            if t.max_gpus_per_pod is None:
                continue
            res = rf.tier_resource(t)
            # containers run together (their sum), init containers one at a time (each)
            out.append({
                "expression": f"variables.pc != {pc_l} || ("
                              f"object.spec.containers.map(c, {_quantity('c', res)}).sum() <= {t.max_gpus_per_pod} && "
                              f"variables.containers.all(c, {_quantity('c', res)} <= {t.max_gpus_per_pod}))",
                "message": f"pods of PriorityClass {pc} may request at most {t.max_gpus_per_pod} {res} "
                           f"(tier {t.name} maxGPUsPerPod)",
                "reason": "Invalid"})
    return out


def policy(rf: ResolvedFleet) -> dict[str, Any]:
    from gpuplan.lower.gitops import object_annotations

    meta = metadata(rf, policy_name(rf), annotations=object_annotations(rf, "ValidatingAdmissionPolicy"))
    return obj(API, "ValidatingAdmissionPolicy", meta, spec={
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]},
        ]},
        "variables": variables(rf),
        "validations": validations(rf),
    })


def binding(rf: ResolvedFleet) -> dict[str, Any]:
    from gpuplan.lower.gitops import object_annotations

    meta = metadata(rf, policy_name(rf), annotations=object_annotations(rf, "ValidatingAdmissionPolicyBinding"))
    return obj(API, "ValidatingAdmissionPolicyBinding", meta, spec={
        "policyName": policy_name(rf),
        "validationActions": ["Deny"],
        "matchResources": {"namespaceSelector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": exempt_namespaces(rf)},
        ]}},
    })


def lower(rf: ResolvedFleet, produced: Sequence[Artifact]) -> list[Artifact]:
    if not enabled(rf):
        return []
    return [Artifact(PATH, documents=(policy(rf), binding(rf)),
                     description="ValidatingAdmissionPolicy: tiers only on their pool and in granted namespaces")]
