"""Render diagnostics once, at the edge. One small module per format."""

from __future__ import annotations

from typing import Callable, Sequence

from gpuplan.diagnostics import Diagnostic

FORMATS = ("text", "json", "github", "sarif")


def render(fmt: str, diags: Sequence[Diagnostic], *, color: bool = False) -> str:
    """Diagnostics (already normalised) as text in the given format."""
    renderer: Callable[..., str]
    if fmt == "text":
        from gpuplan.reporters.text import render as renderer

        return renderer(diags, color=color)
    if fmt == "json":
        from gpuplan.reporters.json import render as renderer
    elif fmt == "github":
        from gpuplan.reporters.github import render as renderer
    elif fmt == "sarif":
        from gpuplan.reporters.sarif import render as renderer
    else:
        raise ValueError(f"unknown format {fmt!r}")
    return renderer(diags)


def summary(diags: Sequence[Diagnostic]) -> str:
    errors = sum(1 for d in diags if d.severity.value == "error")
    warnings = sum(1 for d in diags if d.severity.value == "warning")

    def n(k: int, word: str) -> str:
        return f"{k} {word}" + ("" if k == 1 else "s")

    return f"{n(errors, 'error')}, {n(warnings, 'warning')}"
