"""The round trip: build the draft with the compiler and compare what it
makes with the objects the cluster has (gpuplan.output.objdiff).

Before comparing, the cluster's objects lose what the API server wrote
(managedFields, resourceVersion, status) and take gpuplan's names where a
naming convention is the only difference (its ConfigMap and config names,
its quota names): each such rename is counted under its convention. Every
remaining difference is then either a named convention (``CONVENTIONS``) or
a GP959 warning.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import copy
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuplan.artifacts import dig
from gpuplan.diagnostics import Diagnostic, show
from gpuplan.importer import codes as C
from gpuplan.importer import karpenter_read as KR
from gpuplan.importer import sharing_read as SR
from gpuplan.importer import conventions as V
from gpuplan.importer.infer import Draft
from gpuplan.importer.read import Obj

# id -> what gpuplan does on purpose (printed with the count of differences it explains)
CONVENTIONS: dict[str, str] = {
    "labels": "gpuplan labels what it manages (app.kubernetes.io/managed-by, app.kubernetes.io/part-of, "
              "gpuplan.dev/pool|tier|tenant, tier.gpuplan.dev/<tier> on tenant namespaces)",
    "gitops": "gpuplan adds Argo CD / Flux sync annotations (sync waves, sync options)",
    "config-names": "gpuplan names its ConfigMaps gpuplan-device-plugin-config and gpuplan-mig-parted-config, "
                    "and each pool's configs <pool>-<hash8> / gpuplan-<pool>-<hash8> (the node labels follow)",
    "explicit-defaults": "gpuplan writes device-plugin sharing flags the cluster left at their upstream default "
                         "(renameByDefault, failRequestsGreaterThanOne: false)",
    "default-configs": "gpuplan keeps a default device-plugin config (gpuplan.default) and mig-parted all-disabled",
    "quotas": "gpuplan writes one ResourceQuota gpuplan-gpus per namespace listing every GPU resource "
              "(0 where not granted), gpuplan-tier-<tier> for enforced tiers and gpuplan-other-priorities",
    "priorityclasses": "gpuplan writes one PriorityClass per tier (gpuplan-<tier>, globalDefault: false, a "
                       "description naming its resource and pool)",
    "binding": "gpuplan labels each static pool's nodes gpuplan.dev/pool (its NoSchedule taint, which keeps pods "
               "off the nodes, is a difference)",
    "operator-namespace": "gpuplan manages the GPU Operator's namespace (pod-security label)",
    "nodepool": "gpuplan adds NodePool requirements the instance types already decide (GPU name, count, memory, "
                "arch, os): every node the NodePool launches carries those labels, so none drifts",
    "instance-selector": "gpuplan writes a NodePool that selects instance types by family, size, category or GPU "
                         "as the list of the instance types it selects (the same set: no node drifts)",
    "api-version": "gpuplan writes the AKSNodeClass as karpenter.azure.com/v1beta1; the cluster's deprecated "
                   "v1alpha2 is the same stored object (the CRD has no conversion webhook)",
    "own-objects": "gpuplan adds the objects it owns beside these (GPU Operator values, NodeFeatureRules, "
                   "admission policy, delivery, monitoring, Kueue, Volcano)",
}

KUEUE_KINDS = ("ResourceFlavor", "ClusterQueue", "Cohort", "LocalQueue", "WorkloadPriorityClass", "Topology")
DRA_KINDS = ("DeviceClass", "ResourceClaimTemplate")
VOLCANO_KINDS = ("Queue",)
COMPARED_KINDS = ("ConfigMap", "PriorityClass", "Namespace", "ResourceQuota", "NodePool", "EC2NodeClass",
                  "AKSNodeClass") \
    + KUEUE_KINDS + DRA_KINDS + VOLCANO_KINDS
# Requirements Karpenter's AWS provider sets as labels on every node from its instance type
# (aws/karpenter-provider-aws@v1.14.1 pkg/apis/v1/labels.go:160-163: instance-gpu-name, -count, -memory;
# kubernetes.io/arch and os from the instance type): a NodeClaim's labels then stay compatible
# with them, so adding them drifts nothing (kubernetes-sigs/karpenter@v1.14.1
# pkg/controllers/nodeclaim/disruption/drift.go:170-180 areRequirementsDrifted; requirements are
# `hash:"ignore"` in the static hash, pkg/apis/v1/nodeclaim.go:47).
DERIVED_REQUIREMENTS = ("karpenter.k8s.aws/instance-gpu-name", "karpenter.k8s.aws/instance-gpu-count",
                        "karpenter.k8s.aws/instance-gpu-memory", "kubernetes.io/arch", "kubernetes.io/os")


@dataclass
class RoundTrip:
    built: bool = False
    conventions: dict[str, int] = field(default_factory=dict)  # id -> differences it explains
    added_kinds: dict[str, int] = field(default_factory=dict)  # own objects by kind
    unexplained: list[str] = field(default_factory=list)  # "Kind ns/name: path" lines
    codes: list[Any] = field(default_factory=list)  # the Code of each (GP959, or a more specific one)
    # where each unexplained difference is in the input: (file, line, col), or None
    where: list[tuple[str, int | None, int | None] | None] = field(default_factory=list)
    compared: int = 0
    unchanged: int = 0
    diagnostics: list[Diagnostic] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)

    def finding(self, text: str, o: Obj | None = None, *sub: Any, code: Any = None) -> None:
        self.unexplained.append(text)
        self.codes.append(code or C.W_UNEXPLAINED)
        self.where.append(o.at(*sub) if o is not None else None)

    def count(self, conv: str, n: int = 1) -> None:
        self.conventions[conv] = self.conventions.get(conv, 0) + n

    def summary_lines(self) -> list[str]:
        if not self.built:
            return ["round trip: not made (the draft does not build)"]
        out = [f"round trip: {self.compared} cluster objects compared with what gpuplan builds, "
               f"{self.unchanged} identical"]
        for cid in sorted(self.conventions):
            out.append(f"  convention [{cid}] x{self.conventions[cid]}: {CONVENTIONS[cid]}")
        if self.added_kinds:
            kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.added_kinds.items()))
            out.append(f"  gpuplan adds its own objects: {kinds}")
        codes = ", ".join(sorted({c.code for c in self.codes}))
        out.append(f"  unexplained differences: {len(self.unexplained)}" + (f" ({codes} below)" if self.unexplained else ""))
        return out


def _strip(o: Obj) -> dict:
    d = copy.deepcopy(o.data)
    d.pop("status", None)
    meta = d.get("metadata")
    if isinstance(meta, dict):
        for k in V.SERVER_METADATA:
            meta.pop(k, None)
        ann = meta.get("annotations")
        if isinstance(ann, dict):
            for k in V.SERVER_ANNOTATIONS:
                ann.pop(k, None)
            if not ann:
                meta.pop("annotations")
        if d.get("kind") == "Namespace" and isinstance(meta.get("labels"), dict):
            meta["labels"].pop("kubernetes.io/metadata.name", None)  # the API server sets it
            if not meta["labels"]:
                meta.pop("labels")
        if meta.get("labels") is None:
            meta.pop("labels", None)
    if d.get("kind") == "Namespace" and d.get("spec") == {"finalizers": ["kubernetes"]}:
        d.pop("spec")  # the API server's default
    return d


def _key(d: dict) -> Any:
    from gpuplan.output.objdiff import ObjectKey

    meta = d.get("metadata") or {}
    return ObjectKey(d["apiVersion"].rpartition("/")[0], d["kind"], meta.get("namespace") or "", meta.get("name"))


def _platform_templates() -> dict[str, Any]:
    from gpuplan.provisioning import aks, capi, gke

    return {kind: m.read_template for m in (gke, aks, capi) for kind in m.TEMPLATE_KINDS}


PLATFORM_TEMPLATES = _platform_templates()


def _built_selectors(built: dict) -> dict[str, tuple[str | None, str | None]]:
    """pool -> (device-plugin config, mig config) the built tree selects by node label."""
    out: dict[str, tuple[str | None, str | None]] = {}
    for key, (_, d) in built.items():
        labels = None
        if key.kind == "NodeFeatureRule":
            rules = (d.get("spec") or {}).get("rules") or []
            labels = rules[0].get("labels") if rules else None
        elif key.kind == "NodePool":
            labels = ((((d.get("spec") or {}).get("template") or {}).get("metadata")) or {}).get("labels")
        elif key.kind in PLATFORM_TEMPLATES:  # a GKE, AKS or Cluster API pool's object: its node labels
            read = PLATFORM_TEMPLATES[key.kind](d)
            labels = read[1] if read else None
        if isinstance(labels, dict) and labels.get(V.POOL_LABEL):
            out[labels[V.POOL_LABEL]] = (labels.get(V.DEVICE_PLUGIN_CONFIG_LABEL), labels.get(V.MIG_CONFIG_LABEL))
    return out


def _nfr_expect(built: dict) -> dict[str, tuple[dict, list]]:
    out = {}
    for key, (_, d) in built.items():
        if key.kind == "NodeFeatureRule":
            rules = (d.get("spec") or {}).get("rules") or []
            if rules and isinstance(rules[0].get("labels"), dict):
                out[rules[0]["labels"].get(V.POOL_LABEL)] = (rules[0]["labels"], rules[0].get("taints") or [])
    return out


def build_draft(text: str, display: str) -> tuple[Any, dict[str, bytes], list[Diagnostic]]:
    """(resolved fleet or None, files, diagnostics) of the draft, built by the compiler."""
    from gpuplan.compiler import check_fleet, render_files

    with tempfile.TemporaryDirectory(prefix="gpuplan-import-") as tmp:
        path = Path(tmp) / "fleet.yaml"
        path.write_text(text, encoding="utf-8")
        checked = check_fleet(path, display=display)
    if checked.failed():
        return None, {}, checked.diagnostics
    return checked.resolved, dict(render_files(checked.resolved, display)), checked.diagnostics


def round_trip(draft: Draft, text: str, display: str) -> RoundTrip:
    from gpuplan.output.objdiff import diff_objects, tree_objects

    rt = RoundTrip()
    rf, files, diags = build_draft(text, display)
    if rf is None:
        errors = [d for d in diags if d.is_error]
        rt.diagnostics.append(C.E_DRAFT_INVALID.diag(
            f"the draft does not pass gpuplan validate ({len(errors)} error{'s' if len(errors) != 1 else ''}); "
            "no round trip", file=display, hint="fix the values named below, then run gpuplan diff"))
        rt.diagnostics += diags
        return rt
    rt.built, rt.files = True, files
    built = tree_objects(files)
    scope = draft.scope
    cfg = scope["configs"]
    sel = _built_selectors(built)
    op_ns = rf.fleet.spec.cluster.gpu_operator.namespace

    imported: dict[Any, tuple[str, Any]] = {}
    origin: dict[Any, Obj] = {}  # key -> the input object, for GP959's position

    def add(o: Obj, d: dict | None = None) -> None:
        d = _strip(o) if d is None else d
        imported[_key(d)] = (o.file, d)
        origin[_key(d)] = o

    # device-plugin configs, under gpuplan's names
    if cfg.dp_cm is not None:
        d = _strip(cfg.dp_cm)
        data = {}
        for p in scope["pools"]:
            old, new = p["_selected"][0] or cfg.dp_default, sel.get(p["name"], (None, None))[0]
            if old in cfg.dp and new:
                data[new] = (cfg.dp_cm.data.get("data") or {})[old]
                if old != new:
                    rt.count("config-names")
        if cfg.dp_default in cfg.dp:
            data[V.DEVICE_PLUGIN_DEFAULT_CONFIG] = (cfg.dp_cm.data.get("data") or {})[cfg.dp_default]
        if cfg.dp_cm.name != V.DEVICE_PLUGIN_CONFIGMAP or cfg.dp_cm.namespace != op_ns:
            rt.count("config-names")
        d["metadata"]["name"], d["metadata"]["namespace"], d["data"] = V.DEVICE_PLUGIN_CONFIGMAP, op_ns, data
        add(cfg.dp_cm, d)
    if cfg.mig_cm is not None:
        from gpuplan.render.yamlwriter import dump

        d = _strip(cfg.mig_cm)
        configs = {}
        for p in scope["pools"]:
            old, new = p["_selected"][1] or cfg.mig_default, sel.get(p["name"], (None, None))[1]
            if old in cfg.mig and new and new != V.MIG_ALL_DISABLED:
                configs[new] = cfg.mig[old]
                if old != new:
                    rt.count("config-names")
        if cfg.mig_default in cfg.mig:
            configs[V.MIG_ALL_DISABLED] = cfg.mig[cfg.mig_default]
        if cfg.mig_cm.name != V.MIG_PARTED_CONFIGMAP or cfg.mig_key != V.MIG_PARTED_CONFIG_KEY:
            rt.count("config-names")
        d["metadata"]["name"], d["metadata"]["namespace"] = V.MIG_PARTED_CONFIGMAP, op_ns
        d["data"] = {V.MIG_PARTED_CONFIG_KEY: dump({"version": "v1", "mig-configs": dict(sorted(configs.items()))})}
        add(cfg.mig_cm, d)
    for t in scope["tiers"]:
        if t.get("_pc") is not None:
            add(t["_pc"])
    quota_objs = {}
    for t in scope["tenants"]:
        for o in t["_ns"]:
            if o is not None:
                add(o)
    tenant_ns = {ns for t in scope["tenants"] for ns in t["namespaces"]}
    pc_tier = {(t.get("priorityClassName") or f"{V.PRIORITY_CLASS_PREFIX}{t['name']}"): t["name"] for t in scope["tiers"]}
    op_ns_obj = None
    for o in sorted(draft.scope.get("objects", ()), key=lambda o: (o.kind, o.namespace, o.name)):
        if o.kind == "Namespace" and not o.api_group and o.name == op_ns:
            op_ns_obj = o
        if o.kind == "ResourceQuota" and not o.api_group and o.namespace == op_ns:
            add(o)  # the operator's own pods' quota (GKE: gpuplan.provisioning.gke.OPERATOR_QUOTA)
        if o.kind == "ResourceQuota" and not o.api_group and o.namespace in tenant_ns:
            d = _strip(o)
            sc = ((d.get("spec") or {}).get("scopeSelector") or {}).get("matchExpressions") or []
            if not sc and not (d.get("spec") or {}).get("scopes"):
                new = V.QUOTA_NAME
            elif len(sc) == 1 and sc[0].get("operator") == "In" and len(sc[0].get("values") or []) == 1 \
                    and sc[0]["values"][0] in pc_tier:
                new = V.TIER_QUOTA_PREFIX + pc_tier[sc[0]["values"][0]]
            elif len(sc) == 1 and sc[0].get("operator") == "NotIn":
                new = V.OTHER_PRIORITIES_QUOTA
            else:
                new = o.name
            if (o.namespace, new) in quota_objs:
                new = o.name  # a second unscoped quota keeps its name (and shows as removed)
            quota_objs[(o.namespace, new)] = o
            if new != o.name:
                rt.count("quotas")
            d["metadata"]["name"] = new
            add(o, d)
    if op_ns_obj is not None:
        add(op_ns_obj)
    # Kueue, Volcano and DRA objects as they are: gpuplan names and writes them as the cluster has
    # them (Volcano's own root and default queues aside: its controller makes them, gpuplan writes neither)
    groups = {**{k: V.KUEUE_GROUP for k in KUEUE_KINDS}, **{k: "resource.k8s.io" for k in DRA_KINDS},
              **{k: V.VOLCANO_GROUP for k in VOLCANO_KINDS}}
    extra_ns = set()
    for o in sorted(draft.scope.get("objects", ()), key=lambda o: (o.kind, o.namespace, o.name)):
        if o.api_group == V.VOLCANO_GROUP and o.name in V.VOLCANO_OWN_QUEUES:
            continue
        if groups.get(o.kind) == o.api_group and o.name:
            add(o)
        elif o.kind == "Namespace" and not o.api_group and o.name == V.DRA_NAMESPACE:
            add(o)
            extra_ns.add(o.name)
    # Argo CD Applications of the names gpuplan gives its own, from Argo CD's namespace only: their
    # source is what Argo CD deploys (a tenant's same-named Application elsewhere is never read)
    from gpuplan.importer.kueue import engine_namespace

    argo_ns = engine_namespace(list(draft.scope.get("objects", ())), "Application")
    apps = set()
    for o in draft.scope.get("objects", ()):
        if o.kind == "Application" and o.api_group == "argoproj.io" and o.namespace == argo_ns and o.name:
            d = _strip(o)
            if _key(d) in built:
                add(o, d)
                apps.add(_key(d))
    for p in scope["pools"]:
        bclass = None
        if p.get("_nodepool") is not None:
            d = _strip(p["_nodepool"])
            _instance_selector(d, built.get(_key(d)), p["_nodepool"], rt)
            add(p["_nodepool"], d)
            bclass = dig((built.get(_key(d)) or (None, {}))[1], "spec", "template", "spec", "nodeClassRef", "name")
        if p.get("_floor") is not None:  # the pool's on-demand floor NodePool
            add(p["_floor"])
        if p.get("_nodeclass") is not None:
            # compared with the EC2NodeClass gpuplan builds for the pool (the NodePool's nodeClassRef,
            # a difference of its own, names it)
            d = _strip(p["_nodeclass"])
            if isinstance(bclass, str):
                d["metadata"]["name"] = bclass
            _bottlerocket_text(d, built.get(_key(d)), p["_nodeclass"], rt)
            _served_version(d, built.get(_key(d)), rt)
            add(p["_nodeclass"], d)
        for o in p.get("_overlays", ()):  # NodeOverlays whose requirements select the pool's instance types
            add(o)
    # a platform pool's object (ContainerNodePool, ManagedClustersAgentPool, MachineDeployment) as the
    # export has it, and every device plugin or mig-manager DaemonSet outside the operator: gpuplan
    # writes none, so each is listed as removed (GP943)
    provisioned = {o.kind for p in scope["pools"] for o in p.get("_provisioned", ())}
    for p in scope["pools"]:
        for o in p.get("_provisioned", ()):
            add(o)
    for o in scope.get("standalone", ()):
        add(o)

    mine = {V.DEVICE_PLUGIN_CONFIGMAP, V.MIG_PARTED_CONFIGMAP}
    compared = {}
    for k, v in built.items():
        in_scope = k in apps or k.kind in provisioned or k.kind == "NodeOverlay" and k in imported or \
            k.kind in COMPARED_KINDS and (
            k.kind != "ConfigMap" or k.name in mine) and (
            k.kind != "Namespace" or k.name in tenant_ns or k.name == op_ns or k.name in extra_ns)
        if in_scope:
            compared[k] = v
        elif k.kind:
            rt.added_kinds[k.kind] = rt.added_kinds.get(k.kind, 0) + 1
    if rt.added_kinds:
        rt.count("own-objects", sum(rt.added_kinds.values()))
    _manager_config(scope.get("kueue"), files, add, compared)
    diff = diff_objects(imported, compared)
    rt.compared, rt.unchanged = len(imported), diff.unchanged
    for c in diff.added:
        conv = _added_convention(c.key, op_ns)
        if conv:
            rt.count(conv)
        else:
            rt.finding(f"{c.key.label}: added")
    from gpuplan.importer.kueue_compare import queue_changes

    queues = [d for k, (_, d) in compared.items() if k.kind in ("ClusterQueue", "ResourceFlavor")]
    for c in diff.removed:
        o = origin.get(c.key)
        rt.finding(f"{c.key.label}: removed (gpuplan does not write it)", o,
                   code=C.W_STANDALONE if c.key.kind == "DaemonSet" else None)
        if c.key.kind == "ClusterQueue" and scope.get("kueue") is not None and o is not None:
            for text, at in queue_changes(scope["kueue"], o, queues):  # what its jobs get instead
                rt.finding(f"{c.key.label}: {text}", o, *at)
    for c in diff.changed:
        o = origin.get(c.key)
        for f in c.fields:
            conv = _field_convention(c.key, f)
            if conv:
                rt.count(conv)
            else:
                rt.finding(f"{c.key.label}: {f.path or '(whole)'} {f.kind}", o,
                           *(_steps(o.data, f.path) if o is not None else ()), code=behaviour_code(c.key, f.path))
    _compare_nodes(scope, built, rt)
    for line, at, code in list(zip(rt.unexplained, rt.where, rt.codes))[:50]:
        # at the input object that differs (an object only gpuplan writes: at the draft)
        f, ln, col = at if at is not None else (display, None, None)
        rt.diagnostics.append(code.diag(f"gpuplan would change {show(line)}", file=f, line=ln, col=col))
    if len(rt.unexplained) > 50:
        rt.diagnostics.append(C.W_UNEXPLAINED.diag(f"{len(rt.unexplained) - 50} more differences", file=display))
    return rt


def _is_instance_key(key: Any, cloud: str = "aws") -> bool:
    from gpuplan.cloud.karpenter_requirements import NORMALIZED, instance_keys

    k = NORMALIZED.get(key, key) if isinstance(key, str) else None
    return k in instance_keys(cloud)


def _instance_selector(d: dict, built: tuple[str, Any] | None, o: Obj, rt: RoundTrip) -> None:
    """A NodePool that selects its instance types by anything but an instance-type list is compared
    by the set of instance types each side's requirements admit (kubernetes-sigs/karpenter@v1.14.1
    pkg/scheduling/requirements.go:254-274, via gpuplan.cloud.karpenter_requirements): an equal set
    is the ``instance-selector`` convention; another set drifts the nodes whose instance type it
    no longer admits (pkg/controllers/nodeclaim/disruption/drift.go:170-180), GP966. The cluster's
    instance-type requirements are replaced by gpuplan's, so they show once, here."""
    from gpuplan.cloud.karpenter_requirements import select
    from gpuplan.importer.nap_read import is_nap

    cloud = "azure" if is_nap(o) else "aws"  # Karpenter on Azure: gpuplan's AKS VM-size table
    tspec = dig(d, "spec", "template", "spec")
    reqs = tspec.get("requirements") if isinstance(tspec, dict) else None
    breqs = dig(built[1], "spec", "template", "spec", "requirements") if built is not None else None
    if not isinstance(reqs, list) or not isinstance(breqs, list) or KR.lists_instance_types(reqs) is not None:
        return
    theirs, ours = select(reqs, cloud), select(breqs, cloud)
    min_values = sorted(r["key"] for r in reqs if isinstance(r, dict) and _is_instance_key(r.get("key"), cloud)
                        and r.get("minValues") is not None)
    tspec["requirements"] = [r for r in reqs if not (isinstance(r, dict) and _is_instance_key(r.get("key"), cloud))] \
        + [r for r in breqs if isinstance(r, dict) and _is_instance_key(r.get("key"), cloud)]
    if theirs.exact and theirs.types == ours.types and not min_values:
        rt.count("instance-selector")
        return
    gone, new = sorted(set(theirs.types) - set(ours.types)), sorted(set(ours.types) - set(theirs.types))
    why = [f"no longer launches {', '.join(gone)}"] if gone else []
    why += [f"adds {', '.join(new)}"] if new else []
    why += [f"drops minValues on {', '.join(min_values)}"] if min_values else []
    why += ["the cluster's requirements are not all in gpuplan's instance table"] if not theirs.exact else []
    rt.finding(f"{_key(d).label}: spec.template.spec.requirements select other instance types "
               f"({'; '.join(why)})", o, "spec", "template", "spec", "requirements", code=C.W_DRIFT)


