"""cluster/admission-policy.yaml: the ValidatingAdmissionPolicies that hold tiers to their
pools and namespaces, each with its binding (docs/placement.md): one for namespaces, one
per tier PriorityClass (``matchConditions`` on the class).

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
CEL lists library's (k8s.io/apiserver/pkg/cel/library/lists.go, on since 1.28).

Stage: lower (docs/architecture.md)."""

from __future__ import annotations

import json
from typing import Any, Sequence

from gpuplan.artifacts import Artifact, Produced
from gpuplan.lower.common import metadata, obj
from gpuplan.identity import POOL_LABEL, POOL_TAINT_KEY, TENANT_LABEL, content_name
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
    from gpuplan.identity import priority_class_name

    out: dict[str, list] = {}
    for t in rf.fleet.spec.tiers:
        if rf.tier_resource(t) is not None and t.pool in rf.pool_by_name:
            out.setdefault(priority_class_name(t), []).append(t)
    return out


def _variables(names: Sequence[str], rf: ResolvedFleet) -> list[dict[str, str]]:
    gpu = _lit(list(rf.gpu_resources))
    every = {
        "containers": "object.spec.containers + (has(object.spec.initContainers) ? object.spec.initContainers : [])",
        "gpu": f"variables.containers.exists(c, has(c.resources) && ("
               f"(has(c.resources.limits) && c.resources.limits.exists(k, k in {gpu})) || "
               f"(has(c.resources.requests) && c.resources.requests.exists(k, k in {gpu}))))",
        "nsLabels": "has(namespaceObject.metadata.labels) ? namespaceObject.metadata.labels : {}",
        "managed": f"{_lit(TENANT_LABEL)} in variables.nsLabels",
        "pc": "has(object.spec.priorityClassName) ? object.spec.priorityClassName : ''",
        "selector": "has(object.spec.nodeSelector) ? object.spec.nodeSelector : {}",
        "tolerations": "has(object.spec.tolerations) ? object.spec.tolerations : []",
    }
    return [{"name": n, "expression": every[n]} for n in names]


def namespace_validations(rf: ResolvedFleet) -> list[dict[str, str]]:
    classes = class_tiers(rf)
    return [
        {"expression": "!variables.gpu || variables.managed",
         "message": "GPU resources may be requested only in namespaces gpuplan manages (label "
                    f"{TENANT_LABEL}); see the tenant page of the namespace's tenant",
         "reason": "Forbidden"},
        {"expression": f"!variables.gpu || !variables.managed || variables.pc in {_lit(sorted(classes))}",
         "message": f"a GPU pod in a gpuplan namespace must name the PriorityClass of one of its tiers: "
                    f"{', '.join(sorted(classes))}",
         "reason": "Forbidden"},
    ]


def class_validations(rf: ResolvedFleet, pc: str, tiers: list) -> list[dict[str, str]]:
    """What a pod of PriorityClass ``pc`` must satisfy (its policy matches only those pods)."""
    from gpuplan.identity import tier_namespace_label

    labels = sorted({tier_namespace_label(t.name) for t in tiers})
    pools = sorted({t.pool for t in tiers})
    out = [
        {"expression": f"{_lit(labels)}.exists(l, l in variables.nsLabels && variables.nsLabels[l] == 'true')",
         "message": f"PriorityClass {pc} is only for namespaces granted tier {' or '.join(t.name for t in tiers)}",
         "reason": "Forbidden"},
        {"expression": f"{_lit(POOL_LABEL)} in variables.selector && "
                       f"variables.selector[{_lit(POOL_LABEL)}] in {_lit(pools)} && "
                       f"variables.tolerations.exists(t, has(t.key) && t.key == {_lit(POOL_TAINT_KEY)} && "
                       f"((has(t.operator) && t.operator == 'Exists') || "
                       f"(has(t.value) && t.value == variables.selector[{_lit(POOL_LABEL)}])))",
         "message": f"pods of PriorityClass {pc} must select their pool with nodeSelector "
                    f"{POOL_LABEL}: {' or '.join(pools)} and tolerate its taint {POOL_TAINT_KEY}",
         "reason": "Invalid"},
    ]
    for t in tiers:
        if t.max_gpus_per_pod is None:
            continue
        q = _quantity("c", rf.tier_resource(t))
        # containers run together (their sum), init containers one at a time (each)
        out.append({
            "expression": f"object.spec.containers.map(c, {q}).sum() <= {t.max_gpus_per_pod} && "
                          f"variables.containers.all(c, {q} <= {t.max_gpus_per_pod})",
            "message": f"pods of PriorityClass {pc} may request at most {t.max_gpus_per_pod} "
                       f"{rf.tier_resource(t)} (tier {t.name} maxGPUsPerPod)",
            "reason": "Invalid"})
    return out


def class_policy_name(rf: ResolvedFleet, pc: str) -> str:
    name = f"{policy_name(rf)}-{pc}"
    return name if len(name) <= 253 else content_name(f"{policy_name(rf)}-class", pc, limit=253)


def _policy(rf: ResolvedFleet, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    from gpuplan.lower.common import object_annotations

    meta = metadata(rf, name, annotations=object_annotations(rf, "ValidatingAdmissionPolicy"))
    return obj(API, "ValidatingAdmissionPolicy", meta, spec={
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]},
        ]},
        **spec,
    })


def policies(rf: ResolvedFleet) -> list[dict[str, Any]]:
    """The namespace policy, then one policy per tier PriorityClass: its ``matchConditions``
    select the pods of that class, so the API server (and the proof) evaluates a class's
    rules only on its pods."""
    out = [_policy(rf, policy_name(rf), {
        "variables": _variables(("containers", "gpu", "nsLabels", "managed", "pc"), rf),
        "validations": namespace_validations(rf),
    })]
    for pc, tiers in sorted(class_tiers(rf).items()):
        out.append(_policy(rf, class_policy_name(rf, pc), {
            "matchConditions": [{"name": "tier-class", "expression":
                                 f"has(object.spec.priorityClassName) && object.spec.priorityClassName == {_lit(pc)}"}],
            "variables": _variables(("containers", "nsLabels", "selector", "tolerations"), rf),
            "validations": class_validations(rf, pc, tiers),
        }))
    return out


def binding(rf: ResolvedFleet, policy: dict[str, Any]) -> dict[str, Any]:
    from gpuplan.lower.common import object_annotations

    name = policy["metadata"]["name"]
    meta = metadata(rf, name, annotations=object_annotations(rf, "ValidatingAdmissionPolicyBinding"))
    return obj(API, "ValidatingAdmissionPolicyBinding", meta, spec={
        "policyName": name,
        "validationActions": ["Deny"],
        "matchResources": {"namespaceSelector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": exempt_namespaces(rf)},
        ]}},
    })


def objects(rf: ResolvedFleet) -> list[dict[str, Any]]:
    """Every policy, each followed by its binding."""
    out = []
    for p in policies(rf):
        out += [p, binding(rf, p)]
    return out


def lower(rf: ResolvedFleet, produced: Sequence[Produced]) -> list[Artifact]:
    if not enabled(rf):
        return []
    return [Artifact(PATH, documents=tuple(objects(rf)),
                     description="ValidatingAdmissionPolicy: tiers only on their pool and in granted namespaces")]
