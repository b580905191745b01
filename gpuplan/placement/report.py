"""The capacity report with the proofs over the generated objects: the placement proof
(:mod:`gpuplan.placement`) and the tenancy boundary (:mod:`gpuplan.placement.boundary`).

Stage: check-objects (docs/architecture.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpuplan.resolve import ResolvedFleet

if TYPE_CHECKING:
    from gpuplan.capacity import CapacityReport


def with_placement(rf: ResolvedFleet, report: "CapacityReport", docs: list[dict[str, Any]] | None) -> "CapacityReport":
    """The capacity report with the placement proof and the boundary, for fleets with tiers.
    Not part of ``capacity``: the proofs read quotas that read the capacity. ``docs`` None: the
    proofs the checks ran (kept on the fleet), without the objects."""
    from dataclasses import replace

    from gpuplan.placement.simulate import MAX_PROOF_SIZE, proof_size, proof
    from gpuplan.placement.boundary import boundary

    if not rf.fleet.spec.tiers or proof_size(rf) > MAX_PROOF_SIZE:
        return report
    if docs is None:
        placement = rf.__dict__.get("_placement_proof")
        return report if placement is None else replace(report, placement=placement,
                                                         boundary=rf.__dict__.get("_boundary_proof"))

    bound = boundary(rf, docs) if any(d.get("kind") == "ValidatingAdmissionPolicy" for d in docs) else None
    return replace(report, placement=proof(rf, docs), boundary=bound)

