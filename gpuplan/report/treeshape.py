"""The shape of the old tree, checked before any report reads it.

`gpuplan diff` (and the pull-request report, which runs it with ``--old`` set to the
base branch's tree) reads the old tree as the cluster's present state: the
disruption model (``gpuplan.report.disruption``, ``transition``, ``delivery``) and
the node-group back-ends (``gpuplan.provisioning``) walk its objects as gpuplan
wrote them. A pull request can edit that tree, so before anything reads it every
object is checked here for the types those readers take, which are the types
Kubernetes itself gives the fields (labels and annotations map strings to strings,
``spec`` is an object, a NodeFeatureRule's ``rules`` a list of objects, ...), and
for an identity Markdown can quote (``kind`` a Kubernetes kind, an API group a DNS
name, names without control characters). An object no API server would have
admitted is not guessed at: :func:`check` returns a GP839 diagnostic per field,
naming the file, the object and the field, and :func:`require` raises
:class:`TreeShapeError` with them (exit 1, invalid input).

Only the fields the readers take are checked (``FIELDS``); others are compared as
data by ``gpuplan.output.objdiff``, which takes any shape. A reader that starts to
read a new field adds it here; ``tests/cli/test_hostile_trees.py`` mutates real
trees field by field to keep the two in step.

Stage: report (docs/architecture.md)."""

from __future__ import annotations

import json
import re
from typing import Any, Iterator, Mapping

import click

from gpuplan.diagnostics import Diagnostic
from gpuplan.output.tree import TreeError
from gpuplan.verify.manifests import E_SHAPE

MAP, LIST, STR, STR_MAP, STR_LIST = "a mapping", "a list", "a string", "a mapping of strings", "a list of strings"

# Every Kubernetes object.
OBJECT: tuple[tuple[str, str], ...] = (
    ("metadata.labels", STR_MAP),
    ("metadata.annotations", STR_MAP),
    ("spec", MAP),
)
# gpu-operator/values.yaml, and a Flux HelmRelease's spec.values (gpuplan.report.disruption)
VALUES: tuple[tuple[str, str], ...] = (
    ("driver", MAP), ("driver.nvidiaDriverCRD", MAP), ("driver.upgradePolicy", MAP),
    ("toolkit", MAP), ("cdi", MAP), ("mig", MAP),
)
_TAINTS = lambda at: ((at, LIST), (f"{at}[]", MAP), (f"{at}[].key", STR), (f"{at}[].value", STR),  # noqa: E731
                      (f"{at}[].effect", STR))
