"""Where a spec's ``inventory:`` entries may point: inside its repository.

The spec is reviewed in a pull request, but CI runs it on a machine that holds
other files (credentials, other checkouts): a pattern such as ``/etc/*`` or
``../../.aws/*`` would make gpuplan read them and quote a line into the log.
Entries are resolved inside the repository that holds the spec; anything
else is refused before it is read, unless the run explicitly allows it.

Stage: model (docs/architecture.md)."""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Sequence

from gpuplan.codes import Code
from gpuplan.diagnostics import Diagnostic, Severity
from gpuplan.probe.reader import inventory_files

GP720 = Code(
    "GP720",
    "inventory path outside the repository",
    Severity.ERROR,
    "An `inventory:` entry is an absolute path, climbs out of the repository with `..`, or "
    "matches a symlink that leads out of it. The spec is reviewed in a pull request but runs in "
    "CI, where such a path could read (and quote into the log) any file of the machine. Paths "
    "are resolved inside the repository that holds the spec (the nearest directory with `.git`, "
    "else the spec's directory); `--allow-inventory-outside-repo` lifts this for a trusted run.",
    bad='inventory: ["/etc/*", "../../secrets/*.yaml"]',
    good="inventory: [inventory/]",
)
GP721 = Code(
    "GP721",
    "inventory entry matches no file",
    Severity.WARNING,
    "An `inventory:` pattern matches nothing, or names a directory with no *.yaml, *.yml or "
    "*.json file: the rules that compare the spec with the hardware then have nothing to compare.",
    bad="inventory: [inventroy/*.yaml]",
    good="inventory: [inventory/]   # a directory loads every inventory file in it",
)

CODES = (GP720, GP721)


def repository_root(spec_path: Path | str) -> Path:
    """The repository that holds the spec: the nearest directory at or above
    the spec's own with a ``.git`` entry, else the spec's directory."""
    d = Path(os.path.realpath(spec_path)).parent
    for cand in (d, *d.parents):
        if os.path.lexists(cand / ".git"):
            return cand
    return d


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _in_repo(path: str, root: str) -> bool:
    """Inside the repository's files: ``.git`` is not one of them (actions/checkout keeps the
    job's token in ``.git/config``, and an inventory's lines are quoted in diagnostics)."""
    return _inside(path, root) and not _inside(path, os.path.join(root, ".git"))


def inventory_paths(patterns: Sequence[tuple[str, tuple[int | None, int | None]]], spec_path: Path, spec_file: str,
                    *, allow_outside: bool = False) -> tuple[list[Path], list[Diagnostic]]:
    """The inventory files the spec names (``patterns``: each entry of
    ``spec.inventory`` with its position), each resolved inside the repository.

    A directory loads the inventory files in it; a pattern that matches
    nothing is a warning at its line; an absolute pattern, one that climbs out
    of the repository, or a match that is a symlink leading out is refused
    (GP720) before anything is read, unless ``allow_outside``."""
    spec_dir = spec_path.parent
    root = os.path.realpath(repository_root(spec_path))
    real_spec_dir = os.path.realpath(spec_dir)
    paths: set[Path] = set()
    diags: list[Diagnostic] = []
    for i, (pattern, (line, col)) in enumerate(patterns):
        at = {"file": spec_file, "line": line, "col": col, "path": f"spec.inventory[{i}]"}
        hint = "name inventory files inside the repository, e.g. inventory/ (gpuplan inventory pull -o inventory)"
        if not allow_outside:
            if os.path.isabs(pattern) or pattern.startswith("~"):
                diags.append(GP720.diag(f"inventory path {pattern!r} is absolute; refused", hint=hint, **at))
                continue
            if not _in_repo(os.path.normpath(os.path.join(real_spec_dir, pattern)), root):
                diags.append(GP720.diag(f"inventory path {pattern!r} leads out of the repository; refused",
                                        hint=hint, **at))
                continue
        full = pattern if os.path.isabs(pattern) else str(spec_dir / pattern)
        found: list[Path] = []
        for m in sorted(glob.glob(full, recursive=True)):
            if not allow_outside and not _in_repo(os.path.realpath(m), root):
                diags.append(GP720.diag(f"inventory path {Path(m).as_posix()!r} is a symlink that leads out of "
                                        "the repository; refused", hint=hint, **at))
                continue
            if os.path.isdir(m):
                for f in inventory_files(Path(m)):
                    if allow_outside or _in_repo(os.path.realpath(f), root):
                        found.append(f)
                    else:
                        diags.append(GP720.diag(f"inventory file {f.as_posix()!r} is a symlink that leads out "
                                                "of the repository; refused", hint=hint, **at))
            else:
                found.append(Path(m))
        if not found and not any(d.path == at["path"] and d.code == "GP720" for d in diags):
            diags.append(GP721.diag(f"inventory entry {pattern!r} matches no inventory file",
                                    hint="a directory loads its *.yaml, *.yml and *.json files; "
                                         "run `gpuplan inventory pull -o inventory/`", **at))
        paths.update(found)
    return sorted(paths), diags
