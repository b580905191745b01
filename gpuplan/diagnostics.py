"""Diagnostics as data.

Every stage returns ``Diagnostic`` values; nothing below the CLI prints. The CLI
sorts, de-duplicates and renders them once, in the format the user asked for
(see ``gpuplan.reporters``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Iterable


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"error": 0, "warning": 1, "info": 2}[self.value]


@dataclass(frozen=True)
class Diagnostic:
    """One finding. ``line`` and ``col`` are 1-based; ``path`` is the spec path
    (``spec.pools[2].sharing.layout``) so tools can point at the object, not
    only the text."""

    code: str
    severity: Severity
    message: str
    file: str | None = None
    line: int | None = None
    col: int | None = None
    path: str | None = None
    hint: str | None = None
    related: tuple[str, ...] = field(default=())

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def at(self, file: str | None, line: int | None, col: int | None) -> "Diagnostic":
        return replace(self, file=file, line=line, col=col)

    def sort_key(self) -> tuple:
        return (
            self.file or "",
            self.line if self.line is not None else 0,
            self.col if self.col is not None else 0,
            self.severity.rank,
            self.code,
            self.message,
        )

    def location(self) -> str:
        """``file:line:col`` (parts that are unknown are left out)."""
        parts = [self.file or "<input>"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.col is not None:
                parts.append(str(self.col))
        return ":".join(parts)


def normalise(diags: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Sorted by position, severity and code, with exact duplicates removed."""
    seen: set[Diagnostic] = set()
    out: list[Diagnostic] = []
    for d in sorted(diags, key=Diagnostic.sort_key):
        if d not in seen:
            seen.add(d)
            out.append(d)
    return out


def has_errors(diags: Iterable[Diagnostic], *, strict: bool = False) -> bool:
    """True when any error, or (``strict``) any warning, is present."""
    for d in diags:
        if d.severity is Severity.ERROR or (strict and d.severity is Severity.WARNING):
            return True
    return False
