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
from itertools import islice
from typing import Any, Iterable, Iterator, Sequence

from gpuplan.identity import CAPACITY_TYPE_LABEL, scope_matches
from gpuplan.provisioning.pools import platform_labels, platform_taints, read_template
from gpuplan.resolve import ResolvedFleet

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
    pool: str = ""  # the gpuplan pool (a pool's on-demand floor is a NodePool of its own)

    @property
    def owner(self) -> str:
        return self.pool or self.name

    def identity(self) -> tuple:
        return (tuple(sorted(self.labels.items())), tuple(sorted(self.taints)), tuple(sorted(self.resources.items())))


@dataclass(slots=True)
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


class ShapeNamespaces(Sequence[str]):
    """The namespaces of some shapes (a bit mask over the proof's shapes, each a tuple of names
    shared by every tier), in shape order, without copying them: a tier refused in most of a
    large fleet's namespaces holds one of these, not a tuple of thousands of names."""

    __slots__ = ("_shapes", "_mask", "_len", "_total")

    def __init__(self, shapes: Sequence[tuple[str, ...]], mask: int, total: int) -> None:
        """``total``: how many namespaces ``shapes`` hold together."""
        self._shapes, self._mask = shapes, mask
        self._len: int | None = None
        self._total = total

    def __len__(self) -> int:
        if self._len is None:  # counted over the fewer shapes: those in the mask, or those left out
            every = (1 << len(self._shapes)) - 1
            if self._mask.bit_count() * 2 > len(self._shapes):
                self._len = self._total - sum(len(self._shapes[g]) for g in shape_bits(every & ~self._mask))
            else:
                self._len = sum(len(self._shapes[g]) for g in shape_bits(self._mask))
        return self._len

    def __iter__(self) -> Iterator[str]:
        for g in shape_bits(self._mask):
            yield from self._shapes[g]

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return tuple(self)[i] if i.step or (i.start or 0) < 0 or (i.stop is not None and i.stop < 0) \
                else tuple(islice(self, i.start or 0, i.stop))
        if i < 0:
            i += len(self)
        for name in islice(self, i, None):
            return name
        raise IndexError(i)

    def heads(self, n: int) -> Iterator[str]:
        """At most ``n`` names of each shape (its first, in the tree's order)."""
        for g in shape_bits(self._mask):
            yield from self._shapes[g][:n]

    def __repr__(self) -> str:
        return f"ShapeNamespaces({len(self)} namespaces)"


@dataclass(frozen=True)
class Group:
    """One tier's contract pod in namespaces of one shape and grant: the same verdict for each."""

    tier: str
    namespaces: Sequence[str]  # a tuple, or the ShapeNamespaces of the shapes a policy refuses it in
    granted: bool
    denied_by: list[str]
    pools: list[str]
    expected_pool: str
    # pool -> the capacity types its pod can get there, on pools that allow spot (Karpenter's
    # order: reserved, spot, on-demand); the pod's own karpenter.sh/capacity-type when it pins one
    capacity: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def verdict(self, namespace: str) -> Verdict:
        return Verdict(self.tier, namespace, self.granted, self.denied_by, self.pools, self.expected_pool)


@dataclass
class Proof:
    pools: list[PoolNodes]
    groups: list[Group]
    twins: list[tuple[str, str]]  # pools a pod cannot tell apart
    namespaces: tuple[str, ...] = ()  # every namespace the groups name, in the tree's order

    @property
    def verdicts(self) -> list[Verdict]:
        """One verdict per tier and namespace (tier order, then namespace order)."""
        return [g.verdict(n) for g in self.groups for n in g.namespaces]

    def matrix(self) -> list[tuple[str, dict[str, str]]]:
        """tier -> pool -> cell: 'yes' where its contract pod (admitted in a granted
        namespace) can land, '-' elsewhere; 'denied' on its pool when never admitted."""
        out = []
        tiers: dict[str, list[Group]] = {}
        for g in self.groups:
            tiers.setdefault(g.tier, []).append(g)
        for tier, gs in tiers.items():
            granted = [g for g in gs if g.granted]
            row = {p.owner: "-" for p in self.pools}
            for g in granted:
                types = dict(g.capacity)
                for p in g.pools if not g.denied_by else ():
                    row[p] = ("yes" + (f" ({', '.join(types[p])})" if types.get(p) else "")
                              if p == g.expected_pool else "WRONG POOL")
            if granted and all(g.denied_by for g in granted):
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
            pool = (d["metadata"].get("labels") or {}).get(POOL_LABEL, name)
            lim = d["spec"].get("limits", {}).get("nodes")
            out.append(PoolNodes(name, labels, _taints(t["spec"].get("taints", [])), _resources(rf, pool), True,
                                 int(d["spec"].get("weight", 0)), None if lim is None else int(lim), pool))
        elif kind == "NodeFeatureRule":
            for rule in d["spec"]["rules"]:
                labels = {k: (v,) for k, v in rule.get("labels", {}).items()}
                name = d["metadata"].get("labels", {}).get(POOL_LABEL, d["metadata"]["name"])
                out.append(PoolNodes(name, labels, _taints(rule.get("taints", [])), _resources(rf, name), False))
        elif (tpl := read_template(d)) is not None:  # a node group's template (GKE ContainerNodePool, ...)
            out.append(_node_group(rf, tpl[0], *tpl))  # named by its pool, as the proof keys places
    return sorted(out, key=lambda p: p.name)


