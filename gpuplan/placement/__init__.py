"""The placement proof: where each tier's contract pod can run, and who admits it.

A simulation over the *generated* objects (NodePools, NodeFeatureRules, Namespaces,
ResourceQuotas, the ValidatingAdmissionPolicy and its binding), following the upstream
rules it names (docs/placement.md):

- ExtendedResourceToleration (a mutating admission plugin, so before validation): for
  every extended resource a container requests, the pod gets the toleration
  ``{key: <resource>, operator: Exists, effect: NoSchedule}``
  (kubernetes/kubernetes@v1.33.0 plugin/pkg/admission/extendedresourcetoleration/admission.go,
  ``Admit``); on when ``cluster.extendedResourceToleration`` says, by default with
  ``cluster.aws`` (EKS enables it);
- the ValidatingAdmissionPolicy, its CEL evaluated by gpuplan's CEL engine (:mod:`.cel`), where its
  binding's namespaceSelector matches the namespace;
- ResourceQuota: only ``requests.<resource>`` keys of extended resources are counted, per
  quota whose PriorityClass scope matches the pod; a request above ``hard`` is refused
  (kubernetes/kubernetes@v1.33.0 pkg/quota/v1/evaluator/core/pods.go ``podComputeUsageHelper``
  and plugin/pkg/admission/resourcequota/controller.go ``checkRequest``);
- node fit: every ``nodeSelector`` pair among the node's labels (NodePool
  ``template.metadata.labels`` and ``In`` requirements, NodeFeatureRule labels), every
  NoSchedule/NoExecute taint tolerated (k8s.io/api@v0.33.0 core/v1/toleration.go
  ``ToleratesTaint``: empty key + Exists tolerates all; Exists ignores the value; an
  empty effect matches every effect), every requested resource advertised by the pool
  in the amount one node has;
- Karpenter: NodePools tried by ``weight`` (highest first), then name descending
  (kubernetes-sigs/karpenter@v1.14.1 pkg/utils/nodepool/nodepool.go:157-170); a pool
  whose ``limits.nodes`` is 0 launches nothing.

Not simulated: the scheduler's scoring (which of several fitting nodes wins), current
usage of quotas and nodes, DRA claims (docs/placement.md "Limits").

Stage: check-objects (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from gpuplan.resolve import ResolvedFleet

if TYPE_CHECKING:
    from gpuplan.capacity import CapacityReport

UNMANAGED_NAMESPACE = "default"  # a namespace gpuplan does not manage, for the proof


@dataclass(frozen=True)
class PoolNodes:
    """What a node of a pool looks like to the scheduler, from the generated objects."""

    name: str
    labels: dict[str, tuple[str, ...]]  # key -> the values a node may carry
    taints: tuple[tuple[str, str, str], ...]  # (key, value, effect)
    resources: dict[str, int]  # per node
    karpenter: bool
    weight: int = 0
    node_limit: int | None = None

    def identity(self) -> tuple:
        return (tuple(sorted(self.labels.items())), tuple(sorted(self.taints)), tuple(sorted(self.resources.items())))


@dataclass
class Verdict:
    """One tier's contract pod in one namespace."""

    tier: str
    namespace: str
    granted: bool
    denied_by: list[str] = field(default_factory=list)
    pools: list[str] = field(default_factory=list)  # pools it fits, Karpenter order first
    expected_pool: str = ""

    @property
    def admitted(self) -> bool:
        return not self.denied_by

    @property
    def ok(self) -> bool:
        if not self.granted:
            return not self.admitted
        return self.admitted and self.pools == [self.expected_pool]


@dataclass
class Proof:
    pools: list[PoolNodes]
    verdicts: list[Verdict]
    twins: list[tuple[str, str]]  # pools a pod cannot tell apart

    def matrix(self) -> list[tuple[str, dict[str, str]]]:
        """tier -> pool -> cell: 'yes' where its contract pod (admitted in a granted
        namespace) can land, '-' elsewhere; 'denied' on its pool when never admitted."""
        out = []
        tiers: dict[str, list[Verdict]] = {}
        for v in self.verdicts:
            tiers.setdefault(v.tier, []).append(v)
        for tier, vs in tiers.items():
            granted = [v for v in vs if v.granted]
            row = {p.name: "-" for p in self.pools}
            for v in granted:
                for p in v.pools if v.admitted else ():
                    row[p] = "yes" if p == v.expected_pool else "WRONG POOL"
            if granted and not any(v.admitted for v in granted):
                row[granted[0].expected_pool] = "denied"
            out.append((tier, row))
        return out


# --- pools from generated objects -----------------------------------------------------


