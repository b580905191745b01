"""Render diagnostics once, at the edge. One small module per format.

Two guarantees every format keeps, whatever the input held:

* **No forged output.** Values in messages come from files (and ConfigMaps)
  that may be hostile. ``escape`` turns every control character, including
  newlines, into a visible escape, so a value cannot start a line of its own
  (a fake ``::warning::`` workflow command, a fake "valid" line) or move the
  terminal's cursor; and it breaks ``##[``, the runner's legacy command form,
  which is recognised anywhere in a line. (actions/runner at 258d6c85,
  src/Runner.Common/ActionCommand.cs: ``TryParseV2`` takes a line whose
  ``TrimStart()`` starts with ``::``; ``TryParse`` finds ``##[`` by
  ``IndexOf`` anywhere; src/Runner.Worker/ActionCommandManager.cs tries both
  on every output line, for commands such as warning, error, add-mask,
  set-output.)
* **Bounded output.** At most ``MAX_SHOWN`` diagnostics are rendered; the rest
  are counted in one "N more" line (code GP016).

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from gpuplan.codes import E_MORE, MAX_SHOWN
from gpuplan.diagnostics import Diagnostic, Severity

FORMATS = ("text", "json", "github", "sarif")

CODES = (E_MORE,)

def cap(diags: Sequence[Diagnostic], limit: int = MAX_SHOWN) -> list[Diagnostic]:
    """The first ``limit`` diagnostics and, when there were more, one GP016
    line counting the rest (errors and warnings among them)."""
    if len(diags) <= limit:
        return list(diags)
    rest = diags[limit:]
    errors = sum(1 for d in rest if d.severity is Severity.ERROR)
    warnings = sum(1 for d in rest if d.severity is Severity.WARNING)
    first = rest[0]
    return [*diags[:limit], E_MORE.diag(
        f"{len(rest):,} more diagnostics not shown ({errors:,} errors, {warnings:,} warnings)",
        file=first.file, line=first.line, col=first.col,
        hint="fix the ones shown and run again")]


def render(fmt: str, diags: Sequence[Diagnostic], *, color: bool = False,
           sources: Mapping[str, str] | None = None) -> str:
    """Diagnostics (already normalised) as text in the given format.
    ``sources`` maps the files whose lines may be quoted (the spec and the
    inventory files it names) to their text; nothing else is ever read."""
    renderer: Callable[..., str]
    diags = cap(diags)
    if fmt == "text":
        from gpuplan.reporters.text import render as renderer

        return renderer(diags, color=color, sources=sources)
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
