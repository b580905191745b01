"""Markdown for text someone else wrote: the one place a report escapes it.

Every Markdown report (``gpuplan plan --format markdown``, the disruption block of
``gpuplan diff --format markdown``, the pull-request report) quotes strings from
inputs a pull request controls: names, labels and annotations of the old tree,
spec values. GitHub renders a comment as CommonMark with GitHub's extensions and
some HTML, so such a string could close a ``<details>``, open an HTML comment
that hides everything after it, embed an image that calls a server when the
comment is viewed, make a link that reads as something else, start a heading or
a table row. Each renderer passes those strings through :func:`md_text` (running
text, table cells), :func:`md_code` (a code span) or :func:`md_fence` (a code
block), nothing else.

:func:`md_text` leaves ordinary text as it is (DNS names, resource names,
numbers: the generated CAPACITY.md does not change) and escapes what Markdown or
HTML would read: a backslash escape for ASCII punctuation CommonMark gives a
meaning (``\\ ` * _ [ ] | ~ $ #``, ``(`` after ``]``, ``!`` before ``[``, and
``- + = > . )`` where they would start a block), an entity for ``&`` and ``<``
(also safe inside an HTML block such as ``<summary>``, where backslash escapes
are not read). Line breaks become spaces (a cell or a list item stays one line), other
control characters are shown as ``\\xNN`` (:func:`gpuplan.diagnostics.escape`).

Stage: report (docs/architecture.md)."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["md_code", "md_fence", "md_text"]

# CommonMark line endings, and the Unicode ones some renderers also break at
_BREAKS = re.compile("\r\n|[\n\r\x0b\x0c\x85\u2028\u2029]")
# always escaped: emphasis, code, links, tables, strikethrough, math, headings, raw HTML
_ALWAYS = {
    "\\": "\\\\", "`": "\\`", "*": "\\*", "_": "\\_", "[": "\\[", "]": "\\]", "|": "\\|", "~": "\\~",
    "$": "\\$", "#": "\\#", "&": "&amp;", "<": "&lt;",
}
# escaped only where they would start a block when the text begins a line (as in
# "- {text}"): a list item ("- x", "+ x", "1. x", "1) x"), a thematic break or a setext
# underline ("---", "==="), a block quote ("> x"); "-3", "+4", "0.50" and "a -> b" stay as
# they are (with every "<" escaped, a ">" elsewhere closes no tag)
_LEADING = re.compile(r"(?:[-+=](?=[\s\-+=]|$)|>|\d{1,9}[.)](?=\s|$))")
_SPECIAL = re.compile(r"[\\`*_\[\]|~$#&<(!]")


def _plain(value: Any) -> str:
    from gpuplan.diagnostics import escape

    text = value if isinstance(value, str) else str(value)
    text = _BREAKS.sub(" ", text)
    # lone surrogates (from "\ud800" escapes) cannot be written as UTF-8
    return escape(text.encode("utf-8", "backslashreplace").decode("utf-8"))


def md_text(value: Any, *, cell: bool = False) -> str:
    """``value`` as inert Markdown inline text: it reads as it is written and cannot
    become markup, HTML, a link or a new line. ``cell``: the text is a whole table
    cell, which never starts a block (a lone ``-`` stays as it is)."""
    text = _plain(value)
    body = text.lstrip(" \t")
    lead = "&#32;" * (len(text) - len(body))  # blanks would indent (a code block in a list item)
    m = None if cell else _LEADING.match(body)
    cut = (m.end() - 1) if m else -1  # the character that makes the block
    if cut < 0 and not _SPECIAL.search(body):
        return lead + body  # most names and numbers: nothing to escape
    out: list[str] = []
    for i, c in enumerate(body):
        if c in _ALWAYS:
            out.append(_ALWAYS[c])
        elif i == cut or (c == "(" and i and body[i - 1] == "]") or (c == "!" and body[i + 1:i + 2] == "["):
            out.append("\\" + c)
        else:
            out.append(c)
    return lead + "".join(out)


def md_code(value: Any, *, cell: bool = False) -> str:
    """``value`` as one inline code span that nothing in it can end: one line, a
    fence of more backticks than any run inside. ``cell``: inside a table cell,
    where GitHub needs ``\\|`` (and shows the backslash anywhere else)."""
    text = _plain(value)
    if cell:
        text = text.replace("|", "\\|")
    run = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * (run + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def md_fence(text: str, info: str = "") -> str:
    """``text`` as a fenced code block whose fence is longer than any backtick
    run in it (a line of ``` in the text cannot end the block)."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"
