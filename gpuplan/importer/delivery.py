"""What the cluster's Argo CD Applications, GPU Operator objects and admission
policies say that ``spec.cluster`` and the tiers can say: the GitOps repository,
the gpu-operator chart version, the driver version, tiers' ``maxGPUsPerPod``.

* GitOps: a gpuplan chart Application's ``ref: values`` source (importer.kueue.gitops_from),
  else an Application in Argo CD's namespace that syncs a Git path (``source.path``): its
  ``repoURL``, ``targetRevision`` and ``path`` (the parent of ``delivery/...`` for gpuplan's own).
* the gpu-operator chart Application or HelmRelease: ``chartVersion``; its Helm values
  (``helm.valuesObject`` / ``helm.values``) ``driver.version``.
* NVIDIADriver objects (``spec.version``): one version is the fleet's ``driverVersion``.
* gpuplan's ValidatingAdmissionPolicies: the message gpuplan writes for a tier's
  ``maxGPUsPerPod`` (gpuplan/lower/admission.py ``_tier_validations``).

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import re
from typing import Any

from gpuplan.artifacts import dig as _get
from gpuplan.importer import conventions as V
from gpuplan.importer.read import Obj, yaml_payload

OPERATOR_CHART = "gpu-operator"  # gpuplan/lower/gitops.py GPU_OPERATOR_CHART
CHART_VERSION = re.compile(r"v[0-9]+\.[0-9]+\.[0-9]+\Z")  # spec.models.GpuOperator.chart_version
# gpuplan/lower/admission.py: "pods of PriorityClass <pc> may request at most <n> <res> (tier <t> maxGPUsPerPod; ..."
MAX_PER_POD = re.compile(r"pods of PriorityClass \S+ may request at most (?P<n>[0-9]+) \S+ "
                         r"\(tier (?P<tier>[a-z0-9-]+) maxGPUsPerPod;")
DELIVERY_DIR = "/delivery/"  # gpuplan.identity: bootstrap and project Applications sync <path>/delivery/...


def git_sources(objs: list[Obj], argo_ns: str) -> list[tuple[Obj, dict]]:
    """(Application, its source) of every Application in Argo CD's namespace that
    syncs a path of a Git repository (not a chart), gpuplan's first, then by name."""
    out = []
    for o in objs:
        if o.kind != "Application" or o.api_group != "argoproj.io" or o.namespace != argo_ns:
            continue
        src = _get(o.data, "spec", "source")
        if isinstance(src, dict) and isinstance(src.get("repoURL"), str) and isinstance(src.get("path"), str) \
                and "chart" not in src:
            out.append((o, src))
    return sorted(out, key=lambda x: (x[0].labels.get(V.MANAGED_BY_LABEL) != V.MANAGED_BY_VALUE, x[0].name))


def gitops_from_source(o: Obj, src: dict) -> dict[str, Any]:
    """spec.cluster.gitops of an Application's Git source; gpuplan's project Application syncs
    ``<path>/delivery/project``, its root ``<path>``."""
    path = src["path"].strip("/")
    if V.MANAGED_BY_VALUE == o.labels.get(V.MANAGED_BY_LABEL) and DELIVERY_DIR in f"/{path}/":
        path = f"/{path}/".split(DELIVERY_DIR)[0].strip("/")
    g: dict[str, Any] = {"engine": "argocd", "repoURL": src["repoURL"]}
    rev = src.get("targetRevision")
    if isinstance(rev, str) and rev not in ("main", ""):
        g["revision"] = rev
    if path and path != "generated":
        g["path"] = path
    return g


def chart_values(o: Obj) -> dict:
    """The Helm values an Application gives its chart inline (``valuesObject``, else the
    ``values`` YAML text); {} when none or not a mapping."""
    sources = _get(o.data, "spec", "sources")
    sources = sources if isinstance(sources, list) else [_get(o.data, "spec", "source")]
    for s in sources:
        helm = s.get("helm") if isinstance(s, dict) else None
        if not isinstance(helm, dict):
            continue
        if isinstance(helm.get("valuesObject"), dict):
            return helm["valuesObject"]
        if isinstance(helm.get("values"), str):
            v = yaml_payload(helm["values"])
            return v if isinstance(v, dict) else {}
    return {}


def driver_version(driver: Any) -> str | None:
    """spec.cluster.gpuOperator.driverVersion of the chart's / ClusterPolicy's ``driver``:
    ``usePrecompiled`` with a branch ``570`` is ``R570`` (gpuplan/lower/operator.py
    driver_values writes the branch so), else the version as it is."""
    v = driver.get("version") if isinstance(driver, dict) else None
    if not isinstance(v, str) or not v:
        return None
    return f"R{v}" if driver.get("usePrecompiled") is True and v.isdigit() else v


def nvidia_drivers(objs: list[Obj]) -> list[Obj]:
    """The NVIDIADriver objects with a version, by name."""
    return [o for o in sorted(objs, key=lambda o: o.name) if o.kind == "NVIDIADriver" and o.api_group == "nvidia.com"
            and isinstance(_get(o.data, "spec", "version"), str) and _get(o.data, "spec", "version")]


def driver_versions(objs: list[Obj]) -> dict[str, Obj]:
    """NVIDIADriver ``spec.version`` -> the first object (by name) that states it."""
    out: dict[str, Obj] = {}
    for o in nvidia_drivers(objs):
        out.setdefault(_get(o.data, "spec", "version"), o)
    return out


def max_gpus_per_pod(objs: list[Obj]) -> dict[str, tuple[int, Obj]]:
    """tier -> (maxGPUsPerPod, policy) from gpuplan's ValidatingAdmissionPolicies
    (cluster-scoped, labelled by gpuplan: a tenant cannot write one)."""
    out: dict[str, tuple[int, Obj]] = {}
    for o in sorted(objs, key=lambda o: o.name):
        if o.kind != "ValidatingAdmissionPolicy" or o.namespace or o.labels.get(V.MANAGED_BY_LABEL) != V.MANAGED_BY_VALUE:
            continue
        for v in _get(o.data, "spec", "validations") or ():
            m = MAX_PER_POD.match(v.get("message") or "") if isinstance(v, dict) and isinstance(
                v.get("message"), str) else None
            if m:
                out.setdefault(m["tier"], (int(m["n"]), o))
    return out
