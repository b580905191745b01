"""Moving pools between the device plugin and DRA: what changes, and in what order.

``gpuplan plan FLEET --base OLD`` adds this section when a pool's allocation
back-end differs between OLD and FLEET. Both specs are compiled in memory and
compared object by object, and the plan says:

- which generated objects are added, removed or changed;
- which tiers' pods keep working unchanged (their DeviceClass carries the
  device-plugin resource as ``extendedResourceName``) and which must switch
  to a ResourceClaimTemplate;
- which ResourceQuota keys change, per namespace;
- the ordered steps per pool. NVIDIA supports no in-place switch: a node is
  cordoned and drained, relabelled (one label, ``nvidia.com/gpu.deploy.device-plugin``,
  decides which back-end runs, see ``gpuplan.lower.dra``), checked, and only
  then uncordoned;
- a check on the generated trees themselves: in the old tree, in the new tree
  and in between (new DRA driver and classes synced, old node labels), no pool
  is selected by both the operator's device-plugin DaemonSet and the DRA
  kubelet plugin. The selection is modelled as the controllers do it: the
  device plugin runs where the label is not ``"false"`` (the operator sets
  ``"true"`` where it is absent, ``NVIDIA/gpu-operator@v26.7.0 :
  controllers/state_manager.go`` L476-483) and the operator values enable
  it; the DRA kubelet plugin runs where its Helm ``kubeletPlugin.nodeSelector``
  and required node affinity (the DRA pools' ``gpuplan.dev/pool``, the MIG gate) match.

Stage: report (docs/architecture.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpuplan.dra.claims import DEVICE_PLUGIN_DEPLOY_LABEL, pool_backend, tier_claim

if TYPE_CHECKING:
    from gpuplan.resolve import PoolView, ResolvedFleet


@dataclass(frozen=True)
class PoolMove:
    pool: str
    old: str
    new: str
    nodes: tuple[str, ...]  # static nodes; empty for Karpenter pools
    karpenter: bool
    steps: tuple[str, ...]


@dataclass(frozen=True)
class TierEffect:
    tier: str
    pool: str
    resource: str | None
    unchanged: bool  # pods that request `resource` keep working
    how: str


@dataclass(frozen=True)
class QuotaChange:
    namespace: str
    quota: str
    key: str
    old: str | None
    new: str | None


@dataclass
class Migration:
    moves: list[PoolMove]
    objects: list[tuple[str, str]] = field(default_factory=list)  # (added|removed|changed, label)
    tiers: list[TierEffect] = field(default_factory=list)
    quotas: list[QuotaChange] = field(default_factory=list)
    overlaps: list[str] = field(default_factory=list)  # "<state>: pool <p>" with both back-ends

    @property
    def empty(self) -> bool:
        return not self.moves


# --- the trees --------------------------------------------------------------------------


def _docs(files: dict[str, bytes], path: str) -> list[dict[str, Any]]:
    data = files.get(path)
    if data is None:
        return []
    return _mappings(data, path)


def _mappings(data: bytes, path: str) -> list[dict[str, Any]]:
    """The mapping documents of a file, through the bounded reader (nothing
    for a file it refuses): every tree YAML is read the same bounded way."""
    from gpuplan.output.objdiff import yaml_documents

    return [d for d in yaml_documents(data, path) or () if isinstance(d, dict)]


def _pool_labels(files: dict[str, bytes], pool: str) -> dict[str, str] | None:
    """The node labels the tree gives a pool (NodeFeatureRule or NodePool template)."""
    for d in _docs(files, f"pools/{pool}/node-labels.yaml"):
        return dict(d["spec"]["rules"][0]["labels"])
    for d in _docs(files, f"pools/{pool}/nodepool.yaml"):
        if d.get("kind") == "NodePool":
            return dict(d["spec"]["template"]["metadata"].get("labels", {}))
    return None


def backends(labels: dict[str, str], files: dict[str, bytes]) -> set[str]:
    """Which back-ends run on a node with these labels, given the tree's installation."""
    out = set()
    op = _docs(files, "gpu-operator/values.yaml")
    dp_enabled = bool(op) and op[0].get("devicePlugin", {}).get("enabled", True)
    if dp_enabled and labels.get(DEVICE_PLUGIN_DEPLOY_LABEL, "true") != "false":
        out.add("device-plugin")
    dra = _docs(files, "dra-driver/values.yaml")
    if dra:
        plugin = dra[0].get("kubeletPlugin", {})
        selector = plugin.get("nodeSelector", {})
        if all(labels.get(k) == v for k, v in selector.items()) and _affinity_matches(plugin.get("affinity"), labels):
            out.add("dra")
    return out


