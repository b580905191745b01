"""The hardware inventory: one ``NodeInventory`` document per node.

Written by `gpuplan probe` on the node (through NVML), collected into the
repository by `gpuplan inventory pull`, read back by ``gpuplan.probe.reader`` for the
fleet rules. This module imports neither pynvml nor ruamel at import time, so
the validate path can use the models without the ``probe`` extra.

Keys are camelCase like every Kubernetes-style document; the Python attributes
are snake_case (``GpuInfo.memory_mib`` <-> ``memoryMiB``). A document carries
no timestamp: the same hardware always gives the same bytes, which is what lets
the node probe publish only when something changed.

Stage: model (docs/architecture.md)."""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

API_VERSION = "gpuplan.dev/v1alpha1"
KIND = "NodeInventory"

# Levels as `nvidia-smi topo -m` prints them: X (self), NV<n> (n NVLinks, direct
# or through NVSwitch), PIX, PXB, PHB, NODE, SYS; UNKNOWN when NVML refused.
TOPO_LEVEL_PATTERN = r"^(X|NV[1-9][0-9]*|PIX|PXB|PHB|NODE|SYS|UNKNOWN)$"
TopoLevel = Annotated[str, Field(pattern=TOPO_LEVEL_PATTERN)]
ARCHITECTURES = (
    "kepler",
    "maxwell",
    "pascal",
    "volta",
    "turing",
    "ampere",
    "ada",
    "hopper",
    "blackwell",
    "rubin",
    "unknown",
)


def _camel(name: str) -> str:
    special = {"memory_mib": "memoryMiB", "memory_size_mib": "memorySizeMiB"}
    if name in special:
        return special[name]
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        alias_generator=_camel,
        populate_by_name=True,
        frozen=True,
    )


class FieldError(_Model):
    """A query NVML refused; the field it would have filled is left null."""

    field: str = Field(description="inventory field (or NVML query) that could not be read")
    nvml_error: str = Field(pattern=r"^NVML_ERROR_[A-Z0-9_]+$", description="NVML error name")
    code: int = Field(ge=0, description="NVML return code (nvmlReturn_t)")


class Probe(_Model):
    tool: Literal["gpuplan"] = "gpuplan"
    version: str = Field(description="gpuplan version that wrote the document")
    source: Literal["nvml", "fake"] = Field(
        "nvml", description="'fake' when written from a test fixture (gpuplan probe --fake)"
    )


class Metadata(_Model):
    name: str = Field(min_length=1, max_length=253, description="Kubernetes node name")


class SystemInfo(_Model):
    hostname: str
    driver_version: Optional[str] = None
    cuda_driver_version: Optional[str] = Field(None, description='e.g. "12.4"')
    nvml_version: Optional[str] = None
    online_cpus: Optional[str] = Field(
        None, pattern=r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$",
        description="Linux cpulist of /sys/devices/system/cpu/online; absent in older inventories",
    )
    errors: list[FieldError] = Field(default_factory=list)


class PciInfo(_Model):
    bus_id: str = Field(description="NVML busId, e.g. 00000000:18:00.0")
    device_id: str = Field(pattern=r"^0x[0-9A-F]{4}$", description="PCI device id, e.g. 0x2330")
    vendor_id: str = Field(pattern=r"^0x[0-9A-F]{4}$", description="PCI vendor id (0x10DE)")
    subsystem_id: Optional[str] = Field(None, pattern=r"^0x[0-9A-F]{8}$")


class EnableState(_Model):
    current: bool
    pending: bool


class Placement(_Model):
    start: int = Field(ge=0, description="first memory slice")
    size: int = Field(ge=1, description="memory slices")