def _taints(ts: Iterable[dict[str, str]]) -> tuple[tuple[str, str, str], ...]:
    return tuple((t["key"], t.get("value", ""), t["effect"]) for t in ts)


def pools_from_objects(rf: ResolvedFleet, docs: Iterable[dict[str, Any]]) -> list[PoolNodes]:
    from gpuplan.identity import POOL_LABEL

    out = []
    for d in docs:
        kind = d.get("kind")
        if kind == "NodePool":
            t = d["spec"]["template"]
            labels = {k: (v,) for k, v in (t.get("metadata", {}).get("labels") or {}).items()}
            for r in t["spec"].get("requirements", []):
                if r["operator"] == "In" and r["key"] not in labels:
                    labels[r["key"]] = tuple(r["values"])
            name = d["metadata"]["name"]
            lim = d["spec"].get("limits", {}).get("nodes")
            out.append(PoolNodes(name, labels, _taints(t["spec"].get("taints", [])), _resources(rf, name), True,
                                 int(d["spec"].get("weight", 0)), None if lim is None else int(lim)))
        elif kind == "NodeFeatureRule":
            for rule in d["spec"]["rules"]:
                labels = {k: (v,) for k, v in rule.get("labels", {}).items()}
                name = d["metadata"].get("labels", {}).get(POOL_LABEL, d["metadata"]["name"])
                out.append(PoolNodes(name, labels, _taints(rule.get("taints", [])), _resources(rf, name), False))
    return sorted(out, key=lambda p: p.name)


def _resources(rf: ResolvedFleet, pool: str) -> dict[str, int]:
    # what the device plugin advertises per node, from the pool's device-plugin config
    pv = rf.pool_by_name.get(pool)
    return dict(pv.node_resources()) if pv is not None else {}


def karpenter_order(pools: list[PoolNodes]) -> list[PoolNodes]:
    """kubernetes-sigs/karpenter@v1.14.1 pkg/utils/nodepool/nodepool.go:161-170 OrderByWeight:
    weight descending, equal weights by name descending."""
    return sorted((p for p in pools if p.karpenter), key=lambda p: (-p.weight, _desc(p.name)))


def _desc(s: str) -> tuple:
    return tuple(-ord(c) for c in s) + (1,)  # a prefix sorts after its extensions, as Go's ">" has it


# --- scheduling rules -----------------------------------------------------------------


def tolerates(tol: dict[str, Any], key: str, value: str, effect: str) -> bool:
    """k8s.io/api@v0.33.0 core/v1/toleration.go ToleratesTaint."""
    if tol.get("effect") and tol["effect"] != effect:
        return False
    if tol.get("key", "") and tol["key"] != key:
        return False
    op = tol.get("operator") or "Equal"
    if op == "Exists":
        return True
    return op == "Equal" and tol.get("value", "") == value and bool(tol.get("key", ""))


def requests(pod: dict[str, Any]) -> dict[str, int]:
    """Extended resources the pod requests: containers add up, init containers by max
    (limits stand for requests where requests are left out)."""
    def one(c):
        r = c.get("resources", {})
        return {k: int(v) for k, v in {**r.get("limits", {}), **r.get("requests", {})}.items() if "/" in k}
    total: dict[str, int] = {}
    for c in pod["spec"].get("containers", []):
        for k, v in one(c).items():
            total[k] = total.get(k, 0) + v
    for c in pod["spec"].get("initContainers", []):
        for k, v in one(c).items():
            total[k] = max(total.get(k, 0), v)
    return total


def extended_resource_toleration(pod: dict[str, Any]) -> dict[str, Any]:
    """plugin/pkg/admission/extendedresourcetoleration/admission.go: one Exists/NoSchedule
    toleration per extended resource requested (kubernetes.io/ names excluded)."""
    spec = dict(pod["spec"])
    tols = list(spec.get("tolerations", []))
    for res in sorted(requests(pod)):
        if res.split("/")[0].endswith("kubernetes.io"):  # helper.IsExtendedResourceName
            continue
        t = {"key": res, "operator": "Exists", "effect": "NoSchedule"}
        if t not in tols:
            tols.append(t)
    spec["tolerations"] = tols
    return {**pod, "spec": spec}


def fits(pod: dict[str, Any], pool: PoolNodes) -> bool:
    for k, v in (pod["spec"].get("nodeSelector") or {}).items():
        if v not in pool.labels.get(k, ()):
            return False
    tols = pod["spec"].get("tolerations", [])
    for key, value, effect in pool.taints:
        if effect == "PreferNoSchedule":
            continue
        if not any(tolerates(t, key, value, effect) for t in tols):
            return False
    for res, n in requests(pod).items():
        if pool.resources.get(res, 0) < n:
            return False
    return not (pool.karpenter and pool.node_limit == 0)