def _served_version(d: dict, built: tuple[str, Any] | None, rt: RoundTrip) -> None:
    """An AKSNodeClass exported as the deprecated ``v1alpha2``: both versions are served from one stored
    object and the CRD declares no conversion (Azure/karpenter-provider-azure@v1.14.2
    pkg/apis/crds/karpenter.azure.com_aksnodeclasses.yaml:34-35 deprecated, :921-922 and :1821-1822
    served, v1beta1 stored), so the API server only rewrites ``apiVersion``."""
    ours = dig(built[1], "apiVersion") if built is not None else None
    if d.get("apiVersion") == "karpenter.azure.com/v1alpha2" and ours == "karpenter.azure.com/v1beta1":
        d["apiVersion"] = ours
        rt.count("api-version")


def _bottlerocket_text(d: dict, built: tuple[str, Any] | None, o: Obj, rt: RoundTrip) -> None:
    """A Bottlerocket userData with the settings gpuplan writes, in other text (or leaving the device
    plugin's settings at their defaults, gpuplan.importer.sharing_read): Bottlerocket and Karpenter read
    the TOML's values (aws/karpenter-provider-aws@v1.14.1
    pkg/providers/amifamily/bootstrap/bottlerocket.go:37-116 parses it and marshals it again), but the
    EC2NodeClass hash covers the text (pkg/apis/v1/ec2nodeclass.go:597-610): the nodes drift once.
    One difference, named as such, instead of a changed userData."""
    theirs = dig(d, "spec", "userData")
    ours = dig(built[1], "spec", "userData") if built is not None else None
    if not isinstance(theirs, str) or not isinstance(ours, str) or theirs == ours:
        return
    meaning = SR.settings_meaning(theirs)
    if meaning is not None and meaning == SR.settings_meaning(ours):
        d["spec"]["userData"] = ours
        rt.finding(f"{_key(d).label}: spec.userData has the same Bottlerocket settings in other text (the "
                   "EC2NodeClass hash covers the text: its nodes are replaced once)", o, "spec", "userData",
                   code=C.W_DRIFT)


