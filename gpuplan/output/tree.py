"""The only code that touches the output tree (``generated/``).

A rendered tree is ``dict[str, bytes]``: relative POSIX path → content.

**Record of generated files.** ``<out>/.gpuplan.sha256`` lists every file
gpuplan wrote, one ``<sha256>  <path>`` line each, sorted by path (the format of
``sha256sum``, so ``cd generated && sha256sum -c .gpuplan.sha256`` checks a
tree by hand). It is committed with the tree, depends only on the contents
(no mtimes, no hostnames), and tells apart:

* a file gpuplan generated earlier (listed), from one a person created (not
  listed: never deleted, never overwritten, carried over unchanged);
* a generated file edited by hand (listed, but its hash differs): refused
  (GP801) unless ``force``.

**Writing** (:func:`write_tree`, or :class:`TreeWriter` file by file) builds
the complete new tree in ``<parent>/.<name>.gpuplan-new`` (same filesystem),
then swaps it in:

1. under an ``flock`` on ``<parent>/.<name>.gpuplan-lock`` (one lock per tree, so
   builds into sibling directories run side by side; the lock file is removed
   again), :func:`recover` cleans up what an interrupted run left (see there);
2. each rendered file is written into the new tree as it arrives (0644), only
   its hash kept in memory;
3. at commit the old tree is read and every refusal is decided; a refusal
   removes the new tree, so nothing changes on disk; otherwise the new tree
   gets the person's files (hard links, else copies; symlinks as symlinks,
   never followed), then the record;
4. swap: on Linux one ``renameat2(RENAME_EXCHANGE)`` exchanges the two
   directories atomically, so ``<out>`` is at every instant either the whole
   old or the whole new tree; then the old one (now at the temporary name) is
   removed. Where the exchange is unavailable: rename ``<out>`` →
   ``.<name>.gpuplan-old``, rename new → ``<out>``, remove the backup; a kill
   between the two renames leaves no ``<out>``, and :func:`recover` restores
   the backup (the old tree) on the next run.

Only a crash of the process is covered, not a power loss (no fsync: it costs
seconds on thousands of files and the tree is regenerable from the spec).

**Reading** a tree on disk (``check``, ``diff``, ``build``'s look at the old
tree) treats it as hostile: it may come from a pull request. The tree's
directory is opened once without following a symlink (a symlinked ``-o`` is
refused, GP807; :func:`output_path_problem` is the CLI's check against the
spec's repository) and every listing and read is relative to that
descriptor, so a tree swapped in by a concurrent build is never mixed with the
one being read; a file that vanishes meanwhile is missing (GP809). Symlinks
inside are listed, never followed or read. A recorded file over
``MAX_FILE_BYTES``, or no regular file, is never read (GP808); an OSError is a
diagnostic (GP804), never a crash. (The writer's own, resolved target may be a
symlinked directory a library caller chose; the CLI refuses one.)

**Leftovers.** The old tree is removed after the swap. What cannot be removed
(files left by an earlier ``sudo gpuplan build``, a directory made read-only)
does not fail a build whose new tree is in place: the remains are moved aside
to ``.<name>.gpuplan-stale-<random>`` so no fixed name stays taken, reported
once (GP806, a warning) with the command that clears them, and quietly retried
by later builds.

Stage: write (docs/architecture.md)."""

from __future__ import annotations

import ctypes
import ctypes.util
import difflib
import errno
import hashlib
import os
import re
import shlex
import shutil
import stat
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.output.atomic import FILE_MODE, write_all

__all__ = [
    "RECORD_NAME",
    "CheckResult",
    "TreeCheck",
    "TreeError",
    "TreeWriter",
    "WriteResult",
    "check_tree",
    "output_path_problem",
    "read_tree",
    "record_bytes",
    "recover",
    "write_tree",
]

RECORD_NAME = ".gpuplan.sha256"
_NEW_SUFFIX = ".gpuplan-new"
_OLD_SUFFIX = ".gpuplan-old"
_LOCK_SUFFIX = ".gpuplan-lock"
_STALE_INFIX = ".gpuplan-stale-"
DIR_MODE = 0o755
# No file gpuplan writes comes near this (4x the spec's own limit; at 20,000
# nodes the largest file is ~4 MiB); a bigger one in the tree was put there,
# and only its size is looked at (a 6 GiB sparse file costs one fstat).
MAX_FILE_BYTES = 64 * 1024 * 1024

HAND_EDITED = Code(
    "GP801",
    "generated file edited by hand",
    Severity.ERROR,
    "A file that gpuplan generated was changed after it was written (its content no longer "
    "matches the record in .gpuplan.sha256). gpuplan will not overwrite or delete it, because "
    "the edit would be lost; nothing in the tree is changed.",
    bad="$ vi generated/tenants/vision/resourcequotas.yaml   # raise a quota by hand\n"
    "$ gpuplan build fleet.yaml",
    good="# change the quota in fleet.yaml (tenants[].quotas) and rebuild;\n"
    "# or discard the edit: gpuplan build --force fleet.yaml",
)
NOT_GENERATED = Code(
    "GP802",
    "output path taken by a file gpuplan did not generate",
    Severity.ERROR,
    "gpuplan would write a file where a person's file (or symlink, or directory) is, one that "
    "is not in the record of generated files. It is never overwritten silently; nothing in the "
    "tree is changed.",
    bad="$ cp my-quota.yaml generated/tenants/vision/resourcequotas.yaml\n$ gpuplan build fleet.yaml",
    good="# keep your own files under another name in the tree (they are carried over),\n"
    "# or let gpuplan take the path: gpuplan build --force fleet.yaml",
)
BAD_RECORD = Code(
    "GP803",
    "unreadable record of generated files",
    Severity.ERROR,
    "The record of generated files (.gpuplan.sha256 in the output tree) is malformed or names a "
    "path outside the tree, so gpuplan cannot tell its files from yours.",
    bad="a9f0...  ../../etc/passwd",
    good="# restore it from git (git checkout generated/.gpuplan.sha256),\n"
    "# or rebuild with --force, which treats every existing file as yours unless it is produced",
)
OUTPUT_DIR = Code(
    "GP804",
    "cannot write the output tree",
    Severity.ERROR,
    "The output directory cannot be used: it is a file, it is the root of a git repository "
    "(gpuplan replaces the directory as a whole), another gpuplan is writing it, or the "
    "filesystem refused. The old tree is left as it was.",
    bad="$ gpuplan build fleet.yaml -o .",
    good="$ gpuplan build fleet.yaml -o generated",
)
STALE = Code(
    "GP805",
    "generated tree is stale",
    Severity.ERROR,
    "A file of the generated tree differs from what the spec produces now, is missing, or was "
    "generated earlier and is no longer produced. `gpuplan check` fails with the unified diff.",
    bad="$ vi fleet.yaml && git commit fleet.yaml   # generated/ not rebuilt",
    good="$ gpuplan build fleet.yaml && git add fleet.yaml generated/",
)