def quota_denials(pod: dict[str, Any], quotas: list[dict[str, Any]]) -> list[str]:
    pc = pod["spec"].get("priorityClassName", "")
    req = requests(pod)
    out = []
    for q in quotas:
        scope = (q["spec"].get("scopeSelector") or {}).get("matchExpressions", [])
        if not all(_scope_matches(e, pc) for e in scope):
            continue
        for key, hard in q["spec"].get("hard", {}).items():
            res = key.removeprefix("requests.")
            if key.startswith("requests.") and res in req and req[res] > int(hard):
                out.append(f"ResourceQuota {q['metadata']['name']}: {res} {req[res]} > {hard}")
    return out


def _scope_matches(e: dict[str, Any], pc: str) -> bool:
    if e["scopeName"] != "PriorityClass":
        return True
    if e["operator"] == "In":
        return pc in e["values"]
    if e["operator"] == "NotIn":
        return pc not in e["values"]
    if e["operator"] == "Exists":
        return pc != ""
    return pc == ""


# --- the proof -------------------------------------------------------------------------


def ert_enabled(rf: ResolvedFleet) -> bool:
    c = rf.fleet.spec.cluster
    return c.extended_resource_toleration if c.extended_resource_toleration is not None else c.aws is not None


def admit(rf: ResolvedFleet, pod: dict[str, Any], ns_obj: dict[str, Any], docs: list[dict[str, Any]]
          ) -> tuple[dict[str, Any], list[str]]:
    """Admission as the API server runs it: mutating plugins, then validating policies,
    then quota. Returns the admitted pod and the denials."""
    from gpuplan.placement.cel import evaluate_policy

    if ert_enabled(rf):
        pod = extended_resource_toleration(pod)
    ns = ns_obj["metadata"]["name"]
    denied: list[str] = []
    policies = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "ValidatingAdmissionPolicy"}
    for b in (d for d in docs if d.get("kind") == "ValidatingAdmissionPolicyBinding"):
        p = policies.get(b["spec"]["policyName"])
        if p is None or not _selects(b["spec"].get("matchResources", {}).get("namespaceSelector", {}), ns_obj):
            continue
        denied += [f"ValidatingAdmissionPolicy {p['metadata']['name']}: {m}" for m in evaluate_policy(p, pod, ns_obj)]
    quotas = [d for d in docs if d.get("kind") == "ResourceQuota" and d["metadata"].get("namespace") == ns]
    denied += quota_denials(pod, quotas)
    return pod, denied


def _selects(sel: dict[str, Any], ns_obj: dict[str, Any]) -> bool:
    labels = ns_obj["metadata"].get("labels", {})
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in sel.get("matchExpressions", []):
        has, val = e["key"] in labels, labels.get(e["key"])
        op = e["operator"]
        if (op == "In" and val not in e["values"]) or (op == "NotIn" and has and val in e["values"]) \
                or (op == "Exists" and not has) or (op == "DoesNotExist" and has):
            return False
    return True


def namespace_object(doc: dict[str, Any]) -> dict[str, Any]:
    """The Namespace as the API server stores it (kubernetes.io/metadata.name added,
    NamespaceDefaultLabelName, on since 1.21)."""
    md = dict(doc["metadata"])
    md["labels"] = {**md.get("labels", {}), "kubernetes.io/metadata.name": md["name"]}
    return {**doc, "metadata": md}


# Tier x namespace pairs the proof evaluates inside validate/build: it simulates every
# contract pod in every namespace, so larger fleets are not proved there (GP525 says
# so) - docs/placement.md "Limits".
MAX_PAIRS = 1500


def pairs(rf: ResolvedFleet) -> int:
    return len(rf.fleet.spec.tiers) * (1 + sum(len(tn.namespaces) for tn in rf.fleet.spec.tenants))


def _shape(ns_obj: dict[str, Any], docs_by_ns: dict[str, list], bindings: list) -> str:
    """What the admission of a pod can depend on in a namespace: its labels (not its name,
    nor which tenant: gpuplan's policies test the tenant label for presence only, and read
    no names, tests/placement checks both), which bindings select it, its quotas' specs."""
    import json

    from gpuplan.identity import TENANT_LABEL

    labels = {k: ("*" if k == TENANT_LABEL else v) for k, v in ns_obj["metadata"].get("labels", {}).items()
              if k != "kubernetes.io/metadata.name"}
    selected = [_selects(b["spec"].get("matchResources", {}).get("namespaceSelector", {}), ns_obj) for b in bindings]
    quotas = [(q["metadata"]["name"], q["spec"]) for q in docs_by_ns.get(ns_obj["metadata"]["name"], [])]
    return json.dumps([labels, selected, quotas], sort_keys=True)


