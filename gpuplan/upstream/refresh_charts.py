"""Refresh the pinned lists of objects the Helm charts gpuplan installs render.

    python -m gpuplan.upstream.refresh_charts kueue GIT_DIR
    python -m gpuplan.upstream.refresh_charts gpu-operator GIT_DIR
    python -m gpuplan.upstream.refresh_charts dra-driver-nvidia-gpu GIT_DIR
    python -m gpuplan.upstream.refresh_charts volcano GIT_DIR

``GIT_DIR``: a clone (or bare mirror) of the chart's repository that has the tag in
:data:`CHARTS`. The chart's templates are read at that tag (``git show``): every
document's ``kind``, ``apiVersion`` and ``metadata.namespace``, and the ``{{ if }}``
blocks around it. A condition over ``.Values`` (``.Values.a.b``, ``not``, ``and``) is
kept as ``when`` and evaluated by the check against the chart's defaults (kept as
``defaults``) and the values gpuplan writes; anything else (``.Capabilities``,
``empty``, ``has``) is kept as text in ``unparsed`` and assumed true. Subcharts
are read with their dependency ``condition`` (or always, without one), their values under their
name. ``crds/`` files are CustomResourceDefinitions; a template line that brings in a chart file
through ``.Files.Get`` (Volcano's CRDs and admission policies) is read as that file's documents. Where ``helm`` is on ``PATH`` the
result can be compared with ``helm template`` (docs/charts.md). Output:
``charts/<chart>-<version>.json``.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent / "charts"
RELEASE_NS = "<release>"

# chart -> where it lives upstream; version: the chart version gpuplan pins
CHARTS: dict[str, dict[str, Any]] = {
    "kueue": {"repository": "kubernetes-sigs/kueue", "tag": "v0.19.2", "version": "0.19.2",
              "path": "charts/kueue", "subcharts": {}},
    "gpu-operator": {"repository": "NVIDIA/gpu-operator", "tag": "v26.7.0", "version": "v26.7.0",
                     "path": "deployments/gpu-operator",
                     "subcharts": {"node-feature-discovery": "nfd.enabled"}},
    # Chart.yaml version 1.15.1 (appVersion 1.15.1), published unchanged in the Helm repository users
    # install it from: https://volcano-sh.github.io/helm-charts, chart `volcano` (README.md "Install via
    # helm" at the tag; the repository's index.yaml lists volcano 1.15.1 for appVersion 1.15.1). Its
    # templates bring the CRDs and admission policies in through .Files.Get (crd/bases/, policy/);
    # the jobflow subchart is a dependency without a condition, always rendered
    "volcano": {"repository": "volcano-sh/volcano", "tag": "v1.15.1", "version": "1.15.1",
                "path": "installer/helm/chart/volcano", "subcharts": {"jobflow": None}},
    # no release tag carries chart 0.5.0 yet: the commit the GPU Operator v26.7.0 image pin matches
    "dra-driver-nvidia-gpu": {"repository": "kubernetes-sigs/dra-driver-nvidia-gpu",
                              "tag": "95932046683719c43b6a0dd9613c2e5aad5d6703", "version": "0.5.0",
                              "path": "deployments/helm/dra-driver-nvidia-gpu", "subcharts": {}},
}

# namespaced kinds the charts render (everything else they render is cluster-scoped)
NAMESPACED = frozenset({
    "ConfigMap", "Secret", "Service", "ServiceAccount", "Deployment", "DaemonSet", "Job", "Role",
    "RoleBinding", "PodDisruptionBudget", "NetworkPolicy", "Ingress", "ServiceMonitor", "PodMonitor",
    "Certificate", "Issuer",
})

_IF = re.compile(r"^\{\{-?\s*(if|with|range)\s+(.*?)\s*-?\}\}\s*$")
_END = re.compile(r"^\{\{-?\s*end\s*-?\}\}\s*$")
_ELSE = re.compile(r"^\{\{-?\s*else")
_REF = re.compile(r"^\(?\s*(not\s+)?\.Values\.([A-Za-z0-9_.-]+)\s*\)?$")


def _git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", "-C", git_dir, *args], check=True, capture_output=True, text=True).stdout


def parse_condition(expr: str) -> tuple[list[list[Any]], list[str]]:
    """``when`` ([values path, truthy]) and the parts that are not a plain values test."""
    expr = expr.strip()
    parts = [expr]
    m = re.match(r"^and\s+(.*)$", expr)
    if m:
        parts = re.findall(r"\([^()]*(?:\([^()]*\)[^()]*)*\)|\S+", m.group(1))
    when: list[list[Any]] = []
    raw: list[str] = []
    for p in parts:
        r = _REF.match(p.strip())
        if r:
            when.append([r.group(2), not r.group(1)])
        else:
            raw.append(p.strip())
    return when, raw


def scan_template(text: str) -> list[dict[str, Any]]:
    """Documents of one template: kind, apiVersion, namespace expression, conditions."""
    stack: list[str | None] = []
    out: list[dict[str, Any]] = []
    cur: dict[str, Any] = {}
    for line in text.splitlines():
        s = line.strip()
        if m := _IF.match(s):
            stack.append(m.group(2) if m.group(1) == "if" else None)
            continue
        if _END.match(s):
            if stack:
                stack.pop()
            continue
        if _ELSE.match(s) and stack:
            stack[-1] = None  # an else branch: condition unknown
            continue
        if s == "---":
            cur = {}
            continue
        if line.startswith("apiVersion:"):
            cur["apiVersion"] = line.split(":", 1)[1].strip().strip("'\"")
        elif line.startswith("kind:"):
            cur = {**cur, "kind": line.split(":", 1)[1].strip(), "conds": [c for c in stack if c]}
            out.append(cur)
        elif re.match(r"^  namespace:", line) and out and out[-1] is cur:
            cur["namespace"] = line.split(":", 1)[1].strip().strip("'\"")
    return out


def _namespace(expr: str | None, cluster: bool) -> str | None:
    if cluster:
        return None
    # a chart's "<chart>.namespace" helper is the release namespace unless namespaceOverride is set
    # (gpuplan sets none); the DRA driver's `$namespace` ranges over that one namespace plus the
    # controller's ADDITIONAL_NAMESPACES, empty by default (templates/_helpers.tpl:156-170)
    if expr is None or "Release.Namespace" in expr or re.search(r'\.namespace"', expr) or expr == "{{ $namespace }}":
        return RELEASE_NS
    return expr


# apiVersions a chart picks by the cluster's Capabilities: the group is the same whichever version
# (dra-driver-nvidia-gpu templates/_helpers.tpl "resourceApiVersion": resource.k8s.io/v1 or v1beta1)
TEMPLATED_GROUPS = {"resourceApiVersion": "resource.k8s.io"}


def _group(api_version: str) -> str:
    if "{{" in api_version:
        for helper, group in TEMPLATED_GROUPS.items():
            if helper in api_version:
                return group
        raise ValueError(f"templated apiVersion gpuplan cannot resolve: {api_version}")
    return api_version.rpartition("/")[0]


def _lookup(values: dict[str, Any], path: str) -> Any:
    cur: Any = values
    for k in path.split("."):
        if not isinstance(cur, dict) or k not in cur:
            return None
        cur = cur[k]
    return cur


# a template line bringing in a file of the chart: ``{{ .Files.Get "policy/x.yaml" }}``, or the CRD
# templates' ``{{- tpl ($.Files.Get (printf "crd/%s/x.yaml" (include "crd_version" .))) . }}``
_FILES_GET = re.compile(r'\.Files\.Get\s+(?:"([^"]+)"|\(printf\s+"([^"]+)"\s+\(include\s+"crd_version"\s+\.\)\))')
# Volcano's "crd_version" helper (templates/_helpers.tpl): "bases" (the apiextensions.k8s.io/v1 CRDs)
# where the cluster serves apiextensions.k8s.io/v1, as every Kubernetes version gpuplan supports does
CRD_VERSION = "bases"


def inline_files(git_dir: str, tag: str, path: str, text: str) -> str:
    """A template with each line that brings in a chart file (:data:`_FILES_GET`) replaced by the
    file's documents, kept under the conditions around that line."""
    out = []
    for line in text.splitlines():
        m = _FILES_GET.search(line)
        if m is None:
            out.append(line)
            continue
        rel = m.group(1) or m.group(2).replace("%s", CRD_VERSION)
        # what follows the include on the same line (a block opened there) still applies
        rest = line[m.end():].split("}}", 1)[1] if "}}" in line[m.end():] else ""
        out += ["---", *_git(git_dir, "show", f"{tag}:{path}/{rel}").splitlines(), "---"]
        if rest.strip():
            out.append(rest)
    return "\n".join(out) + "\n"


