"""Kept state: what the previous tree may hand to the next build, and the
judgement of a tree's kept state against a trusted base tree.

Some objects must outlive their spec entry (docs/transitions.md): device-plugin
and mig-parted config names that old nodes still carry
(:func:`gpuplan.identity.kept_plugin_configs`) and AppProject destinations that a
pending prune needs (:func:`gpuplan.lower.gitops.kept_namespaces`). The build
reads them back from the existing ``generated/`` tree, which a pull request can
edit like any file. So a build keeps only what a previous build could have
written:

- a config name that its ConfigMap's ``gpuplan.dev/kept-configs`` annotation
  lists, of the shape ``<pool>-<8 hex digits>``, whose digits are the content
  hash of its body, recomputed (:func:`gpuplan.identity.content_name`; checked
  in ``identity._kept``);
- a destination of the old AppProject that is not reserved (a Kubernetes system
  namespace, ``kube-*``, or one the spec exempts from admission:
  :func:`gpuplan.identity.exempt_namespaces`) and that the old annotation lists
  or the old tree managed (a Namespace object or an Application destination
  there).

Everything else is discarded and reported (GP810), and kept state is bounded
(:data:`MAX_KEPT`, :data:`MAX_ANNOTATION_BYTES`). What the tree alone cannot
tell, a hand edit that adds a consistent entry, is judged against the tree the
cluster was synced from: ``gpuplan check --base`` and ``gpuplan diff --old``
refuse kept state the base tree does not have (GP811, :func:`judge`).

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from gpuplan.artifacts import dig
from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity

# The API server refuses more than 256 KiB of annotations on one object
# (kubernetes v1.36.3 staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta.go:36,
# TotalAnnotationSizeLimitB): a longer kept annotation was never applied.
MAX_ANNOTATION_BYTES = 256 * 1024
# Kept names per annotation: one per pool change whose old nodes are still up; more is a hand edit.
MAX_KEPT = 1000
# Files of the old tree scanned for evidence that it managed a namespace.
MAX_EVIDENCE_FILES = 20_000

DEVICE_PLUGIN_CONFIG_FILE = "gpu-operator/device-plugin-config.yaml"
MIG_PARTED_CONFIG_FILE = "gpu-operator/mig-parted-config.yaml"


W_DISCARDED = Code(
    "GP810", "kept state discarded", Severity.WARNING,
    "The existing generated tree keeps state for objects that outlive their spec entry: config names "
    "old nodes still carry (the ConfigMaps' gpuplan.dev/kept-configs annotation) and AppProject "
    "destinations a pending prune needs (gpuplan.dev/kept-namespaces). A build keeps only what a "
    "previous build could have written: a config name whose hash is that of its body, a destination "
    "the old tree managed and that is no system namespace or one exempt from admission. The rest, "
    "and anything past the bounds, is dropped and named here.",
    bad="# a hand edit adds kube-system to the project's destinations\n"
        "$ gpuplan build --force fleet.yaml",
    good="# destinations come from the spec: a tenant's namespaces, the operator's namespace",
)
E_NOT_IN_BASE = Code(
    "GP811", "kept state the base tree does not have", Severity.ERROR,
    "`gpuplan check --base` and `gpuplan diff --old` judge the tree's kept state against the base "
    "branch's tree, the one the cluster was synced from: a kept destination must be a destination "
    "of the base tree's AppProject, a kept config name a config of the base tree's ConfigMap with "
    "the same body. Anything else was added by this change (by hand, or kept for a namespace or "
    "config that never reached the cluster) and would widen what the cluster accepts.",
    bad="$ gpuplan check --base base/generated fleet.yaml   # a pull request adds a kept destination",
    good="$ gpuplan build fleet.yaml --retire-namespace NAME   # and commit the tree",
)
W_RETIRE_NOTHING = Code(
    "GP812", "retired name is not kept", Severity.WARNING,
    "`--retire-config`, `--retire-namespace` and `--retire-resource` drop a name the existing tree keeps "
    "for old nodes or a pending prune. A name the tree does not keep (a typo, a name already retired, one still in "
    "use by the spec) retires nothing.",
    bad="$ gpuplan build fleet.yaml --retire-namespace vison-train",
    good="$ gpuplan build fleet.yaml --retire-namespace vision-train",
)

W_ADVANCE_NOTHING = Code(
    "GP992", "advanced rollout has nothing to move", Severity.WARNING,
    "`gpuplan build --advance POOL` moves the next step of a static pool's rollout: the nodes the tree "
    "still holds at an old MIG layout or device-plugin config (their own rule of the pool's "
    "NodeFeatureRule) take the pool's. A pool that is not static, not in the spec, or whose nodes all "
    "carry the pool's labels already has nothing to move.",
    bad="$ gpuplan build fleet.yaml --advance inferenc",
    good="$ gpuplan review fleet.yaml --base main   # lists each pool's rollout and its next step",
)

CODES = (W_DISCARDED, E_NOT_IN_BASE, W_RETIRE_NOTHING, W_ADVANCE_NOTHING)

Docs = Callable[[str], list[dict]]


# --- Reading kept state back ----------------------------------------------------------------


def kept_configs_annotation(meta: Any) -> tuple[dict[str, str], str | None]:
    """A ConfigMap's ``gpuplan.dev/kept-configs`` (name -> pool) and, when some or all of it
    is not taken, why."""
    from gpuplan.identity import KEPT_CONFIGS_ANNOTATION

    kept = dig(meta, "annotations", KEPT_CONFIGS_ANNOTATION) if isinstance(meta, dict) else None
    if kept is None:
        return {}, None
    if not isinstance(kept, str):
        return {}, "the annotation is not a string"
    if len(kept) > MAX_ANNOTATION_BYTES:
        return {}, f"the annotation is longer than {MAX_ANNOTATION_BYTES // 1024} KiB"
    try:
        parsed = json.loads(kept)
    except (ValueError, RecursionError):
        return {}, "the annotation is not a JSON object"
    if not isinstance(parsed, dict):
        return {}, "the annotation is not a JSON object"
    out = {k: v for k, v in parsed.items() if isinstance(k, str) and isinstance(v, str)}
    why = None if len(out) == len(parsed) else "entries that are not name: pool strings"
    if len(out) > MAX_KEPT:
        out = dict(sorted(out.items())[:MAX_KEPT])
        why = f"more than {MAX_KEPT} names"
    return out, why


def reserved_destination(rf, ns: str) -> str | None:
    """Why ``ns`` is never kept as a destination, or None."""
    from gpuplan.identity import exempt_namespaces
    from gpuplan.rules.tenancy import SYSTEM_NAMESPACES

    if ns in SYSTEM_NAMESPACES or ns.startswith("kube-"):
        return "a Kubernetes system namespace"
    why = exempt_namespaces(rf).get(ns)
    return f"exempt from admission ({why})" if why else None


def project_namespaces(rf, docs: Docs, evidence: Callable[[set[str]], set[str]]
                       ) -> tuple[frozenset[str], frozenset[str], dict[str, str]]:
    """(the destination namespaces of the fleet's own AppProject in the old tree that a build may
    keep, those its ``gpuplan.dev/kept-namespaces`` annotation lists, namespace -> why discarded):
    ``delivery/project/appproject.yaml``, or ``delivery/bootstrap.yaml`` for a tree from before
    the project had its own Application. Empty under ``gitops.project`` and Flux.

    ``evidence(names)``: those of ``names`` the old tree managed (a Namespace object, an
    Application destination); asked only for destinations that neither the annotation nor the
    spec's managed namespaces account for."""
    g = rf.fleet.spec.cluster.gitops
    if g.engine != "argocd" or g.project is not None:
        return frozenset(), frozenset(), {}
    from gpuplan.identity import BOOTSTRAP_PATH, PROJECT_PATH, project_name
    from gpuplan.k8snames import is_dns_label
    from gpuplan.lower.gitops import KEPT_NAMESPACES_ANNOTATION, managed_namespaces

    for path in (PROJECT_PATH, BOOTSTRAP_PATH):
        for d in docs(path):
            if d.get("kind") != "AppProject" or dig(d, "metadata", "name") != project_name(rf):
                continue
            dests = dig(d, "spec", "destinations")
            found = sorted({ns for x in dests if is_dns_label(ns := dig(x, "namespace"))}) \
                if isinstance(dests, list) else []
            kept = dig(d, "metadata", "annotations", KEPT_NAMESPACES_ANNOTATION)
            listed = set(kept.split(",")) if isinstance(kept, str) and len(kept) <= MAX_ANNOTATION_BYTES \
                else set()
            discarded: dict[str, str] = {}
            current = set(managed_namespaces(rf))
            keep: list[str] = []
            for ns in found:
                why = reserved_destination(rf, ns) if ns not in current else None
                if why:
                    discarded[ns] = why
                else:
                    keep.append(ns)
            unexplained = {ns for ns in keep if ns not in listed and ns not in current}
            managed = evidence(unexplained) if unexplained else set()
            for ns in sorted(unexplained - managed):
                discarded[ns] = "no object of the old tree lives there"
                keep.remove(ns)
            extra = [ns for ns in keep if ns not in current]
            for ns in extra[MAX_KEPT:]:
                discarded[ns] = f"more than {MAX_KEPT} kept destinations"
                keep.remove(ns)
            return frozenset(keep), frozenset(ns for ns in listed if ns in keep), discarded
    return frozenset(), frozenset(), {}


