"""Capacity, oversubscription and cost reports (`gpuplan plan`, generated/CAPACITY.md)."""

from gpuplan.report.capacity import CapacityReport, capacity

__all__ = ["CapacityReport", "capacity"]