def _added_convention(key: Any, op_ns: str) -> str | None:
    if key.kind == "ResourceQuota" and (key.name in (V.QUOTA_NAME, V.OTHER_PRIORITIES_QUOTA)
                                        or key.name.startswith(V.TIER_QUOTA_PREFIX)):
        return "quotas"
    if key.kind == "PriorityClass":
        return "priorityclasses"
    if key.kind == "Namespace" and key.name == op_ns:
        return "operator-namespace"
    if key.kind == "ConfigMap":
        return "default-configs"
    return None


_LABELS = re.compile(r'metadata\.labels(\["(app\.kubernetes\.io/(managed-by|part-of)|gpuplan\.dev/[a-z]+|tier\.gpuplan\.dev/[^"]+)"\])?\Z')
_GITOPS = re.compile(r'metadata\.annotations(\["(argocd\.argoproj\.io|kustomize\.toolkit\.fluxcd\.io|helm\.toolkit\.fluxcd\.io)/[^"]+"\])?\Z')


def _field_convention(key: Any, f: Any) -> str | None:
    p = f.path
    if _LABELS.match(p):
        if p == "metadata.labels" and isinstance(f.new, dict) and isinstance(f.old, dict):
            return None
        return "labels"
    if _GITOPS.match(p):
        return "gitops"
    if key.kind == "Namespace" and p.startswith('metadata.labels["pod-security.kubernetes.io/'):
        return "operator-namespace"
    if key.kind == "PriorityClass" and (p == "globalDefault" and f.new is False or p == "description"
                                        and f.kind == "added"):
        return "priorityclasses"
    if key.kind == "ResourceQuota" and p.startswith('spec.hard["requests.') and f.kind == "added" and f.new == "0":
        return "quotas"
    # DRA: every DRA tier's class and the driver chart's classes get a "0" quota key (gpuplan.lower.dra)
    if key.kind == "ResourceQuota" and p.endswith('.deviceclass.resource.k8s.io/devices"]') and f.kind == "added" \
            and f.new == "0":
        return "quotas"
    if key.kind == "ConfigMap" and key.name == V.DEVICE_PLUGIN_CONFIGMAP and f.kind == "added" \
            and p == f'data["{V.DEVICE_PLUGIN_DEFAULT_CONFIG}"]':
        return "default-configs"
    if key.kind == "ConfigMap" and key.name == V.DEVICE_PLUGIN_CONFIGMAP and f.kind == "added" and f.new is False \
            and p.endswith((".renameByDefault", ".failRequestsGreaterThanOne")):
        return "explicit-defaults"
    if key.kind == "ConfigMap" and key.name == V.MIG_PARTED_CONFIGMAP and f.kind == "added" \
            and V.MIG_ALL_DISABLED in p:
        return "default-configs"
    # NodePool template labels, taints and the rest of spec.template are in the NodePool's hash:
    # any change drifts every node (areStaticFieldsDrifted, drift.go:154-167; NodePool.Hash,
    # pkg/apis/v1/nodepool.go:336-342); disruption changes consolidation; every EC2NodeClass field
    # drifts the nodes: the spec is hashed whole (aws/karpenter-provider-aws@v1.14.1
    # pkg/apis/v1/ec2nodeclass.go:597-610), and the selector terms the hash ignores drift through
    # the AMI, subnet and security group checks (pkg/cloudprovider/drift.go:44-123): none is a convention.
    if key.kind == "NodePool" and f.kind == "added" and isinstance(f.new, dict) \
            and f.new.get("key") in DERIVED_REQUIREMENTS \
            and p == f'spec.template.spec.requirements[key={f.new.get("key")}]':
        return "nodepool"
    return None


