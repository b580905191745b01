"""MIG geometry: the exact placement solver, layout enumeration, node-level
rules and slice diagrams. See docs/mig.md.

Stage: foundation (docs/architecture.md)."""

from gpuplan.mig.layout import NodeProblem, NodeProblemKind, check_node, resources_for_layout, resources_for_node
from gpuplan.mig.solver import (
    Failure,
    FailureKind,
    LayoutCheck,
    Placement,
    Suggestion,
    check_layout,
    enumerate_layouts,
    format_layout,
    parse_driver,
)

__all__ = [
    "Failure",
    "FailureKind",
    "LayoutCheck",
    "NodeProblem",
    "NodeProblemKind",
    "Placement",
    "Suggestion",
    "check_layout",
    "check_node",
    "enumerate_layouts",
    "format_layout",
    "parse_driver",
    "resources_for_layout",
    "resources_for_node",
]
