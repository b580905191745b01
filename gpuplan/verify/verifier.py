"""Verify Kubernetes manifests as the API server would admit them.

    verify_paths(["generated/"], Options(kubernetes_version="1.33"))

Each object is checked against

* the strict upstream CRD schema pinned in ``gpuplan.upstream`` for its
  group, kind and version (``gpuplan.verify.schemas``), then every CEL rule
  of that CRD (``gpuplan.verify.cel``);
* or, for core kinds, the strict schema of its Kubernetes version from the
  PyPI package kubernetes-validate.

Work is done once per object *shape*: the object without its name and
namespace and with label and annotation values blanked (no pinned schema or
rule looks at those). Results are data (``Diagnostic``); nothing here prints.

Stage: check-objects (docs/architecture.md)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity, normalise
from gpuplan.verify.manifests import Manifest, discover, identify, load_text, read_file

DEFAULT_KUBERNETES_VERSION = "1.33"

E_BUILD_REJECTED = Code(
    "GP850", "build refused: the API server would reject the tree", Severity.ERROR,
    "`gpuplan build` verifies what it is about to write (as `gpuplan verify` does) and writes "
    "nothing when an object would be rejected by the API server: the spec passed gpuplan's own "
    "checks but produced a value an upstream schema or CEL rule refuses. Exit code 7.",
    bad="pools:\n  - name: p\n    labels: {karpenter.sh/team: ml}   # into a NodePool template: restricted domain",
    good="pools:\n  - name: p\n    labels: {example.com/team: ml}",
)
CODES = (E_BUILD_REJECTED,)

# kustomize build files are not API objects: counted, not verified
NOT_API_GROUPS = frozenset({"kustomize.config.k8s.io"})


@dataclass(frozen=True)
class Options:
    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION
    cel: bool = True
    # a version kubernetes-validate does not carry: use the nearest one it has,
    # with a warning (build), instead of leaving core kinds unverified (verify)
    nearest_version: bool = False


@dataclass(frozen=True)
class Problem:
    """A finding relative to its object (positions are added per object)."""

    code: Code
    path: tuple
    at_key: bool
    message: str
    hint: str | None = None


@dataclass
class Stats:
    files: int = 0
    objects: int = 0
    crd_objects: int = 0
    core_objects: int = 0
    not_verified: int = 0
    build_files: int = 0  # kustomization.yaml and the like
    plain: int = 0  # documents without apiVersion and kind (Helm values)
    shapes: int = 0
    cel_evaluations: int = 0
    not_evaluated: dict[str, int] = field(default_factory=dict)  # rule label -> objects


@dataclass
class Result:
    diagnostics: list[Diagnostic]
    stats: Stats
    sources: dict[str, str] = field(default_factory=dict)  # text of each file a diagnostic names

    @property
    def ok(self) -> bool:
        return not any(d.is_error for d in self.diagnostics)


def identity(obj: dict) -> tuple[str, str, str, str] | None:
    """(group, kind, namespace, name): the same object in two trees."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        return None
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    return (group, str(obj.get("kind")), str(meta.get("namespace") or ""), meta["name"])


def _shape(obj: dict) -> str:
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        m = {k: v for k, v in meta.items() if k not in ("name", "namespace")}
        for k in ("labels", "annotations"):
            if isinstance(m.get(k), dict):
                m[k] = {a: "" if isinstance(b, str) else b for a, b in m[k].items()}
        obj = {**obj, "metadata": m}
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