def behaviour_code(key: Any, path: str) -> Any:
    """The code of a difference a controller acts on: Karpenter drift (GP966) or consolidation
    (GP967), Argo CD's source (GP968); else GP959."""
    if key.kind == "EC2NodeClass" or key.kind == "NodePool" and path.startswith("spec.template"):
        return C.W_DRIFT
    if key.kind == "NodePool" and path.startswith("spec.disruption"):
        return C.W_CONSOLIDATION
    if key.kind == "Application" and path.startswith(("spec.source", "spec.sources")):
        return C.W_DELIVERY
    return C.W_UNEXPLAINED


def _compare_nodes(scope: dict, built: dict, rt: RoundTrip) -> None:
    expect = _nfr_expect(built)
    for p in scope["pools"]:
        if p["name"] not in expect:
            continue
        labels, taints = expect[p["name"]]
        for n in p["_nodes"]:
            have = n.labels
            for k, v in sorted(labels.items()):
                if have.get(k) == v:
                    continue
                if k == V.POOL_LABEL:
                    rt.count("binding")
                elif k in (V.DEVICE_PLUGIN_CONFIG_LABEL, V.MIG_CONFIG_LABEL):
                    rt.count("config-names" if have.get(k) is not None or k == V.MIG_CONFIG_LABEL else "default-configs")
                else:
                    rt.finding(f"Node {n.name}: label {k} {'changed' if k in have else 'added'}", n,
                               "metadata", "labels", *((k,) if k in have else ()))
            raw = (n.data.get("spec") or {}).get("taints") or []
            for t in taints:
                if any(isinstance(x, dict) and x.get("key") == t["key"] and x.get("effect") == t["effect"]
                       and (x.get("value") or None) == t.get("value") for x in raw):
                    continue
                # a new NoSchedule taint keeps every pod that does not tolerate it off the node
                rt.finding(f"Node {n.name}: taint {t['key']}:{t['effect']} added", n, "spec", "taints")


