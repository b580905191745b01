"""What an invalid value does not also report.

A rule that refuses a pool's value (a MIG layout that cannot be created, a sharing
config the device plugin rejects, a GPU model gpuplan does not know) names the value
in its module's ``REFUSES`` (code -> the pool's field); a rule whose findings are
computed from those values names what it reads in its module's ``CONSUMES`` (code ->
the pool's fields). When a root error holds, the findings of the consuming codes that
concern the same pool are dropped: the capacity of a layout that cannot exist is not
a number the user should chase. The pool a finding concerns is read from its spec
path (a pool, a tier's pool, the pool of a quota cell's tier).

Stage: check (docs/architecture.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from gpuplan.diagnostics import Diagnostic
from gpuplan.spec.validate import parse_path

if TYPE_CHECKING:
    from gpuplan.resolve import ResolvedFleet

# the fields of a pool a root error may refuse
SHARING = "sharing"  # spec.pools[i].sharing: layout, per-GPU groups, strategy, replicas
GPU = "gpu"  # spec.pools[i].gpu
POOL_INPUTS = frozenset({SHARING, GPU})


def suppress(rf: "ResolvedFleet", diags: list[Diagnostic], refuses: Mapping[str, str],
             consumes: Mapping[str, frozenset[str]]) -> list[Diagnostic]:
    """``diags`` without the findings of ``consumes`` codes on a pool whose value an error
    of a ``refuses`` code refused."""
    invalid: set[tuple[int, str]] = set()
    for d in diags:
        field = refuses.get(d.code)
        path = parse_path(d.path or "")
        if d.is_error and field is not None and path[:2] == ("spec", "pools") and len(path) > 2:
            invalid.add((path[2], field))
    if not invalid:
        return diags
    return [d for d in diags
            if not any((pool, field) in invalid
                       for pool in _pools(rf, parse_path(d.path or ""))
                       for field in consumes.get(d.code, ()))]


def _pools(rf: "ResolvedFleet", path: tuple) -> set[int]:
    """Indices of the pools a finding at spec ``path`` is about."""
    if path[:2] == ("spec", "pools") and len(path) > 2:
        return {path[2]}
    spec = rf.fleet.spec
    tiers: list[str] = []
    if path[:2] == ("spec", "tiers") and len(path) > 2 and path[2] < len(spec.tiers):
        tiers = [spec.tiers[path[2]].name]
    elif path[:2] == ("spec", "tenants") and len(path) > 2 and path[2] < len(spec.tenants):
        quotas = spec.tenants[path[2]].quotas
        cells = [quotas.get(path[4], {})] if len(path) > 4 and path[3] == "quotas" else list(quotas.values())
        tiers = [t for cell in cells for t in cell if len(path) < 6 or t == path[5]]
    out = set()
    for name in tiers:
        t = rf.tier_by_name.get(name)
        pv = rf.tier_pool(t) if t is not None else None
        if pv is not None:
            out.add(pv.index)
    return out