def _node_group(rf: ResolvedFleet, name: str, pool: str, labels: dict[str, str],
                taints: list[dict[str, str]]) -> PoolNodes:
    """A node group's nodes: the template's labels and taints plus those the platform sets itself
    (GKE: the node-pool name, the partition size, the GPU taint; ``gpuplan.provisioning``)."""
    pv = rf.pool_by_name.get(pool)
    if pv is not None:
        labels = {**platform_labels(pv), **labels}
        seen = {(t["key"], t["effect"]) for t in taints}
        taints = [*taints, *(t for t in platform_taints(pv) if (t["key"], t["effect"]) not in seen)]
    return PoolNodes(name, {k: (v,) for k, v in labels.items()}, _taints(taints), _resources(rf, pool), False,
                     pool=pool)


def _resources(rf: ResolvedFleet, pool: str) -> dict[str, int]:
    # what the device plugin advertises per node, from the pool's device-plugin config, and the
    # fabric a node launched for a multi-node job carries (EKS: vpc.amazonaws.com/efa, the fewest
    # of the pool's instance types; identity.pool_gang_resources)
    from gpuplan.identity import pool_gang_resources

    pv = rf.pool_by_name.get(pool)
    return {**pv.node_resources(), **pool_gang_resources(rf, pv)} if pv is not None else {}


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


def _container_requests(c: dict[str, Any]) -> dict[str, int]:
    r = c.get("resources", {})
    return {k: int(v) for k, v in {**r.get("limits", {}), **r.get("requests", {})}.items() if "/" in k}


def requests(pod: dict[str, Any]) -> dict[str, int]:
    """Extended resources the pod requests, as the scheduler and quota count them
    (k8s.io/component-helpers@v0.33.0 resource/helpers.go ``PodRequests``): containers and
    restartable init containers (sidecars, ``restartPolicy: Always``) add up; each other
    init container counts with the sidecars declared before it; the larger wins. Limits
    stand for requests where requests are left out."""
    total: dict[str, int] = {}
    for c in pod["spec"].get("containers", []):
        for k, v in _container_requests(c).items():
            total[k] = total.get(k, 0) + v
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for c in pod["spec"].get("initContainers", []):
        own = _container_requests(c)
        if c.get("restartPolicy") == "Always":
            for k, v in own.items():
                sidecars[k] = sidecars.get(k, 0) + v
            continue
        for k in set(own) | set(sidecars):
            init_peak[k] = max(init_peak.get(k, 0), own.get(k, 0) + sidecars.get(k, 0))
    for k, v in sidecars.items():
        total[k] = total.get(k, 0) + v
    for k, v in init_peak.items():
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


class PoolIndex:
    """The pools by their node labels, so that the pools a pod's ``nodeSelector`` can match are
    looked up, not tried one by one (:func:`fits` and :func:`kubelet_admits` check the selector
    first: a pool without one of its labels is refused by both)."""

    def __init__(self, pools: list[PoolNodes]) -> None:
        self.pools = pools
        self._by_label: dict[tuple[str, str], set[int]] = {}
        for i, p in enumerate(pools):
            for k, values in p.labels.items():
                for v in values:
                    self._by_label.setdefault((k, v), set()).add(i)

    def candidates(self, pod: dict[str, Any]) -> list[PoolNodes]:
        """The pools with every label of the pod's node selector, in the pools' order."""
        sel = pod["spec"].get("nodeSelector") or {}
        if not sel:
            return self.pools
        common: set[int] | None = None
        for k, v in sel.items():
            have = self._by_label.get((k, v), set())
            common = set(have) if common is None else common & have
        return [self.pools[i] for i in sorted(common or ())]