LEFTOVER = Code(
    "GP806",
    "old tree could not be removed",
    Severity.WARNING,
    "The new tree is in place, but part of the old one could not be deleted (files owned by "
    "another user, such as root after a `sudo gpuplan build`, or a directory without write "
    "permission). The remains are moved aside next to the tree and named in the message with "
    "the command that removes them; later builds are not affected and retry the removal.",
    bad="$ sudo gpuplan build fleet.yaml   # root-owned files in generated/\n$ gpuplan build fleet.yaml",
    good="$ sudo rm -rf .generated.gpuplan-stale-*   # as the message says; then build as yourself",
)

OUTPUT_PATH = Code(
    "GP807",
    "output tree path is a symlink or leads out of the repository",
    Severity.ERROR,
    "The generated tree named by -o (or --old) is a symlink, or it is named inside the spec's "
    "repository but a symlinked directory on its path leads out of it. CI runs gpuplan on a pull "
    "request's checkout, where a committed `generated -> /` would make `check` and `diff` walk, "
    "read and quote the whole machine, and `build` write there. Nothing is read or written. A "
    "directory named outside the repository on the command line (such as the base branch's "
    "worktree) is the caller's choice and is used as named, but never through a symlink.",
    bad="$ ln -s / generated && gpuplan check fleet.yaml",
    good="$ gpuplan check fleet.yaml -o generated   # a real directory of the repository",
)
NOT_READ = Code(
    "GP808",
    "file in the output tree not read",
    Severity.WARNING,
    f"A file the record names as generated is now larger than gpuplan ever writes "
    f"({MAX_FILE_BYTES // (1024 * 1024)} MiB), or is no regular file. Only its size and kind are "
    "looked at, never its content: `check` reports it stale, `diff` leaves it out, and `build` "
    "refuses to replace it (as a hand edit) unless --force.",
    bad="$ truncate -s 6G generated/pools/train/nodepool.yaml",
    good="$ git checkout generated/ && gpuplan build fleet.yaml",
)
TREE_CHANGED = Code(
    "GP809",
    "output tree changed while it was read",
    Severity.WARNING,
    "A file of the generated tree disappeared between listing the tree and reading it: another "
    "process (such as a concurrent `gpuplan build`) replaced or removed it. `check` counts the "
    "file as missing (stale) and `diff` leaves it out; run the command again once the other "
    "one has finished.",
    bad="$ gpuplan build fleet.yaml & gpuplan check fleet.yaml",
    good="$ gpuplan build fleet.yaml && gpuplan check fleet.yaml",
)

CODES = (HAND_EDITED, NOT_GENERATED, BAD_RECORD, OUTPUT_DIR, STALE, LEFTOVER, OUTPUT_PATH, NOT_READ, TREE_CHANGED)


class TreeError(Exception):
    """The tree cannot be read (for example a malformed record)."""

    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


@dataclass(frozen=True)
class WriteResult:
    written: tuple[str, ...] = ()  # produced files that are new or changed
    removed: tuple[str, ...] = ()  # generated earlier, no longer produced: pruned
    unchanged: tuple[str, ...] = ()  # produced with the content already on disk
    kept: tuple[str, ...] = ()  # a person's files, carried over unchanged
    diagnostics: tuple[Diagnostic, ...] = ()  # refusals (errors: nothing changed); GP806 warnings

    @property
    def ok(self) -> bool:
        return not any(d.is_error for d in self.diagnostics)

    @property
    def changed(self) -> bool:
        return bool(self.written or self.removed)


@dataclass(frozen=True)
class CheckResult:
    missing: tuple[str, ...] = ()  # produced, not on disk
    extra: tuple[str, ...] = ()  # generated earlier, still on disk, no longer produced
    differing: tuple[str, ...] = ()  # on disk with other content (the record file included)
    hand_edited: tuple[str, ...] = ()  # generated files whose content no longer matches the record
    diff: str = ""  # unified diff, disk (a/) → what `build` would write (b/)
    diagnostics: tuple[Diagnostic, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.differing)


# --------------------------------------------------------------------------- paths

_BAD_CHARS = re.compile(r"[\x00-\x1f\x7f\\]")


def _path_problem(p: str) -> str | None:
    """Why ``p`` is not a safe relative POSIX path inside the tree, or None."""
    if not isinstance(p, str) or not p:
        return "empty path"
    if p.startswith("/") or _BAD_CHARS.search(p):
        return "absolute, or contains a backslash or control character"
    parts = p.split("/")
    if any(s in ("", ".", "..") for s in parts):
        return "empty, '.' or '..' segment"
    if parts[0].endswith((_NEW_SUFFIX, _OLD_SUFFIX)) or p == RECORD_NAME:
        return "reserved name"
    return None


