"""Compiler-style text: location, severity, code, message, the source line and a caret."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Sequence

from gpuplan.diagnostics import Diagnostic

_TOKEN = re.compile(r"""("[^"]*"|'[^']*'|[^\s:,\[\]{}#]+)""")


@lru_cache(maxsize=32)
def _lines(file: str) -> tuple[str, ...] | None:
    try:
        with open(file, encoding="utf-8", errors="replace") as fh:
            return tuple(fh.read().splitlines())
    except OSError:
        return None


def _style(text: str, color: bool, **kw: object) -> str:
    if not color:
        return text
    import click

    return click.style(text, **kw)  # type: ignore[arg-type]


def _excerpt(d: Diagnostic, color: bool) -> list[str]:
    if not d.file or d.line is None:
        return []
    lines = _lines(d.file)
    if not lines or not 1 <= d.line <= len(lines):
        return []
    src = lines[d.line - 1].replace("\t", " ")
    if len(src) > 160:
        src = src[:157] + "..."
    col = max(1, min(d.col or 1, len(src) + 1))
    m = _TOKEN.match(src, col - 1)
    width = max(1, len(m.group(0)) if m else 1)
    gutter = " " * len(str(d.line))
    caret = _style("^" * width, color, fg="red" if d.is_error else "yellow", bold=True)
    return [
        f"{gutter} |",
        f"{d.line} | {src}",
        f"{gutter} | {' ' * (col - 1)}{caret}",
    ]


def render(diags: Sequence[Diagnostic], *, color: bool = False) -> str:
    out: list[str] = []
    for d in diags:
        sev = _style(d.severity.value, color, fg="red" if d.is_error else "yellow", bold=True)
        out.append(f"{d.location()}: {sev}[{d.code}]: {d.message}")
        out.extend(_excerpt(d, color))
        if d.hint:
            out.append(f"  = hint: {d.hint}")
    return "\n".join(out) + ("\n" if out else "")