class Verifier:
    """Verifies objects one by one, remembering each shape's result."""

    def __init__(self, options: Options = Options()) -> None:
        self.options = options
        self.stats = Stats()
        self._memo: dict[str, tuple[list[Problem], int, tuple[str, ...]]] = {}
        self._core_version: str | None | bool = False  # False: not looked up yet
        self.diagnostics: list[Diagnostic] = []
        # errors only an update of the existing tree's object gives (its update rules): the old
        # tree, not the spec, refuses the change (a hand edit there, or a transition to replace)
        self.update_errors = 0
        self._first_at: dict[str, tuple[str, int | None, int | None]] = {}

    # -- one object ------------------------------------------------------------------------

    def check(self, obj: dict, old: dict | None = None) -> tuple[list[Problem], int, tuple[str, ...]]:
        """(problems, CEL evaluations, labels of rules not evaluated) for ``obj``."""
        key = _shape(obj) + ("\x00" + _shape(old) if old is not None else "")
        hit = self._memo.get(key)
        if hit is None:
            hit = self._check(obj, old)
            self._memo[key] = hit
            self.stats.shapes += 1
        return hit

    def _check(self, obj: dict, old: dict | None) -> tuple[list[Problem], int, tuple[str, ...]]:
        from gpuplan.upstream.pins import crd_groups

        api, kind = obj["apiVersion"], obj["kind"]
        group, _, version = api.rpartition("/")
        if group in crd_groups():
            return self._check_crd(obj, old, group, kind, version)
        return self._check_core(obj, api, kind, old), 0, ()

    def _check_crd(self, obj: dict, old: dict | None, group: str, kind: str, version: str):
        from gpuplan.upstream.pins import crd_kinds, crd_schema, served_versions
        from gpuplan.verify import schemas

        # every version the pinned release serves has its own schema, loaded on first use
        validator = schemas.crd_validator(group, kind, version)
        if validator is None:
            served = sorted(f"{g}/{v} {k}" for g, k, v in crd_kinds() if g == group)
            versions = served_versions(group, kind)
            if kind.isidentifier() and kind.isascii() and not versions:
                # a kind of the group gpuplan does not pin (Karpenter's NodeClaim,
                # NFD's NodeFeature): served wherever the project is installed
                return [Problem(schemas.W_UNKNOWN_KIND, ("kind",), False,
                                f"{group}/{version} {kind}: gpuplan pins no CRD of this kind; not verified",
                                hint="pinned kinds of " + group + ": " + ", ".join(served))], 0, ()
            if versions:
                return [Problem(schemas.E_NOT_SERVED, ("apiVersion",), False,
                                f"{group}/{version} {kind} is not served by the pinned CRD, which serves "
                                + ", ".join(f"{group}/{v}" for v in versions),
                                hint="gpuplan writes " + " or ".join(f"apiVersion: {group}/{v}"
                                                                     for v in _current(group, kind)))], 0, ()
            return [Problem(schemas.E_NOT_SERVED, ("apiVersion",), False,
                            f"{group}/{version} {kind} is not served by the pinned CRDs of {group}",
                            hint="served: " + ", ".join(served))], 0, ()
        # as the API server: prune nulls, apply defaults, drop status where it is a
        # subresource, then validate schema, list types and rules (schemas.prepare)
        schema = crd_schema(group, kind, version)
        obj = schemas.prepare(group, kind, schema, obj)
        old = schemas.prepare(group, kind, schema, old) if old is not None else None
        problems = _deprecated(group, kind, version)
        problems += [Problem(c or schemas.E_CRD_SCHEMA, p, k, m) for c, p, k, m in schemas.schema_findings(validator, obj)]
        if any(p.code.severity is Severity.ERROR for p in problems) or not self.options.cel:
            # CEL runs on schema-valid objects only: its type errors would only repeat these
            return problems, 0, ()
        from gpuplan.verify import cel

        tree = cel.rules_tree(group, kind, version)
        if tree is None:
            return problems, 0, ()
        counter = [0]
        skipped: list[str] = []
        for f in cel.evaluate(tree, obj, old, counter):
            if f.over_budget:
                problems.append(Problem(cel.E_COST, f.path, False, f"{f.rule.message}: {f.over_budget}",
                                        hint=f"CEL rule: {f.rule.rule}"))
                continue
            if f.skipped:
                skipped.append(f"{f.rule.label} ({f.skipped})")
                continue
            if f.error is None:
                problems.append(Problem(cel.E_RULE, f.path, True, f.rule.message, hint=f"CEL rule: {f.rule.rule}"))
            else:
                problems.append(Problem(cel.E_RULE_ERROR, f.path, True,
                                        f"{f.rule.message}: the rule fails to evaluate: {f.error}",
                                        hint=f"CEL rule: {f.rule.rule}"))
        return problems, counter[0], tuple(skipped)

    def _check_core(self, obj: dict, api: str, kind: str, old: dict | None = None) -> list[Problem]:
        from gpuplan.verify import core, schemas

        version = self._version()
        if version is None:
            return []  # GP837 reported once
        validator = schemas.core_validator(version, api, kind)
        if validator is None:
            return [Problem(schemas.W_UNKNOWN_KIND, ("kind",), False,
                            f"{api} {kind}: no pinned CRD and no Kubernetes {version} schema; not verified",
                            hint="gpuplan pins the CRDs listed in gpuplan/upstream/SOURCES.md")]
        # a built-in kind is decoded into its Go type: a null is the zero value, as if absent
        obj = core.drop_nulls(obj)
        old = core.drop_nulls(old) if old is not None else None
        problems = [Problem(c or schemas.E_CORE_SCHEMA, p, k, m)
                    for c, p, k, m in schemas.schema_findings(validator, obj)]
        if not any(p.code.severity is Severity.ERROR for p in problems):
            # the Go validation runs on a decoded object: after a schema error there is none
            problems += [Problem(core.E_CORE_VALIDATION, p, False, m, hint=h)
                         for p, m, h in core.validate(api, kind, obj, old)]
        return problems

    def _version(self) -> str | None:
        if self._core_version is False:
            from gpuplan.verify import schemas

            v = schemas.core_version(self.options.kubernetes_version)
            if v is None:
                have = schemas.core_versions()
                wanted = self.options.kubernetes_version
                if self.options.nearest_version:
                    v = have[0] if schemas.older(wanted, have[0]) else have[-1]
                    self.diagnostics.append(schemas.E_K8S_VERSION.diag(
                        f"no Kubernetes {wanted} schemas in kubernetes-validate (it has {have[0]} to {have[-1]}): "
                        f"core kinds verified against {v}", severity=Severity.WARNING,
                        hint="upgrade kubernetes-validate for schemas of this Kubernetes version"))
                else:
                    self.diagnostics.append(schemas.E_K8S_VERSION.diag(
                        f"no Kubernetes {wanted} schemas in kubernetes-validate "
                        f"(it has {have[0]} to {have[-1]}): core kinds are not verified",
                        hint="pass --kubernetes-version with a version in that range, or upgrade kubernetes-validate"))
            self._core_version = v
        return self._core_version  # type: ignore[return-value]

    # -- objects with their places -----------------------------------------------------------

    def add(self, obj: dict, file: str, locate: Callable[[tuple, bool], tuple[int | None, int | None]],
            old: dict | None = None, where: str = "") -> None:
        """Verify one object and record diagnostics at ``file`` and the positions
        ``locate(path, at_key)`` gives."""
        self.stats.objects += 1
        group = obj["apiVersion"].rpartition("/")[0]
        if group in NOT_API_GROUPS:
            self.stats.objects -= 1
            self.stats.build_files += 1
            return
        if old is not None and (_replaced(obj) or _replaced(old)):
            old = None  # the sync tool deletes and creates it: create rules, not update rules
        problems, evaluated, skipped = self.check(obj, old)
        from gpuplan.upstream.pins import crd_groups
        from gpuplan.verify import core

        if group not in crd_groups() and core.NAMED.get(obj["kind"]) is not None and not any(
                p.code.severity is Severity.ERROR for p in problems):
            # rules on the name (the memo's shape leaves names out): a few per object, cheap
            problems = problems + [Problem(core.E_CORE_VALIDATION, p, False, m, hint=h)
                                   for p, m, h in core.validate_named(obj, old)]

        if any(p.code.code in ("GP833", "GP834") for p in problems) or (group not in crd_groups() and self._version() is None):
            self.stats.not_verified += 1
        elif group in crd_groups():
            self.stats.crd_objects += 1
        else:
            self.stats.core_objects += 1
        self.stats.cel_evaluations += evaluated
        name = _name(obj)
        update_only: set[tuple] = set()
        if old is not None and any(p.code.severity is Severity.ERROR for p in problems):
            created = {(p.code.code, p.path, p.message) for p in self.check(obj, None)[0]}
            update_only = {(p.code.code, p.path, p.message) for p in problems
                           if p.code.severity is Severity.ERROR and (p.code.code, p.path, p.message) not in created}
        for p in problems:
            line, col = locate(p.path, p.at_key)
            hint = p.hint
            if (p.code.code, p.path, p.message) in update_only:
                self.update_errors += 1
                hint = (f"{hint}; " if hint else "") + ("an update rule against the object the existing tree has at "
                                                        "this path: if that file was edited by hand, restore it "
                                                        "(git checkout) and build again")
            self.diagnostics.append(p.code.diag(f"{name}: {p.message}{where}", file=file, line=line, col=col,
                                                path=_jsonpath(p.path), hint=hint))
        for label in skipped:
            self.stats.not_evaluated[label] = self.stats.not_evaluated.get(label, 0) + 1
            if label not in self._first_at:
                self._first_at[label] = (file, *locate((), False))

    def result(self) -> Result:
        from gpuplan.verify.cel import I_NOT_EVALUATED

        diags = list(self.diagnostics)
        for label, n in sorted(self.stats.not_evaluated.items()):
            file, line, col = self._first_at[label]
            diags.append(I_NOT_EVALUATED.diag(f"not evaluated on {n} object{'s' if n != 1 else ''}: {label}",
                                              file=file, line=line, col=col))
        return Result(normalise(diags), self.stats)