def kubelet_admits(pod: dict[str, Any], pool: PoolNodes) -> bool:
    """Whether a node of ``pool`` runs a pod bound to it by name (``spec.nodeName``, no
    scheduler): the kubelet checks the node selector, the resources and only the NoExecute
    taints (kubernetes/kubernetes v1.36.3 pkg/kubelet/lifecycle/predicate.go:454
    ``generalFilter``)."""
    for k, v in (pod["spec"].get("nodeSelector") or {}).items():
        if v not in pool.labels.get(k, ()):
            return False
    tols = pod["spec"].get("tolerations", [])
    for key, value, effect in pool.taints:
        if effect == "NoExecute" and not any(tolerates(t, key, value, effect) for t in tols):
            return False
    return all(pool.resources.get(res, 0) >= n for res, n in requests(pod).items())


def quota_denials(pod: dict[str, Any], quotas: list[dict[str, Any]], req: dict[str, int] | None = None) -> list[str]:
    """``req``: the pod's :func:`requests`, when the caller has them (one pod against many namespaces)."""
    pc = pod["spec"].get("priorityClassName", "")
    if req is None:
        req = requests(pod)
    if not req:
        return []  # no extended resource: no requests.<resource> key charges the pod
    out = []
    for q in quotas:
        scope = (q["spec"].get("scopeSelector") or {}).get("matchExpressions", [])
        if not all(scope_matches(e, pc) for e in scope):
            continue
        for key, hard in q["spec"].get("hard", {}).items():
            res = key.removeprefix("requests.")
            if key.startswith("requests.") and res in req and req[res] > int(hard):
                out.append(f"ResourceQuota {q['metadata']['name']}: {res} {req[res]} > {hard}")
    return out


# --- the proof -------------------------------------------------------------------------


def ert_enabled(rf: ResolvedFleet) -> bool:
    c = rf.fleet.spec.cluster
    return c.extended_resource_toleration if c.extended_resource_toleration is not None else c.aws is not None