def evidence_paths(names: Iterable[str]) -> list[str]:
    """Which of ``names`` (tree paths) may hold a Namespace or Application gpuplan writes."""
    out = []
    for p in names:
        parts = p.split("/")
        if (len(parts) == 3 and parts[0] == "tenants" and parts[2] == "namespaces.yaml") \
                or (len(parts) == 2 and parts[1] == "namespace.yaml") \
                or (len(parts) == 2 and parts[0] == "delivery" and parts[1].endswith(".yaml")):
            out.append(p)
    return sorted(out)[:MAX_EVIDENCE_FILES]


def tree_paths(root: str) -> list[str]:
    """The tree paths under ``root`` that :func:`evidence_paths` reads (no symlinks followed)."""
    out: list[str] = []
    try:
        with os.scandir(root) as top:
            dirs = sorted(e.name for e in top if e.is_dir(follow_symlinks=False))
    except OSError:
        return []
    for name in dirs:
        if name == "tenants":
            out += [f"tenants/{e}/namespaces.yaml" for e in _entries(os.path.join(root, name), dirs=True)]
        elif name == "delivery":
            out += [f"delivery/{e}" for e in _entries(os.path.join(root, name), dirs=False)]
        out.append(f"{name}/namespace.yaml")
        if len(out) > 2 * MAX_EVIDENCE_FILES:
            break
    return evidence_paths(out)


