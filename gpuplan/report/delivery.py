"""What the GitOps engine does with a change of the generated tree: which objects
it applies, refuses, prunes, keeps or holds, and which steps a person must take
for it to apply the tree at all (#27). Computed from the two trees, as
``gpuplan diff`` and ``gpuplan plan --base`` read them.

The model, and the upstream behaviour it stands on:

- **Argo CD** applies, as one operation, what the root Application's
  ``kustomization.yaml`` lists. Every object of the operation — a prune too,
  whose object is the live one — is checked against the *live* AppProject: a
  cluster-scoped group/kind against ``clusterResourceWhitelist``, a namespaced
  object's namespace against ``destinations`` (argoproj/argo-cd@v3.5.1
  controller/sync.go:647-669; gitops-engine/pkg/sync/sync_context.go:1086-1093).
  One refused object fails the whole operation before anything is applied
  (sync_context.go:481-498); the Application's retry re-reads the project on
  each attempt (controller/appcontroller.go:1595-1598,1619-1633).

  Which project is live: one applied by hand (``delivery/bootstrap.yaml``) is the
  old tree's until a person applies the new file; one delivered by its own
  Application (``delivery/project/``) is the new tree's once that Application has
  synced. The two Applications sync independently, so the root may sync first:
  an object only the new project admits *waits* (the root fails and its retry
  applies it after the project has synced); a prune only the old project admits
  may be *refused* for good (the project may sync first).

  A prune of an object whose live ``sync-options`` say ``Prune=confirm`` *holds*
  the whole operation, and auto-sync starts no new one, until someone confirms
  (sync_context.go:458-475,1616-1624; appcontroller.go:2336-2338);
  ``Prune=false`` skips it and counts as a success (sync_context.go:1454-1458,
  1568-1573): the object is *kept*.
- **Flux** applies the root Kustomization's objects (and the tenancy
  Kustomization's, from the same revision) with the controller's
  service account (no project), prunes what left the tree, and skips objects
  marked ``kustomize.toolkit.fluxcd.io/prune: disabled``
  (fluxcd/kustomize-controller@v1.9.4 docs/spec/v1/kustomizations.md:1686-1693):
  they are *kept*.
- Both engines: ``delivery/bootstrap.yaml`` is applied by hand, so a change to
  its objects reaches the cluster only when a person applies it again.
- **Recreated** objects (deleted, then created under the same name), engine by engine:
  Argo CD replaces an object whose desired *or live* ``sync-options`` carry
  ``Replace=true`` on every change (gitops-engine/pkg/sync/sync_context.go:1400,1418-1434;
  with ``Force=true`` that is ``kubectl replace --force``, delete, wait, create:
  k8s.io/kubectl@v0.36.3 pkg/cmd/replace/replace.go:264-265,315-410). The root Application
  syncs only changed objects (``ApplyOutOfSyncOnly=true``, sync_context.go:529-531,646-648), so
  an unchanged object is left alone. Flux recreates an object marked
  ``kustomize.toolkit.fluxcd.io/force: enabled`` (desired or in-cluster) only when its apply
  fails on an immutable field (fluxcd/pkg/ssa@v0.76.1 manager_apply.go:141-148,519-533, as
  kustomize-controller@v1.9.4 sets the selector, internal/controller/kustomization_controller.go:
  867-869): the immutable fields are those of :data:`IMMUTABLE`.

Limits: the live cluster is not read (the model assumes it runs the old tree);
objects outside the root kustomization other than the bootstrap and the
project (chart Applications' own objects) are not modelled.

Stage: report (docs/architecture.md)."""

from __future__ import annotations

import posixpath

from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, Mapping

from gpuplan.identity import ARGO_SYNC_OPTIONS, BOOTSTRAP_PATH as BOOTSTRAP, FLUX_PRUNE, PROJECT_DIR, ROOT_KUSTOMIZATION
from gpuplan.identity import FLUX_FORCE, FLUX_TENANCY_DIR

