"""The hardware inventory: one ``NodeInventory`` document per node.

Written by `gpuplan probe` on the node (through NVML), collected into the
repository by `gpuplan inventory pull`, read back by `load_inventory` for the
fleet rules. This module imports neither pynvml nor ruamel at import time, so
the validate path can use the models without the ``probe`` extra.

Keys are camelCase like every Kubernetes-style document; the Python attributes
are snake_case (``GpuInfo.memory_mib`` <-> ``memoryMiB``). A document carries
no timestamp: the same hardware always gives the same bytes, which is what lets
the node probe publish only when something changed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, Iterable, Literal, Optional, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gpuplan.diagnostics import Diagnostic

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


# --- loading --------------------------------------------------------------

INVENTORY_SUFFIXES = (".yaml", ".yml", ".json")


def _expand(paths: Iterable[str | Path]) -> tuple[list[Path], list[Diagnostic]]:
    from gpuplan.probe.codes import GP701, GP706

    files: list[Path] = []
    diags: list[Diagnostic] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if f.is_file() and f.suffix in INVENTORY_SUFFIXES)
            if not found:
                diags.append(GP706.diag(f"no inventory files (*.yaml, *.yml, *.json) in {p}", file=str(p)))
            files.extend(found)
        elif p.is_file():
            files.append(p)
        else:
            diags.append(GP701.diag(f"inventory file not found: {p}", file=str(p)))
    return files, diags


class _Positions:
    """Line/column of keys and items in one YAML document (ruamel round-trip
    nodes keep them; 1-based here)."""

    def __init__(self, root: Any) -> None:
        self.root = root

    def find(self, loc: Sequence[Any]) -> tuple[int | None, int | None]:
        node = self.root
        line = col = None
        lc = getattr(node, "lc", None)
        if lc is not None:
            line, col = lc.line + 1, lc.col + 1
        for key in loc:
            lc = getattr(node, "lc", None)
            try:
                if isinstance(key, int) and isinstance(node, list):
                    if lc is not None and key < len(node):
                        ln, cl = lc.item(key)
                        line, col = ln + 1, cl + 1
                    node = node[key]
                elif isinstance(node, dict) and key in node:
                    if lc is not None:
                        ln, cl = lc.key(key)
                        line, col = ln + 1, cl + 1
                    node = node[key]
                else:
                    break
            except (KeyError, IndexError, TypeError, AttributeError):
                break
        return line, col


def _loc_text(loc: Sequence[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _read_text(path: Path) -> tuple[str | None, list[Diagnostic]]:
    from gpuplan.probe.codes import GP701

    try:
        return path.read_text(encoding="utf-8"), []
    except UnicodeDecodeError as exc:
        return None, [GP701.diag(f"not UTF-8 text: {exc.reason}", file=str(path))]
    except OSError as exc:
        return None, [GP701.diag(f"cannot read inventory file: {exc.strerror or exc}", file=str(path))]


def _fast_load(path: Path, text: str) -> tuple[list[Any], list[Diagnostic]]:
    """All documents of one file as plain data.

    Speed matters here (a fleet has hundreds of inventories, each ~15 kB of
    YAML): JSON goes through ``json``, YAML through libyaml's safe loader
    (PyYAML's CSafeLoader, ~2.5x faster than ruamel's C loader and ~25x faster
    than its round-trip loader). Both construct only maps, lists and scalars.
    Positions are recovered with ruamel only when a document is invalid.
    """
    from gpuplan.probe.codes import GP702

    if path.suffix == ".json":
        try:
            return [json.loads(text)], []
        except ValueError as exc:
            line, col = getattr(exc, "lineno", None), getattr(exc, "colno", None)
            return [], [GP702.diag(f"JSON syntax error: {getattr(exc, 'msg', exc)}", file=str(path), line=line, col=col)]
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        docs = [d for d in yaml.load_all(text, Loader=loader) if d is not None]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        col = mark.column + 1 if mark is not None else None
        msg = " ".join(str(p) for p in (exc.context, exc.problem) if p) or str(exc)
        return [], [GP702.diag(f"YAML syntax error: {msg}", file=str(path), line=line, col=col)]
    except yaml.YAMLError as exc:
        return [], [GP702.diag(f"YAML error: {exc}", file=str(path))]
    return docs, []


def _positions(text: str) -> list[_Positions]:
    """Round-trip parse (ruamel keeps line/column of every key and item);
    used only to place the diagnostics of an invalid document."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    yaml = YAML(typ="rt", pure=True)
    yaml.allow_duplicate_keys = True
    try:
        return [_Positions(d) for d in yaml.load_all(text) if d is not None]
    except YAMLError:
        return []