_STEP = re.compile(r'\.?([A-Za-z0-9_$-]+)|\["((?:[^"\\]|\\.)*)"\]|\[([0-9]+)\]|\[name=([^\]]*)\]')


def _steps(data: Any, path: str) -> tuple:
    """An objdiff field path (``spec.hard["x"]``, ``a[0]``, ``a[name=b]``) as the
    keys and indices of ``data``, as far as they go (for Manifest.locate)."""
    out: list[Any] = []
    node = data
    for m in _STEP.finditer(path or ""):
        if m[1] is not None or m[2] is not None:
            step: Any = m[1] if m[1] is not None else m[2].replace('\\"', '"').replace("\\\\", "\\")
            if not isinstance(node, dict) or step not in node:
                break
        elif m[3] is not None:
            step = int(m[3])
            if not isinstance(node, list) or step >= len(node):
                break
        else:
            idx = [i for i, x in enumerate(node) if isinstance(x, dict) and x.get("name") == m[4]] \
                if isinstance(node, list) else []
            if not idx:
                break
            step = idx[0]
        out.append(step)
        node = node[step]
    return tuple(out)


def _manager_config(kq: Any, files: dict[str, bytes], add: Any, compared: dict) -> None:
    """The Kueue chart's manager ConfigMap against the Configuration gpuplan puts
    in kueue/values.yaml: the cluster's ConfigMap with gpuplan's text in its key."""
    if kq is None or kq.config_obj is None:
        return
    from gpuplan.output.objdiff import yaml_documents

    raw = next((b for p, b in sorted(files.items()) if p.endswith(V.KUEUE_VALUES_PATH)), None)
    docs = yaml_documents(raw.decode("utf-8"), V.KUEUE_VALUES_PATH) if raw is not None else None
    text = ((docs or [{}])[0].get("managerConfig") or {}).get("controllerManagerConfigYaml") \
        if docs and isinstance(docs[0], dict) else None
    if not isinstance(text, str):
        return
    o = kq.config_obj
    d = _strip(o)
    add(o, d)
    mine = copy.deepcopy(d)
    # the same Configuration in other whitespace (the chart's template may add a newline) is no change
    if yaml_documents(text, V.KUEUE_VALUES_PATH) != [kq.config]:
        mine["data"] = {**(mine.get("data") or {}), V.KUEUE_CONFIG_KEY: text}
    compared[_key(mine)] = (V.KUEUE_VALUES_PATH, mine)
