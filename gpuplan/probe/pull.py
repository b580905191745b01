"""`gpuplan inventory pull`: the node probes' ConfigMaps -> inventory/<node>.yaml (or .json).

One ``kubectl get configmaps -l app.kubernetes.io/name=gpuplan-node-probe
--chunk-size=N`` (kubectl pages through the LIST itself, N objects per
request, so 1,000 nodes are two requests that never hold the whole list in
one response). Each document is validated and re-serialised by gpuplan's own
writer, so the files are byte-identical whatever probe version wrote them,
and a file is rewritten only when its bytes change.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from gpuplan.probe.inventory import NodeInventory, dump_json, dump_yaml
from gpuplan.probe.publish import ANNOTATION_NODE, DATA_KEY, SELECTOR

# a node name is a DNS subdomain: safe as a file name
_SAFE_NODE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


class PullError(Exception):
    """kubectl is missing, failed, or printed something that is not a List."""


@dataclass
class PullResult:
    written: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def kubectl_command(
    *, kubectl: str = "kubectl", namespace: str, context: str | None = None, chunk_size: int = 500
) -> list[str]:
    cmd = [kubectl]
    if context:
        cmd += ["--context", context]
    cmd += [
        "get",
        "configmaps",
        "--namespace",
        namespace,
        "--selector",
        SELECTOR,
        "--output",
        "json",
        f"--chunk-size={int(chunk_size)}",
    ]
    return cmd


def run_kubectl(cmd: Sequence[str], *, timeout: float = 300) -> dict[str, Any]:
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise PullError(f"{cmd[0]} not found on PATH (install kubectl or pass --kubectl PATH)") from None
    except PermissionError:
        raise PullError(f"{cmd[0]} is not executable") from None
    except subprocess.TimeoutExpired:
        raise PullError(f"{cmd[0]} did not answer within {timeout:.0f}s") from None
    if proc.returncode != 0:
        lines = [l for l in (proc.stderr or "").strip().splitlines() if l.strip()]
        reason = lines[-1] if lines else f"exit status {proc.returncode}"
        raise PullError(f"kubectl failed (exit {proc.returncode}): {reason}")
    try:
        obj = json.loads(proc.stdout)
    except ValueError:
        raise PullError("kubectl did not print JSON") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("items"), list):
        raise PullError("kubectl did not print a List")
    return obj


def inventories_from_list(obj: dict[str, Any]) -> tuple[list[NodeInventory], list[str]]:
    """Valid inventories (sorted by node) and one warning per ConfigMap skipped."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    from pydantic import ValidationError

    yaml = YAML(typ="safe", pure=True)
    invs: dict[str, NodeInventory] = {}
    warnings: list[str] = []
    for item in obj.get("items", []):
        meta = item.get("metadata") or {}
        where = f"{meta.get('namespace', '?')}/{meta.get('name', '?')}"
        text = (item.get("data") or {}).get(DATA_KEY)
        if not isinstance(text, str):
            warnings.append(f"{where}: no {DATA_KEY} key; skipped")
            continue
        try:
            inv = NodeInventory.model_validate(yaml.load(text))
        except YAMLError as exc:
            warnings.append(f"{where}: {DATA_KEY} is not YAML ({str(exc).splitlines()[0]}); skipped")
            continue
        except ValidationError as exc:
            warnings.append(f"{where}: not a valid NodeInventory ({exc.error_count()} problems); skipped")
            continue
        node = inv.metadata.name
        annotated = (meta.get("annotations") or {}).get(ANNOTATION_NODE)
        if annotated != node:
            # the admission policy ties the annotation to the writing node; a
            # document claiming another node is not trusted
            warnings.append(f"{where}: annotation {ANNOTATION_NODE}={annotated!r} does not match the document's node {node!r}; skipped")
            continue
        if not _SAFE_NODE.match(node):
            warnings.append(f"{where}: node name {node!r} is not a DNS name; skipped")
            continue
        if node in invs:
            warnings.append(f"{where}: second inventory for node {node!r}; skipped")
            continue
        invs[node] = inv
    return [invs[k] for k in sorted(invs)], warnings


# How each format's files start (model key order): only files that begin so are
# gpuplan's, and only those are ever removed.
_HEADERS = {
    ".yaml": "apiVersion: gpuplan.dev/v1alpha1\nkind: NodeInventory\n",
    ".json": '{\n  "apiVersion": "gpuplan.dev/v1alpha1",\n  "kind": "NodeInventory",\n',
}
_DUMPERS = {".yaml": dump_yaml, ".json": dump_json}


def _ours(path: Path) -> bool:
    header = _HEADERS[path.suffix]
    try:
        with path.open(encoding="utf-8") as fh:
            return fh.read(len(header)) == header
    except (OSError, UnicodeDecodeError):
        return False


def write_inventories(out_dir: Path, invs: Sequence[NodeInventory], *, prune: bool = False,
                      fmt: str = "yaml") -> PullResult:
    """Write ``<out_dir>/<node>.<fmt>`` for each inventory, touching only files
    whose bytes change. A node's file in the other format, if gpuplan wrote it,
    is removed, so switching formats never leaves a node inventoried twice.
    ``prune`` removes gpuplan's inventory files for nodes that no longer publish."""
    suffix = "." + fmt
    other = ".json" if suffix == ".yaml" else ".yaml"
    dump = _DUMPERS[suffix]
    res = PullResult()
    out_dir.mkdir(parents=True, exist_ok=True)
    keep: set[str] = set()
    for inv in invs:
        path = out_dir / f"{inv.metadata.name}{suffix}"
        keep.add(path.name)
        text = dump(inv)
        try:
            old = path.read_text(encoding="utf-8")
        except OSError:
            old = None
        if old == text:
            res.unchanged.append(path)
        else:
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(path)
            res.written.append(path)
        stale = path.with_suffix(other)
        if stale.is_file() and _ours(stale):
            stale.unlink()
            res.removed.append(stale)
    if prune:
        for path in sorted([*out_dir.glob("*.yaml"), *out_dir.glob("*.json")]):
            if path.name not in keep and _ours(path):
                path.unlink()
                res.removed.append(path)
    return res
