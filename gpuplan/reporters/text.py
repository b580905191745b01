"""Compiler-style text: location, severity, code, message, the source line and a caret.

Source lines come only from ``sources``, the texts the loader already holds
(the spec and the inventory files it names): the reporter opens no file, so
it costs no second read, cannot hang on a FIFO, and never quotes a line of a
file the run had no business reading.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from gpuplan.diagnostics import Diagnostic
from gpuplan.diagnostics import escape

_TOKEN = re.compile(r"""("[^"]*"|'[^']*'|[^\s:,\[\]{}#]+)""")


class _Lines:
    """Line ``n`` of a text, found by walking forward from the last line
    asked for: diagnostics come sorted by line, so quoting them all costs one
    pass over the text, whatever its size."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.line, self.start = 1, 0

    def span(self, n: int) -> tuple[int, int] | None:
        if n < self.line:
            self.line, self.start = 1, 0
        text = self.text
        while self.line < n:
            nl = text.find("\n", self.start)
            if nl < 0:
                return None
            self.line, self.start = self.line + 1, nl + 1
        end = text.find("\n", self.start)
        end = len(text) if end < 0 else end
        if self.start == end == len(text) and n > 1:
            return None
        return self.start, end


WIDTH = 160  # a source line is shown in at most this many characters


def _style(text: str, color: bool, **kw: object) -> str:
    if not color:
        return text
    import click

    return click.style(text, **kw)  # type: ignore[arg-type]


def _excerpt(d: Diagnostic, color: bool, lines: dict[str, _Lines], sources: Mapping[str, str]) -> list[str]:
    if not d.file or d.line is None or d.line < 1:
        return []
    if d.file not in lines:
        text = sources.get(d.file)
        if text is None:
            return []
        lines[d.file] = _Lines(text)
    span = lines[d.file].span(d.line)
    if span is None:
        return []
    start, end = span
    text = lines[d.file].text
    col = max(1, min(d.col or 1, end - start + 1))
    # a window of the line around the column (a minified line can be megabytes)
    off = 0 if end - start <= WIDTH else max(0, min(col - 1 - WIDTH // 3, end - start - (WIDTH - 6)))
    raw = text[start + off: min(end, start + off + (WIDTH if off == 0 else WIDTH - 6))].rstrip("\r")
    lead = "..." if off else ""
    tail = "..." if start + off + len(raw) < end else ""
    raw = raw.replace("\t", " ")
    m = _TOKEN.match(raw, col - 1 - off)
    width = max(1, len(escape(m.group(0))) if m else 1)
    # escaped text before the caret may be wider than the raw text
    caret_at = len(lead) + len(escape(raw[: col - 1 - off]))
    src = lead + escape(raw) + tail
    gutter = " " * len(str(d.line))
    caret = _style("^" * width, color, fg="red" if d.is_error else "yellow", bold=True)
    return [
        f"{gutter} |",
        f"{d.line} | {src}",
        f"{gutter} | {' ' * caret_at}{caret}",
    ]


def _location(d: Diagnostic) -> str:
    loc = escape(d.location())
    # a file name cannot make the line a workflow command (`::warning ...`)
    return "./" + loc if loc.startswith("::") else loc


def render(diags: Sequence[Diagnostic], *, color: bool = False,
           sources: Mapping[str, str] | None = None) -> str:
    out: list[str] = []
    lines: dict[str, _Lines] = {}
    for d in diags:
        sev = _style(d.severity.value, color, fg="red" if d.is_error else "yellow", bold=True)
        out.append(f"{_location(d)}: {sev}[{d.code}]: {escape(d.message)}")
        out.extend(_excerpt(d, color, lines, sources or {}))
        if d.hint:
            out.append(f"  = hint: {escape(d.hint)}")
    return "\n".join(out) + ("\n" if out else "")