def _validate_files(files: Mapping[str, bytes]) -> None:
    """Programming errors of the caller (the compiler), hence exceptions."""
    seen: dict[str, bytes] = {}
    dirs: set[str] = set()
    for p, data in files.items():
        _add_path(p, data, seen, dirs)
        seen[p] = data
        dirs.update(_parents(p))


def _add_path(path: str, data: bytes, files: Mapping[str, object], dirs: set[str]) -> None:
    """:func:`_validate_files` for one more file of a tree that arrives file by
    file (``files``: those so far, ``dirs``: their parents)."""
    why = _path_problem(path)
    if why:
        raise ValueError(f"invalid output path {path!r}: {why}")
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"content of {path} must be bytes, not {type(data).__name__}")
    if path in files:
        raise ValueError(f"output path {path!r} written twice")
    if path in dirs or any(q in files for q in _parents(path)):
        raise ValueError(f"output path {path!r} is both a file and a directory of the tree")


def _parents(p: str) -> Iterator[str]:
    i = p.find("/")
    while i != -1:
        yield p[:i]
        i = p.find("/", i + 1)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def output_path_problem(out_dir: Path | str, spec: Path | str, *, option: str = "-o") -> Diagnostic | None:
    """Why the tree at ``out_dir`` is not read or written for the spec at
    ``spec`` (GP807), or None. A symlink is refused wherever it points (the
    link is a pull request's to make); a directory named inside the spec's
    repository must resolve inside it (no symlinked directory on the way
    leads out). One named outside the repository on the command line (``-o
    /tmp/out``, the base branch's worktree) is the caller's choice."""
    from gpuplan.spec.loader import display_path, leaves_repository, named_repository

    display = display_path(out_dir)
    hint = f"name the directory itself with {option}, not a symlink to it or through one"
    if os.path.islink(out_dir):
        return OUTPUT_PATH.diag(f"{display} is a symlink; gpuplan reads and writes a tree only where it is named",
                                file=display, hint=hint)
    if leaves_repository(out_dir, named_repository(spec)):
        return OUTPUT_PATH.diag(f"{display} leads out of the repository through a symlinked directory; refused",
                                file=display, hint=hint)
    return None


# -------------------------------------------------------------------------- record


def record_bytes(files: Mapping[str, bytes]) -> bytes:
    """The record for a rendered tree: ``sha256sum`` lines sorted by path."""
    return _record({p: _sha(data) for p, data in files.items()})


def _record(shas: Mapping[str, str]) -> bytes:
    return "".join(f"{shas[p]}  {p}\n" for p in sorted(shas)).encode("utf-8")


_RECORD_LINE = re.compile(r"([0-9a-f]{64})  (.+)")


def _parse_record(data: bytes, display: str) -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise TreeError(BAD_RECORD.diag("the record of generated files is not UTF-8 text", file=display))
    for n, line in enumerate(text.splitlines(), 1):
        m = _RECORD_LINE.fullmatch(line)
        why = _path_problem(m.group(2)) if m else "not '<sha256>  <path>'"
        if why:
            raise TreeError(
                BAD_RECORD.diag(
                    f"line {n} of the record of generated files is invalid ({why})",
                    file=display,
                    line=n,
                    hint="restore it from git, or rebuild with --force",
                )
            )
        out[m.group(2)] = m.group(1)
    return out


# ---------------------------------------------------------------------------- scan

_FILE, _LINK, _DIR, _OTHER = "file", "symlink", "directory", "special file"


_O = lambda name: getattr(os, name, 0)  # noqa: E731 - flags some platforms lack
_DIR_FLAGS = os.O_RDONLY | _O("O_DIRECTORY") | _O("O_NOFOLLOW") | _O("O_CLOEXEC")
_FILE_FLAGS = os.O_RDONLY | _O("O_NONBLOCK") | _O("O_NOFOLLOW") | _O("O_CLOEXEC")


def _open_tree(root: Path | str, display: str) -> int | None:
    """A descriptor of the tree's directory, never through a symlink: every
    scan and read of the tree is relative to it, so a tree swapped in by a
    concurrent build is never mixed with the one being read, and
    ``generated -> /`` is never walked. None when there is no directory there."""
    try:
        return os.open(root, _DIR_FLAGS)
    except (FileNotFoundError, NotADirectoryError) as exc:
        if isinstance(exc, NotADirectoryError) and os.path.islink(root):  # O_NOFOLLOW|O_DIRECTORY: ENOTDIR
            raise TreeError(_link_refused(display)) from None
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise TreeError(_link_refused(display)) from None
        raise TreeError(OUTPUT_DIR.diag(f"cannot read the output tree: {exc.strerror or exc}", file=display)) from None


def _link_refused(display: str) -> Diagnostic:
    return OUTPUT_PATH.diag(f"{display} is a symlink; gpuplan reads a tree only where it is named", file=display,
                            hint="name the directory itself, not a symlink to it")


def _scan(fd: int | None, display: str = "") -> dict[str, str]:
    """Every entry of the tree open at ``fd`` (relative POSIX path → kind),
    never following a symlink, sorted. Directories are listed too (for empty
    ones). A directory that vanishes meanwhile is skipped; one that cannot be
    read is a TreeError (GP804), not a crash."""
    out: dict[str, str] = {}
    if fd is None:
        return out
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            # parents were seen as real directories; O_NOFOLLOW checks the last step
            dfd = os.open(rel[:-1] or ".", _DIR_FLAGS, dir_fd=fd)
        except (FileNotFoundError, NotADirectoryError):
            continue  # gone, or swapped for a file or symlink, since it was listed
        except OSError as exc:
            raise TreeError(OUTPUT_DIR.diag(f"cannot read {rel or '.'} in the output tree: {exc.strerror or exc}",
                                            file=_join(display, rel.rstrip("/")) if rel else display)) from None
        try:
            with os.scandir(dfd) as it:
                for e in it:
                    r = f"{rel}{e.name}"
                    if e.is_symlink():
                        out[r] = _LINK
                    elif e.is_dir(follow_symlinks=False):
                        out[r] = _DIR
                        stack.append(r + "/")
                    elif e.is_file(follow_symlinks=False):
                        out[r] = _FILE
                    else:
                        out[r] = _OTHER
        except OSError as exc:
            raise TreeError(OUTPUT_DIR.diag(f"cannot read {rel or '.'} in the output tree: {exc.strerror or exc}",
                                            file=display)) from None
        finally:
            os.close(dfd)
    return dict(sorted(out.items()))