class MigProfile(_Model):
    """A GPU instance profile as NVML describes it on this GPU."""

    id: int = Field(ge=0, description="NVML profile id (nvidia-smi -lgip ID), e.g. 19 for 1g")
    name: str = Field(description='e.g. "1g.10gb", "1g.10gb+me"')
    slice_count: int = Field(ge=1, description="compute slices")
    instance_count: int = Field(ge=0, description="max instances of this profile")
    memory_size_mib: int = Field(ge=0)
    multiprocessor_count: int = Field(ge=0)
    placements: Optional[list[Placement]] = Field(
        None, description="possible placements; null when NVML did not report them (MIG off)"
    )


class MigInstance(_Model):
    id: int = Field(ge=0, description="GPU instance id")
    profile_id: int = Field(ge=0)
    profile: Optional[str] = Field(None, description="profile name, when the profile is known")
    placement: Placement


class MigInfo(_Model):
    capable: bool
    current: Optional[bool] = Field(None, description="MIG mode now (null when not capable)")
    pending: Optional[bool] = Field(None, description="MIG mode after the next GPU reset")
    profiles: list[MigProfile] = Field(default_factory=list)
    instances: Optional[list[MigInstance]] = Field(
        None, description="GPU instances; null when MIG is off or they could not be read"
    )


class NvLink(_Model):
    """NVLink links of one GPU that share a state and a remote end (one entry
    per peer GPU or NVSwitch; inactive links together)."""

    links: list[int] = Field(min_length=1, description="link numbers")
    active: bool
    remote_bus_id: Optional[str] = Field(None, description="PCI bus id of the remote end")
    remote_type: Optional[Literal["gpu", "switch", "ibmnpu", "unknown"]] = None
    remote_gpu: Optional[int] = Field(None, description="index of the peer GPU on this node")


class GpuInfo(_Model):
    index: int = Field(ge=0)
    uuid: Optional[str] = None
    name: Optional[str] = Field(None, description='NVML name, e.g. "NVIDIA H100 80GB HBM3"')
    product: Optional[str] = Field(
        None, description="GFD nvidia.com/gpu.product: the name with spaces as '-'"
    )
    pci: Optional[PciInfo] = None
    memory_mib: Optional[int] = Field(None, ge=0)
    architecture: Optional[Literal[ARCHITECTURES]] = None  # type: ignore[valid-type]
    compute_capability: Optional[str] = Field(None, pattern=r"^[0-9]+\.[0-9]+$")
    persistence_mode: Optional[bool] = None
    ecc: Optional[EnableState] = None
    mig: Optional[MigInfo] = None
    numa_node: Optional[int] = Field(None, ge=0, description="null: not reported or single node")
    cpu_affinity: Optional[str] = Field(
        None, pattern=r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$", description="Linux cpulist"
    )
    nvlinks: list[NvLink] = Field(default_factory=list)
    errors: list[FieldError] = Field(default_factory=list)


class Topology(_Model):
    gpus: list[int] = Field(default_factory=list, description="GPU indexes, in matrix order")
    matrix: list[list[TopoLevel]] = Field(
        default_factory=list, description="nvidia-smi topo -m levels; matrix[i][j] for gpus[i], gpus[j]"
    )
    errors: list[FieldError] = Field(default_factory=list)

    @model_validator(mode="after")
    def _square(self) -> "Topology":
        n = len(self.gpus)
        if len(self.matrix) != n or any(len(row) != n for row in self.matrix):
            raise ValueError(f"topology.matrix must be {n}x{n} (one row and column per GPU)")
        return self


class NodeInventory(_Model):
    api_version: Literal["gpuplan.dev/v1alpha1"] = API_VERSION
    kind: Literal["NodeInventory"] = KIND
    metadata: Metadata
    probe: Probe
    system: SystemInfo
    gpus: list[GpuInfo] = Field(default_factory=list)
    topology: Topology = Field(default_factory=Topology)

    @model_validator(mode="after")
    def _consistent(self) -> "NodeInventory":
        idx = [g.index for g in self.gpus]
        if len(set(idx)) != len(idx):
            raise ValueError("gpus: duplicate GPU index")
        uuids = [g.uuid for g in self.gpus if g.uuid]
        if len(set(uuids)) != len(uuids):
            raise ValueError("gpus: duplicate GPU uuid")
        if self.topology.gpus and sorted(self.topology.gpus) != sorted(idx):
            raise ValueError("topology.gpus must list the same indexes as gpus")
        return self

    def gpu(self, index: int) -> GpuInfo:
        for g in self.gpus:
            if g.index == index:
                return g
        raise KeyError(index)