def _current(group: str, kind: str) -> list[str]:
    """The served versions of a pinned kind that are not deprecated: the ones gpuplan writes."""
    from gpuplan.upstream.pins import deprecation_warning, served_versions

    return [v for v in served_versions(group, kind) if deprecation_warning(group, kind, v) is None]


def _deprecated(group: str, kind: str, version: str) -> list[Problem]:
    """GP848 for a served version the CRD marks deprecated: the warning the API server sends with
    every request at it (k8s.io/apiextensions-apiserver@v0.36.3 pkg/apiserver/
    customresource_handler.go:1043-1048, recorded at refresh by gpuplan.upstream.crdread)."""
    from gpuplan.upstream.pins import deprecation_warning
    from gpuplan.verify import schemas

    warning = deprecation_warning(group, kind, version)
    if warning is None:
        return []
    current = " or ".join(f"{group}/{v}" for v in _current(group, kind))
    return [Problem(schemas.W_DEPRECATED, ("apiVersion",), False,
                    f"{group}/{version} {kind} is deprecated (served by the pinned release, verified against "
                    f"its {version} schema): {warning!r}",
                    hint=f"gpuplan writes {current}: change apiVersion and the fields that differ"
                    if current else "no served version of this kind is without deprecation")]


def _replaced(obj: dict) -> bool:
    """The object asks its GitOps tool to replace it rather than update it: Argo CD's
    sync option ``Replace=true`` (kubectl replace / delete and create), Flux's
    ``kustomize.toolkit.fluxcd.io/force: enabled`` (recreate on an immutable-field
    error). gpuplan writes these on PriorityClasses, whose ``value`` is immutable, and on
    no NVIDIADriver (gpuplan.lower.operator.nvidia_driver). Read on the new object and on the
    existing tree's: both engines honour the option on the live object too (argoproj/argo-cd@v3.5.1
    gitops-engine/pkg/sync/sync_context.go:1400; fluxcd/pkg/ssa@v0.76.1 manager_apply.go:522-533),
    so a tree written when NVIDIADrivers carried it has them created again once."""
    ann = (obj.get("metadata") or {}).get("annotations")
    if not isinstance(ann, dict):
        return False
    opts = ann.get("argocd.argoproj.io/sync-options")
    return (isinstance(opts, str) and "Replace=true" in opts.replace(" ", "").split(",")) or \
        ann.get("kustomize.toolkit.fluxcd.io/force") == "enabled"