def _entries(path: str, *, dirs: bool) -> list[str]:
    """The names of the directories (``dirs``) or regular files in ``path``, no symlink followed."""
    try:
        with os.scandir(path) as it:
            return [e.name for e in it if (e.is_dir if dirs else e.is_file)(follow_symlinks=False)]
    except OSError:
        return []


def managed_in(docs: Docs, paths: list[str], names: set[str]) -> set[str]:
    """Those of ``names`` that a Namespace object or an Application destination of ``paths`` names."""
    out: set[str] = set()
    for p in paths:
        for d in docs(p):
            if d.get("kind") == "Namespace":
                ns = dig(d, "metadata", "name")
            elif d.get("kind") == "Application":
                ns = dig(d, "spec", "destination", "namespace")
            else:
                continue
            if isinstance(ns, str) and ns in names:
                out.add(ns)
        if out == names:
            break
    return out


def discarded_diagnostics(prev, tree: str) -> list[Diagnostic]:
    """GP810 for what :func:`project_namespaces` and the config readers dropped."""
    from gpuplan.identity import PROJECT_PATH

    out = []
    for ns, why in sorted(getattr(prev, "discarded_namespaces", {}).items()):
        out.append(W_DISCARDED.diag(
            f"destination {ns!r} of the old AppProject is not kept: {why}",
            file=f"{tree}/{PROJECT_PATH}",
            hint="nothing to do if the tree was edited by hand; destinations come from the spec"))
    for path, why in sorted(getattr(prev, "discarded_configs", {}).items()):
        out.append(W_DISCARDED.diag(f"the kept config names of {path} are not read: {why}", file=f"{tree}/{path}",
                                    hint="nothing to do if the tree was edited by hand; the build writes the "
                                         "annotation anew"))
    return out