def read_chart(git_dir: str, tag: str, path: str, prefix: str = "", extra_when: list | None = None,
               parent_values: dict[str, Any] | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    files = _git(git_dir, "ls-tree", "-r", "--name-only", tag, path).split()
    # a chart without values.yaml (Volcano's jobflow subchart) has no defaults
    values = (yaml.safe_load(_git(git_dir, "show", f"{tag}:{path}/values.yaml")) or {}
              if f"{path}/values.yaml" in files else {})
    objects: list[dict[str, Any]] = []
    defaults: dict[str, Any] = {}
    for f in sorted(files):
        rel = f[len(path) + 1:]
        if rel.startswith("charts/") or not f.endswith((".yaml", ".yml")) or "/tests/" in f:
            continue
        if rel.startswith("crds/"):
            objects.append({"kind": "CustomResourceDefinition", "group": "apiextensions.k8s.io",
                            "namespace": None, "clusterScoped": True, "template": f"{prefix}{rel}",
                            "when": list(extra_when or [])})
            continue
        if not rel.startswith("templates/"):
            continue
        for d in scan_template(inline_files(git_dir, tag, path, _git(git_dir, "show", f"{tag}:{f}"))):
            kind = d["kind"]
            group = _group(d.get("apiVersion", "v1"))
            cluster = kind not in NAMESPACED
            when, raw = [], []
            for c in d["conds"]:
                w, r = parse_condition(c)
                when += [[prefix + p, t] for p, t in w]
                raw += r
            for p, _ in when:
                local = p[len(prefix):]
                v = _lookup((parent_values or {}).get(prefix.rstrip("."), {}) if prefix else {}, local)
                defaults[p] = v if v is not None else _lookup(values, local)
            obj: dict[str, Any] = {"kind": kind, "group": group,
                                   "namespace": _namespace(d.get("namespace"), cluster),
                                   "clusterScoped": cluster, "template": f"{prefix}{rel}",
                                   "when": list(extra_when or []) + when}
            if raw:
                obj["unparsed"] = raw
            objects.append(obj)
    return objects, defaults | ({"__values__": values} if not prefix else {})


def refresh(chart: str, git_dir: str) -> Path:
    c = CHARTS[chart]
    commit = _git(git_dir, "rev-parse", c["tag"] + "^{commit}").strip()
    objects, defaults = read_chart(git_dir, c["tag"], c["path"])
    values = defaults.pop("__values__")
    for sub, cond in c["subcharts"].items():
        if cond is not None:  # None: a dependency without a condition, always rendered
            defaults[cond] = _lookup(values, cond)
        o, d = read_chart(git_dir, c["tag"], f"{c['path']}/charts/{sub}", prefix=f"{sub}.",
                          extra_when=[[cond, True]] if cond is not None else [], parent_values=values)
        objects += o
        defaults.update(d)
    data = {
        "chart": chart, "version": c["version"], "repository": c["repository"], "tag": c["tag"],
        "commit": commit, "path": c["path"], "releaseNamespace": RELEASE_NS,
        "method": "templates read at the tag (gpuplan.upstream.refresh_charts); when: values tests "
                  "evaluated against defaults + gpuplan's values; unparsed: assumed true",
        "defaults": dict(sorted(defaults.items())),
        "objects": objects,
    }
    HERE.mkdir(exist_ok=True)
    out = HERE / f"{chart}-{c['version']}.json"
    out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in CHARTS:
        print(__doc__, file=sys.stderr)
        return 2
    print(refresh(argv[0], argv[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