def _big(limit: int) -> str:
    return f"file larger than {limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else \
        f"file larger than {limit:,} bytes"


def _read(fd: int, rel: str, display: str = "", limit: int | None = None) -> bytes | str | None:
    """The bytes of the regular file ``rel`` of the tree open at ``fd``; None
    when it has gone since the scan (a concurrent build swapped the tree); the
    kind of what is there instead when it is no regular file of at most
    ``limit`` bytes (default MAX_FILE_BYTES; then it is never read: O_NOFOLLOW
    refuses a symlink planted since the scan, O_NONBLOCK and fstat a FIFO).
    Other errors are a TreeError (GP804)."""
    limit = MAX_FILE_BYTES if limit is None else limit
    try:
        f = os.open(rel, _FILE_FLAGS, dir_fd=fd)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return _LINK
        raise TreeError(OUTPUT_DIR.diag(f"cannot read {rel}: {exc.strerror or exc}", file=_join(display, rel))) from None
    try:
        st = os.fstat(f)
        if not stat.S_ISREG(st.st_mode):
            return _DIR if stat.S_ISDIR(st.st_mode) else _OTHER
        if st.st_size > limit:
            return _big(limit)
        chunks: list[bytes] = []
        got = 0
        want = st.st_size + 1  # one read() for a file that does not change meanwhile
        while got <= limit:  # it may grow after fstat: the cap is on what is read
            n = min(max(want - got, 1 << 16), limit + 1 - got)
            chunk = os.read(f, n)
            chunks.append(chunk)
            got += len(chunk)
            if len(chunk) < n:  # a short read of a regular file: its end
                break
    except OSError as exc:
        raise TreeError(OUTPUT_DIR.diag(f"cannot read {rel}: {exc.strerror or exc}", file=_join(display, rel))) from None
    finally:
        os.close(f)
    return _big(limit) if got > limit else b"".join(chunks)


@dataclass(frozen=True)
class _Disk:
    entries: dict[str, str]
    record: dict[str, str]  # path → sha256 as recorded
    record_raw: bytes | None
    notes: tuple[Diagnostic, ...] = ()  # the record vanished while the tree was read (GP809)


def _load_disk(fd: int | None, display: str) -> _Disk:
    entries = _scan(fd, display)
    raw = None
    record: dict[str, str] = {}
    notes: tuple[Diagnostic, ...] = ()
    if fd is not None and entries.get(RECORD_NAME) == _FILE:
        got = _read(fd, RECORD_NAME, display)
        if isinstance(got, str):
            raise TreeError(BAD_RECORD.diag(f"the record of generated files is a {got}; gpuplan never wrote that",
                                            file=_join(display, RECORD_NAME),
                                            hint="restore it from git, or rebuild with --force"))
        if got is None:  # gone since the scan: read as a tree without a record
            notes = (_unread(display, RECORD_NAME, None),)
        else:
            raw = got
            record = _parse_record(raw, _join(display, RECORD_NAME))
    return _Disk(entries, record, raw, notes)


def _join(display: str, rel: str) -> str:
    return f"{display.rstrip('/')}/{rel}" if display else rel


# ---------------------------------------------------------------------- recovery


def _siblings(target: Path) -> tuple[Path, Path]:
    return (
        target.parent / f".{target.name}{_NEW_SUFFIX}",
        target.parent / f".{target.name}{_OLD_SUFFIX}",
    )


def recover(out_dir: Path | str) -> list[str]:
    """Repair what an interrupted :func:`write_tree` left next to ``out_dir``.

    * ``.<name>.gpuplan-new`` is a tree being built, or (after an atomic
      exchange) the old tree waiting for removal: either way ``<out>`` is
      complete, so it is removed.
    * ``.<name>.gpuplan-old`` is the old tree moved aside by the fallback swap:
      if ``<out>`` is missing the kill came between the two renames and the
      backup is put back (the old tree wins); otherwise ``<out>`` is the new
      tree and the backup is removed.

    What cannot be removed is moved aside (``.<name>.gpuplan-stale-*``), and
    such remains of earlier runs are retried quietly: a leftover never blocks
    a build. Returns what was done, for messages. Call it under the writer's lock."""
    target = _real_target(Path(out_dir))
    new, old = _siblings(target)
    done: list[str] = []
    if old.is_dir() and not old.is_symlink():
        if not os.path.lexists(target):
            os.rename(old, target)
            done.append(f"restored {target} from an interrupted write")
        else:
            _discard(old)
            done.append(f"removed {old}")
    if os.path.lexists(new):
        if new.is_dir() and not new.is_symlink():
            _discard(new)
        else:
            os.unlink(new)
        done.append(f"removed {new}")
    prefix = f".{target.name}{_STALE_INFIX}"
    try:
        stale = [e for e in os.scandir(target.parent) if e.name.startswith(prefix)]
    except OSError:
        stale = []
    for e in stale:
        if e.is_dir(follow_symlinks=False):
            _rmtree(Path(e.path))
    return done


def _rmtree(path: Path) -> None:
    """Remove what can be removed under ``path``; make our own read-only
    directories writable on the way. Never raises."""

    def retry(func, p, _exc) -> None:
        try:
            parent = os.path.dirname(p)
            for d in (parent, p) if func in (os.rmdir, os.unlink) else (p,):
                if d and stat.S_ISDIR(os.lstat(d).st_mode):
                    os.chmod(d, 0o700)
            func(p)
        except OSError:
            pass  # someone else's file: left for the report

    shutil.rmtree(path, onerror=retry)