TENANCY_KUSTOMIZATION = f"{FLUX_TENANCY_DIR}/kustomization.yaml"


Parsed = Mapping[Any, tuple[str, Any]]  # gpuplan.output.objdiff.tree_objects
Ref = tuple[str, str, str, str]  # (group, kind, namespace, name)


def show(ref: Ref) -> str:
    group, kind, ns, name = ref
    gk = f"{kind}.{group}" if group else kind
    return f"{gk} {ns}/{name}" if ns else f"{gk} {name}"


@dataclass
class Outcome:
    """What the engine does with the new tree (each a sorted list of objects)."""

    engine: str  # "argocd", "flux", or "" (no delivery objects in the tree)
    applied: list[Ref] = field(default_factory=list)  # new or changed root objects the sync applies
    waits: list[Ref] = field(default_factory=list)  # Argo CD: refused until the project Application syncs
    refused: list[tuple[Ref, str]] = field(default_factory=list)  # (object, why): the root sync fails
    pruned: list[Ref] = field(default_factory=list)
    kept: list[Ref] = field(default_factory=list)  # left the tree, stays in the cluster
    held: list[Ref] = field(default_factory=list)  # prunes waiting for a confirmation: the sync holds
    hand_steps: list[str] = field(default_factory=list)
    # changed objects the engine deletes and creates instead of updating: (object, why)
    recreated: list[tuple[Ref, str]] = field(default_factory=list)

    @property
    def blocked(self) -> bool:
        """The root sync applies nothing of this commit until a person acts."""
        return bool(self.refused or self.held)


def _ref(key: Any) -> Ref:
    return (key.group, key.kind, key.namespace, key.name)


def _meta(o: Any, *keys: str) -> Any:
    cur = o.get("metadata") if isinstance(o, dict) else None
    for k in keys:
        cur = cur.get(k) if isinstance(cur, dict) else None
    return cur


def _root_files(parsed: Parsed) -> set[str]:
    """The files the root syncs, and (Flux) those of the tenancy Kustomization, which Flux applies
    from the same revision (lower/gitops.py flux_tenancy_kustomization): an object moving between
    the two is neither pruned nor applied anew (the moved object is relabelled before the root's
    prune, which skips it)."""
    out: set[str] = set()
    for key, (path, value) in parsed.items():
        if path in (ROOT_KUSTOMIZATION, TENANCY_KUSTOMIZATION) and isinstance(value, dict) \
                and value.get("kind") == "Kustomization":
            res = value.get("resources")
            base = posixpath.dirname(path)
            out |= {posixpath.normpath(posixpath.join(base, r)) for r in res if isinstance(r, str)} \
                if isinstance(res, list) else set()
    return out


def _root(parsed: Parsed) -> dict[Ref, Any]:
    files = _root_files(parsed)
    return {_ref(k): v for k, (path, v) in parsed.items() if k.kind and path in files and isinstance(v, dict)}


def _in(parsed: Parsed, pred) -> dict[Ref, Any]:
    return {_ref(k): v for k, (path, v) in parsed.items() if k.kind and pred(path) and isinstance(v, dict)}


def _engine(parsed: Parsed) -> str:
    boot = _in(parsed, lambda p: p == BOOTSTRAP)
    if any(r[1] == "Application" for r in boot):
        return "argocd"
    if any(r[1] == "Kustomization" and r[0] == "kustomize.toolkit.fluxcd.io" for r in boot):
        return "flux"
    return ""


def _spec(o: Any) -> dict:
    s = o.get("spec") if isinstance(o, dict) else None
    return s if isinstance(s, dict) else {}


def _source_path(app: Any) -> str:
    src = _spec(app).get("source")
    p = src.get("path") if isinstance(src, dict) else None
    return p.rstrip("/") + "/" if isinstance(p, str) else ""


def _apps(parsed: Parsed) -> tuple[Any, Any]:
    """(root Application, project Application or None) of the bootstrap file."""
    root = project = None
    for ref, o in _in(parsed, lambda p: p == BOOTSTRAP).items():
        if ref[1] != "Application":
            continue
        if _source_path(o).rstrip("/").endswith(PROJECT_DIR):
            project = o
        else:
            root = o
    return root, project


