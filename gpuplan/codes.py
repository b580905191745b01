"""The registry of diagnostic codes.

Each rule family declares its codes next to the rules (``CODES`` tuple of
``Code``); this module only knows where to find them so the reference page
(`docs/codes.md`) and `gpuplan explain CODE` can list every one. Code ranges:

    GP0xx  reading input (YAML, size, encoding)
    GP1xx  spec schema (unknown keys, types, names, references)
    GP2xx  MIG geometry
    GP3xx  sharing (device plugin: time-slicing, MPS)
    GP4xx  resources, quotas and capacity
    GP5xx  tenancy (namespaces, priority classes)
    GP6xx  topology, Karpenter, instance types
    GP7xx  hardware inventory
    GP8xx  output tree (stale, hand-edited files); GP83x-85x verifying manifests
    GP940-944, GP95x-96x  import
    GP97x-99x  platforms: node facts, node upgrades and rollouts (GP6xx is full)
    GP900  internal

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Iterable

from gpuplan.diagnostics import Diagnostic, Severity


@dataclass(frozen=True)
class Code:
    code: str
    title: str
    severity: Severity
    summary: str
    bad: str = ""
    good: str = ""
    pain: str = ""  # the reference/user-pains.md entry this code prevents, if any

    def diag(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        col: int | None = None,
        path: str | None = None,
        hint: str | None = None,
        severity: Severity | None = None,
    ) -> Diagnostic:
        return Diagnostic(
            code=self.code,
            severity=severity or self.severity,
            message=message,
            file=file,
            line=line,
            col=col,
            path=path,
            hint=hint,
        )


# At most this many diagnostics are printed; the rest are counted in one GP016 line
# (gpuplan.reporters). Stages that cap their own lists (the spec's schema errors,
# verify-cluster) count with the same code.
MAX_SHOWN = 200

E_MORE = Code(
    "GP016", "more diagnostics than shown", Severity.INFO,
    f"A run found more problems than are worth printing: the first {MAX_SHOWN} are shown "
    "(the first of each kind of schema error), the rest are counted in one line. Fix those "
    "shown and run again.",
    bad="spec:\n  k1: 1\n  k2: 1\n  # ... 10,000 misspelt keys", good="spec:\n  pools: [...]",
)

# Modules that declare a ``CODES`` tuple. Imported only by `all_codes()`, never
# on the validate path.
CODE_MODULES: tuple[str, ...] = (
    "gpuplan.spec.loader",
    "gpuplan.spec.validate",
    "gpuplan.rules.registry",
    "gpuplan.mig.codes",
    "gpuplan.rules.mig",
    "gpuplan.rules.sharing",
    "gpuplan.rules.resources",
    "gpuplan.rules.capacity",
    "gpuplan.rules.spot",
    "gpuplan.rules.tenancy",
    "gpuplan.rules.nodetaints",
    "gpuplan.kept",
    "gpuplan.rules.topology",
    "gpuplan.rules.karpenter",
    "gpuplan.rules.autoscaler",
    "gpuplan.rules.operator",
    "gpuplan.rules.inventory",
    "gpuplan.rules.monitoring",
    "gpuplan.rules.dra",
    "gpuplan.rules.queueing",
    "gpuplan.queueing.volcano.rules",
    "gpuplan.rules.admission",
    "gpuplan.rules.versions",
    "gpuplan.rules.provisioning",
    "gpuplan.rules.gke",
    "gpuplan.rules.aks",
    "gpuplan.rules.nap",
    "gpuplan.rules.capi",
    "gpuplan.objchecks.placement",
    "gpuplan.objchecks.dra",
    "gpuplan.objchecks.monitoring",
    "gpuplan.objchecks.charts",
    "gpuplan.probe.codes",
    "gpuplan.probe.paths",
    "gpuplan.output.tree",
    "gpuplan.report.annotations",
    "gpuplan.drift",
    "gpuplan.verify.manifests",
    "gpuplan.verify.schemas",
    "gpuplan.verify.cel",
    "gpuplan.verify.verifier",
    "gpuplan.internal",
    "gpuplan.reporters.formats",
    "gpuplan.importer.codes",
)


def all_codes() -> dict[str, Code]:
    out: dict[str, Code] = {}
    for name in CODE_MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        for c in getattr(mod, "CODES", ()):
            if c.code in out and out[c.code] != c:
                raise RuntimeError(f"diagnostic code {c.code} declared twice")
            out[c.code] = c
    return dict(sorted(out.items()))


def codes_by_id(codes: Iterable[Code]) -> dict[str, Code]:
    return {c.code: c for c in codes}
