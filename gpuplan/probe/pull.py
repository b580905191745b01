"""`gpuplan inventory pull`: the node probes' ConfigMaps -> inventory/<node>.yaml (or .json).

One ``kubectl get configmaps -l app.kubernetes.io/name=gpuplan-node-probe
--chunk-size=N`` (kubectl pages through the LIST itself, N objects per
request, so 1,000 nodes are two requests that never hold the whole list in
one response). Each document is validated and re-serialised by gpuplan's own
writer, so the files are byte-identical whatever probe version wrote them,
and a file is rewritten only when its bytes change.

Stage: report (docs/architecture.md)."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from gpuplan.output.atomic import write_atomic
from gpuplan.probe.inventory import NodeInventory, dump_json, dump_yaml
from gpuplan.probe.publish import ANNOTATION_NODE, DATA_KEY, SELECTOR

INVENTORY_FILE_MAX = 1024 * 1024  # what a pull ever writes: one inventory

# a node name is a DNS subdomain: safe as a file name
_SAFE_NODE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
NAME_MAX = 255  # bytes of one file name on Linux and macOS


def inventory_file_name(node: str, suffix: str) -> str:
    """``<node><suffix>``; for a node name so long (up to 253 characters) that
    this exceeds NAME_MAX, the name cut and completed with a hash of the whole
    name: deterministic, distinct per node, still sorted near its node. The
    file's content names the node; the file name is only where it is kept."""
    name = f"{node}{suffix}"
    if len(name.encode("utf-8")) <= NAME_MAX:
        return name
    import hashlib

    digest = hashlib.sha256(node.encode("utf-8")).hexdigest()[:16]
    return f"{node[:NAME_MAX - len(suffix) - len(digest) - 1]}-{digest}{suffix}"


class PullError(Exception):
    """kubectl is missing, failed, or printed something that is not a List."""


@dataclass
class PullResult:
    written: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # nodes whose file could not be written


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


def nodes_command(*, kubectl: str = "kubectl", context: str | None = None, chunk_size: int = 500) -> list[str]:
    """The cluster's Node objects (names only are used): with ``--prune``,
    the ConfigMaps of deleted nodes are left out. This is the puller's read,
    so the probe pods on every node need no cluster-wide rights."""
    cmd = [kubectl]
    if context:
        cmd += ["--context", context]
    return cmd + ["get", "nodes", "--output", "json", f"--chunk-size={int(chunk_size)}"]


def node_names(obj: dict[str, Any]) -> set[str]:
    return {(i.get("metadata") or {}).get("name") for i in obj.get("items", []) if isinstance(i, dict)} - {None}


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


def _text(value: Any, limit: int = 120) -> str:
    """A value from a ConfigMap, fit for one log line: quoted, control
    characters escaped, cut."""
    r = repr(value)
    return r if len(r) <= limit else r[: limit - 3] + "..."


def inventories_from_list(obj: dict[str, Any], *, nodes: set[str] | None = None) -> tuple[list[NodeInventory], list[str]]:
    """Valid inventories (sorted by node) and one warning per ConfigMap skipped.

    Each ConfigMap is written by one node, and a node can be compromised: its
    text goes through the bounded loader (size, depth, values, alias
    expansion: ``gpuplan.probe.reader``), and whatever is wrong with it is a
    warning that names the node, never a stop for the other nodes. ``nodes``:
    the cluster's node names; a ConfigMap of a node not among them is skipped."""
    from gpuplan.probe.reader import parse_documents, validate_document
    from gpuplan.spec.loader import INVENTORY_LIMITS

    invs: dict[str, NodeInventory] = {}
    warnings: list[str] = []
    items = obj.get("items", [])
    for item in items if isinstance(items, list) else []:
        item = item if isinstance(item, dict) else {}
        meta = item.get("metadata") if isinstance(item.get("metadata"), dict) else {}
        annotations = meta.get("annotations") if isinstance(meta.get("annotations"), dict) else {}
        annotated = annotations.get(ANNOTATION_NODE)
        where = f"{_text(meta.get('namespace', '?'), 80)[1:-1]}/{_text(meta.get('name', '?'), 260)[1:-1]}"
        if annotated is not None:
            where += f" (node {_text(annotated, 260)})"
        data = item.get("data") if isinstance(item.get("data"), dict) else {}
        text = data.get(DATA_KEY)
        if not isinstance(text, str):
            warnings.append(f"{where}: no {DATA_KEY} key; skipped")
            continue
        if len(text) > INVENTORY_LIMITS.max_bytes or len(text.encode("utf-8", "surrogatepass")) > INVENTORY_LIMITS.max_bytes:
            warnings.append(f"{where}: {DATA_KEY} is larger than {INVENTORY_LIMITS.max_bytes // 1024} KiB; skipped")
            continue
        docs, errs = parse_documents(text, DATA_KEY)
        if not errs and len(docs) != 1:
            warnings.append(f"{where}: {DATA_KEY} holds {len(docs)} documents, not one; skipped")
            continue
        inv = None
        if not errs:
            inv, errs = validate_document(docs[0])
        if inv is None:
            first = errs[0] if errs else None
            detail = ""
            if first is not None:
                at = f"line {first.line}: " if first.line else ""
                detail = f" ({at}{_text(first.message, 160)[1:-1]}" + (
                    f"; {len(errs) - 1} more problems)" if len(errs) > 1 else ")")
            warnings.append(f"{where}: not a valid NodeInventory{detail}; skipped")
            continue
        node = inv.metadata.name
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
        if nodes is not None and node not in nodes:
            name = _text(meta.get("name", "?"), 260)[1:-1]
            namespace = _text(meta.get("namespace", "?"), 80)[1:-1]
            warnings.append(f"{where}: node {node!r} is not in the cluster any more; skipped "
                            f"(remove the ConfigMap: kubectl delete configmap -n {namespace} {name})")
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


def _current(path: Path) -> str | None:
    """The file's text when it is gpuplan's regular file (a symlink or a
    FIFO planted at the name is replaced, never read or followed)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None
        raw = fh.read(INVENTORY_FILE_MAX + 1)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _ours(path: Path) -> bool:
    header = _HEADERS[path.suffix]
    text = _current(path)
    return text is not None and text.startswith(header)


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
        node = inv.metadata.name
        path = out_dir / inventory_file_name(node, suffix)
        if path.name in keep:  # only a node named like another's shortened name gets here
            res.warnings.append(f"node {node!r}: its file name {path.name!r} is taken by another node; skipped")
            res.failed.append(node)
            continue
        keep.add(path.name)
        # an OSError on one node's file is a warning naming the node: the others are still written
        try:
            text = dump(inv)
            old = _current(path)
            if old == text:
                res.unchanged.append(path)
            else:
                write_atomic(path, text.encode("utf-8"))
                res.written.append(path)
            stale = out_dir / inventory_file_name(node, other)
            if stale.is_file() and _ours(stale):
                stale.unlink()
                res.removed.append(stale)
        except OSError as exc:
            res.warnings.append(f"node {node!r}: cannot write {path.name}: {exc.strerror or exc}")
            res.failed.append(node)
    if prune:
        for path in sorted([*out_dir.glob("*.yaml"), *out_dir.glob("*.json")]):
            if path.name not in keep and _ours(path):
                path.unlink()
                res.removed.append(path)
    return res