def _name(obj: dict) -> str:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    ns = meta.get("namespace")
    name = meta.get("name", "<no name>")
    return f"{obj['kind']} {f'{ns}/' if ns else ''}{name}"


def _jsonpath(path: tuple) -> str:
    out = ""
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
        elif p.replace("_", "").replace("-", "").isalnum():
            out += f".{p}" if out else p
        else:
            out += f"[{json.dumps(p)}]"
    return out


# --- entry points ----------------------------------------------------------------------------


def _manifests_by_identity(manifests: Iterable[Manifest]) -> dict[tuple, dict]:
    out: dict[tuple, dict] = {}
    for m in manifests:
        if isinstance(m.data, dict) and not isinstance(identify(m), Diagnostic):
            ident = identity(m.data)
            if ident is not None:
                out[ident] = m.data
    return out


def load_paths(paths: list[str], sources: dict[str, str] | None = None) -> tuple[list[Manifest], list[Diagnostic], int]:
    """Every document under ``paths``; ``sources`` gets the text of each file read."""
    import gc

    files, diags = discover(paths)
    manifests: list[Manifest] = []
    # the loaded data only grows and holds no cycles: a cyclic collection every
    # few thousand allocations would walk all of it again and again (2x on the XL tree)
    enabled = gc.isenabled()
    gc.disable()
    try:
        for path, display in files:
            ms, ds = read_file(path, display, sources=sources)
            manifests += ms
            diags += ds
    finally:
        if enabled:
            gc.enable()
    return manifests, diags, len(files)


