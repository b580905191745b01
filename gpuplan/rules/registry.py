"""Rule families. Each module exposes ``check(rf: ResolvedFleet) -> Iterable[Diagnostic]``
and a ``CODES`` tuple; each rule's code, title, PASS/FAIL examples and the
user pain it prevents are declared next to the rule and become docs/codes.md.
A module may also declare ``REFUSES`` (codes whose errors refuse a pool's value) and
``CONSUMES`` (codes whose findings are computed from it): the findings computed from
a refused value are dropped once, here (``gpuplan.rules.cascade``).

Stage: check (docs/architecture.md)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.rules.cascade import suppress

if TYPE_CHECKING:
    from gpuplan.resolve import ResolvedFleet

# Run order matters only for readability of output; diagnostics are sorted later.
RULE_MODULES: tuple[str, ...] = (
    "gpuplan.rules.mig",
    "gpuplan.rules.sharing",
    "gpuplan.rules.resources",
    "gpuplan.rules.capacity",
    "gpuplan.rules.spot",
    "gpuplan.rules.tenancy",
    "gpuplan.rules.nodetaints",  # static pools' taints through nfd-master
    "gpuplan.rules.rollout",  # static pools' rollouts
    "gpuplan.rules.topology",
    "gpuplan.rules.karpenter",
    "gpuplan.rules.autoscaler",
    "gpuplan.rules.operator",
    "gpuplan.rules.inventory",
    "gpuplan.rules.monitoring",
    "gpuplan.rules.dra",
    "gpuplan.rules.queueing",
    "gpuplan.queueing.volcano.rules",  # queueing.engine volcano
    "gpuplan.rules.admission",
    "gpuplan.rules.versions",
    "gpuplan.rules.provisioning",  # node groups against their back-end's machine table
    "gpuplan.rules.gke",
    "gpuplan.rules.capi",  # Cluster API MachineDeployments and the Cluster Autoscaler
    "gpuplan.rules.aks",  # AKS agent pools (Azure Service Operator)
    "gpuplan.rules.nap",  # Karpenter pools on AKS Node Auto Provisioning
)

W_DISABLE_UNKNOWN = Code(
    "GP114", "disabled rule does not exist", Severity.WARNING,
    "spec.rules.disable names a code gpuplan does not have, or one that cannot be disabled "
    "(reading and schema errors, GP0xx and GP1xx, always apply).",
    bad="rules:\n  disable:\n    - {code: GP999, reason: noisy}",
    good="rules:\n  disable:\n    - {code: GP303, reason: notebooks tolerate shared memory}",
)
CODES = (W_DISABLE_UNKNOWN,)


def run_rules(rf: "ResolvedFleet") -> list[Diagnostic]:
    """Every spec rule family, with the spec's ``rules.disable`` applied. Checks over
    the generated objects (``gpuplan.objchecks``) run after lowering, on a clean spec."""
    out: list[Diagnostic] = []
    refuses: dict[str, str] = {}
    consumes: dict[str, frozenset[str]] = {}
    for name in RULE_MODULES:
        mod = importlib.import_module(name)
        out.extend(mod.check(rf))
        refuses.update(getattr(mod, "REFUSES", {}))
        consumes.update(getattr(mod, "CONSUMES", {}))
    disabled = {d.code for d in rf.fleet.spec.rules.disable}
    if disabled:
        from gpuplan.codes import all_codes

        known = all_codes()
        for i, d in enumerate(rf.fleet.spec.rules.disable):
            if d.code not in known or d.code[:3] in ("GP0", "GP1"):
                out.append(rf.diag(W_DISABLE_UNKNOWN,
                                   f"{d.code} is not a rule that can be disabled",
                                   ("spec", "rules", "disable", i, "code")))
    # a disabled root error refuses nothing: what follows from the value is then all that is shown
    return suppress(rf, drop_disabled(rf, out), refuses, consumes)


def drop_disabled(rf: "ResolvedFleet", diags: list[Diagnostic]) -> list[Diagnostic]:
    """``diags`` without the codes the spec disables (reading and schema errors always apply)."""
    disabled = {d.code for d in rf.fleet.spec.rules.disable}
    return [d for d in diags if d.code not in disabled or d.code[:3] in ("GP0", "GP1")]
