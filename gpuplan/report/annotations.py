"""What a change does to the cluster, as diagnostics at the fleet.yaml line that causes it.

`gpuplan plan FLEET --base OLD --format github` (and `gpuplan review --format github`, the
Action's pull-request report) turn each disruption and hand step of the change
(``gpuplan.report.disruption``) into one diagnostic, rendered by the one GitHub reporter
(``gpuplan.reporters.github``: its escaping keeps a name in a message from starting a
workflow command of its own). The disruptions are computed from the two trees, not from the
specs, so the spec line is found from what the subject names: a pool (its nodes, its
NodePool or node group: its name; a MIG config change: its `layout`; a device-plugin config
change: its `sharing`), a tier's PriorityClass (the tier), a tenant's namespace (that entry), the GPU
driver (`driverVersion`). What the new spec no longer holds (a removed tenant or tier), and a
hand step of the delivery, is anchored at the file.

Stage: report (docs/architecture.md)."""

from __future__ import annotations

import re
from typing import Iterable

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.identity import priority_class_name
from gpuplan.report.disruption import MIG_LABEL, PLUGIN_LABEL, Disruption
from gpuplan.resolve import ResolvedFleet

W_DISRUPTS = Code(
    "GP813", "the change disrupts what runs", Severity.WARNING,
    "`gpuplan plan --base --format github` and `gpuplan review --format github`: the change deletes, "
    "drains, replaces, strands or takes back something running pods hold (a warning), or rolls or "
    "reconfigures nodes without stopping their pods (a notice). The annotation sits at the line of "
    "fleet.yaml that causes it: review it before the sync.",
    bad="sharing: {mode: mig, layout: {3g.40gb: 1, 1g.10gb: 4}}   # was {3g.40gb: 2}: every node drained",
    good="# the drain planned: one node at a time, or a new pool beside the old",
)
W_HAND_STEP = Code(
    "GP814", "the change needs a hand step", Severity.WARNING,
    "`gpuplan plan --base --format github` and `gpuplan review --format github`: something the tree "
    "cannot do by itself (apply `delivery/bootstrap.yaml`, admit a namespace in your own AppProject, "
    "confirm a prune): until a person does it the GitOps engine stops applying the tree.",
    bad="gitops: {project: platform}   # a new namespace the AppProject `platform` does not admit",
    good="# the AppProject admits the namespace before the sync",
)
CODES = (W_DISRUPTS, W_HAND_STEP)

# the kinds of disruption that keep running pods: a notice, not a warning
NOTICE = frozenset({"upgrade", "reconfigure"})
_POOL = re.compile(r"\(pool ([^)\s]+)\)|\bpool ([^\s:;,()]+)")


def change_diagnostics(rf: ResolvedFleet, disruptions: Iterable[Disruption]) -> list[Diagnostic]:
    """One diagnostic per disruption and hand step of a change to ``rf`` (the new spec)."""
    out = []
    for d in disruptions:
        code = W_HAND_STEP if d.severity == "hand-step" else W_DISRUPTS
        severity = Severity.INFO if d.severity in NOTICE else None
        message = f"{d.severity}: {d.subject}: {d.message}"
        path = anchor(rf, d)
        out.append(rf.diag(code, message, path, severity=severity) if path is not None
                   else code.diag(message, file=rf.doc.file, severity=severity))
    return out


def anchor(rf: ResolvedFleet, d: Disruption) -> tuple | None:
    """The spec path of what causes ``d`` in the new spec, None when it names nothing there."""
    spec = rf.fleet.spec
    kind, _, name = d.subject.partition(" ")
    if kind == "PriorityClass":
        for i, t in enumerate(spec.tiers):
            if priority_class_name(t) == name:
                return ("spec", "tiers", i, "priority")  # the tier's entry when it sets none
        return None
    if kind == "Namespace":
        name = name.split(" ", 1)[0]  # "Namespace nlp-serve (tier inference-medium)"
        for i, tn in enumerate(spec.tenants):
            if name in tn.namespaces:
                return ("spec", "tenants", i, "namespaces", tn.namespaces.index(name))
        return None
    if d.subject == "GPU driver" and spec.cluster.gpu_operator.driver_version is not None:
        return ("spec", "cluster", "gpuOperator", "driverVersion")
    pools = [p for m in _POOL.finditer(d.subject) for p in m.groups() if p]
    pools += [name] if name else []  # NodePool <pool>, a node group <pool>
    for p in pools:
        pv = rf.pool_by_name.get(p)
        if pv is not None:
            if MIG_LABEL in d.message:  # its layout (the `sharing` entry when per-GPU groups hold it)
                return pv.path + ("sharing", "layout")
            return pv.path + ("sharing",) if PLUGIN_LABEL in d.message else pv.path + ("name",)
    return None