def verify_paths(paths: list[str], options: Options = Options(), *, base: list[str] | None = None) -> Result:
    """Verify every manifest under ``paths`` (files or directories). With
    ``base`` (an earlier tree), transition rules run against the object of the
    same group, kind, namespace and name found there."""
    texts: dict[str, str] = {}
    manifests, diags, nfiles = load_paths(paths, texts)
    old: dict[tuple, dict] = {}
    if base:
        base_manifests, base_diags, _ = load_paths(base, texts)
        diags += base_diags
        old = _manifests_by_identity(base_manifests)
    v = Verifier(options)
    v.stats.files = nfiles
    v.diagnostics += diags
    for m in manifests:
        ident = identify(m)
        if isinstance(ident, Diagnostic):
            v.diagnostics.append(ident)
            if ident.is_error:
                v.stats.not_verified += 1
            else:
                v.stats.plain += 1
            continue
        key = identity(m.data)
        v.add(m.data, m.file, lambda p, k, m=m: m.locate(p, key=k), old.get(key) if key else None)
    result = v.result()
    # excerpts come from the text read once, through the bounded reader: a
    # file is never opened again (it may have changed, or be a link swapped since)
    for d in result.diagnostics:
        if d.file and d.file not in result.sources and d.file in texts:
            result.sources[d.file] = texts[d.file]
    return result


def verify_file(v: Verifier, path: str, docs: Sequence[Any], files: Mapping[str, bytes], *, out_dir: str,
                old_tree: str | Path) -> None:
    """Verify one file's objects; the build calls this per file as it renders,
    so the lowered objects can go as soon as their bytes exist. ``old_tree``:
    the tree on disk, whose objects at this path the transition rules compare with."""
    v.stats.files += 1
    old = read_old_objects(old_tree, path, docs)
    located: list[Manifest] | None = None

    def locate(p: tuple, k: bool, i: int = 0) -> tuple[int | None, int | None]:
        nonlocal located
        if located is None:
            located = load_text(files[path].decode("utf-8"), path, check_duplicates=False)[0]
        return located[i].locate(p, key=k) if i < len(located) else (None, None)

    for i, obj in enumerate(d for d in docs if d is not None):
        if not isinstance(obj, dict) or "apiVersion" not in obj or not isinstance(obj.get("metadata"), dict):
            continue  # not an API object: Helm values, kustomization.yaml, kubelet drop-ins
        key = identity(obj)
        v.add(obj, f"{out_dir}/{path}", lambda p, k, i=i: locate(p, k, i), old.get(key) if key else None)


def verify_result(v: Verifier, files: Mapping[str, bytes], *, out_dir: str) -> Result:
    result = v.result()
    for d in result.diagnostics:  # excerpts come from the files about to be written
        rel = (d.file or "")[len(out_dir) + 1:]
        if rel in files:
            result.sources[d.file] = files[rel].decode("utf-8", errors="replace")  # type: ignore[index]
    return result


def read_old_objects(out_dir: str | Path, path: str, docs: Sequence[Any]) -> dict[tuple, dict]:
    """The objects, by identity, of the existing tree's file at ``path``, when
    ``docs`` hold objects that have transition rules (only those rules read the
    old object; parsing every file of the tree would cost seconds)."""
    import yaml

    from gpuplan.upstream.pins import crd_groups
    from gpuplan.verify.cel import rules_tree, transition_rules

    from gpuplan.verify.core import UPDATE_RULES

    def has_transition_rules(d: Any) -> bool:
        if not isinstance(d, dict) or not isinstance(d.get("apiVersion"), str):
            return False
        group, _, version = d["apiVersion"].rpartition("/")
        if group not in crd_groups():
            return d.get("kind") in UPDATE_RULES  # Go update rules (PriorityClass value, ...)
        return bool(transition_rules(rules_tree(group, str(d.get("kind")), version)))

    if not any(has_transition_rules(d) for d in docs):
        return {}
    # The committed tree is as hostile as any pull request: read through the
    # same bounded reader and loader as `gpuplan verify` (a FIFO, a device, a
    # 6 GiB sparse file, an alias bomb or a 5,000-digit integer cost nothing).
    # Anything wrong with the old file, or a link out of the tree, means no old
    # objects: the transition rules are then reported as not evaluated.
    file = os.path.join(out_dir, path)
    try:
        real = os.path.realpath(file)
        root = os.path.realpath(out_dir)
        if not real.startswith(root.rstrip(os.sep) + os.sep) or not os.path.lexists(file):
            return {}
    except (OSError, ValueError):
        return {}
    olds, diags = read_file(Path(real), str(file))
    if any(d.is_error for d in diags):
        return {}
    return {key: m.data for m in olds if isinstance(m.data, dict) and (key := identity(m.data)) is not None}