class Cluster:
    """The admission chain of the generated objects (ValidatingAdmissionPolicies and their
    bindings, ResourceQuotas per namespace), with the namespaces each binding selects
    worked out once.

    gpuplan's bindings select namespaces by name (a single ``NotIn`` on
    ``kubernetes.io/metadata.name``); for those, which bindings select a namespace is a set
    lookup. Any other selector is evaluated as written."""

    def __init__(self, rf: ResolvedFleet, docs: Iterable[dict[str, Any]]) -> None:
        from gpuplan.placement.cel import reads_namespace

        self.rf = rf
        self._specs: dict[int, tuple[dict[str, Any], str]] = {}  # id(quota spec) -> (it, its JSON)
        self.policies: dict[str, dict[str, Any]] = {}
        self.bindings: list[dict[str, Any]] = []
        self.quotas: dict[str, list[dict[str, Any]]] = {}
        for d in docs:
            kind = d.get("kind")
            if kind == "ValidatingAdmissionPolicy":
                self.policies[d["metadata"]["name"]] = d
            elif kind == "ValidatingAdmissionPolicyBinding":
                self.bindings.append(d)
            elif kind == "ResourceQuota":
                self.quotas.setdefault(d["metadata"].get("namespace", ""), []).append(d)
        self.bindings = [b for b in self.bindings if b["spec"]["policyName"] in self.policies]
        self._by_name: list[frozenset[str] | None] = [_name_exclusions(b) for b in self.bindings]
        self._reads_ns = {n: reads_namespace(p) for n, p in self.policies.items()}
        self._class_of = {n: _class_condition(p) for n, p in self.policies.items()}
        # a policy that reads the namespace but takes no pod (Volcano's PodGroup queues) leaves the
        # pods' verdicts the same in namespaces that differ only in labels
        pod = {"apiVersion": "v1", "kind": "Pod"}
        self.reads_labels = any(r and _matches(self.policies[n], pod, None) for n, r in self._reads_ns.items())
        self._per_namespace = [n for n, r in self._reads_ns.items() if r]
        self._bound: dict[str, list[int]] = {n: [] for n in self.policies}
        for i, b in enumerate(self.bindings):
            self._bound[b["spec"]["policyName"]].append(i)
        # name -> the name-bound bindings that leave it out; the other bindings are evaluated
        self._left_out: dict[str, set[int]] = {}
        for i, ex in enumerate(self._by_name):
            for name in ex or ():
                self._left_out.setdefault(name, set()).add(i)
        self._generic = [i for i, ex in enumerate(self._by_name) if ex is None]
        # policies by the class their matchCondition names (None: every pod)
        self._by_class: dict[str | None, list[str]] = {}
        for n, pc in self._class_of.items():
            if not self._reads_ns[n]:
                self._by_class.setdefault(pc, []).append(n)

    def selected(self, ns_obj: dict[str, Any]) -> frozenset[int]:
        """The bindings that do *not* select the namespace (by index): a binding ``i`` selects
        it when ``i not in`` the result."""
        out = set(self._left_out.get(ns_obj["metadata"]["name"], ()))
        for i in self._generic:
            if not _selects(self.bindings[i]["spec"].get("matchResources", {}).get("namespaceSelector", {}), ns_obj):
                out.add(i)
        return frozenset(out)

    def shape(self, ns_obj: dict[str, Any]) -> tuple:
        """What the admission of a pod can depend on in a namespace: the bindings that select
        it, its quotas' specs, and its labels only where a policy reads the namespace
        (gpuplan's do not: they bind grants to names). Each quota spec is written out once per
        spec object (the proof's objects share equal specs: objchecks.placement.slim)."""
        import json

        labels = json.dumps({k: v for k, v in ns_obj["metadata"].get("labels", {}).items()
                             if k != "kubernetes.io/metadata.name"}, sort_keys=True) if self.reads_labels else ""
        quotas = tuple((q["metadata"]["name"], self._spec_text(q["spec"]))
                       for q in self.quotas.get(ns_obj["metadata"]["name"], []))
        return labels, tuple(sorted(self.selected(ns_obj))), quotas

    def _spec_text(self, spec: dict[str, Any]) -> str:
        import json

        hit = self._specs.get(id(spec))
        if hit is None or hit[0] is not spec:
            hit = self._specs[id(spec)] = (spec, json.dumps(spec, sort_keys=True))
        return hit[1]

    def policy_masks(self, unselected: list[frozenset[int]]) -> dict[str, int] | None:
        """Per policy, the namespace shapes its bindings select, as a bit mask (bit ``g``: the
        shape whose bindings left out are ``unselected[g]``), so that the shapes a pod is
        refused in are the union of its refusing policies' masks: a few integer operations per
        pod instead of one look at every shape. None where a policy reads the namespace (its
        verdict is not one per pod; callers then evaluate each shape)."""
        if self._per_namespace:
            return None
        out = {}
        binding = self.binding_masks(unselected)
        for name, idx in self._bound.items():
            m = 0
            for i in idx:
                m |= binding[i]
            out[name] = m
        return out

    def binding_masks(self, unselected: list[frozenset[int]]) -> list[int]:
        """Per binding, the shapes it selects (bit mask)."""
        left_out = [0] * len(self.bindings)  # binding -> the shapes it does not select
        for g, sel in enumerate(unselected):
            for i in sel:
                left_out[i] |= 1 << g
        every = (1 << len(unselected)) - 1
        return [every & ~m for m in left_out]

    def refusals(self, verdicts: dict[str, list[str]], mask: int, binding: list[int]) -> list[tuple[int, list[str]]]:
        """The shapes of ``mask`` split by what the policies say there: (shapes, the messages
        :meth:`policy_denials` gives in each of them), for a pod of these ``verdicts``."""
        parts = [(mask, [])]
        for name, msgs in verdicts.items():
            if not msgs:
                continue
            for m in msgs:
                for i in self._bound[name]:
                    line = f"ValidatingAdmissionPolicy {name}: {m}"
                    parts = [(x, y) for part, said in parts
                             for x, y in ((part & binding[i], [*said, line]), (part & ~binding[i], said)) if x]
        return parts

    def covering(self, unselected: Iterable[frozenset[int]]) -> set[str]:
        """The policies bound in every one of these namespace selections."""
        sels = list(unselected)
        return {n for n, idx in self._bound.items() if all(any(i not in u for i in idx) for u in sels)}

    def verdicts(self, pod: dict[str, Any], request: dict[str, Any] | None = None,
                 covering: set[str] | None = None) -> dict[str, list[str]]:
        """Per policy that applies to the pod and reads no namespace, the messages it refuses
        the pod with (empty: passes) - the same in every namespace its bindings select.

        ``covering``: policies bound in every namespace the caller asks about; they are
        evaluated first, and the first that refuses the pod ends the evaluation (with its
        first message): the pod is refused in all of them whatever the rest say."""
        from gpuplan.placement.cel import evaluate_policy, object_key

        classes = _classes(pod)
        key = object_key(pod, request)
        if classes is None:  # not a Pod: every policy's matchConditions are evaluated
            names = [n for pc, ns in self._by_class.items() for n in ns]
        else:  # a class policy whose matchCondition names another class does not apply
            names = [*self._by_class.get(None, ()), *(n for pc in classes if pc is not None
                                                        for n in self._by_class.get(pc, ()))]
        if covering is not None:
            names.sort(key=lambda n: n not in covering)
        out: dict[str, list[str]] = {}
        for name in names:
            policy = self.policies[name]
            if _matches(policy, pod, request):  # its resourceRules take the kind and operation
                quick = covering is not None and name in covering
                out[name] = evaluate_policy(policy, pod, None, request, key=key, first_only=quick)
                if quick and out[name]:
                    return out
        return out

    def policy_denials(self, pod: dict[str, Any], ns_obj: dict[str, Any], unselected: frozenset[int],
                       request: dict[str, Any] | None = None, verdicts: dict[str, list[str]] | None = None
                       ) -> list[str]:
        from gpuplan.placement.cel import evaluate_policy

        if verdicts is None:
            verdicts = self.verdicts(pod, request)
        out: list[str] = []
        # only the policies that refuse the pod (or read the namespace) matter: look up their bindings
        for name in self._per_namespace:
            if any(i not in unselected for i in self._bound[name]) and _matches(self.policies[name], pod, request):
                msgs = evaluate_policy(self.policies[name], pod, ns_obj, request)
                out += [f"ValidatingAdmissionPolicy {name}: {m}" for m in msgs]
        for name, msgs in verdicts.items():
            if msgs:
                out += [f"ValidatingAdmissionPolicy {name}: {m}" for m in msgs
                        for i in self._bound[name] if i not in unselected]
        return out

    def denials(self, pod: dict[str, Any], ns_obj: dict[str, Any], request: dict[str, Any] | None = None,
                selected: frozenset[int] | None = None, verdicts: dict[str, list[str]] | None = None,
                req: dict[str, int] | None = None) -> list[str]:
        """Validating policies (where their bindings select the namespace), then quota: the
        API server runs ValidatingAdmissionPolicy before ResourceQuota and stops at the first
        plugin that refuses (kubernetes v1.36.3 pkg/kubeapiserver/options/plugins.go:116-118;
        k8s.io/apiserver v0.36.3 pkg/admission/chain.go:47-59), so a pod a policy refuses is
        never charged or refused by quota."""
        sel = self.selected(ns_obj) if selected is None else selected
        out = self.policy_denials(pod, ns_obj, sel, request, verdicts)
        return out or quota_denials(pod, self.quotas.get(ns_obj["metadata"]["name"], []), req)