# kind -> the fields its readers take (besides OBJECT's)
FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "NodeFeatureRule": (
        ("spec.rules", LIST), ("spec.rules[]", MAP), ("spec.rules[].labels", STR_MAP),
        *_TAINTS("spec.rules[].taints"),
        ("spec.rules[].matchFeatures", LIST), ("spec.rules[].matchFeatures[]", MAP),
        ("spec.rules[].matchFeatures[].matchExpressions", MAP),
        ("spec.rules[].matchFeatures[].matchExpressions{}", MAP),
        ("spec.rules[].matchFeatures[].matchExpressions{}.value", STR_LIST),
    ),
    "NodePool": (
        ("spec.template", MAP), ("spec.template.metadata", MAP), ("spec.template.metadata.labels", STR_MAP),
        ("spec.template.spec", MAP), *_TAINTS("spec.template.spec.taints"),
        ("spec.template.spec.nodeClassRef", MAP),
        ("spec.disruption", MAP), ("spec.disruption.budgets", LIST), ("spec.disruption.budgets[]", MAP),
        ("spec.disruption.budgets[].reasons", STR_LIST),
    ),
    "NVIDIADriver": (("spec.nodeSelector", STR_MAP), ("spec.upgradePolicy", MAP)),
    "HelmRelease": (("spec.values", MAP), *((f"spec.values.{p}", t) for p, t in VALUES)),
    "ConfigMap": (("data", STR_MAP),),
    "Application": (("spec.source", MAP), ("spec.destination", MAP)),
    "AppProject": (("spec.destinations", LIST), ("spec.destinations[]", MAP), ("spec.destinations[].namespace", STR),
                   ("spec.clusterResourceWhitelist", LIST), ("spec.clusterResourceWhitelist[]", MAP)),
    # gpuplan.provisioning's back-ends
    "ManagedClustersAgentPool": (("spec.gpuProfile", MAP), ("spec.nodeLabels", STR_MAP), ("spec.nodeTaints", STR_LIST)),
    "ContainerNodePool": (("spec.nodeConfig", MAP), ("spec.nodeConfig.labels", STR_MAP),
                          ("spec.nodeConfig.taint", LIST), ("spec.nodeConfig.taint[]", MAP)),
    "MachineDeployment": (("spec.template", MAP), ("spec.template.spec", MAP),
                          ("spec.template.spec.bootstrap", MAP)),
    "KubeadmConfigTemplate": (
        ("spec.template", MAP), ("spec.template.spec", MAP), ("spec.template.spec.joinConfiguration", MAP),
        ("spec.template.spec.joinConfiguration.nodeRegistration", MAP),
        ("spec.template.spec.joinConfiguration.nodeRegistration.kubeletExtraArgs", LIST),
        ("spec.template.spec.joinConfiguration.nodeRegistration.kubeletExtraArgs[]", MAP),
        *_TAINTS("spec.template.spec.joinConfiguration.nodeRegistration.taints"),
    ),
}
VALUES_PATH = "gpu-operator/values.yaml"  # gpuplan.report.transition.VALUES_PATH

# kind: a Kubernetes kind (CamelCase, as CRD names.kind); apiVersion: [group/]version
KIND = re.compile(r"[A-Za-z][A-Za-z0-9]{0,62}\Z")
API_VERSION = re.compile(r"(?:[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[a-z0-9]{1,63}\Z")
# what no name or namespace holds: control characters, line breaks, bidirectional overrides
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
MAX_SHOWN = 20  # problems listed per tree; the rest are counted


class TreeShapeError(TreeError, click.ClickException):
    """The old tree has objects no report can read (GP839). A ``TreeError``, as a
    tree that cannot be read is (``diagnostic``: the first; ``diagnostics``: all); a
    ``click.ClickException`` with exit code 1 (invalid input) for a command that does
    not catch it, which then prints the diagnostics instead of an internal error."""

    exit_code = 1  # gpuplan.exitcodes.ExitCode.INVALID

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        super().__init__(diagnostics[0])
        self.diagnostics = tuple(diagnostics)

    def show(self, file: Any = None) -> None:
        from gpuplan.diagnostics import escape

        lines = []
        for d in self.diagnostics:
            lines.append(f"{escape(d.location())}: {d.severity.value}[{d.code}]: {escape(d.message)}")
            if d.hint:
                lines.append(f"  = hint: {escape(d.hint)}")
        n = sum(d.is_error for d in self.diagnostics)
        lines.append(f"{n} error{'s' if n != 1 else ''}, 0 warnings")
        click.echo("\n".join(lines), err=True)


def _steps(path: str) -> list[str]:
    return re.findall(r"[^.\[\]{}]+|\[\]|\{\}", path)