def _project(parsed: Parsed, name: str) -> tuple[Any, str]:
    """(the AppProject ``name`` of the tree, the file it is in) or (None, "")."""
    for key, (path, v) in parsed.items():
        if key.kind == "AppProject" and key.name == name and isinstance(v, dict):
            return v, path
    return None, ""


def admits(project: Any, ref: Ref) -> str | None:
    """None when the project admits the object, else why not (controller/sync.go:647-669)."""
    group, kind, ns, _ = ref
    spec = _spec(project)
    if ns:
        for d in spec.get("destinations") or ():
            if isinstance(d, dict) and isinstance(d.get("namespace"), str) and fnmatchcase(ns, d["namespace"]):
                return None
        return f"namespace {ns} is not a destination"
    for w in spec.get("clusterResourceWhitelist") or ():
        if isinstance(w, dict) and fnmatchcase(group, str(w.get("group", ""))) \
                and fnmatchcase(kind, str(w.get("kind", ""))):
            return None
    return f"cluster-scoped {kind}.{group or 'core'} is not whitelisted"


def _options(o: Any) -> set[str]:
    v = _meta(o, "annotations", ARGO_SYNC_OPTIONS)
    return {x.strip() for x in v.split(",")} if isinstance(v, str) else set()


# The fields an update may not change, by kind: what a Flux ``force: enabled`` apply recreates
# an object for. PriorityClass: kubernetes/kubernetes@v1.36.3
# pkg/apis/scheduling/validation/validation.go:59-69; NVIDIADriver: CEL ``self == oldSelf``
# (NVIDIA/gpu-operator@v26.7.0 api/nvidia/v1alpha1/nvidiadriver_types.go:57,64).
IMMUTABLE: dict[str, tuple[tuple[str, ...], ...]] = {
    "PriorityClass": (("value",), ("preemptionPolicy",)),
    "NVIDIADriver": (("spec", "driverType"), ("spec", "usePrecompiled")),
}
def _at(o: Any, path: tuple[str, ...]) -> Any:
    for k in path:
        o = o.get(k) if isinstance(o, dict) else None
    return o


def immutable_changes(kind: str, old: Any, new: Any) -> list[str]:
    """The immutable fields (:data:`IMMUTABLE`) whose value differs between two objects."""
    return [".".join(p) for p in IMMUTABLE.get(kind, ()) if _at(old, p) != _at(new, p)]


def _recreated(engine: str, kind: str, old: Any, new: Any) -> str | None:
    """Why the engine deletes and creates a changed object rather than updating it; None: updated."""
    if engine == "argocd":
        if "Replace=true" in _options(new):
            return "Argo CD replaces it (sync option Replace=true): deleted, then created"
        if "Replace=true" in _options(old):
            return ("Argo CD replaces it: the live object still carries sync option Replace=true (written by an "
                    "older gpuplan) and Argo CD honours the live option too: deleted, then created")
        return None
    fields = immutable_changes(kind, old, new)
    if fields and "enabled" in (_meta(new, "annotations", FLUX_FORCE), _meta(old, "annotations", FLUX_FORCE)):
        return (f"its apply fails on immutable {', '.join(fields)} and Flux recreates it "
                "(kustomize.toolkit.fluxcd.io/force: enabled): deleted, then created")
    return None