def refused_shapes(masks: dict[str, int] | None, verdicts: dict[str, list[str]]) -> int | None:
    """The shapes (bit mask, :meth:`Cluster.policy_masks`) a pod with these per-pod ``verdicts``
    is refused in by a policy; None without masks."""
    if masks is None:
        return None
    m = 0
    for name, msgs in verdicts.items():
        if msgs:
            m |= masks[name]
    return m


def shape_bits(mask: int) -> Iterator[int]:
    """The shapes of a mask, in order."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def _matches(policy: dict[str, Any], obj: dict[str, Any], request: dict[str, Any] | None) -> bool:
    """The policy's matchConstraints.resourceRules take the object's kind and the operation
    (resources named by the kind's lower-case plural, as every kind gpuplan guards is; with the
    request's ``subResource``, ``<plural>/<subresource>``: a pod's resize)."""
    group = obj.get("apiVersion", "v1").rpartition("/")[0]
    resource = obj.get("kind", "").lower() + "s"
    if (request or {}).get("subResource"):
        resource += "/" + request["subResource"]
    op = (request or {}).get("operation", "CREATE")
    for r in policy["spec"].get("matchConstraints", {}).get("resourceRules", []):
        if (group in r.get("apiGroups", []) or "*" in r.get("apiGroups", [])) \
                and (resource in r.get("resources", []) or "*" in r.get("resources", [])) \
                and (op in r.get("operations", []) or "*" in r.get("operations", [])):
            return True
    return False


def _name_exclusions(b: dict[str, Any]) -> frozenset[str] | None:
    sel = b["spec"].get("matchResources", {}).get("namespaceSelector", {})
    exprs = sel.get("matchExpressions", [])
    if sel.get("matchLabels") or len(exprs) != 1:
        return None
    e = exprs[0]
    if e["key"] != "kubernetes.io/metadata.name" or e["operator"] != "NotIn":
        return None
    return frozenset(e["values"])


_CLASS_CONDITION = None


def _class_condition(policy: dict[str, Any]) -> str | None:
    """The class a policy applies to, when one of its matchConditions is gpuplan's
    ``(<pod specs>).exists(s, has(s.priorityClassName) && s.priorityClassName == "<class>")``:
    false for a pod of any other class, so the proof skips it for those pods (a test holds
    the shortcut to the full evaluation)."""
    import json
    import re

    global _CLASS_CONDITION
    if _CLASS_CONDITION is None:
        _CLASS_CONDITION = re.compile(
            r'\)\.exists\(s, has\(s\.priorityClassName\) && s\.priorityClassName == ("(?:[^"\\]|\\.)*")\)$')
    for mc in policy["spec"].get("matchConditions", []):
        m = _CLASS_CONDITION.search(mc["expression"])
        if m and mc["expression"].startswith("("):
            return json.loads(m.group(1))
    return None


def _classes(pod: dict[str, Any]) -> set[str] | None:
    """The PriorityClasses of a Pod's one spec (None for other kinds: no shortcut)."""
    if pod.get("kind") != "Pod":
        return None
    return {pod["spec"].get("priorityClassName", "")}