def retire_diagnostics(prev, options_retire: frozenset[str], options_retire_ns: frozenset[str],
                       current_configs: set[str], current_namespaces: set[str],
                       options_retire_resources: frozenset[str] = frozenset(),
                       current_resources: Iterable[str] = ()) -> list[Diagnostic]:
    """GP812 for each retired name the old tree does not keep, or that the spec still uses."""
    kinds = (  # option, names retired, names the old tree keeps, names in use, why (in use / not kept), hint
        ("--retire-resource", options_retire_resources, set(getattr(prev, "resources", ())), set(current_resources),
         ("is a resource the spec advertises", "is no resource the tree's quotas charge"),
         "list charged names: the requests.* keys of a gpuplan-gpus quota in tenants/<tenant>/resourcequotas.yaml"),
        ("--retire-config", options_retire, set(getattr(prev, "data", {})) | set(getattr(prev, "mig_data", {})),
         current_configs, ("is the current config of a pool", "is no config of the tree"),
         "list kept names: the gpuplan.dev/kept-configs annotation of gpu-operator/device-plugin-config.yaml "
         "and mig-parted-config.yaml"),
        ("--retire-namespace", options_retire_ns, set(getattr(prev, "namespaces", ())), current_namespaces,
         ("is a namespace of the spec", "is no destination the tree keeps"),
         "list kept namespaces: the gpuplan.dev/kept-namespaces annotation of delivery/project/appproject.yaml"),
    )
    out = []
    for option, retired, kept, used, (in_use, not_kept), hint in kinds:
        for name in sorted(retired):
            if name not in kept or name in used:
                why = in_use if name in used else not_kept
                out.append(W_RETIRE_NOTHING.diag(f"{option} {name}: retires nothing, the name {why}", hint=hint))
    return out


def advance_diagnostics(rf, advance: frozenset[str]) -> list[Diagnostic]:
    """GP992 for each pool ``--advance`` names whose build moved no node."""
    from gpuplan.provisioning.rollout import pool_step

    out = []
    for name in sorted(advance):
        pv = rf.pool_by_name.get(name)
        step = pool_step(rf, pv) if pv is not None else None
        if step is None:
            why = "is no pool of the spec" if pv is None else "is not a static pool (`nodes`)"
        elif not step.moved:
            why = "has no node held at an old layout or sharing config"
        else:
            continue
        out.append(W_ADVANCE_NOTHING.diag(
            f"--advance {name}: moves nothing, the pool {why}",
            hint="see which pools roll and their next step: gpuplan review FLEET --base main"))
    return out


# --- Judging a tree against its base ---------------------------------------------------------


def kept_state(docs: Docs) -> tuple[set[str], dict[str, tuple[str, Any]]]:
    """(kept destinations, kept config name -> (file, body)) a tree states: the AppProject's
    ``gpuplan.dev/kept-namespaces`` that are destinations, the ConfigMaps' kept-configs names
    with their bodies."""
    from gpuplan.identity import PROJECT_PATH
    from gpuplan.lower.gitops import KEPT_NAMESPACES_ANNOTATION

    namespaces: set[str] = set()
    for d in docs(PROJECT_PATH):
        if d.get("kind") != "AppProject":
            continue
        kept = dig(d, "metadata", "annotations", KEPT_NAMESPACES_ANNOTATION)
        dests = dig(d, "spec", "destinations")
        found = {ns for x in dests if isinstance(ns := dig(x, "namespace"), str)} if isinstance(dests, list) else set()
        if isinstance(kept, str):
            namespaces |= {ns for ns in kept.split(",") if ns in found}
    bodies, kept_names = _config_bodies(docs)
    configs: dict[str, tuple[str, Any]] = {}
    for path, names in bodies.items():
        for name, body in names.items():
            if name in kept_names:
                configs.setdefault(name, (path, body))
    return namespaces, configs