def _key(base: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{base}[{key}]"
    if isinstance(key, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", key):
        return f"{base}.{key}" if base else key
    return f"{base}[{json.dumps(key, ensure_ascii=False, default=str)}]"


def _at(value: Any, steps: list[str], trail: str = "") -> Iterator[tuple[str, Any]]:
    """(field path, value) of every field ``steps`` names in ``value``; an absent
    field, or a step into a value of another type (its own rule reports it), ends the walk."""
    if not steps:
        yield trail, value
        return
    step, rest = steps[0], steps[1:]
    if step == "[]":
        if isinstance(value, list):
            for i, item in enumerate(value):
                yield from _at(item, rest, _key(trail, i))
    elif step == "{}":
        if isinstance(value, dict):
            for k, item in value.items():
                yield from _at(item, rest, _key(trail, k))
    elif isinstance(value, dict) and step in value:
        yield from _at(value[step], rest, _key(trail, step))


def _kind_of(v: Any) -> str:
    from gpuplan.diagnostics import type_name

    return type_name(v, mapping="a mapping")


def _wrong(value: Any, want: str) -> tuple[str, str, str] | None:
    """(where inside the value, what it is, what it should be) when ``value`` is not
    ``want``, else None."""
    simple = {MAP: dict, LIST: list, STR: str}
    if want in simple:
        return None if isinstance(value, simple[want]) else ("", _kind_of(value), want)
    container, items = (dict, "values") if want == STR_MAP else (list, "items")
    if not isinstance(value, container):
        return "", _kind_of(value), want
    for k, v in (value.items() if isinstance(value, dict) else enumerate(value)):
        if not isinstance(v, str):
            return _key("", k), _kind_of(v), STR
    return None


def _fields(value: Any, rules: tuple[tuple[str, str], ...]) -> Iterator[str]:
    """One sentence per field of ``value`` that ``rules`` give another type."""
    for path, want in rules:
        for where, v in _at(value, _steps(path)):
            bad = _wrong(v, want)
            if bad is not None:
                inner, what, should = bad
                field = where + inner if inner.startswith("[") else _key(where, inner) if inner else where
                yield f"{field} is {what}, not {should}"


def _identity(key: Any, api: Any) -> Iterator[str]:
    from gpuplan.diagnostics import show

    if not KIND.match(key.kind):
        yield f"kind {show(key.kind)} is not a Kubernetes kind"
    if not (isinstance(api, str) and API_VERSION.match(api)):
        yield f"apiVersion {show(api)} is not a Kubernetes API version ([group/]version)"
    for what, v in (("name", key.name), ("namespace", key.namespace)):
        if _CONTROL.search(v) or len(v) > 253:
            yield f"metadata.{what} {show(v)} holds a control character or is longer than 253 characters"


def check(parsed: Mapping[Any, tuple[str, Any]], *, tree: str | None = None) -> list[Diagnostic]:
    """GP839 for every field of the objects of ``parsed`` (``gpuplan.output.objdiff.tree_objects``)
    that the reports read and that has a type Kubernetes never gives it. ``tree``: the
    tree's directory, for the file names (else they are relative to the tree)."""
    from gpuplan.diagnostics import show

    out: list[Diagnostic] = []
    for key, (path, value) in parsed.items():
        problems: list[str] = []
        if key.kind and isinstance(value, dict):
            problems += _identity(key, value.get("apiVersion"))
            problems += _fields(value, OBJECT + FIELDS.get(key.kind, ()))
            label = show(key.label)
        elif not key.kind and path == VALUES_PATH and isinstance(value, dict):
            problems += _fields(value, VALUES)
            label = "the GPU Operator's values"
        else:
            continue
        file = f"{tree.rstrip('/')}/{path}" if tree else path
        for p in problems:
            out.append(E_SHAPE.diag(
                f"{label}: {p}; no API server admits that, so the tree cannot be what the cluster runs",
                file=file,
                hint=f"restore {path} as gpuplan generated it (`git checkout <base branch> -- <tree>/{path}`, "
                     "or `gpuplan build` the base branch's spec)"))
    return out


def require(parsed: Mapping[Any, tuple[str, Any]], *, tree: str | None = None) -> None:
    """Raise :class:`TreeShapeError` when :func:`check` finds anything (at most
    MAX_SHOWN diagnostics, then one that counts the rest)."""
    found = check(parsed, tree=tree)
    if not found:
        return
    if len(found) > MAX_SHOWN:
        rest = len(found) - MAX_SHOWN
        found = found[:MAX_SHOWN] + [E_SHAPE.diag(
            f"... and {rest} more field{'s' if rest != 1 else ''} of the wrong type", file=found[-1].file)]
    raise TreeShapeError(found)
