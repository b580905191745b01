"""The draft as commented YAML: ruamel.yaml's CommentedMap carries a comment
per value (where it came from, or a TODO); ruamel quotes every scalar that
needs it, so a name with `: `, `#` or a newline from the cluster stays a
harmless string. Comment text is escaped onto one line.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import io
from typing import Any

from gpuplan.importer.infer import Draft


def _comment(text: str) -> str:
    from gpuplan.diagnostics import escape

    return escape(text).replace("\r", " ").replace("\n", " ")


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
    y.default_flow_style = False
    y.width = 4096
    y.indent(mapping=2, sequence=4, offset=2)
    buf = io.StringIO()
    y.dump(doc, buf)
    return buf.getvalue()