def admit(rf: ResolvedFleet, pod: dict[str, Any], ns_obj: dict[str, Any], docs: list[dict[str, Any]],
          request: dict[str, Any] | None = None) -> tuple[dict[str, Any], list[str]]:
    """Admission as the API server runs it: mutating plugins, then validating policies,
    then quota. Returns the admitted pod and the denials."""
    if ert_enabled(rf):
        pod = extended_resource_toleration(pod)
    return pod, Cluster(rf, docs).denials(pod, ns_obj, request)


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


def slim_object(doc: dict[str, Any], shared: dict[str, Any]) -> dict[str, Any]:
    """What the proofs read of an object: a ResourceQuota's name, namespace, annotations (the sync
    steps read its wave and prune options) and spec; a Namespace's name, labels and annotations,
    as the API server stores it (:func:`namespace_object`);
    other kinds whole. Equal specs and annotations are kept once (``shared``: by content, one per
    collection): a 20,000-node fleet's 120,000 quotas have a few hundred distinct specs. The
    rest (labels of quotas, which no admission reads) is dropped as the objects are collected,
    so the proof of a large fleet does not hold it."""
    import json

    kind = doc.get("kind") if isinstance(doc, dict) else None
    md = doc.get("metadata") if kind in ("ResourceQuota", "Namespace") else None
    if not isinstance(md, dict):
        return doc  # other kinds whole, and a hand-edited object as it is

    def once(value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        return shared.setdefault(json.dumps(value, sort_keys=True), value)
    keep = ("name", "namespace", "annotations") if kind == "ResourceQuota" else ("name", "labels", "annotations")
    out = {"apiVersion": doc.get("apiVersion"), "kind": kind,
           "metadata": {k: (once(md[k]) if k == "annotations" else md[k]) for k in keep if k in md}}
    if kind == "ResourceQuota":
        out["spec"] = once(doc.get("spec"))
        return out
    return namespace_object(out)  # as stored, so each proof reads it without a copy of its own


def namespace_object(doc: dict[str, Any]) -> dict[str, Any]:
    """The Namespace as the API server stores it (kubernetes.io/metadata.name added,
    NamespaceDefaultLabelName, on since 1.21); ``doc`` itself where it already carries it."""
    labels = doc["metadata"].get("labels") or {}
    if isinstance(doc["metadata"].get("name"), str) and labels.get("kubernetes.io/metadata.name") == doc["metadata"]["name"]:
        return doc
    md = dict(doc["metadata"])
    md["labels"] = {**md.get("labels", {}), "kubernetes.io/metadata.name": md["name"]}
    return {**doc, "metadata": md}


# The proofs' work grows with the tiers (each tier's pods, each evaluated once) and the
# namespaces (each visited where its tier is granted or admitted), not with their product; above
# this many tiers plus namespaces validate and build skip them (GP525 says so) - docs/placement.md
# "Limits". The 20,000-node benchmark fleet is 31,667 (docs/performance.md).
MAX_PROOF_SIZE = 40_000


def proof_size(rf: ResolvedFleet) -> int:
    return len(rf.fleet.spec.tiers) + 1 + sum(len(tn.namespaces) for tn in rf.fleet.spec.tenants)


def cluster_namespaces(docs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The generated namespaces as stored, and one gpuplan does not manage (``default``)."""
    out = [namespace_object(d) for d in docs if d.get("kind") == "Namespace"]
    out.append(namespace_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": UNMANAGED_NAMESPACE}}))
    return out


def prove(rf: ResolvedFleet, docs: list[dict[str, Any]], exhaustive: bool = False) -> Proof:
    """Every tier's contract pod in every namespace. Admission is simulated once per
    namespace shape (:meth:`Cluster.shape`), placement once per tier (the pod is the same
    in every namespace), so a fleet of thousands of namespaces is proved in seconds.

    The shapes a policy refuses the pod in and none of whose namespaces is granted the tier
    are decided together (:meth:`Cluster.refusals`: one group per set of refusing bindings),
    so the work per tier follows the namespaces it is granted or admitted in, not the fleet's
    shapes; ``exhaustive`` evaluates every shape instead (a test holds both to the same
    verdicts)."""
    from gpuplan.dra.claims import is_dra
    from gpuplan.identity import contract_pod

    pools = pools_from_objects(rf, docs)
    index = PoolIndex(pools)
    order = {p.name: i for i, p in enumerate(karpenter_order(pools))}
    spot_pools = {p.owner for p in pools if "spot" in p.labels.get(CAPACITY_TYPE_LABEL, ())}
    cluster = Cluster(rf, docs)
    namespaces = cluster_namespaces(docs)
    shapes: dict[tuple, list[dict[str, Any]]] = {}
    for ns_obj in namespaces:
        shapes.setdefault(cluster.shape(ns_obj), []).append(ns_obj)
    groups = list(shapes.values())
    selected = [cluster.selected(g[0]) for g in groups]
    masks = None if exhaustive else cluster.policy_masks(selected)
    binding = cluster.binding_masks(selected)
    every = (1 << len(groups)) - 1
    shape_of = {ns["metadata"]["name"]: g for g, group in enumerate(groups) for ns in group}
    from gpuplan.queues import namespace_grants

    granted_to: dict[str, set[str]] = {}  # tier -> the namespaces granted it
    for ns, tiers in namespace_grants(rf).items():
        for t in tiers:
            granted_to.setdefault(t, set()).add(ns)
    group_names = [tuple(ns["metadata"]["name"] for ns in g) for g in groups]
    out: list[Group] = []
    for tier in rf.fleet.spec.tiers:
        res = rf.tier_resource(tier)
        if res is None or tier.pool not in rf.pool_by_name or is_dra(rf, rf.pool_by_name[tier.pool]):
            continue  # DRA pools: claims, not extended resources (not simulated)
        pod = contract_pod(rf, tier, "")
        del pod["metadata"]["namespace"]  # read by no policy: one evaluation for every namespace
        if ert_enabled(rf):
            pod = extended_resource_toleration(pod)
        fitting = sorted((p for p in index.candidates(pod) if fits(pod, p)),
                         key=lambda p: (p.name not in order, order.get(p.name, 0), p.name))
        landing = list(dict.fromkeys(p.owner for p in fitting))  # a pool's NodePools count as the pool
        capacity = _capacity(pod, fitting, spot_pools)
        request = contract_request(rf, tier)
        pod_verdicts = cluster.verdicts(pod, request)
        mine = granted_to.get(tier.name, frozenset())
        req = requests(pod)
        refused = refused_shapes(masks, pod_verdicts)
        granted = 0
        for name in mine:
            if name in shape_of:
                granted |= 1 << shape_of[name]
        # the shapes with a namespace granted the tier or a namespace a policy admits it in, one
        # by one; the rest (refused by a policy, granted nowhere: most of a large fleet's) at once
        exact = range(len(groups)) if refused is None else shape_bits(granted | (every & ~refused))
        for g in exact:
            names = group_names[g]
            denied = cluster.denials(pod, groups[g][0], request, selected[g], pod_verdicts, req)
            if mine.isdisjoint(names):  # most shapes: none of its namespaces is granted this tier
                out.append(Group(tier.name, names, False, denied, landing, tier.pool, capacity))
                continue
            split: dict[bool, list[str]] = {}
            for name in names:
                split.setdefault(name in mine, []).append(name)
            out += [Group(tier.name, tuple(ns), ok, denied, landing, tier.pool, capacity)
                    for ok, ns in sorted(split.items())]
        if refused is not None:
            for part, denied in cluster.refusals(pod_verdicts, refused & ~granted, binding):
                out.append(Group(tier.name, ShapeNamespaces(group_names, part, len(namespaces)), False, denied, landing, tier.pool,
                                 capacity))
    seen: dict[tuple, str] = {}
    twins = []
    for p in pools:
        other = seen.setdefault(p.identity(), p.name)
        if other != p.name:
            twins.append((other, p.name))
    return Proof(pools, out, twins, tuple(ns["metadata"]["name"] for ns in namespaces))


CAPACITY_ORDER = ("reserved", "spot", "on-demand")  # Karpenter's preference (nodepools.md:276)


def _capacity(pod: dict[str, Any], fitting: list[PoolNodes], spot_pools: set[str]
              ) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Per pool that allows spot: the capacity types the pod can land on (its NodePools' offerings,
    or the one its ``karpenter.sh/capacity-type`` selects)."""
    chosen = (pod["spec"].get("nodeSelector") or {}).get(CAPACITY_TYPE_LABEL)
    types: dict[str, set[str]] = {}
    for p in fitting:
        if p.owner in spot_pools:
            offered = set(p.labels.get(CAPACITY_TYPE_LABEL, ()))
            types.setdefault(p.owner, set()).update(offered & {chosen} if chosen else offered)
    return tuple((o, tuple(c for c in CAPACITY_ORDER if c in ts)) for o, ts in types.items())


def contract_request(rf: ResolvedFleet, tier) -> dict[str, Any] | None:
    """Who creates the tier's contract pod: a tenant, or for a queued tier the Job
    controller of the tier's example Job (Kueue admitted the Job)."""
    from gpuplan.queues import JOB_CONTROLLER, queue_controllers, queued_tiers

    if tier.name in queued_tiers(rf):
        ctrl = queue_controllers(rf)
        user = JOB_CONTROLLER if JOB_CONTROLLER in ctrl else (ctrl[0] if ctrl else "tenant")
        return {"operation": "CREATE", "userInfo": {"username": user}}
    return None


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
    owners = list(dict.fromkeys(x.owner for x in p.pools))
    head = ["tier", *owners, "admitted in", "refused in"]
    rows = []
    by_tier: dict[str, list[Group]] = {}
    for g in p.groups:
        by_tier.setdefault(g.tier, []).append(g)
    order = {n: i for i, n in enumerate(p.namespaces)}
    for tier, row in p.matrix():
        gs = by_tier[tier]
        rows.append([tier, *(row[x] for x in owners), _first(gs, False, order), _first(gs, True, order)])
    return head, rows


def _first(gs: list[Group], refused: bool, order: dict[str, int]) -> str:
    """:func:`_some` of the namespaces the tier's pod is refused (or admitted) in, in the tree's
    order, reading a few names of each shape: each shape's names are in that order already."""
    from heapq import nsmallest

    picked = [g for g in gs if bool(g.denied_by) == refused]
    total = sum(len(g.namespaces) for g in picked)
    heads = (n for g in picked for n in (g.namespaces.heads(SHOWN_NAMESPACES) if isinstance(g.namespaces, ShapeNamespaces)
                                          else g.namespaces[:SHOWN_NAMESPACES]))
    return _some(nsmallest(SHOWN_NAMESPACES, heads, key=order.__getitem__), total)


SHOWN_NAMESPACES = 6


def _some(names: list[str], total: int | None = None) -> str:
    """A few names and a count (``total``: of all, where ``names`` are the first few): a fleet
    of thousands of namespaces keeps one line per tier."""
    if not names:
        return "-"
    more = (len(names) if total is None else total) - SHOWN_NAMESPACES
    return ", ".join(names[:SHOWN_NAMESPACES]) + (f" and {more} more" if more > 0 else "")