def _config_bodies(docs: Docs) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """(file -> config name -> body, the names their kept-configs annotations list) of the
    device-plugin and mig-parted ConfigMaps, each file read once."""
    from gpuplan.identity import DEVICE_PLUGIN_CONFIGMAP, MIG_PARTED_CONFIG_KEY, MIG_PARTED_CONFIGMAP

    out: dict[str, dict[str, Any]] = {}
    kept: set[str] = set()
    for path, name in ((DEVICE_PLUGIN_CONFIG_FILE, DEVICE_PLUGIN_CONFIGMAP),
                       (MIG_PARTED_CONFIG_FILE, MIG_PARTED_CONFIGMAP)):
        for d in docs(path):
            if d.get("kind") != "ConfigMap":
                continue
            kept |= set(kept_configs_annotation(d.get("metadata"))[0])
            if dig(d, "metadata", "name") != name:
                continue
            data = d.get("data") if isinstance(d.get("data"), dict) else {}
            if path == MIG_PARTED_CONFIG_FILE:
                text = data.get(MIG_PARTED_CONFIG_KEY)
                parsed = docs_in_memory({"c": text.encode("utf-8")}, "c") if isinstance(text, str) else []
                configs = dig(parsed[0], "mig-configs") if len(parsed) == 1 else None
                out[path] = dict(configs) if isinstance(configs, dict) else {}
            else:
                out[path] = dict(data)
    return out, kept


def judge(tree: Docs, tree_label: str, base: Docs, base_label: str, fleet: str) -> list[Diagnostic]:
    """GP811 for each kept destination of ``tree`` that is no destination of ``base``'s AppProject,
    and each kept config name that ``base``'s ConfigMaps do not have with the same body."""
    from gpuplan.identity import PROJECT_PATH

    namespaces, configs = kept_state(tree)
    base_dests: set[str] = set()
    for d in base(PROJECT_PATH):
        dests = dig(d, "spec", "destinations") if d.get("kind") == "AppProject" else None
        base_dests |= {ns for x in dests if isinstance(ns := dig(x, "namespace"), str)} if isinstance(dests, list) else set()
    base_bodies: dict[str, Any] = {}
    for names in _config_bodies(base)[0].values():
        for name, body in names.items():
            base_bodies.setdefault(name, body)
    out = []
    for ns in sorted(namespaces - base_dests):
        out.append(E_NOT_IN_BASE.diag(
            f"the AppProject keeps destination {ns!r}, which the base tree's AppProject "
            f"({base_label}/{PROJECT_PATH}) does not admit: this change widens where Argo CD may sync",
            file=f"{tree_label}/{PROJECT_PATH}", hint=f"gpuplan build {fleet} --retire-namespace {ns}"))
    for name, (path, body) in sorted(configs.items()):
        if name in base_bodies and base_bodies[name] == body:
            continue
        why = "has another body there" if name in base_bodies else "is not there"
        out.append(E_NOT_IN_BASE.diag(
            f"{path} keeps config {name!r}, which {why} in the base tree ({base_label}/{path}): no node "
            "of the cluster can carry it", file=f"{tree_label}/{path}",
            hint=f"gpuplan build {fleet} --retire-config {name}"))
    return out


def docs_on_disk(out_dir: Path | str, path: str) -> list[dict]:
    """The objects of the existing tree's file at ``path``; none when it is
    missing, leads out of the tree or does not load (the same bounded reader
    as `gpuplan verify`: the committed tree is as hostile as any pull request)."""
    from gpuplan.verify.manifests import read_file

    file = os.path.join(out_dir, path)
    try:
        real = os.path.realpath(file)
        root = os.path.realpath(out_dir)
        if not real.startswith(root.rstrip(os.sep) + os.sep) or not os.path.isfile(file):
            return []
        docs, diags = read_file(Path(real), file)
    except (OSError, ValueError):
        return []
    if any(d.is_error for d in diags):
        return []
    return [m.data for m in docs if isinstance(m.data, dict)]


