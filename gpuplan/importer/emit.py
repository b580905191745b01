"""The draft as commented YAML: ruamel.yaml's CommentedMap carries a comment
per value (where it came from, or a TODO); ruamel quotes every scalar that
needs it, so a name with `: `, `#` or a newline from the cluster stays a
harmless string. Comment text is escaped onto one line.

Strings from the cluster (label keys and values, names, descriptions) may be
words a YAML reader takes for something else: `yes`, `on`, `y` are booleans
and `010`, `0x1F`, `1_000`, `1:20` numbers to YAML 1.1 readers (PyYAML, Go's
yaml.v2), `1e3`, `0o17` numbers to YAML 1.2 ones. Every string that any of
them would not read back as that string is written quoted (``_Representer``:
keys and values alike), so the draft means the same to every reader. A lone
surrogate (only in objects a library caller built: the readers refuse it) is
written as its escape text, so the draft is always UTF-8.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import io
from functools import lru_cache
from typing import Any

from gpuplan.importer.infer import Draft


def _utf8(text: str) -> str:
    """``text`` as it can be written in UTF-8: a lone surrogate (only objects a library caller
    made hold one: the readers refuse them) as its escape, ``\\ud800``."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _comment(text: str) -> str:
    from gpuplan.diagnostics import escape

    return escape(_utf8(text)).replace("\r", " ").replace("\n", " ")


@lru_cache(maxsize=1)
def _resolvers() -> tuple:
    """The implicit resolvers of YAML 1.1 and 1.2 (ruamel), and PyYAML's (1.1) where installed."""
    from ruamel.yaml.nodes import ScalarNode
    from ruamel.yaml.resolver import VersionedResolver

    out: list = [(VersionedResolver(version=v), ScalarNode) for v in ((1, 1), (1, 2))]
    try:
        import yaml
    except ImportError:  # pragma: no cover - PyYAML is a dependency of the manifest reader
        pass
    else:
        out.append((yaml.resolver.Resolver(), yaml.ScalarNode))
    return tuple(out)


@lru_cache(maxsize=65536)
def ambiguous(text: str) -> bool:
    """Whether some YAML reader (1.1 or 1.2) reads ``text``, written plain, as anything but this string."""
    return any(str(r.resolve(node, text, (True, False))) != "tag:yaml.org,2002:str" for r, node in _resolvers())


@lru_cache(maxsize=1)
def _representer() -> Any:
    from ruamel.yaml.representer import RoundTripRepresenter

    class _Representer(RoundTripRepresenter):
        def represent_str(self, data: Any) -> Any:
            data = _utf8(data)
            return self.represent_scalar("tag:yaml.org,2002:str", data, style="'" if ambiguous(data) else None)

    _Representer.add_representer(str, _Representer.represent_str)
    return _Representer


def _build(value: Any, path: tuple, draft: Draft) -> Any:
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if isinstance(value, dict):
        m = CommentedMap()
        for k, v in value.items():
            m[k] = _build(v, path + (k,), draft)
            note = draft.notes.get(path + (k,))
            if note is not None:
                parts = []
                if note.source:
                    parts.append(note.source)
                if note.todo:
                    parts.append("TODO: " + note.todo)
                if parts:
                    m.yaml_add_eol_comment(_comment("; ".join(parts)), k)
        return m
    if isinstance(value, list):
        s = CommentedSeq()
        for i, v in enumerate(value):
            s.append(_build(v, path + (i,), draft))
        return s
    return value


def render(draft: Draft) -> str:
    from ruamel.yaml import YAML

    doc = _build(draft.spec, (), draft)
    head = ["Draft written by `gpuplan import` from a running cluster's objects.",
            "Every inferred value names where it came from; review each TODO, then run",
            "`gpuplan validate` and `gpuplan diff` before the first sync (docs/import.md)."]
    head += draft.header
    doc.yaml_set_start_comment("\n".join(_comment(h) for h in head))
    y = YAML(typ="rt")
    y.Representer = _representer()
    y.default_flow_style = False
    y.width = 4096
    y.indent(mapping=2, sequence=4, offset=2)
    buf = io.StringIO()
    y.dump(doc, buf)
    return buf.getvalue()
