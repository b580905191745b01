"""GP526: every object a chart gpuplan installs renders must be admitted by the
Argo CD AppProject gpuplan writes. Argo CD checks each object of a sync against the
project (argoproj/argo-cd@v3.5.1 controller/sync.go:647-671: a cluster-scoped
group/kind against ``clusterResourceWhitelist``, a namespaced object's namespace
against ``destinations``); one refused object fails the whole sync operation.

What a chart renders at its pinned version is pinned under
``gpuplan/upstream/charts/<chart>-<version>.json`` (refreshed by
``python -m gpuplan.upstream.refresh_charts``, docs/charts.md): each object's
kind, API group, namespace (``<release>``: the release namespace) and the
``.Values`` tests it renders under, evaluated here against the chart's defaults
and the values the tree gives the Application (its ``$values`` file, or inline
``helm.values``/``valuesObject``). A chart version without a pinned list is not
checked. Flux: no AppProject; the HelmRelease runs with the helm-controller's
service account (cluster-admin in a default ``flux bootstrap``), so nothing to check.

Stage: check-objects (docs/architecture.md)."""

from __future__ import annotations

import json
from fnmatch import fnmatchcase
from functools import lru_cache
from importlib.resources import files
from typing import Any, Iterator

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.resolve import ResolvedFleet

E_NOT_ADMITTED = Code(
    "GP526", "chart object the AppProject does not admit", Severity.ERROR,
    "A Helm chart gpuplan installs through an Argo CD Application renders an object the generated "
    "AppProject does not admit: a namespaced object outside the project's destinations, or a "
    "cluster-scoped kind outside its clusterResourceWhitelist. Argo CD refuses the object and the "
    "whole sync of the Application fails. The objects each pinned chart version renders are listed in "
    "gpuplan/upstream/charts/ (docs/charts.md).",
    bad="Kueue chart 0.19.2 with enableVisibilityAuthReaderRoleBinding: true (a RoleBinding in kube-system)",
    good="the chart value that renders the object turned off, and the object created another way",
)

CODES = (E_NOT_ADMITTED,)

# the object carrying a chart values file through the collect step
VALUES_KIND = "gpuplan.dev/ChartValues"
RELEASE_NS = "<release>"

# chart name -> the spec field that pins its version
SPEC_PATHS: dict[str, tuple[Any, ...]] = {
    "gpu-operator": ("spec", "cluster", "gpuOperator", "chartVersion"),
    "kueue": ("spec", "queueing", "kueue", "chartVersion"),
    "volcano": ("spec", "queueing", "volcano", "chartVersion"),
    "dra-driver-nvidia-gpu": ("spec", "cluster", "allocation", "draDriverVersion"),
}
GITOPS_PATH = ("spec", "cluster", "gitops")
ANCHORS = (*SPEC_PATHS.values(), GITOPS_PATH)  # every spec path a finding is reported at


def keep_document(path: str, d: Any) -> dict[str, Any] | None:
    """What the check reads of one streamed document: the AppProject and the
    Applications as they are, a Helm values file (``*/values.yaml``, no kind) as
    ``{kind: VALUES_KIND, path, values}``; None for everything else."""
    if not isinstance(d, dict):
        return None
    if d.get("kind") in ("AppProject", "Application"):
        return d
    if path.endswith("/values.yaml") and "kind" not in d:
        return {"kind": VALUES_KIND, "path": path, "values": d}
    return None


def needed(rf: ResolvedFleet) -> bool:
    """Only where gpuplan writes the AppProject (Argo CD, no ``gitops.project``)."""
    g = rf.fleet.spec.cluster.gitops
    return g.engine == "argocd" and g.project is None


@lru_cache(maxsize=None)
def chart_objects(chart: str, version: str) -> dict[str, Any] | None:
    """The pinned list of one chart version, or None."""
    res = files("gpuplan.upstream").joinpath("charts", f"{chart}-{version}.json")
    if not res.is_file():
        return None
    return json.loads(res.read_text())


def _lookup(values: Any, path: str) -> tuple[bool, Any]:
    cur = values
    for k in path.split("."):
        if not isinstance(cur, dict) or k not in cur:
            return False, None
        cur = cur[k]
    return True, cur