def docs_in_memory(files: Mapping[str, bytes], path: str) -> list[dict]:
    from gpuplan.verify.manifests import load_text

    raw = files.get(path)
    if raw is None:
        return []
    try:
        docs, diags = load_text(raw.decode("utf-8"), path)
    except (UnicodeDecodeError, RecursionError):
        return []
    if any(d.is_error for d in diags):
        return []
    return [m.data for m in docs if isinstance(m.data, dict)]


def docs_of(files: Mapping[str, bytes] | None = None, root: Path | str | None = None) -> Docs:
    """A bounded reader of a tree's files: rendered (``files``) or on disk (``root``)."""
    def docs(path: str) -> list[dict]:
        if files is not None:
            return docs_in_memory(files, path)
        return docs_on_disk(root, path) if root is not None else []
    return docs


def _configmap(docs: list[dict], name: str) -> tuple[dict, dict[str, str], str | None]:
    """(data, kept names, why some were not taken) of the ConfigMap ``name`` among ``docs``."""
    for d in docs:
        meta = d.get("metadata")
        if d.get("kind") == "ConfigMap" and isinstance(meta, dict) and meta.get("name") == name:
            data = d.get("data")
            kept, why = kept_configs_annotation(meta)
            return (data if isinstance(data, dict) else {}), kept, why
    return {}, {}, None


def previous_resources(docs: Docs, files: Mapping[str, bytes] | None, out_dir: Path | str | None) -> frozenset[str]:
    """The GPU resource names the old tree's namespace quotas charge: the ``requests.<name>`` keys of
    ``gpuplan-gpus`` in the first tenant's quota file (every namespace's lists every name, at 0
    where not granted: lower/tenancy.py), NVIDIA device-plugin names only
    (:func:`gpuplan.resolve.is_gpu_name`). One file, whatever the fleet's size."""
    from gpuplan.identity import QUOTA_NAME
    from gpuplan.resolve import is_gpu_name

    if files is not None:
        tenants = sorted({p.split("/")[1] for p in files if p.startswith("tenants/") and p.count("/") == 2})
    else:
        tenants = sorted(_entries(os.path.join(str(out_dir), "tenants"), dirs=True)) if out_dir is not None else []
    out: set[str] = set()
    for tenant in tenants:
        quotas = [d for d in docs(f"tenants/{tenant}/resourcequotas.yaml")
                  if d.get("kind") == "ResourceQuota" and dig(d, "metadata", "name") == QUOTA_NAME]
        for q in quotas:
            hard = dig(q, "spec", "hard")
            for key in hard if isinstance(hard, dict) else ():
                if isinstance(key, str) and key.startswith("requests.") and is_gpu_name(key[len("requests."):]):
                    out.add(key[len("requests."):])
        if quotas:
            break
    return frozenset(out)


