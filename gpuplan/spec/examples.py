"""`examples` for the spec's JSON Schema, from gpuplan's own catalogs.

Editors offer these names as completions. They are ``json_schema_extra``
callables on the model fields, so the catalogs are read only when a schema is
generated (`gpuplan schema`), never when a spec is validated.

Stage: model (docs/architecture.md)."""

from __future__ import annotations

from typing import Any

EXAMPLE_LAYOUTS = ({"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}, {"1g.10gb": 7}, {"7g.80gb": 1})


def gpu_models(schema: dict[str, Any]) -> None:
    """Every GPU model in the catalog, by canonical name (aliases are accepted too)."""
    from gpuplan.catalog.gpus import all_gpus

    schema["examples"] = [g.key for g in all_gpus()]


def _profile_names() -> list[str]:
    from gpuplan.catalog.gpus import all_gpus

    def order(name: str) -> tuple[int, int, str]:
        g, _, rest = name.partition("g.")
        gb = rest.split("gb", 1)[0]
        return (int(g), int(gb), name) if g.isdigit() and gb.isdigit() else (99, 0, name)

    return sorted({p.name for g in all_gpus() for p in g.profiles}, key=order)


def mig_profile(schema: dict[str, Any]) -> None:
    """Every MIG profile name of every MIG-capable GPU (names are per GPU model)."""
    schema["examples"] = _profile_names()


def mig_layout(schema: dict[str, Any]) -> None:
    """Layouts as examples; the profile names as examples of the keys."""
    schema["examples"] = [dict(x) for x in EXAMPLE_LAYOUTS]
    schema["propertyNames"] = {"examples": _profile_names()}


def instance_types(schema: dict[str, Any]) -> None:
    """Every GPU instance type gpuplan knows (the instance type decides the GPU)."""
    from gpuplan.cloud.aws import instance_types as table

    def order(name: str) -> tuple[str, int, str]:  # g5.xlarge, g5.2xlarge, ..., g5.48xlarge
        family, _, size = name.partition(".")
        n = size.split("xlarge")[0]
        return family, int(n) if n.isdigit() else (1 if size == "xlarge" else 999), size

    schema.setdefault("items", {})["examples"] = sorted(table(), key=order)


def disableable_codes(schema: dict[str, Any]) -> None:
    """Codes `spec.rules.disable` accepts: every rule code (GP2xx and up); reading
    and schema errors (GP0xx, GP1xx) always apply."""
    from gpuplan.codes import all_codes

    schema["examples"] = sorted(c for c in all_codes() if c[:3] not in ("GP0", "GP1"))


def gke_machine_types(schema: dict[str, Any]) -> None:
    """Every GKE GPU machine type gpuplan knows (the machine type decides the GPU)."""
    from gpuplan.cloud.gke import machine_types

    schema["examples"] = sorted(machine_types())


def aks_vm_sizes(schema: dict[str, Any]) -> None:
    """Every Azure GPU VM size gpuplan knows (the VM size decides the GPU)."""
    from gpuplan.cloud.aks import machine_types

    schema["examples"] = sorted(machine_types())
