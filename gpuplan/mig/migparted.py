"""Check an existing mig-parted config (plain ``version: v1`` + ``mig-configs:``
or a GPU Operator ConfigMap holding it under ``data["config.yaml"]``): the
file's schema (mig-parted ``api/spec/v1/spec.go``, reference/k8s/facts.md §e)
and the geometry of every entry on every GPU model it targets.

Returns diagnostics as data with 1-based ``line``/``col``; the CLI renders them.
ruamel.yaml is imported only when a file is checked.

Stage: model (docs/architecture.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuplan.catalog import GpuModel, mig_gpus, parse_profile_name, resolve_gpu
from gpuplan.diagnostics import Diagnostic, Severity, normalise
from gpuplan.mig.solver import FailureKind, LayoutCheck, check_layout, describe_layout, geometry_profile

from gpuplan.mig.codes import (
    E_MIG_PARTED_SCHEMA,
    FAILURE_CODES,
    W_PROFILE_NOT_IN_CATALOG,
    W_UNFILTERED_NOT_EVERYWHERE,
    W_UNKNOWN_DEVICE,
)

SCHEMA_CODE = E_MIG_PARTED_SCHEMA.code  # the file breaks mig-parted's config schema
UNKNOWN_DEVICE_CODE = W_UNKNOWN_DEVICE.code  # a device-filter id no catalog GPU has (warning)

TOP_KEYS = ("version", "mig-configs")
ENTRY_KEYS = ("device-filter", "devices", "mig-enabled", "mig-devices")
_FILTER_RE = re.compile(r"^0x[0-9A-Fa-f]{4}([0-9A-Fa-f]{4})?$")


@dataclass(frozen=True)
class MigPartedReport:
    file: str
    diagnostics: tuple[Diagnostic, ...]
    configs: int = 0
    entries: int = 0
    checked: tuple[tuple[str, int, str, bool], ...] = field(default=())  # (config, entry, model, ok)

    @property
    def ok(self) -> bool:
        return not any(d.is_error for d in self.diagnostics)


class _Pos:
    """Maps positions of a (possibly embedded) YAML document to the file."""

    def __init__(self, line_offset: int = 0, col_offset: int = 0, fixed: tuple[int, int] | None = None):
        self.line_offset, self.col_offset, self.fixed = line_offset, col_offset, fixed

    def at(self, line: int | None, col: int | None) -> tuple[int | None, int | None]:
        if self.fixed is not None:
            return self.fixed
        if line is None:
            return None, None
        return line + self.line_offset + 1, (col or 0) + self.col_offset + 1


def _node_pos(node: Any) -> tuple[int | None, int | None]:
    lc = getattr(node, "lc", None)
    return (lc.line, lc.col) if lc is not None else (None, None)


def _key_pos(mapping: Any, key: Any) -> tuple[int | None, int | None]:
    try:
        return tuple(mapping.lc.key(key))  # type: ignore[return-value]
    except Exception:  # noqa: BLE001 - plain dicts carry no positions
        return _node_pos(mapping)


def _value_pos(mapping: Any, key: Any) -> tuple[int | None, int | None]:
    try:
        return tuple(mapping.lc.value(key))  # type: ignore[return-value]
    except Exception:  # noqa: BLE001
        return _node_pos(mapping)


def _item_pos(seq: Any, i: int) -> tuple[int | None, int | None]:
    try:
        return tuple(seq.lc.item(i))  # type: ignore[return-value]
    except Exception:  # noqa: BLE001
        return _node_pos(seq)


class _Checker:
    def __init__(self, file: str, driver: str | None):
        self.file = file
        self.driver = driver
        self.diags: list[Diagnostic] = []
        self.configs = 0
        self.entries = 0
        self.checked: list[tuple[str, int, str, bool]] = []

    def add(self, code: str, msg: str, pos: _Pos, lc: tuple[int | None, int | None], *,
            hint: str | None = None, severity: Severity = Severity.ERROR, path: str | None = None) -> None:
        line, col = pos.at(*lc)
        self.diags.append(Diagnostic(code, severity, msg, self.file, line, col, path, hint))

    # --- documents -------------------------------------------------------------------

    def document(self, doc: Any, pos: _Pos, raw_lines: list[str]) -> None:
        from ruamel.yaml.comments import CommentedMap

        if isinstance(doc, CommentedMap) and doc.get("kind") == "ConfigMap":
            self.configmap(doc, pos, raw_lines)
        else:
            self.config(doc, pos, "")

    def configmap(self, cm: Any, pos: _Pos, raw_lines: list[str]) -> None:
        from ruamel.yaml.scalarstring import LiteralScalarString

        data = cm.get("data")
        if not isinstance(data, dict) or "config.yaml" not in data:
            where = _key_pos(cm, "data") if "data" in cm else _node_pos(cm)
            self.add(SCHEMA_CODE, "ConfigMap has no data key 'config.yaml'; the GPU Operator's MIG manager "
                     "reads only that key", pos, where, path="data")
            return
        text = data["config.yaml"]
        if not isinstance(text, str):
            self.add(SCHEMA_CODE, "data['config.yaml'] must be a string holding the mig-parted config",
                     pos, _value_pos(data, "config.yaml"), path="data.config.yaml")
            return
        vline, vcol = _value_pos(data, "config.yaml")
        if isinstance(text, LiteralScalarString) and vline is not None and self.fixed_is_none(pos):
            # a `|` block: content starts on the next line at the block's indent
            first = vline + 1
            while first < len(raw_lines) and not raw_lines[first].strip():
                first += 1
            indent = len(raw_lines[first]) - len(raw_lines[first].lstrip(" ")) if first < len(raw_lines) else 0
            inner = _Pos(pos.line_offset + vline + 1, pos.col_offset + indent)
        else:  # quoted or folded text: point at the value itself
            inner = _Pos(fixed=pos.at(vline, vcol))
        self.parse(text, inner, path_prefix="data.config.yaml")

    @staticmethod
    def fixed_is_none(pos: _Pos) -> bool:
        return pos.fixed is None

    def parse(self, text: str, pos: _Pos, path_prefix: str = "") -> None:
        from ruamel.yaml import YAML
        from ruamel.yaml.error import MarkedYAMLError, YAMLError

        yaml = YAML(typ="rt")
        try:
            docs = [d for d in yaml.load_all(text) if d is not None]
        except MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            lc = (mark.line, mark.column) if mark is not None else (None, None)
            problem = exc.problem or exc.context or "invalid YAML"
            self.add(SCHEMA_CODE, f"YAML error: {problem}", pos, lc)
            return
        except YAMLError as exc:
            self.add(SCHEMA_CODE, f"YAML error: {exc}", pos, (None, None))
            return
        raw_lines = text.splitlines()
        if not docs:
            self.add(SCHEMA_CODE, "empty document: expected a mig-parted config (version: v1, mig-configs:)",
                     pos, (0, 0))
        for doc in docs:
            if path_prefix:
                self.config(doc, pos, path_prefix)
            else:
                self.document(doc, pos, raw_lines)

    # --- mig-parted schema ---------------------------------------------------------------

    def config(self, doc: Any, pos: _Pos, path: str) -> None:
        if not isinstance(doc, dict):
            self.add(SCHEMA_CODE, "a mig-parted config is a mapping with keys version and mig-configs",
                     pos, _node_pos(doc))
            return
        for k in doc:
            if k not in TOP_KEYS:
                self.add(SCHEMA_CODE, f"unknown key {k!r}; a mig-parted config has only version and mig-configs",
                         pos, _key_pos(doc, k), path=k if not path else f"{path}.{k}")
        if "version" not in doc:
            self.add(SCHEMA_CODE, "missing key 'version' (must be v1)", pos, _node_pos(doc))
        elif doc["version"] != "v1":
            self.add(SCHEMA_CODE, f"version must be v1, not {doc['version']!r}", pos, _value_pos(doc, "version"))
        configs = doc.get("mig-configs")
        if "mig-configs" not in doc:
            self.add(SCHEMA_CODE, "missing key 'mig-configs'", pos, _node_pos(doc))
            return
        if not isinstance(configs, dict):
            self.add(SCHEMA_CODE, "mig-configs must map config names to lists of entries", pos,
                     _value_pos(doc, "mig-configs"))
            return
        for name, entries in configs.items():
            self.configs += 1
            if not isinstance(entries, list) or not entries:
                self.add(SCHEMA_CODE, f"config {name!r} must be a non-empty list of entries", pos,
                         _key_pos(configs, name), path=f"mig-configs.{name}")
                continue
            for i, entry in enumerate(entries):
                self.entry(str(name), i, entry, entries, pos)

    def entry(self, name: str, i: int, entry: Any, seq: Any, pos: _Pos) -> None:
        self.entries += 1
        where = _item_pos(seq, i)
        path = f"mig-configs.{name}[{i}]"
        if not isinstance(entry, dict):
            self.add(SCHEMA_CODE, f"config {name!r} entry {i + 1} must be a mapping", pos, where, path=path)
            return
        bad = False
        for k in entry:
            if k not in ENTRY_KEYS:
                self.add(SCHEMA_CODE, f"unknown key {k!r} in config {name!r} entry {i + 1} (allowed: "
                         f"{', '.join(ENTRY_KEYS)})", pos, _key_pos(entry, k), path=f"{path}.{k}")
                bad = True
        devices = entry.get("devices")
        if "devices" not in entry:
            self.add(SCHEMA_CODE, f"config {name!r} entry {i + 1} has no 'devices' (all, or a list of GPU "
                     "indices)", pos, where, path=path)
            bad = True
        elif not (devices == "all" or (isinstance(devices, list) and devices and all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in devices))):
            self.add(SCHEMA_CODE, f"devices must be 'all' or a list of GPU indices, not {devices!r}", pos,
                     _value_pos(entry, "devices"), path=f"{path}.devices")
            bad = True
        filtered = self.filter_models(entry, name, i, pos, path)
        enabled = entry.get("mig-enabled")
        if "mig-enabled" not in entry:
            self.add(SCHEMA_CODE, f"config {name!r} entry {i + 1} has no 'mig-enabled'", pos, where, path=path)
            return
        if not isinstance(enabled, bool):
            self.add(SCHEMA_CODE, f"mig-enabled must be true or false, not {enabled!r}", pos,
                     _value_pos(entry, "mig-enabled"), path=f"{path}.mig-enabled")
            return
        mig_devices = entry.get("mig-devices")
        if not enabled:
            if mig_devices:
                self.add(SCHEMA_CODE, f"config {name!r} entry {i + 1} lists mig-devices with mig-enabled: false",
                         pos, _key_pos(entry, "mig-devices"), path=f"{path}.mig-devices",
                         hint="set mig-enabled: true, or remove mig-devices")
            return
        if "mig-devices" not in entry:
            self.add(SCHEMA_CODE, f"config {name!r} entry {i + 1} has mig-enabled: true but no mig-devices "
                     "(use mig-devices: {} for MIG mode without devices)", pos, where, path=path)
            return
        if mig_devices is None:
            mig_devices = {}
        if not isinstance(mig_devices, dict):
            self.add(SCHEMA_CODE, "mig-devices must map profile names to counts", pos,
                     _value_pos(entry, "mig-devices"), path=f"{path}.mig-devices")
            return
        layout: dict[str, int] = {}
        for prof, count in mig_devices.items():
            if not isinstance(prof, str) or parse_profile_name(prof) is None:
                self.add(SCHEMA_CODE, f"{prof!r} is not a MIG profile name (<g>g.<gb>gb[+attr], or "
                         "<c>c.<g>g.<gb>gb)", pos, _key_pos(mig_devices, prof), path=f"{path}.mig-devices")
                bad = True
                continue
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                self.add(SCHEMA_CODE, f"count of {prof} must be a non-negative integer, not {count!r}", pos,
                         _value_pos(mig_devices, prof), path=f"{path}.mig-devices.{prof}")
                bad = True
                continue
            layout[prof] = layout.get(prof, 0) + count
        if mig_devices and not bad and not any(layout.values()):
            self.add(SCHEMA_CODE, f"config {name!r} entry {i + 1}: every count in mig-devices is 0", pos,
                     _key_pos(entry, "mig-devices"), path=f"{path}.mig-devices")
            return
        if bad or not any(layout.values()) or filtered is False:
            return
        if filtered is None:  # no device-filter: every MIG GPU that has all these profiles
            wanted = [p for p, c in layout.items() if c > 0]
            models = [g for g in mig_gpus() if all(geometry_profile(g, p) for p in wanted)]
            known = {n for g in mig_gpus() for n in g.profile_names}
            if not models and all(p in known for p in wanted):
                # every name is real, but of different GPUs: no node can create this entry
                self.add(FAILURE_CODES[FailureKind.UNKNOWN_PROFILE].code,
                         f"config {name!r} entry {i + 1}: no MIG GPU in gpuplan's catalog has all of "
                         f"{', '.join(wanted)}", pos, where, path=path,
                         hint="add a device-filter, or check the names with `gpuplan mig profiles MODEL`")
                return
            if not models:
                near = sorted(known)
                import difflib

                guesses = [m for p in wanted for m in difflib.get_close_matches(p, near, n=2, cutoff=0.8)
                           if m not in wanted]
                self.add(W_PROFILE_NOT_IN_CATALOG.code,
                         f"config {name!r} entry {i + 1}: no MIG GPU in gpuplan's catalog has all of "
                         f"{', '.join(wanted)}; the entry is not checked", pos, where, path=path,
                         severity=Severity.WARNING,
                         hint=(f"if misspelt, did you mean {' or '.join(dict.fromkeys(guesses))}? " if guesses else "")
                         + "check the names with `gpuplan mig profiles MODEL`")
                return
            self.geometry(name, i, layout, models, pos, where, path, unfiltered=True)
            return
        self.geometry(name, i, layout, filtered, pos, where, path)

    def filter_models(self, entry: Any, name: str, i: int, pos: _Pos, path: str) -> list[GpuModel] | None | bool:
        """Models an entry's device-filter targets; None without a filter, False when invalid."""
        if "device-filter" not in entry:
            return None
        raw = entry["device-filter"]
        items = [raw] if isinstance(raw, str) else raw
        if not isinstance(items, list) or not items or not all(isinstance(x, str) for x in items):
            self.add(SCHEMA_CODE, "device-filter must be a PCI device id (0x20B210DE) or a list of them", pos,
                     _value_pos(entry, "device-filter"), path=f"{path}.device-filter")
            return False
        models: list[GpuModel] = []
        invalid = False
        for j, item in enumerate(items):
            lc = _item_pos(raw, j) if isinstance(raw, list) else _value_pos(entry, "device-filter")
            if not _FILTER_RE.match(item.strip()):
                self.add(SCHEMA_CODE, f"device-filter {item!r} is not a PCI id like 0x20B210DE", pos, lc,
                         path=f"{path}.device-filter")
                invalid = True
                continue
            g = resolve_gpu(item)
            if g is None:
                self.add(UNKNOWN_DEVICE_CODE, f"device-filter {item} matches no GPU in gpuplan's catalog; "
                         f"config {name!r} entry {i + 1} is not checked for it", pos, lc,
                         severity=Severity.WARNING, path=f"{path}.device-filter")
            elif g not in models:
                models.append(g)
        return False if invalid else models

    def geometry(self, name: str, i: int, layout: dict[str, int], models: list[GpuModel], pos: _Pos,
                 where: tuple[int | None, int | None], path: str, *, unfiltered: bool = False) -> None:
        """Check the layout on each model. ``unfiltered``: an entry without device-filter,
        valid when it fits at least one model it can meet; the others are warnings."""
        by_table: dict[str, list[GpuModel]] = {}
        for g in models:
            by_table.setdefault(g.table or g.key, []).append(g)
        results = []
        for group in by_table.values():
            result = check_layout(group[0], layout, driver=self.driver)
            for g in group:
                self.checked.append((name, i, g.key, result.ok))
            results.append((group, result))
        fits = [g.key for group, r in results if r.ok for g in group]
        for group, result in results:
            if result.ok:
                continue
            assert result.failure is not None
            names = ", ".join(g.key for g in group)
            if unfiltered and fits:
                filters = [f for g in group for f in g.device_filters]
                self.add(W_UNFILTERED_NOT_EVERYWHERE.code,
                         f"config {name!r} entry {i + 1} (no device-filter) cannot be created on {names}: "
                         f"{result.failure.message}; it fits {', '.join(fits[:4])}"
                         + (" ..." if len(fits) > 4 else ""),
                         pos, where, path=path, severity=Severity.WARNING,
                         hint="add a device-filter for the GPUs it is meant for; a node with "
                              f"{names} must not select it" + (f" (its filter: {filters[0]})" if filters else ""))
                continue
            self.add(FAILURE_CODES[result.failure.kind].code,
                     f"config {name!r} entry {i + 1} cannot be created on {names}: {result.failure.message}",
                     pos, where, path=path, hint=hint_for(result))


