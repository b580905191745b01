"""Cloud instance catalogs (package data).

A node-group back-end (``gpuplan.provisioning``: GKE, AKS, Cluster API) describes its machine
types / VM sizes with :class:`Machine`, in its own module here (``gpuplan.cloud.<back-end>``,
with ``machine_type(name) -> Machine | None`` and ``machine_types() -> dict``), from a JSON
table under ``data/`` that names its source and date.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Machine:
    """One machine type (VM size) of a back-end's table: the GPUs it comes with."""

    name: str
    gpu: str  # the GPU catalog's model name (gpuplan.catalog.resolve_gpu)
    gpu_count: int
    accelerator: str | None = None  # the platform's own name of the GPU (GKE nvidia-tesla-a100)
    # the MIG partition sizes the platform itself creates on this GPU (empty: none)
    mig_profiles: tuple[str, ...] = ()