def outcome(old: Parsed, new: Parsed) -> Outcome:
    """What the engine of the new tree does going from tree ``old`` (live) to ``new``."""
    engine = _engine(new)
    out = Outcome(engine)
    if not engine:
        return out
    a, b = _root(old), _root(new)
    out.applied = sorted(r for r in b if a.get(r) != b[r])
    # every object the engine syncs, the root's and its other Kustomizations' or Applications'
    every_a, every_b = _in(old, lambda p: p != BOOTSTRAP), _in(new, lambda p: p != BOOTSTRAP)
    for r in sorted(set(every_a) & set(every_b)):
        why = _recreated(engine, r[1], every_a[r], every_b[r]) if every_a[r] != every_b[r] else None
        if why:
            out.recreated.append((r, why))
    gone = sorted(set(a) - set(b))

    boot_a = _in(old, lambda p: p == BOOTSTRAP)
    boot_b = _in(new, lambda p: p == BOOTSTRAP)
    changed_boot = sorted(r for r in set(boot_a) | set(boot_b) if boot_a.get(r) != boot_b.get(r))

    if engine == "flux":
        for r in gone:
            (out.kept if _meta(a[r], "annotations", FLUX_PRUNE) == "disabled" else out.pruned).append(r)
        if changed_boot and boot_a:
            out.hand_steps.append(
                f"apply {BOOTSTRAP} again (kubectl apply -f <tree>/{BOOTSTRAP}): its Flux objects changed "
                f"({', '.join(map(show, changed_boot))}) and nothing syncs them")
        return out

    root_b, app_b = _apps(new)
    _, app_a = _apps(old)
    name = _spec(root_b).get("project") if root_b is not None else None
    proj_b, file_b = _project(new, name) if isinstance(name, str) else (None, "")
    proj_a, _ = _project(old, name) if isinstance(name, str) else (None, "")
    delivered = proj_b is not None and file_b.startswith(PROJECT_DIR + "/") and app_b is not None
    # the project Application is live only if the old tree's bootstrap (applied) already had it
    live_delivery = delivered and app_a is not None

    for r in gone:
        opts = _options(a[r])
        if "Prune=confirm" in opts:
            out.held.append(r)
            continue
        if "Prune=false" in opts:
            out.kept.append(r)
            continue
        # a prune is checked against the live project like an apply
        why = None
        if proj_b is not None and live_delivery:
            why = admits(proj_b, r)  # the project Application may sync first
            if why is None and proj_a is not None:
                why = admits(proj_a, r)
        elif proj_a is not None:
            why = admits(proj_a, r)
        if why:
            out.refused.append((r, f"prune refused: {why}"))
        else:
            out.pruned.append(r)

    if proj_b is None:
        # the person's own project (gitops.project): gpuplan cannot see it
        fresh = sorted({r[2] for r in b if r[2]} - {r[2] for r in a if r[2]})
        if fresh and isinstance(name, str):
            out.hand_steps.append(
                f"BEFORE merging, make sure AppProject {name} (yours: spec.cluster.gitops.project) admits "
                f"namespace(s) {', '.join(fresh)}: Argo CD refuses objects in a namespace the live project does "
                "not list and fails the whole root sync (argo-cd controller/sync.go:660-669)")
    else:
        for r in out.applied:
            if live_delivery:  # the new project, once its Application has synced; the old one before
                why = admits(proj_b, r)
                if why:
                    out.refused.append((r, why))
                elif proj_a is not None and admits(proj_a, r):
                    out.waits.append(r)
            elif proj_a is not None:  # applied by hand: the old project until a person applies the new one
                why = admits(proj_a, r)
                if why:
                    out.refused.append((r, why + " of the live project until bootstrap.yaml is applied"))
    out.refused.sort()
    if changed_boot and boot_a:
        out.hand_steps.insert(0, (
            f"BEFORE merging, apply the new {BOOTSTRAP} (kubectl apply -f <tree>/{BOOTSTRAP}): its objects "
            f"changed ({', '.join(map(show, changed_boot))}) and nothing syncs them"
            + (": it creates the Application that delivers the AppProject from Git, after which adding, "
               "renaming or removing a namespace needs no hand step" if delivered and not live_delivery else "")))
    if out.held:
        out.hand_steps.append(
            f"right after merging, release the root sync: Argo CD holds it on the prune of "
            f"{', '.join(map(show, out.held))} (live sync-options Prune=confirm) and applies NO later change until "
            "someone confirms the prune in Argo CD (it deletes the object) or deletes it by hand")
    return out