def previous_configs(rf, *, out_dir: Path | str | None = None,
                     files: Mapping[str, bytes] | None = None, retire: frozenset[str] = frozenset(),
                     retire_namespaces: frozenset[str] = frozenset(),
                     retire_resources: frozenset[str] = frozenset(), advance: frozenset[str] = frozenset()):
    """What the previous tree (on disk at ``out_dir``, or rendered into
    ``files``) says about the config names nodes may still carry: the old
    device-plugin and mig-parted ConfigMaps' configs and kept names, the
    names each old node template of a pool still in the fleet selected (its NodePool or
    node-group template, for a pool whose nodes keep the labels they were made with:
    ``gpuplan.provisioning.pools.labels_set_at_creation``), and the
    names each old NodeFeatureRule of a static pool still in the fleet put on
    its nodes (``gpuplan.identity.PreviousConfigs``), and the old AppProject's
    destinations a build may keep (:func:`project_namespaces`). Reads those
    files only, never the whole tree, through the bounded manifest reader.

    A static pool's names come from its old rule and, for the name its last
    change kept, from the old annotation (``static_kept``). Entries of the old
    annotation for a pool the old tree labelled through a NodeFeatureRule never
    become Karpenter names, should the pool turn into a Karpenter pool."""
    from gpuplan.identity import (
        DEVICE_PLUGIN_CONFIG_LABEL, DEVICE_PLUGIN_CONFIGMAP, MIG_CONFIG_LABEL, MIG_PARTED_CONFIG_KEY,
        MIG_PARTED_CONFIGMAP, POOL_LABEL, PreviousConfigs,
    )
    from gpuplan.provisioning.pools import labels_set_at_creation, static_nodes, template_path

    docs = docs_of(files, out_dir)

    def evidence(names: set[str]) -> set[str]:
        listed = files.keys() if files is not None else tree_paths(str(out_dir)) if out_dir is not None else ()
        return managed_in(docs, evidence_paths(listed), names)

    discarded_configs: dict[str, str] = {}
    raw, owners, why = _configmap(docs(DEVICE_PLUGIN_CONFIG_FILE), DEVICE_PLUGIN_CONFIGMAP)
    if why:
        discarded_configs[DEVICE_PLUGIN_CONFIG_FILE] = why
    data = {k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, str)}
    # the configs a kept name may be made from: <pool>-<8 hex> of a pool of the fleet
    prefixes = {pv.name[:63 - 9] for pv in rf.pools}
    bodies = {}
    for k, v in data.items():
        if len(k) > 9 and k[-9] == "-" and k[:-9] in prefixes:
            body = docs_in_memory({"config": v.encode("utf-8")}, "config")
            bodies[k] = body[0] if len(body) == 1 else None
    raw, mig_owners, why = _configmap(docs(MIG_PARTED_CONFIG_FILE), MIG_PARTED_CONFIGMAP)
    if why:
        discarded_configs[MIG_PARTED_CONFIG_FILE] = why
    mig_data: dict = {}
    text = raw.get(MIG_PARTED_CONFIG_KEY)
    if isinstance(text, str):
        parsed = docs_in_memory({"config": text.encode("utf-8")}, "config")
        configs = dig(parsed[0], "mig-configs") if len(parsed) == 1 else None
        mig_data = {k: v for k, v in configs.items() if isinstance(k, str)} if isinstance(configs, dict) else {}
    namespaces, kept_ns, discarded_ns = project_namespaces(rf, docs, evidence)
    from gpuplan.provisioning.rollout import read_rules

    # each pool's rules in the old tree's NodeFeatureRule, whatever the pool is now
    old_rules = {pv.name: read_rules(docs(f"pools/{pv.name}/node-labels.yaml"), pv.name) for pv in rf.pools}
    static_rules = {pv.name: old_rules[pv.name] for pv in rf.pools if static_nodes(pv.pool) and old_rules[pv.name]}
    common = dict(retire=retire, namespaces=namespaces, retire_namespaces=retire_namespaces,
                  static_rules=static_rules, advance=advance,
                  kept_namespaces=kept_ns, discarded_namespaces=discarded_ns, discarded_configs=discarded_configs,
                  resources=previous_resources(docs, files, out_dir), retire_resources=retire_resources)
    if not data and not mig_data:
        return PreviousConfigs(**common)
    static_owners: dict[str, str] = {}
    static_mig_owners: dict[str, str] = {}
    static_kept: dict[str, str] = {}
    static_mig_kept: dict[str, str] = {}
    cluster = rf.fleet.spec.cluster
    for pv in rf.pools:
        # the old tree's NodeFeatureRule of this pool (static there), whatever the pool is now, and
        # for a node group relabelled in place now (an AKS agent pool), its old node template
        rules = [dict(r.labels) for r in old_rules[pv.name]]
        in_place = not labels_set_at_creation(cluster, pv.pool)
        if in_place and not static_nodes(pv.pool):
            rules += template_labels(docs(template_path(pv.pool) or ""), pv.name, POOL_LABEL)
        if rules:
            # kept for nodes relabelled in place: never read back for a pool whose nodes keep their
            # labels until replaced; for a pool still relabelled in place, the name its last change
            # kept (identity._static_names keeps it until the next change)
            for names, kept in ((owners, static_kept), (mig_owners, static_mig_kept)):
                for name in [n for n, p in names.items() if p == pv.name]:
                    if in_place:
                        kept[name] = pv.name
                    del names[name]
        if in_place:
            for labels in rules:
                for label, names in ((DEVICE_PLUGIN_CONFIG_LABEL, static_owners),
                                     (MIG_CONFIG_LABEL, static_mig_owners)):
                    if isinstance(labels.get(label), str):
                        names[labels[label]] = pv.name
    for pv in rf.pools:
        # nodes that keep the labels they were made with: the old template's names stay theirs
        if not labels_set_at_creation(rf.fleet.spec.cluster, pv.pool):
            continue
        for labels in template_labels(docs(template_path(pv.pool) or ""), pv.name, POOL_LABEL):
            for label, names in ((DEVICE_PLUGIN_CONFIG_LABEL, owners), (MIG_CONFIG_LABEL, mig_owners)):
                if isinstance(labels.get(label), str):
                    names[labels[label]] = pv.name
    return PreviousConfigs(data=data, owners=owners, plugin_bodies=bodies, mig_data=mig_data, mig_owners=mig_owners,
                           static_owners=static_owners, static_mig_owners=static_mig_owners,
                           static_kept=static_kept, static_mig_kept=static_mig_kept, **common)


