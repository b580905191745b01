"""Machine-readable JSON: a list of diagnostics with every field.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import json
from typing import Sequence

from gpuplan.diagnostics import Diagnostic


def as_dict(d: Diagnostic) -> dict:
    return {
        "code": d.code,
        "severity": d.severity.value,
        "message": d.message,
        "file": d.file,
        "line": d.line,
        "col": d.col,
        "path": d.path,
        "hint": d.hint,
    }


def render(diags: Sequence[Diagnostic]) -> str:
    return json.dumps({"diagnostics": [as_dict(d) for d in diags]}, indent=2) + "\n"