def hint_for(result: LayoutCheck) -> str | None:
    """One line: did-you-mean for names, else the nearest creatable layouts."""
    f = result.failure
    if f is None:
        return None
    if f.kind is FailureKind.NOT_MIG_CAPABLE:
        return "use whole GPUs (mig-enabled: false) or time-slicing on this model"
    parts = []
    if f.did_you_mean:
        parts.append("did you mean " + " or ".join(f.did_you_mean) + "?")
    if result.suggestions:
        parts.append("nearest creatable: " + "; ".join(describe_layout(s.layout) for s in result.suggestions))
    return " ".join(parts) or None


def check_mig_parted_text(text: str, file: str = "<input>", *, driver: str | None = None) -> MigPartedReport:
    c = _Checker(file, driver)
    c.parse(text, _Pos())
    return MigPartedReport(file, tuple(normalise(c.diags)), c.configs, c.entries, tuple(c.checked))


def check_mig_parted_file(path: str | Path, *, driver: str | None = None) -> MigPartedReport:
    """Raises ``gpuplan.spec.loader.LoadError`` for a file that is not a
    regular UTF-8 file within the spec's size limit."""
    from gpuplan.spec.loader import read_source

    return check_mig_parted_text(read_source(path, display=str(path)), str(path), driver=driver)
