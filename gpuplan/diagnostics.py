"""Diagnostics as data.

Every stage returns ``Diagnostic`` values; nothing below the CLI prints. The CLI
sorts, de-duplicates and renders them once, in the format the user asked for
(see ``gpuplan.reporters``).

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Iterable


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


# C0 and C1 controls, DEL, and the Unicode line/paragraph separators and
# bidirectional overrides that can make text display other than it reads.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _esc(m: re.Match) -> str:
    c = m.group(0)
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def escape(text: str | None) -> str:
    """``text`` on one line with every control character made visible, and
    no ``##[`` (a workflow command wherever it appears in a line)."""
    if not text:
        return text or ""
    return _CONTROL.sub(_esc, text).replace("##[", "##\\x5b")


SHOWN_CHARS = 120  # a value from an input is shown in at most this many characters


def type_name(value: Any, *, mapping: str = "an object") -> str:
    """The JSON type of a value as messages name it: "null", "a boolean", "a number",
    "a string", "a list", else ``mapping``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return mapping if isinstance(value, dict) else type(value).__name__


def show(value: Any) -> str:
    """A value from an input someone else wrote (a cluster snapshot) as message text:
    one line, shortened, no control character, lone surrogate or workflow command
    (``##[``, ``::`` can then never start a line). The reporters escape again; this
    makes the JSON and SARIF formats, which only JSON-encode, as safe as text and github."""
    import json

    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if len(text) > SHOWN_CHARS:
        text = text[: SHOWN_CHARS - 3] + "..."
    # lone surrogates (from "\ud800" escapes) cannot be written as UTF-8
    return escape(text.encode("utf-8", "backslashreplace").decode("utf-8"))
