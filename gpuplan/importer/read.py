"""Read what `kubectl get ... -o json` (or -o yaml) exported: files, directories
and stdin, through the bounded manifest reader `gpuplan verify` uses (regular
files only, 16 MiB a file, nesting, alias and value limits), flattened into
objects that remember where they came from.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from gpuplan.diagnostics import Diagnostic

MAX_STDIN_BYTES = 64 * 1024 * 1024  # as `verify-cluster --live`: ~20,000 nodes without managedFields
MAX_ITEMS = 100_000  # objects in `items`, all inputs together (the --live limit)


@dataclass(frozen=True)
class Obj:
    """One Kubernetes object of the input and where it is (``path``: keys and
    indices from its document's root, ``("items", 3)`` inside a List)."""

    data: dict
    file: str
    manifest: Any  # gpuplan.verify.manifests.Manifest
    path: tuple = ()

    @property
    def kind(self) -> str:
        return self.data.get("kind") if isinstance(self.data.get("kind"), str) else ""

    @property
    def api_group(self) -> str:
        api = self.data.get("apiVersion")
        return api.rpartition("/")[0] if isinstance(api, str) else ""

    @property
    def meta(self) -> dict:
        m = self.data.get("metadata")
        return m if isinstance(m, dict) else {}

    @property
    def name(self) -> str:
        n = self.meta.get("name")
        return n if isinstance(n, str) else ""

    @property
    def namespace(self) -> str:
        n = self.meta.get("namespace")
        return n if isinstance(n, str) else ""

    def strings(self, key: str) -> dict[str, str]:
        """``metadata.labels`` / ``annotations`` with only string values (nulls dropped)."""
        m = self.meta.get(key)
        if not isinstance(m, dict):
            return {}
        return {k: v for k, v in m.items() if isinstance(k, str) and isinstance(v, str)}

    @property
    def labels(self) -> dict[str, str]:
        return self.strings("labels")

    def at(self, *sub: Any) -> tuple[str, int | None, int | None]:
        """``(file, line, col)`` of a field of this object (the nearest node the file has)."""
        line, col = self.manifest.locate(self.path + tuple(sub)) if self.manifest is not None else (None, None)
        return self.file, line, col

    def where(self, *sub: Any) -> str:
        """The field as text for a provenance comment: ``Node gpu-01 metadata.labels[...]``."""
        out = ""
        for s in sub:
            out += f"[{s}]" if isinstance(s, int) else (f".{s}" if _plain(s) else f"[{s}]")
        return f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}{':' if out else ''}{out.lstrip('.')}"


def _plain(s: str) -> bool:
    return s.replace("_", "a").replace("-", "a").isalnum()


@dataclass
class Input:
    objects: list[Obj] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)  # file -> text, for quoting


def _flatten(manifest: Any, file: str, out: Input) -> None:
    d = manifest.data
    if not isinstance(d, dict):
        return
    kind = d.get("kind")
    items = d.get("items")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(items, list):
        for i, it in enumerate(items):
            if len(out.objects) >= MAX_ITEMS:
                from gpuplan.spec.loader import E_TOO_MANY_VALUES

                out.diagnostics.append(E_TOO_MANY_VALUES.diag(
                    f"more than {MAX_ITEMS:,} objects in the input; the rest are not read", file=file))
                return
            if isinstance(it, dict) and isinstance(it.get("kind"), str):
                out.objects.append(Obj(it, file, manifest, ("items", i)))
        return
    if isinstance(kind, str):
        out.objects.append(Obj(d, file, manifest, ()))


def read_inputs(args: Iterable[str], *, stdin: bytes | None = None) -> Input:
    """Every object of every argument: a file, a directory (its ``*.yaml``,
    ``*.yml`` and ``*.json``, walked as `gpuplan verify` walks one: links that
    leave it and other filesystems refused) or ``-`` (stdin; ``stdin`` bytes
    given by a caller instead)."""
    from gpuplan.spec.loader import E_TOO_LARGE, E_UNREADABLE, LoadError, read_stdin
    from gpuplan.verify.manifests import discover, load_text, read_file

    out = Input()
    for arg in args:
        if arg == "-":
            name = "<stdin>"
            try:
                raw = stdin if stdin is not None else read_stdin(max_bytes=MAX_STDIN_BYTES, display=name)
            except LoadError as exc:
                out.diagnostics.append(exc.diag)
                continue
            if len(raw) > MAX_STDIN_BYTES:
                out.diagnostics.append(E_TOO_LARGE.diag(f"stdin is larger than {MAX_STDIN_BYTES // (1 << 20)} MiB",
                                                        file=name))
                continue
            if raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                out.diagnostics.append(E_UNREADABLE.diag("stdin is not UTF-8 text", file=name))
                continue
            out.sources[name] = text
            manifests, diags = load_text(text, name)
            out.diagnostics += diags
            for m in manifests:
                _flatten(m, name, out)
            continue
        files, diags = discover([arg])
        out.diagnostics += diags
        for path, shown in files:
            manifests, diags = read_file(path, shown, sources=out.sources)
            out.diagnostics += diags
            for m in manifests:
                _flatten(m, shown, out)
    return out


def yaml_payload(text: Any) -> Any:
    """A ConfigMap value parsed by the bounded reader (None when it is not YAML)."""
    if not isinstance(text, str):
        return None
    from gpuplan.output.objdiff import yaml_documents

    docs = yaml_documents(text, "<configmap value>")
    return docs[0] if docs and len(docs) == 1 else None
