"""Replace one file atomically, through a temporary name nobody can plant.

``tempfile.mkstemp`` in the target's own directory opens a fresh random name
with ``O_CREAT | O_EXCL`` (and ``O_NOFOLLOW`` where the platform has it): a
symlink or file planted at a predictable ``.<name>.tmp`` is never written
through, and the final ``os.replace`` renames the new file over the target
(replacing a symlink there, never following it).

Stage: write (docs/architecture.md)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

FILE_MODE = 0o644


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` until every byte is written (it may write fewer)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_atomic(path: Path | str, data: bytes, *, mode: int = FILE_MODE) -> None:
    """Make ``path`` hold ``data``: readers see the old or the new file, never
    a part. Raises OSError; the temporary file is removed on failure."""
    path = Path(path)
    # the name is cut so the temporary one stays within NAME_MAX (255 bytes)
    # whatever the target's: `.<name>.<8 random>.tmp` adds 14
    fd, tmp = tempfile.mkstemp(prefix=f".{_cut(path.name, 200)}.", suffix=".tmp", dir=path.parent)
    try:
        try:
            os.fchmod(fd, mode)
            write_all(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _cut(name: str, limit: int) -> str:
    """``name`` cut to at most ``limit`` bytes of UTF-8 (a file name's limit
    is in bytes), never inside a character."""
    raw = name.encode("utf-8", "surrogateescape")
    return name if len(raw) <= limit else raw[:limit].decode("utf-8", "ignore")