def _discard(path: Path) -> Path | None:
    """Remove a tree gpuplan is done with. None when it is gone; otherwise the
    remains are moved to a fresh ``.<name>.gpuplan-stale-*`` name (so no fixed
    name stays taken) and that path is returned."""
    _rmtree(path)
    if not os.path.lexists(path):
        return None
    import secrets

    name = path.name
    for suffix in (_NEW_SUFFIX, _OLD_SUFFIX):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    aside = path.parent / f"{name}{_STALE_INFIX}{secrets.token_hex(4)}"
    try:
        os.rename(path, aside)
    except OSError:
        return path
    return aside


def _real_target(out: Path) -> Path:
    # A symlinked output directory is written where it points, keeping the link
    # (for library callers: the CLI refuses a symlinked -o first, GP807).
    return Path(os.path.realpath(out)) if out.is_symlink() else Path(os.path.abspath(out))


def _lock_path(target: Path) -> Path:
    return target.parent / f".{target.name}{_LOCK_SUFFIX}"


@contextmanager
def _locked(target: Path) -> Iterator[bool]:
    """Exclusive flock on ``.<name>.gpuplan-lock`` beside the tree: one writer
    per tree, while trees in sibling directories are written side by side.

    The lock file is removed on release, so a writer that opened it just
    before checks, once it holds the lock, that the name still leads to the
    file it locked (else it tries again with the new one)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no locking
        yield True
        return
    path = _lock_path(target)
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    while True:
        fd = os.open(path, flags, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            yield False
            return
        try:
            st = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        mine = os.fstat(fd)
        if st is not None and (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino):
            break
        os.close(fd)  # the holder before us removed it: lock the new one
    try:
        yield True
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
        os.close(fd)  # releases the lock


# ------------------------------------------------------------------------- swap

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_libc = None


def _exchange(a: Path, b: Path) -> bool:
    """Atomically exchange two directories (Linux renameat2). False where the
    kernel, libc or filesystem cannot; raises on real errors."""
    global _libc
    if not hasattr(os, "uname") or os.uname().sysname != "Linux":
        return False
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        except OSError:
            _libc = False
    fn = getattr(_libc, "renameat2", None) if _libc else None
    if fn is None:
        return False
    rc = fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(a))


def _swap(new: Path, target: Path, old: Path) -> Path | None:
    """Put the new tree in place. Returns the path of what could not be
    removed of the old one (the swap itself succeeded), or None."""
    if not os.path.lexists(target):
        os.rename(new, target)
        return None
    if _exchange(new, target):
        return _discard(new)  # the old tree now lives at the temporary name
    os.rename(target, old)
    try:
        os.rename(new, target)
    except BaseException:
        os.rename(old, target)  # put the old tree back
        raise
    return _discard(old)


# ------------------------------------------------------------------------ writing


def _write_file(path: Path, data: bytes) -> None:
    """Create one file of the new tree with mode 0644 whatever the umask.
    (A module-level function so tests can inject a failure half-way.)"""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        write_all(fd, data)
    finally:
        os.close(fd)


def _carry(src: Path, dst: Path, kind: str) -> None:
    """Put a person's entry into the new tree unchanged (a hard link keeps the
    very same file; a symlink is recreated, never followed)."""
    if kind == _LINK:
        os.symlink(os.readlink(src), dst)
    elif kind == _DIR:
        os.mkdir(dst, DIR_MODE)
    else:
        try:
            os.link(src, dst, follow_symlinks=False)
        except OSError:
            if kind != _FILE:
                raise
            shutil.copy2(src, dst, follow_symlinks=False)


def _mkdirs(root: Path, rel_dir: str, made: set[str]) -> None:
    if not rel_dir or rel_dir in made:
        return
    parent = rel_dir.rpartition("/")[0]
    _mkdirs(root, parent, made)
    os.mkdir(root / rel_dir)
    os.chmod(root / rel_dir, DIR_MODE)
    made.add(rel_dir)


def _under_any(p: str, prefixes: set[str]) -> bool:
    return any(q in prefixes for q in _parents(p))


def write_tree(out_dir: Path | str, files: Mapping[str, bytes], *, force: bool = False) -> WriteResult:
    """Make ``out_dir`` hold exactly ``files`` plus the person's own files.

    Stale generated files are pruned (and directories left empty by that);
    files gpuplan did not generate are kept; a generated file edited by hand,
    or a path taken by a person's file, is refused with a diagnostic and no
    change on disk, unless ``force`` (which never deletes a person's directory
    with content). See the module docstring for the swap sequence."""
    _validate_files(files)
    with TreeWriter(out_dir, force=force) as tree:
        for p in sorted(files):
            tree[p] = files[p]
        return tree.commit()


class _Streamed(Mapping[str, bytes]):
    """A tree that arrives file by file: the paths so far with their hashes."""

    def __init__(self) -> None:
        self._shas: dict[str, str] = {}
        self._dirs: set[str] = set()  # parents of the files so far: none of them may be a file too

    def _add(self, path: str, data: bytes) -> None:
        _add_path(path, data, self._shas, self._dirs)
        self._dirs.update(_parents(path))
        self._shas[path] = _sha(data)

    def __contains__(self, path: object) -> bool:
        return path in self._shas

    def __iter__(self) -> Iterator[str]:
        return iter(self._shas)

    def __len__(self) -> int:
        return len(self._shas)


class TreeWriter(_Streamed):
    """:func:`write_tree` for a tree that arrives file by file (``gpuplan
    build``): each file set is written at once into the new tree, and only its
    hash stays in memory, so memory does not grow with the output.

    The tree's lock is taken at the first file (a refusal to open the tree, such
    as another writer holding it, is kept for :meth:`commit` and the bytes are
    then held in memory instead). :meth:`commit` decides every refusal as
    :func:`write_tree` does and swaps the new tree in; leaving the ``with``
    block without a commit (an invalid spec, a tree the API server would
    reject, an exception) removes the new tree, so nothing on disk changes.
    ``tree[path]`` reads a file back (the verifier's excerpts)."""

    def __init__(self, out_dir: Path | str, *, force: bool = False) -> None:
        super().__init__()
        self.display = os.fspath(out_dir)
        self.force = force
        self._out = Path(out_dir)
        self._made: set[str] = set()  # directories created in the new tree
        self._held: dict[str, bytes] = {}  # the bytes, once the tree cannot be written (for messages)
        self._stack = ExitStack()
        self._opened = self._closed = False
        self._target: Path | None = None
        self._new: Path | None = None
        self._root: Path | None = None  # where the files are read back: the new tree, then the swapped-in one
        self._refusal: WriteResult | None = None

    # --- the mapping: what was set, read back

    def __getitem__(self, path: str) -> bytes:
        if path not in self._shas:
            raise KeyError(path)
        if path in self._held or self._root is None:
            return self._held[path]
        return (self._root / path).read_bytes()

    def __setitem__(self, path: str, data: bytes) -> None:
        self._open()
        if self._closed:
            raise RuntimeError("the tree writer is closed")
        self._add(path, data)
        if self._refusal is None:
            assert self._new is not None
            try:
                _mkdirs(self._new, path.rpartition("/")[0], self._made)
                _write_file(self._new / path, data)
                return
            except OSError as exc:  # a full disk: refused at commit, the old tree untouched
                self._refusal = _refuse(OUTPUT_DIR.diag(f"cannot write the output tree: {exc}", file=self.display))
        self._held[path] = bytes(data)

    # --- the tree

    def _open(self) -> None:
        if self._opened:
            return
        self._opened = True
        display = self.display
        target = _real_target(self._out)
        if os.path.lexists(target) and not target.is_dir():
            self._refusal = _refuse(OUTPUT_DIR.diag("the output path exists and is not a directory", file=display))
            return
        if (target / ".git").exists() or target == target.parent:
            self._refusal = _refuse(OUTPUT_DIR.diag(
                "refusing to manage a repository root (or /): gpuplan replaces the output directory as a whole",
                file=display,
                hint="write into a directory of its own, e.g. -o generated",
            ))
            return
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if not self._stack.enter_context(_locked(target)):
                self._refusal = _refuse(OUTPUT_DIR.diag("another gpuplan is writing this tree", file=display))
                self._stack.close()
                return
            recover(target)
            new, _ = _siblings(target)
            os.mkdir(new, DIR_MODE)
        except OSError as exc:
            self._stack.close()
            self._refusal = _refuse(OUTPUT_DIR.diag(f"cannot write the output tree: {exc}", file=display))
            return
        self._target, self._new, self._root = target, new, new

    def commit(self) -> WriteResult:
        """Check the tree on disk, then swap the new one in (or refuse, changing nothing)."""
        self._open()
        try:
            if self._refusal is not None:
                return self._refusal
            assert self._target is not None and self._new is not None
            try:
                result = _finish(self._target, self.display, self._new, self._shas, self._made, self.force)
            except TreeError as exc:  # a file in the tree that gpuplan cannot have written
                return _refuse(exc.diagnostic)
            except OSError as exc:
                return _refuse(OUTPUT_DIR.diag(f"cannot write the output tree: {exc}", file=self.display))
            if result.ok:
                self._root = self._target
            return result
        finally:
            self.close()

    def close(self) -> None:
        """Remove the new tree if it was not swapped in; release the lock. Once:
        after the lock is released the temporary name may be another writer's."""
        new, self._new, self._closed = self._new, None, True
        try:
            if new is not None and os.path.lexists(new):
                shutil.rmtree(new, ignore_errors=True)
                if self._root == new:
                    self._root = None
        finally:
            self._stack.close()

    def __enter__(self) -> "TreeWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _refuse(*diags: Diagnostic) -> WriteResult:
    return WriteResult(diagnostics=tuple(sorted(diags, key=Diagnostic.sort_key)))


def _finish(target: Path, display: str, new: Path, files: Mapping[str, str], made: set[str],
            force: bool) -> WriteResult:
    """Decide refusals against the tree on disk, complete the new tree
    (``files``: path → sha256 of what is already written there) and swap it in."""
    fd = _open_tree(target, display)  # ``target`` is resolved already: the writer's own choice
    try:
        return _finish_at(fd, target, display, new, files, made, force)
    finally:
        if fd is not None:
            os.close(fd)


def _finish_at(fd: int | None, target: Path, display: str, new: Path, files: Mapping[str, str], made: set[str],
               force: bool) -> WriteResult:
    try:
        disk = _load_disk(fd, display)
    except TreeError as exc:
        if not force:
            return _refuse(exc.diagnostic)
        disk = _Disk(_scan(fd, display), {}, None)  # every existing file counts as a person's
    entries, record = disk.entries, disk.record
    diags: list[Diagnostic] = []
    dropped: set[str] = set()  # a person's entries that `force` lets gpuplan replace

    # Recorded paths that are still regular files are gpuplan's; note hand edits.
    ours: set[str] = set()
    on_disk: dict[str, str] = {}  # their hashes as they are now
    for p, h in record.items():
        if entries.get(p) != _FILE:
            continue  # deleted (fine), or replaced by a person's dir/symlink (theirs now)
        data = _read(fd, p, display) if fd is not None else None
        if data is None:  # deleted since the scan
            del entries[p]
            continue
        ours.add(p)
        if isinstance(data, str):  # grown past any size gpuplan writes, or swapped: never read
            if not force:
                diags.append(NOT_READ.diag(
                    f"{p} was generated by gpuplan and is now a {data}; it is not read, and not replaced "
                    "without --force", file=_join(display, p), severity=Severity.ERROR,
                    hint="restore it from git, or rebuild with --force to replace it"))
            continue
        on_disk[p] = now = _sha(data)
        if now == h or files.get(p) == now:
            continue
        if force:
            continue
        diags.append(
            HAND_EDITED.diag(
                f"{p} was generated by gpuplan and has been edited by hand since"
                + ("" if p in files else "; it is no longer produced and would be deleted"),
                file=_join(display, p),
                hint="move the change into the spec, or rebuild with --force to discard it",
            )
        )

    # Directories that only ever held gpuplan's files are gpuplan's too.
    our_dirs = {q for p in record for q in _parents(p)}
    person = {
        p: k
        for p, k in entries.items()
        if p != RECORD_NAME and p not in ours and not (k == _DIR and p in our_dirs)
    }
    person_content_dirs = {q for p in person for q in _parents(p)}

    for p in files:
        for q in [*_parents(p), p]:
            k = person.get(q)
            if k is None:
                continue
            if k == _DIR and q == p:
                if p in person_content_dirs or not force:
                    diags.append(
                        NOT_GENERATED.diag(
                            f"{p} would replace a directory gpuplan did not create",
                            file=_join(display, p),
                            hint="move the directory out of the output tree",
                        )
                    )
                else:
                    dropped.add(q)
            elif k != _DIR:
                if force:
                    dropped.add(q)
                else:
                    diags.append(
                        NOT_GENERATED.diag(
                            f"{q} is a {k} gpuplan did not generate, and gpuplan would write "
                            + (f"{p} there" if q == p else f"{p} inside it"),
                            file=_join(display, q),
                            hint="move it away, or rebuild with --force to let gpuplan take the path",
                        )
                    )
    if diags:
        return _refuse(*diags)

    carried = {p: k for p, k in person.items() if p not in dropped and not _under_any(p, dropped)}
    # An empty directory a person made is kept; one that emptied because its
    # generated files went away is not (it is in our_dirs, not in `person`).
    written = tuple(p for p in sorted(files) if on_disk.get(p) != files[p])
    removed = tuple(p for p in sorted(ours) if p not in files)
    unchanged = tuple(p for p in sorted(files) if on_disk.get(p) == files[p])
    kept = tuple(p for p, k in carried.items() if k != _DIR)
    new_record = _record(files)
    result = WriteResult(written, removed, unchanged, kept)
    if not written and not removed and not dropped and disk.record_raw == new_record:
        return result  # already up to date: leave the directory (and its inode) alone

    old = _siblings(target)[1]
    try:
        modes: list[tuple[Path, int]] = []  # a person's directory modes, set last (0555 would stop us)
        for p, k in carried.items():  # sorted: parents before children
            if k == _DIR and p in made:
                continue
            _mkdirs(new, p.rpartition("/")[0], made)
            _carry(target / p, new / p, k)
            if k == _DIR:
                made.add(p)
                modes.append((new / p, stat.S_IMODE(os.lstat(target / p).st_mode)))
        _write_file(new / RECORD_NAME, new_record)
        modes.append((new, stat.S_IMODE(os.stat(target).st_mode) if target.is_dir() else DIR_MODE))
        for d, mode in reversed(modes):
            os.chmod(d, mode)
        left = _swap(new, target, old)
    except BaseException:
        # The old tree has not been touched (or _swap put it back).
        shutil.rmtree(new, ignore_errors=True)
        raise
    if left is not None:
        shown = os.path.relpath(left)
        shown = str(left) if shown.startswith("..") else shown
        quoted = shlex.quote(shown)
        return WriteResult(written, removed, unchanged, kept, (LEFTOVER.diag(
            f"the new tree is in place, but the old one could not be removed completely; its remains are in {shown}",
            file=display,
            hint=f"remove them as the user who owns them, e.g. `sudo rm -rf {quoted}`; later builds are not affected",
        ),))
    return result


# ----------------------------------------------------------------------- reading


def read_tree(out_dir: Path | str, diagnostics: list[Diagnostic] | None = None) -> dict[str, bytes]:
    """The generated files on disk (those in the record), as they are now;
    a person's files are left out. No record: an empty tree. Raises
    :class:`TreeError` for a malformed record, a symlinked ``out_dir`` (GP807)
    or a tree that cannot be read. A recorded file that is too large or no
    regular file (GP808), or that vanished while the tree was read (GP809), is
    left out, with a warning appended to ``diagnostics``."""
    display = os.fspath(out_dir)
    fd = _open_tree(out_dir, display)
    if fd is None:
        return {}
    out: dict[str, bytes] = {}
    try:
        disk = _load_disk(fd, display)
        if diagnostics is not None:
            diagnostics.extend(disk.notes)
        for p in sorted(disk.record):
            if disk.entries.get(p) != _FILE:
                continue
            data = _read(fd, p, display)
            if isinstance(data, bytes):
                out[p] = data
            elif diagnostics is not None:
                diagnostics.append(_unread(display, p, data))
    finally:
        os.close(fd)
    return out


def _unread(display: str, p: str, kind: str | None) -> Diagnostic:
    if kind is None:
        return TREE_CHANGED.diag(f"{p} disappeared while the tree was read; left out", file=_join(display, p),
                                 hint="another process changed the tree; run the command again")
    return NOT_READ.diag(f"{p} is a {kind}; gpuplan never wrote that, so it is not read", file=_join(display, p),
                         hint="restore it from git, or rebuild")


def check_tree(out_dir: Path | str, files: Mapping[str, bytes]) -> CheckResult:
    """Compare a rendered tree (and the record it would get) with the disk,
    read-only. ``ok`` when `gpuplan build` would change nothing."""
    _validate_files(files)
    check = TreeCheck(out_dir)
    try:
        for p in sorted(files):
            check[p] = files[p]
        return check.result()
    finally:
        check.close()


class TreeCheck(_Streamed):
    """:func:`check_tree` for a tree that arrives file by file (``gpuplan
    check``): each file is compared with the disk as it is set, and only the
    files that differ are kept (for the diff), so memory does not grow with the
    output. Read-only. ``tree[path]`` gives a file's bytes back."""

    def __init__(self, out_dir: Path | str) -> None:
        super().__init__()
        self._display = os.fspath(out_dir)
        self._diags: list[Diagnostic] = []
        # one descriptor for the whole check: a tree swapped in meanwhile by a
        # concurrent build is never mixed with this one (its files vanish: stale)
        self._fd = _open_tree(out_dir, self._display)  # TreeError: a symlink (GP807)
        try:
            try:
                self._disk = _load_disk(self._fd, self._display)
            except TreeError as exc:
                if exc.diagnostic.code != BAD_RECORD.code:
                    raise
                self._diags.append(exc.diagnostic)
                self._disk = _Disk(_scan(self._fd, self._display), {}, None)
        except BaseException:
            self.close()
            raise
        self._diags.extend(self._disk.notes)
        self._kept: dict[str, bytes] = {}  # files not on disk as produced
        self._chunks: dict[str, str] = {}  # path -> its unified diff
        self._missing: list[str] = []
        self._differing: list[str] = []
        self._hand_edited: list[str] = []

    def close(self) -> None:
        fd, self._fd = getattr(self, "_fd", None), None
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:
        self.close()

    def _disk_file(self, path: str) -> bytes | str | None:
        """What is at ``path`` now: bytes, a kind, or None (see :func:`_read`);
        GP808/GP809 noted when a listed file cannot be compared."""
        kind = self._disk.entries.get(path)
        if kind != _FILE or self._fd is None:
            return kind
        got = _read(self._fd, path, self._display)
        if not isinstance(got, bytes):
            self._diags.append(_unread(self._display, path, got))
        return got

    def __getitem__(self, path: str) -> bytes:
        if path not in self._shas:
            raise KeyError(path)
        if path in self._kept:
            return self._kept[path]
        got = _read(self._fd, path, self._display) if self._fd is not None else None
        if not isinstance(got, bytes):
            raise KeyError(path)
        return got

    def __setitem__(self, path: str, data: bytes) -> None:
        self._add(path, data)
        self._compare(path, bytes(data))

    def _compare(self, path: str, expected: bytes) -> None:
        actual = self._disk_file(path)
        if isinstance(actual, bytes) and path in self._disk.record and _sha(actual) != self._disk.record[path]:
            self._hand_edited.append(path)
        if actual == expected:
            return
        if path != RECORD_NAME:
            self._kept[path] = expected
        (self._missing if actual is None else self._differing).append(path)
        self._chunks[path] = _file_diff(path, actual, expected)

    def result(self) -> CheckResult:
        disk, entries, display = self._disk, self._disk.entries, self._display
        self._compare(RECORD_NAME, _record(self._shas))
        extra_list = []
        for p in sorted(p for p in disk.record if p not in self._shas and entries.get(p) == _FILE):
            old = self._disk_file(p)
            if old is None:  # gone meanwhile: no longer in the tree
                continue
            extra_list.append(p)
            if isinstance(old, bytes) and _sha(old) != disk.record[p]:
                self._hand_edited.append(p)
            self._chunks[p] = _file_diff(p, old, None)
        extra = tuple(extra_list)
        missing, differing = tuple(sorted(self._missing)), tuple(sorted(self._differing))
        diags = list(self._diags)
        for p in sorted(self._chunks):
            if p == RECORD_NAME:
                msg = "the record of generated files differs from the files produced"
            elif p in self._missing:
                msg = f"{p} is missing"
            elif p in extra:
                msg = f"{p} was generated earlier and is no longer produced"
            else:
                msg = f"{p} differs from what the spec produces"
            diags.append(STALE.diag(msg, file=_join(display, p), hint="run `gpuplan build` and commit the result"))
        for p in sorted(self._hand_edited):
            diags.append(
                HAND_EDITED.diag(
                    f"{p} was generated by gpuplan and has been edited by hand since",
                    file=_join(display, p),
                    severity=Severity.WARNING,
                )
            )
        return CheckResult(
            missing=missing,
            extra=extra,
            differing=differing,
            hand_edited=tuple(sorted(self._hand_edited)),
            diff="".join(self._chunks[p] for p in sorted(self._chunks)),
            diagnostics=tuple(sorted(diags, key=Diagnostic.sort_key)),
        )


def _lines(data: bytes) -> list[str] | None:
    if b"\0" in data:
        return None
    return data.decode("utf-8", errors="replace").splitlines(keepends=True)


def _file_diff(path: str, a: bytes | str | None, b: bytes | None) -> str:
    """git-style unified diff of one file; ``a`` may be a kind name (a symlink
    or directory sits where a file should be) or None (absent)."""
    fa = f"a/{path}" if a is not None else "/dev/null"
    fb = f"b/{path}" if b is not None else "/dev/null"
    if isinstance(a, str):
        head = f"--- {fa}\n+++ {fb}\n@@ {path} is a {a} on disk @@\n"
        return head + "".join(_hunk_lines(["+" + ln for ln in ((_lines(b) if b is not None else None) or [])]))
    la = [] if a is None else _lines(a)
    lb = [] if b is None else _lines(b)
    if la is None or lb is None:
        return f"Binary files {fa} and {fb} differ\n"
    out = difflib.unified_diff(la, lb, fromfile=fa, tofile=fb, n=3)
    return "".join(_hunk_lines(out))


def _hunk_lines(lines) -> Iterator[str]:
    # difflib leaves a last line without "\n" as is; mark it the way git does.
    for ln in lines:
        if ln.endswith("\n"):
            yield ln
        else:
            yield ln + "\n\\ No newline at end of file\n"