def _affinity_matches(affinity: Any, labels: dict[str, str]) -> bool:
    """A required node affinity against a node's labels: its terms ORed, each term's expressions
    ANDed (k8s.io/api@v0.36.3 core/v1/types.go lines 3771-3794); none: any node."""
    terms = ((affinity or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms")
    if not terms:
        return True

    def ok(e: dict[str, Any]) -> bool:
        has, val = e["key"] in labels, labels.get(e["key"])
        return {"In": has and val in e.get("values", ()), "NotIn": not has or val not in e.get("values", ()),
                "Exists": has, "DoesNotExist": not has}.get(e["operator"], False)
    return any(all(ok(e) for e in t.get("matchExpressions", ())) for t in terms)


def _overlaps(old: dict[str, bytes], new: dict[str, bytes], pools: list[str]) -> list[str]:
    """Every (state, pool) where a node would run both back-ends."""
    between = {k: v for k, v in old.items()}
    for k in ("dra-driver/values.yaml", "gpu-operator/values.yaml"):
        if k in new:
            between[k] = new[k]  # the driver and operator synced first, labels still old
    out = []
    for state, files, label_files in (("before", old, old), ("in between", between, old), ("after", new, new)):
        for pool in pools:
            labels = _pool_labels(label_files, pool)
            if labels is not None and len(backends(labels, files)) > 1:
                out.append(f"{state}: pool {pool}")
    return out


def _quota_hard(files: dict[str, bytes]) -> dict[tuple[str, str], dict[str, str]]:
    out = {}
    for path, data in files.items():
        if not path.endswith("resourcequotas.yaml"):
            continue
        for d in _mappings(data, path):
            if d.get("kind") == "ResourceQuota":
                out[(d["metadata"]["namespace"], d["metadata"]["name"])] = dict(d["spec"]["hard"])
    return out


def _quota_changes(old: dict[str, bytes], new: dict[str, bytes]) -> list[QuotaChange]:
    a, b = _quota_hard(old), _quota_hard(new)
    out = []
    for ns, name in sorted(set(a) | set(b)):
        ha, hb = a.get((ns, name), {}), b.get((ns, name), {})
        for key in sorted(set(ha) | set(hb)):
            if ha.get(key) != hb.get(key):
                out.append(QuotaChange(ns, name, key, ha.get(key), hb.get(key)))
    return out


# --- steps -------------------------------------------------------------------------------


def _steps(pv: "PoolView", old: str, new: str) -> tuple[str, ...]:
    to_dra = new == "dra"
    label = f"{DEVICE_PLUGIN_DEPLOY_LABEL}={'false' if to_dra else '(removed)'}"
    target = "the DRA driver's kubelet plugin" if to_dra else "the GPU Operator's device plugin"
    # the kubelet drops a stopped device plugin's resources from the node only after
    # endpointStopGracePeriod (5 minutes, pkg/kubelet/cm/devicemanager/types.go); until then
    # the node still lists them and the scheduler will not serve them through DRA
    check = ("no nvidia.com/* left in the node's capacity (the kubelet removes a stopped device "
             "plugin's resources about 5 minutes after it stops), and its devices in "
             "`kubectl get resourceslices --field-selector spec.nodeName=<node>`" if to_dra else
             "the pool's resources in the node's allocatable, and no ResourceSlice of driver gpu.nvidia.com "
             "for the node")
    sync = ("merge and sync: the DRA driver release and the DeviceClasses come first (Argo CD sync waves -1 "
            "and 0; Flux: the operator Kustomization before the tree); the driver's kubelet plugin selects "
            f"{DEVICE_PLUGIN_DEPLOY_LABEL}=false, so it starts on no node yet" if to_dra else
            "merge and sync: the operator values, DeviceClasses and claim templates change first")
    if pv.pool.karpenter is not None:
        # Leaving DRA, the kubelet plugin's affinity (the DRA pools' gpuplan.dev/pool) drops the pool
        # at the sync, before Karpenter replaces its nodes; a pod holding a claim there cannot finish
        # terminating without it: the kubelet unprepares its claims through the plugin before the pod
        # is done (kubernetes v1.36.3 pkg/kubelet/kubelet.go:2388-2395, SyncTerminatingPod;
        # pkg/kubelet/cm/dra/manager.go:667, no plugin registered is an error).
        leave = () if to_dra else (
            "before merging, scale the pool's DRA workloads down (or drain its nodes): the DRA kubelet "
            "plugin leaves the pool's nodes at the sync, and a pod holding a ResourceClaim on a node "
            "without it stays Terminating",)
        return (
            *leave,
            sync,
            f"the NodePool template now carries {label}: Karpenter sees the NodePool drifted and replaces "
            "every node, cordoning and draining each before it terminates it",
            f"new nodes register with {label}: only {target} ever runs on them",
            f"check each new node: {check}",
        )
    nodes = " ".join(pv.pool.nodes or ())
    return (
        f"before merging, cordon every node of the pool: `kubectl cordon {nodes}`",
        "drain them (`kubectl drain <node> --ignore-daemonsets --delete-emptydir-data`): no pod of the "
        "pool's tiers may hold a device of the old back-end",
        sync,
        f"relabel: the pool's NodeFeatureRule (wave 1) sets {label}, nfd-master applies it; the old "
        f"back-end's DaemonSet pod leaves the nodes and {target} starts — on cordoned nodes, so no pod "
        "lands while both may briefly run",
        f"switch: check each node — {check} — then `kubectl uncordon` it",
    )


def _tier_effects(old_rf: "ResolvedFleet", new_rf: "ResolvedFleet", moved: set[str]) -> list[TierEffect]:
    out = []
    for t in new_rf.fleet.spec.tiers:
        if t.pool not in moved:
            continue
        res = old_rf.tier_resource(old_rf.tier_by_name[t.name]) if t.name in old_rf.tier_by_name else None
        claim = tier_claim(new_rf, t)
        if claim is None:
            out.append(TierEffect(t.name, t.pool, res, res is not None,
                                  f"pods request {res} from the device plugin again"))
        elif claim.extended_resource is not None and claim.extended_resource == res:
            out.append(TierEffect(t.name, t.pool, res, True,
                                  f"pods requesting {res} keep working: DeviceClass {claim.class_name} "
                                  f"serves it as extendedResourceName"))
        else:
            out.append(TierEffect(t.name, t.pool, res, False,
                                  f"pods must claim through ResourceClaimTemplate gpuplan-{t.name} "
                                  f"(resources.claims), not request {res}"))
    return out


def migration_plan(old_rf: "ResolvedFleet", new_rf: "ResolvedFleet",
                   trees: tuple[dict[str, bytes], dict[str, bytes]]) -> Migration:
    """``trees``: the two rendered trees (old, new), which the driver renders once."""
    from gpuplan.output.objdiff import diff_trees

    moves = []
    for pv in new_rf.pools:
        opv = old_rf.pool_by_name.get(pv.name)
        if opv is None:
            continue
        a, b = pool_backend(old_rf, opv), pool_backend(new_rf, pv)
        if a != b:
            moves.append(PoolMove(pv.name, a, b, tuple(pv.pool.nodes or ()), pv.pool.karpenter is not None,
                                  _steps(pv, a, b)))
    m = Migration(moves)
    if not moves:
        return m
    old, new = trees
    d = diff_trees(old, new)
    m.objects = ([("added", c.key.label) for c in d.added] + [("removed", c.key.label) for c in d.removed]
                 + [("changed", c.key.label) for c in d.changed])
    m.tiers = _tier_effects(old_rf, new_rf, {mv.pool for mv in moves})
    m.quotas = _quota_changes(old, new)
    m.overlaps = _overlaps(old, new, [p.name for p in new_rf.pools])
    return m


# --- rendering ----------------------------------------------------------------------------


def to_data(m: Migration) -> dict[str, Any]:
    return {
        "pools": [{"pool": p.pool, "from": p.old, "to": p.new, "nodes": list(p.nodes), "karpenter": p.karpenter,
                   "steps": list(p.steps)} for p in m.moves],
        "objects": [{"change": c, "object": o} for c, o in m.objects],
        "tiers": [{"tier": t.tier, "pool": t.pool, "resource": t.resource, "podsUnchanged": t.unchanged,
                   "how": t.how} for t in m.tiers],
        "quotas": [{"namespace": q.namespace, "quota": q.quota, "key": q.key, "old": q.old, "new": q.new}
                   for q in m.quotas],
        "bothBackends": list(m.overlaps),
    }


def _lines(m: Migration, md: bool) -> list[str]:
    from gpuplan.report.markdown import md_code, md_text

    code = md_code if md else (lambda s: s)
    t = md_text if md else (lambda s: s)  # a value (or a line that quotes one) as inert Markdown
    h = (lambda s: f"### {s}") if md else (lambda s: s + ":")
    out = ["## Allocation back-end migration" if md else "Allocation back-end migration", ""]
    for p in m.moves:
        where = "Karpenter nodes" if p.karpenter else f"{len(p.nodes)} node(s)"
        out.append(h(t(f"pool {p.pool}: {p.old} → {p.new} ({where})")))
        out += [f"{i}. {t(s)}" for i, s in enumerate(p.steps, 1)]
        out.append("")
    if m.overlaps:
        out.append("**A node would run both back-ends:** " + "; ".join(map(t, m.overlaps)) if md else
                   "A NODE WOULD RUN BOTH BACK-ENDS: " + "; ".join(m.overlaps))
    else:
        out.append("No node runs both back-ends: not before, not between the driver sync and the relabel, "
                   "not after.")
    out.append("")
    out.append(h("pods"))
    out += [f"- {code(x.tier)}: {t(x.how)}" for x in m.tiers] or ["- no tier on the moved pools"]
    out.append("")
    out.append(h("quota keys"))
    for q in m.quotas:
        change = (f"added = {q.new}" if q.old is None else f"removed (was {q.old})" if q.new is None
                  else f"{q.old} → {q.new}")
        out.append(f"- {t(f'{q.namespace}/{q.quota}')}: {code(q.key)} {t(change)}")
    if not m.quotas:
        out.append("- none")
    out.append("")
    out.append(h(f"objects ({len(m.objects)})"))
    out += [f"- {c}: {code(o)}" for c, o in m.objects]
    return out


def render_text(m: Migration) -> str:
    return "\n".join(_lines(m, False)) + "\n"


def render_markdown(m: Migration) -> str:
    return "\n".join(_lines(m, True)) + "\n"


def append_to_report(fmt: str, report: str, m: Migration) -> str:
    """The plan report with the migration section added (nothing when no pool moved)."""
    if m.empty:
        return report
    if fmt == "json":
        data = json.loads(report)
        data["migration"] = to_data(m)
        return json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False) + "\n"
    if fmt == "markdown":
        return report.rstrip("\n") + "\n\n" + render_markdown(m)
    if fmt == "html":
        import html

        body = "<pre>" + html.escape(render_text(m)) + "</pre>"
        return report.replace("</body>", body + "</body>", 1) if "</body>" in report else report + body
    return report.rstrip("\n") + "\n\n" + render_text(m)
