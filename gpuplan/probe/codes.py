"""GP701-GP709: reading hardware inventory files (``load_inventory``).

GP71x and above are left to the inventory rules (``gpuplan.rules.inventory``),
which compare the fleet spec with what the inventories say.

Stage: model (docs/architecture.md)."""

from __future__ import annotations

from gpuplan.codes import Code
from gpuplan.diagnostics import Severity

GP701 = Code(
    "GP701",
    "inventory file unreadable",
    Severity.ERROR,
    "An inventory path does not exist, cannot be read, or is not UTF-8 text.",
    bad="inventory: [inventory/gpu-worker-01.yaml]   # file missing",
    good="gpuplan inventory pull -o inventory/   # then commit inventory/",
)
GP702 = Code(
    "GP702",
    "inventory file is not valid YAML/JSON",
    Severity.ERROR,
    "The file does not parse (syntax error, duplicate key). Inventory files are written by "
    "`gpuplan probe` / `gpuplan inventory pull`; regenerate rather than hand-edit.",
    bad="gpus:\n  - index: 0\n   uuid: GPU-...   # bad indentation",
    good="gpus:\n  - index: 0\n    uuid: GPU-...",
)
GP703 = Code(
    "GP703",
    "not a NodeInventory document",
    Severity.ERROR,
    "An inventory document must be a mapping with apiVersion gpuplan.dev/v1alpha1 and kind NodeInventory.",
    bad="apiVersion: v1\nkind: ConfigMap",
    good="apiVersion: gpuplan.dev/v1alpha1\nkind: NodeInventory",
)
GP704 = Code(
    "GP704",
    "inventory document does not match the schema",
    Severity.ERROR,
    "A key is unknown, a required key is missing or a value has the wrong type "
    "(schemas/inventory.schema.json).",
    bad="gpus:\n  - index: 0\n    memoryMB: 81559   # unknown key",
    good="gpus:\n  - index: 0\n    memoryMiB: 81559",
)
GP705 = Code(
    "GP705",
    "two inventories for one node",
    Severity.ERROR,
    "Two inventory documents carry the same metadata.name; which one is true is unknowable.",
    bad="inventory/a.yaml and inventory/b.yaml both say metadata.name: gpu-worker-01",
    good="one file per node: inventory/gpu-worker-01.yaml",
)
GP706 = Code(
    "GP706",
    "no inventory files found",
    Severity.WARNING,
    "An inventory directory holds no *.yaml, *.yml or *.json file.",
    bad="inventory: [inventory/]   # empty directory",
    good="gpuplan inventory pull -o inventory/",
)
GP707 = Code(
    "GP707",
    "the probe could not read a field",
    Severity.WARNING,
    "NVML refused one query on the node (recorded under errors:); facts derived from that "
    "field are unknown and rules that need them skip this node.",
    bad="errors: [{field: numaNode, nvmlError: NVML_ERROR_NOT_SUPPORTED, code: 3}]",
    good="update the NVIDIA driver, or accept that the field stays unknown",
)

CODES: tuple[Code, ...] = (GP701, GP702, GP703, GP704, GP705, GP706, GP707)