def renders(obj: dict[str, Any], defaults: dict[str, Any], values: dict[str, Any]) -> bool:
    """Whether ``obj`` renders: every ``when`` test ([values path, truthy]) holds on the
    given values, the chart default where they do not set the path (Helm truthiness)."""
    for path, truthy in obj.get("when", ()):
        found, v = _lookup(values, path)
        if not found:
            v = defaults.get(path)
        if bool(v) != truthy:
            return False
    return True


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def rendered(data: dict[str, Any], values: dict[str, Any], release_ns: str) -> list[dict[str, Any]]:
    """The objects of a pinned chart that render with ``values``, namespaces resolved."""
    out = []
    for o in data["objects"]:
        if renders(o, data.get("defaults", {}), values):
            ns = o.get("namespace")
            out.append({**o, "namespace": release_ns if ns == RELEASE_NS else ns})
    return out


def _admits_ns(project: dict[str, Any], ns: str) -> bool:
    return any(fnmatchcase(ns, d.get("namespace", "")) for d in project["spec"].get("destinations", ()))


def _admits_kind(project: dict[str, Any], group: str, kind: str) -> bool:
    return any(fnmatchcase(group, w.get("group", "")) and fnmatchcase(kind, w.get("kind", ""))
               for w in project["spec"].get("clusterResourceWhitelist", ()))


def _chart_sources(app: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    spec = app["spec"]
    for src in spec.get("sources") or [spec.get("source", {})]:
        if "helm" not in src and "chart" not in src:
            continue
        chart = src.get("chart") or src["repoURL"].rstrip("/").rsplit("/", 1)[-1]
        yield chart, src.get("targetRevision", ""), src.get("helm", {})


def _values(helm: dict[str, Any], values_files: dict[str, dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in helm.get("valueFiles", ()):
        rel = f.removeprefix("$values/")
        for path, v in values_files.items():
            if rel == path or rel.endswith("/" + path):
                out = _merge(out, v)
    inline = helm.get("valuesObject") or {}
    return _merge(out, inline) if isinstance(inline, dict) else out


def check(rf: ResolvedFleet, docs: list[dict[str, Any]], *, diag: Any = None) -> Iterator[Diagnostic]:
    """The chart Applications against the AppProject lowering emitted. ``diag``: how a
    finding is placed at its spec line (``rf.diag`` unless the build freed the spec)."""
    diag = diag or rf.diag
    # the tree holds two projects under Argo CD: the fleet's (delivery/project/) and the
    # admin project of the Application that delivers it; each Application is checked
    # against the project it names
    projects = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "AppProject"}
    if not projects:
        return
    values_files = {d["path"]: d["values"] for d in docs if d.get("kind") == VALUES_KIND}
    for app in (d for d in docs if d.get("kind") == "Application"):
        project = projects.get(app["spec"].get("project", ""))
        if project is None:
            continue
        release_ns = app["spec"]["destination"].get("namespace", "")
        for chart, version, helm in _chart_sources(app):
            data = chart_objects(chart, version)
            if data is None:
                continue
            where = SPEC_PATHS.get(chart, GITOPS_PATH)
            seen: set[tuple[str, str, str | None]] = set()
            for o in rendered(data, _values(helm, values_files), release_ns):
                group, kind, ns = o["group"], o["kind"], o["namespace"]
                if (group, kind, ns) in seen:
                    continue
                seen.add((group, kind, ns))
                gk = f"{kind}.{group}" if group else kind
                if o["clusterScoped"] and not _admits_kind(project, group, kind):
                    yield diag(E_NOT_ADMITTED, f"chart {chart} {version} renders cluster-scoped {gk} "
                                  f"({o['template']}), which AppProject {project['metadata']['name']} does not "
                                  "list in clusterResourceWhitelist: Argo CD fails the sync of Application "
                                  f"{app['metadata']['name']}", where,
                                  hint=_hint(o))
                elif not o["clusterScoped"] and ns is not None and not _admits_ns(project, ns):
                    yield diag(E_NOT_ADMITTED, f"chart {chart} {version} renders {gk} in namespace {ns} "
                                  f"({o['template']}), which is not a destination of AppProject "
                                  f"{project['metadata']['name']}: Argo CD fails the sync of Application "
                                  f"{app['metadata']['name']}", where,
                                  hint=_hint(o))


def _hint(o: dict[str, Any]) -> str:
    when = [f"{p}={'true' if t else 'false'}" for p, t in o.get("when", ())]
    if when:
        return ("it renders because " + ", ".join(when) + "; set the chart value to skip it (and create the "
                "object another way), or admit it in the project (spec.cluster.gitops.project)")
    return "admit it in the project, or use your own project (spec.cluster.gitops.project)"