def template_labels(docs: list[dict], pool: str, pool_label: str) -> list[dict]:
    """The node labels of the templates among ``docs`` that make ``pool``'s nodes: a NodePool's
    ``spec.template.metadata.labels``, a node-group template as its back-end reads it
    (:func:`gpuplan.provisioning.pools.read_template`), each only with the pool's own
    ``gpuplan.dev/pool`` label, whatever a hand edit left there."""
    from gpuplan.provisioning.pools import read_template

    out = []
    for d in docs:
        if d.get("kind") == "NodePool":
            labels = dig(d, "spec", "template", "metadata", "labels")
        else:
            try:
                read = read_template(d)
            except (KeyError, TypeError, AttributeError, ValueError):
                read = None  # not an object gpuplan wrote
            labels = read[1] if read is not None else None
        if isinstance(labels, dict) and labels.get(pool_label) == pool:
            out.append(labels)
    return out


# --- the admission objects of the existing tree, for the proof at every sync step ---------------


ADMISSION_POLICY_PATH = "cluster/admission-policy.yaml"  # gpuplan.lower.admission.PATH
VOLCANO_POLICY_PATH = "cluster/admission-volcano.yaml"  # gpuplan.queueing.volcano.admission.PATH
TENANT_STEP_FILES = ("namespaces.yaml", "resourcequotas.yaml")


def _step_files() -> tuple[str, ...]:
    from gpuplan.identity import FLUX_CLASSES_DIR, PRIORITY_CLASSES_PATH

    return (ADMISSION_POLICY_PATH, VOLCANO_POLICY_PATH, PRIORITY_CLASSES_PATH,
            f"{FLUX_CLASSES_DIR}/priorityclasses.yaml")


def is_step_path(path: str) -> bool:
    """Whether a tree path holds objects the boundary proof reads at each sync step
    (gpuplan.placement.steps.STEP_KINDS): the policies, the PriorityClasses, the tenants'
    Namespaces and ResourceQuotas."""
    parts = path.split("/")
    return path in _step_files() or (len(parts) == 3 and parts[0] == "tenants" and parts[2] in TENANT_STEP_FILES)


def step_paths(root: str) -> list[str]:
    """The paths of the existing tree under ``root`` that :func:`is_step_path` names (no symlink followed)."""
    tenants = [f"tenants/{t}/{f}" for t in sorted(_entries(os.path.join(root, "tenants"), dirs=True))
               for f in TENANT_STEP_FILES]
    return [p for p in (*_step_files(), *tenants)
            if os.path.isfile(os.path.join(root, p)) and not os.path.islink(os.path.join(root, p))]


def _sha256(path: str) -> str | None:
    import hashlib

    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def previous_step_docs(root: Path | str, rendered: Mapping[str, str]) -> list[dict] | None:
    """The existing tree's admission objects, or None when there is no existing tree or its
    files of :func:`is_step_path` are byte for byte the ones rendered (``rendered``: path ->
    SHA-256 of the new bytes): then no sync step changes what the API server admits."""
    root = str(root)
    paths = step_paths(root)
    if not paths or (set(paths) == set(rendered)
                     and all(_sha256(os.path.join(root, p)) == rendered[p] for p in paths)):
        return None
    return [d for p in paths for d in docs_on_disk(root, p)]
