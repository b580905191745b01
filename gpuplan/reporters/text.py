"""Compiler-style text: location, severity, code, message, the source line and a caret.

Source lines come only from ``sources``, the texts the loader already holds
(the spec and the inventory files it names): the reporter opens no file, so
it costs no second read, cannot hang on a FIFO, and never quotes a line of a
file the run had no business reading."""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from gpuplan.diagnostics import Diagnostic
from gpuplan.reporters import escape

_TOKEN = re.compile(r"""("[^"]*"|'[^']*'|[^\s:,\[\]{}#]+)""")


def _line(text: str, n: int) -> str | None:
    """Line ``n`` (1-based) of ``text``, found without splitting the whole text."""
    start = 0
    for _ in range(n - 1):
        start = text.find("\n", start) + 1
        if start == 0:
            return None
    end = text.find("\n", start)
    line = text[start:] if end < 0 else text[start:end]
    if end < 0 and not line and n > 1:
        return None
    return line.rstrip("\r")


def _style(text: str, color: bool, **kw: object) -> str:
    if not color:
        return text
    import click

    return click.style(text, **kw)  # type: ignore[arg-type]


def _excerpt(d: Diagnostic, color: bool, sources: Mapping[str, str]) -> list[str]:
    if not d.file or d.line is None or d.line < 1:
        return []
    text = sources.get(d.file)
    if text is None:
        return []
    raw = _line(text, d.line)
    if raw is None:
        return []
    raw = raw.replace("\t", " ")
    if len(raw) > 160:
        raw = raw[:157] + "..."
    col = max(1, min(d.col or 1, len(raw) + 1))
    m = _TOKEN.match(raw, col - 1)
    width = max(1, len(escape(m.group(0))) if m else 1)
    # escaped text before the caret may be wider than the raw text
    col = len(escape(raw[: col - 1])) + 1
    src = escape(raw)
    gutter = " " * len(str(d.line))
    caret = _style("^" * width, color, fg="red" if d.is_error else "yellow", bold=True)
    return [
        f"{gutter} |",
        f"{d.line} | {src}",
        f"{gutter} | {' ' * (col - 1)}{caret}",
    ]


def _location(d: Diagnostic) -> str:
    loc = escape(d.location())
    # a file name cannot make the line a workflow command (`::warning ...`)
    return "./" + loc if loc.startswith("::") else loc


def render(diags: Sequence[Diagnostic], *, color: bool = False,
           sources: Mapping[str, str] | None = None) -> str:
    out: list[str] = []
    for d in diags:
        sev = _style(d.severity.value, color, fg="red" if d.is_error else "yellow", bold=True)
        out.append(f"{_location(d)}: {sev}[{d.code}]: {escape(d.message)}")
        out.extend(_excerpt(d, color, sources or {}))
        if d.hint:
            out.append(f"  = hint: {escape(d.hint)}")
    return "\n".join(out) + ("\n" if out else "")