def load_inventory(paths: Iterable[str | Path]) -> tuple[list[NodeInventory], list[Diagnostic]]:
    """Read inventory files (YAML or JSON; a directory means its *.yaml, *.yml
    and *.json files; a file may hold several ``---`` documents).

    Returns the valid inventories in file order and the problems found as
    GP7xx diagnostics with file:line:col. Never raises for bad input; invalid
    documents are left out. Also warns (GP707) about fields the probe could
    not read, so rules know a fact may be missing.
    """
    import gc

    # Parsing builds only acyclic trees of dicts and lists; the cyclic GC
    # would rescan all of them again and again (~40% of the time at 1,000
    # inventories), so it is paused and restored.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _load_inventory(paths)
    finally:
        if was_enabled:
            gc.enable()


def _load_inventory(paths: Iterable[str | Path]) -> tuple[list[NodeInventory], list[Diagnostic]]:
    from gpuplan.probe.codes import GP703, GP704, GP705

    files, diags = _expand(paths)
    out: list[NodeInventory] = []
    seen: dict[str, str] = {}
    for path in files:
        file = str(path)
        text, errs = _read_text(path)
        diags.extend(errs)
        if text is None:
            continue
        docs, errs = _fast_load(path, text)
        diags.extend(errs)
        cache: list[list[_Positions]] = []

        def pos(i: int, text: str = text, cache: list = cache) -> _Positions:
            if not cache:
                cache.append(_positions(text))
            found = cache[0]
            return found[i] if i < len(found) else _Positions(None)

        for i, doc in enumerate(docs):
            if not isinstance(doc, dict):
                line, col = pos(i).find(())
                diags.append(GP703.diag("an inventory document must be a mapping", file=file, line=line, col=col))
                continue
            if doc.get("kind") != KIND or doc.get("apiVersion") != API_VERSION:
                key = "kind" if doc.get("kind") != KIND else "apiVersion"
                line, col = pos(i).find((key,) if key in doc else ())
                diags.append(
                    GP703.diag(
                        f"not a NodeInventory document (want apiVersion: {API_VERSION}, kind: {KIND}; "
                        f"got {doc.get('apiVersion')!r}, {doc.get('kind')!r})",
                        file=file,
                        line=line,
                        col=col,
                    )
                )
                continue
            try:
                inv = NodeInventory.model_validate(doc)
            except ValidationError as exc:
                for err in exc.errors(include_url=False):
                    loc = tuple(err.get("loc", ()))
                    line, col = pos(i).find(loc)
                    where = _loc_text(loc)
                    msg = "unknown key" if err.get("type") == "extra_forbidden" else err.get("msg", "invalid")
                    diags.append(
                        GP704.diag(f"{where + ': ' if where else ''}{msg}", file=file, line=line, col=col,
                                   path=where or None)
                    )
                continue
            name = inv.metadata.name
            if name in seen:
                line, col = pos(i).find(("metadata", "name"))
                diags.append(
                    GP705.diag(
                        f"node {name!r} has a second inventory (first in {seen[name]})",
                        file=file,
                        line=line,
                        col=col,
                        path="metadata.name",
                    )
                )
                continue
            seen[name] = file
            out.append(inv)
            if inv.system.errors or inv.topology.errors or any(g.errors for g in inv.gpus):
                diags.extend(_field_error_warnings(inv, file, pos(i)))
    return out, diags


def _field_error_warnings(inv: NodeInventory, file: str, pos: _Positions) -> list[Diagnostic]:
    from gpuplan.probe.codes import GP707

    out: list[Diagnostic] = []
    node = inv.metadata.name
    groups: list[tuple[tuple, str, list[FieldError]]] = [(("system",), "system", inv.system.errors)]
    for i, g in enumerate(inv.gpus):
        groups.append((("gpus", i), f"GPU {g.index}", g.errors))
    groups.append((("topology",), "topology", inv.topology.errors))
    for loc, what, errors in groups:
        for e in errors:
            line, col = pos.find((*loc, "errors"))
            out.append(
                GP707.diag(
                    f"node {node}: {what}: {e.field} was not read ({e.nvml_error})",
                    file=file,
                    line=line,
                    col=col,
                    path=_loc_text((*loc, "errors")),
                )
            )
    return out