def prove(rf: ResolvedFleet, docs: list[dict[str, Any]]) -> Proof:
    """Every tier's contract pod in every namespace. Admission is simulated once per
    namespace shape (:func:`_shape`), placement once per tier (the pod is the same in
    every namespace), so a fleet of thousands of namespaces is proved in seconds."""
    from gpuplan.dra import is_dra
    from gpuplan.identity import contract_pod

    pools = pools_from_objects(rf, docs)
    order = {p.name: i for i, p in enumerate(karpenter_order(pools))}
    namespaces = [namespace_object(d) for d in docs if d.get("kind") == "Namespace"]
    namespaces.append(namespace_object({"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": UNMANAGED_NAMESPACE}}))
    quotas: dict[str, list] = {}
    for d in docs:
        if d.get("kind") == "ResourceQuota":
            quotas.setdefault(d["metadata"].get("namespace", ""), []).append(d)
    admission_docs = [d for d in docs if d.get("kind") in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")]
    bindings = [d for d in admission_docs if d["kind"] == "ValidatingAdmissionPolicyBinding"]
    shapes: dict[str, list[dict[str, Any]]] = {}
    for ns_obj in namespaces:
        shapes.setdefault(_shape(ns_obj, quotas, bindings), []).append(ns_obj)
    granted: dict[str, set[str]] = {}
    for tn in rf.fleet.spec.tenants:
        for ns in tn.namespaces:
            granted.setdefault(ns, set()).update(t for t, u in tn.quotas.get(ns, {}).items() if u > 0)
    verdicts = []
    for tier in rf.fleet.spec.tiers:
        res = rf.tier_resource(tier)
        if res is None or tier.pool not in rf.pool_by_name or is_dra(rf, rf.pool_by_name[tier.pool]):
            continue  # DRA pools: claims, not extended resources (not simulated)
        landing: list[str] | None = None
        by_ns: dict[str, Verdict] = {}
        for group in shapes.values():
            rep = group[0]
            ns = rep["metadata"]["name"]
            pod = contract_pod(rf, tier, ns)
            del pod["metadata"]["namespace"]  # read by no policy: one evaluation for every namespace
            pod, denied = admit(rf, pod, rep,
                                [*admission_docs, *quotas.get(ns, [])])
            if landing is None:  # the admitted pod is the same in every namespace
                landing = [p.name for p in pools if fits(pod, p)]
                landing.sort(key=lambda n: (n not in order, order.get(n, 0), n))
            for ns_obj in group:
                name = ns_obj["metadata"]["name"]
                by_ns[name] = Verdict(tier.name, name, tier.name in granted.get(name, ()), list(denied),
                                      list(landing), tier.pool)
        verdicts += [by_ns[n["metadata"]["name"]] for n in namespaces]
    seen: dict[tuple, str] = {}
    twins = []
    for p in pools:
        other = seen.setdefault(p.identity(), p.name)
        if other != p.name:
            twins.append((other, p.name))
    return Proof(pools, verdicts, twins)


def proof(rf: ResolvedFleet, docs: list[dict[str, Any]]) -> Proof:
    """The proof of the fleet over ``docs`` (the objects the driver collected from
    lowering), computed once: the object checks and the capacity report share it."""
    cached = rf.__dict__.get("_placement_proof")
    if cached is None:
        cached = rf.__dict__["_placement_proof"] = prove(rf, docs)
    return cached


def matrix_rows(p: Proof) -> tuple[list[str], list[list[str]]]:
    """The tier x pool table of `gpuplan plan`: where each tier's contract pod, admitted in
    a namespace granted the tier, can land; then where it is admitted and refused."""
    head = ["tier", *(x.name for x in p.pools), "admitted in", "refused in"]
    rows = []
    by_tier: dict[str, list[Verdict]] = {}
    for v in p.verdicts:
        by_tier.setdefault(v.tier, []).append(v)
    for tier, row in p.matrix():
        vs = by_tier[tier]
        rows.append([tier, *(row[x.name] for x in p.pools),
                     ", ".join(v.namespace for v in vs if v.admitted) or "-",
                     ", ".join(v.namespace for v in vs if not v.admitted) or "-"])
    return head, rows


def with_placement(rf: ResolvedFleet, report: "CapacityReport", docs: list[dict[str, Any]]) -> "CapacityReport":
    """The capacity report with the placement proof, for fleets with tiers.
    Not part of ``capacity``: the proof reads quotas that read the capacity."""
    if not rf.fleet.spec.tiers or pairs(rf) > MAX_PAIRS:
        return report
    from dataclasses import replace

    return replace(report, placement=proof(rf, docs))