# --- documents ------------------------------------------------------------


def to_document(inv: NodeInventory) -> dict[str, Any]:
    """The inventory as plain data with camelCase keys, in model field order.
    Unknown values (null) are left out: absent and null mean the same on read."""
    return inv.model_dump(mode="json", by_alias=True, exclude_none=True)


def inventory_json_schema() -> dict[str, Any]:
    """JSON Schema of one inventory document (``schemas/inventory.schema.json``)."""
    schema = NodeInventory.model_json_schema(by_alias=True, mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://gpuplan.dev/schemas/inventory.schema.json"
    schema["title"] = "gpuplan NodeInventory"
    return schema


def schema_text() -> str:
    """The committed form: what `gpuplan schema --inventory` prints."""
    return json.dumps(inventory_json_schema(), indent=2, sort_keys=True) + "\n"


def dump_json(inv: NodeInventory) -> str:
    return json.dumps(to_document(inv), indent=2, ensure_ascii=False) + "\n"


# Plain scalars that a YAML 1.2 reader (ruamel) would not read back as strings
# but PyYAML's 1.1 resolver does not quote: 0o17, 0x1F, 1e3, .inf, ...
_YAML12_NON_STR = re.compile(
    r"^(?:[-+]?(?:0o[0-7]+|0x[0-9a-fA-F]+|[0-9]+|[0-9]*\.[0-9]*(?:[eE][-+]?[0-9]+)?|[0-9]+[eE][-+]?[0-9]+)"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)|null|Null|NULL|~|true|True|TRUE|false|False|FALSE)$"
)


class _Flow(dict):
    """A small mapping written on one line: {start: 0, size: 1}."""


def _flowify(node: Any, depth: int = 0, in_list: bool = False) -> Any:
    if isinstance(node, dict):
        scalar_only = all(
            not isinstance(v, dict) and not (isinstance(v, list) and any(isinstance(x, (dict, list)) for x in v))
            for v in node.values()
        )
        items = {k: _flowify(v, depth + 1) for k, v in node.items()}
        if depth >= 2 and scalar_only and node and (in_list or len(node) <= 2):
            return _Flow(items)
        return items
    if isinstance(node, list):
        return [_flowify(v, depth + 1, in_list=True) for v in node]
    return node


def dump_yaml(inv: NodeInventory) -> str:
    """Deterministic YAML: model key order; short all-scalar mappings and
    lists of scalars in flow style (one NVLink, one placement, one topology
    row per line); strings that YAML 1.1 or 1.2 would read as something else
    quoted."""
    import yaml

    class _Dumper(yaml.SafeDumper):
        pass

    def _list(dumper: yaml.SafeDumper, data: list) -> yaml.Node:
        flow = bool(data) and all(not isinstance(x, (dict, list)) for x in data)
        return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)

    def _flow(dumper: yaml.SafeDumper, data: _Flow) -> yaml.Node:
        return dumper.represent_mapping("tag:yaml.org,2002:map", data.items(), flow_style=True)

    def _str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
        if _YAML12_NON_STR.match(data):
            return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="'")
        return dumper.represent_str(data)

    _Dumper.add_representer(list, _list)
    _Dumper.add_representer(_Flow, _flow)
    _Dumper.add_representer(str, _str)
    return yaml.dump(
        _flowify(to_document(inv)),
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=4096,
    )


def dump(inv: NodeInventory, fmt: str = "yaml") -> str:
    return dump_json(inv) if fmt == "json" else dump_yaml(inv)
