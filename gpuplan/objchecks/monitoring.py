"""GP985: no emitted alert selects a node label whose value the tree fixes.

The pool alerts pick a pool's nodes from kube-state-metrics' ``kube_node_labels``
(kubernetes/kube-state-metrics v2.20.0: a node label ``k`` becomes ``label_`` + ``k`` with
every character outside ``[a-zA-Z0-9_]`` turned into ``_``, ``internal/store/utils.go``
lines 146-150). A label the tree itself writes on every node of the pool (the NodePool
template, a node-group template, or nfd-master's NodeFeatureRule, all lowered from
:func:`gpuplan.identity.template_node_labels`) has one value there for good: a matcher on it
either always holds (it selects nothing) or never holds (the alert can never fire). The pool
label ``gpuplan.dev/pool`` is how an alert names its pool and is the one such label allowed.

Example: a Karpenter AL2023 MIG pool applies its layout in the userData and its NodePool
writes ``nvidia.com/mig.config.state: success`` (:data:`gpuplan.identity.MIG_CONFIG_STATE_LABEL`),
so an alert on ``label_nvidia_com_mig_config_state="failed"`` there never fires.

Check-objects stage: reads the PrometheusRules the monitoring target hands on.

Stage: check-objects (docs/architecture.md)."""

from __future__ import annotations

import re
from typing import Any, Iterator

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.identity import POOL_LABEL
from gpuplan.resolve import ResolvedFleet

E_FIXED_LABEL = Code(
    "GP985", "alert selects a node label the tree fixes", Severity.ERROR,
    "An emitted alert selects a node label (through kube-state-metrics' `kube_node_labels`) that the "
    "tree itself sets, to one value, on every node of the pool: the matcher always holds or never "
    "does, so the alert either ignores it or can never fire. gpuplan checks the PrometheusRules it "
    "writes against the labels its NodePools, node-group templates and NodeFeatureRules set.",
    bad="# NodePool template: nvidia.com/mig.config.state: success\n"
        "expr: kube_node_labels{label_gpuplan_dev_pool=\"p\", label_nvidia_com_mig_config_state=\"failed\"}",
    good="expr: kube_node_labels{label_gpuplan_dev_pool=\"p\"} unless on(node) ...",
)

CODES = (E_FIXED_LABEL,)

_SELECTOR = re.compile(r"kube_node_labels\s*\{([^}]*)\}")
_MATCHER = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')


def ksm_label(key: str) -> str:
    """kube-state-metrics' series label for node label ``key`` (see the module docstring)."""
    return "label_" + re.sub(r"[^a-zA-Z0-9_]", "_", key)


POOL_KSM = ksm_label(POOL_LABEL)


def needed(rf: ResolvedFleet) -> bool:
    return rf.fleet.spec.monitoring is not None


def node_label_matchers(expr: str) -> list[list[tuple[str, str, str]]]:
    """Each ``kube_node_labels{...}`` selector of ``expr``: its (label, operator, value) matchers."""
    return [[(m.group(1), m.group(2), m.group(3)) for m in _MATCHER.finditer(sel.group(1))]
            for sel in _SELECTOR.finditer(expr)]


def fixed_label_selections(expr: str, presets: dict[str, dict[str, str]]) -> list[tuple[str, str, str, str, str]]:
    """(pool, node label, operator, value, preset value) of every matcher of ``expr`` on a label
    the tree fixes on the pool's nodes. ``presets``: pool -> the node labels the tree writes."""
    out = []
    for matchers in node_label_matchers(expr):
        pools = [v for lab, op, v in matchers if lab == POOL_KSM and op == "="]
        for pool in pools:
            fixed = {ksm_label(k): (k, v) for k, v in presets.get(pool, {}).items() if k != POOL_LABEL}
            for lab, op, value in matchers:
                if lab in fixed:
                    key, preset = fixed[lab]
                    out.append((pool, key, op, value, preset))
    return out


def check(rf: ResolvedFleet, docs: list[dict[str, Any]]) -> Iterator[Diagnostic]:
    from gpuplan.identity import template_node_labels

    presets = {pv.name: template_node_labels(rf, pv) for pv in rf.pools}
    for d in docs:
        if d.get("kind") != "PrometheusRule":
            continue
        for group in d.get("spec", {}).get("groups", ()):
            for rule in group.get("rules", ()):
                if "alert" not in rule:
                    continue
                for pool, key, op, value, preset in fixed_label_selections(str(rule.get("expr", "")), presets):
                    pv = rf.pool_by_name[pool]
                    yield rf.diag(
                        E_FIXED_LABEL,
                        f"alert {rule['alert']} of pool {pool} selects node label {key}{op}\"{value}\", "
                        f"which the tree sets to {preset!r} on every node of the pool",
                        pv.path, key=True,
                        hint="a defect of gpuplan's monitoring target: the alert cannot tell the pool's "
                             "nodes apart by this label")
