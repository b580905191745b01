"""GitHub Actions workflow commands, shown as annotations on the pull request.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

from typing import Sequence

from gpuplan.diagnostics import Diagnostic
from gpuplan.diagnostics import escape

_LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def _escape_data(s: str) -> str:
    # values are made one-line first (gpuplan.diagnostics.escape); the runner's
    # own escapes then cover what is left: %, and the line break gpuplan adds
    # between message and hint
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_prop(s: str) -> str:
    return _escape_data(s).replace(":", "%3A").replace(",", "%2C")


def render(diags: Sequence[Diagnostic]) -> str:
    out = []
    for d in diags:
        props = []
        if d.file:
            props.append(f"file={_escape_prop(escape(d.file))}")
        if d.line is not None:
            props.append(f"line={d.line}")
        if d.col is not None:
            props.append(f"col={d.col}")
        props.append(f"title={_escape_prop(f'gpuplan {d.code}')}")
        msg = escape(d.message) + (f"\n{escape(d.hint)}" if d.hint else "")
        out.append(f"::{_LEVEL[d.severity.value]} {','.join(props)}::{_escape_data(msg)}")
    return "\n".join(out) + ("\n" if out else "")
