"""Generate ``gpuplan/catalog/drivers.json``: the first NVIDIA driver release that knows
each GPU, per driver branch.

    python -m gpuplan.catalog.build_drivers PATH/TO/open-gpu-kernel-modules

The source is NVIDIA's own list of the GPUs each driver release supports: the "Compatible
GPUs" table (product name and PCI device id) in ``README.md`` of
``NVIDIA/open-gpu-kernel-modules``, one tagged commit per driver release (515.43.04 on).
For every catalog GPU of an architecture the open kernel modules cover from its launch
(Hopper, Ada Lovelace, Blackwell and later: GPUs newer than the modules' first release,
and Blackwell only runs on them) the script records, per branch, the first release whose
table lists one of the GPU's PCI device ids. A driver below that release cannot bind the
GPU: the node comes up without it. Older architectures (Volta, Turing, Ampere) were
supported by the proprietary modules long before the open modules listed them, so the
table would give a false floor: they are left unchecked.

Run it against a full clone (every tag); it writes the JSON and prints one line per GPU.
``gpuplan/upstream/SOURCES.md`` records the clone's newest tag and commit.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

SCHEMA_VERSION = 1
OUT = Path(__file__).with_name("drivers.json")
CATALOG = Path(__file__).with_name("gpus.json")
REPOSITORY = "NVIDIA/open-gpu-kernel-modules"
CHECKED_ARCHITECTURES = ("Hopper", "Ada Lovelace", "Blackwell", "Blackwell Ultra")
_ROW = re.compile(r"^\|[^|\n]*\|\s*([0-9A-F]{4})(?: 10DE [0-9A-F]{4})?\s*\|", re.M)
_TAG = re.compile(r"[0-9]+\.[0-9]+(\.[0-9]+)?\Z")


def version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def first_listing(repo: Path) -> tuple[dict[str, dict[str, str]], list[str]]:
    """{device id: {branch: first release of the branch that lists it}}, and the tags read."""
    tags = sorted((t for t in _git(repo, "tag").split() if _TAG.match(t)), key=version_key)
    out: dict[str, dict[str, str]] = {}
    for tag in tags:
        text = _git(repo, "show", f"{tag}:README.md")
        branch = tag.split(".")[0]
        for m in _ROW.finditer(text):
            out.setdefault(m[1], {}).setdefault(branch, tag)
    return out, tags


def build(repo: Path) -> dict[str, Any]:
    listing, tags = first_listing(repo)
    catalog = json.loads(CATALOG.read_text("utf-8"))
    gpus: dict[str, Any] = {}
    unchecked: dict[str, str] = {}
    for g in catalog["gpus"]:
        if g["architecture"] not in CHECKED_ARCHITECTURES:
            unchecked[g["key"]] = f"{g['architecture']}: supported before the open kernel modules listed it"
            continue
        branches: dict[str, str] = {}
        for pci in g["pci_ids"]:
            for branch, tag in listing.get(pci[2:].upper(), {}).items():
                if branch not in branches or version_key(tag) < version_key(branches[branch]):
                    branches[branch] = tag
        if not branches:
            unchecked[g["key"]] = "no release of the open kernel modules lists its PCI device id"
            continue
        first = min(branches.values(), key=version_key)
        gpus[g["key"]] = {
            "first": first,
            "first_commit": _git(repo, "rev-list", "-n", "1", first).strip(),
            "branches": dict(sorted(branches.items(), key=lambda kv: int(kv[0]))),
        }
    newest = tags[-1]
    return {
        "schema_version": SCHEMA_VERSION,
        "generated_by": "gpuplan/catalog/build_drivers.py",
        "source": {"repository": REPOSITORY, "path": "README.md (Compatible GPUs table)",
                   "tags_read": len(tags), "oldest_tag": tags[0], "newest_tag": newest,
                   "newest_commit": _git(repo, "rev-list", "-n", "1", newest).strip()},
        "gpus": gpus,
        "unchecked": unchecked,
    }


def run(argv: list[str], usage: str, build: Callable[[Path], dict[str, Any]], out: Path,
        lines: Callable[[dict[str, Any]], list[str]]) -> int:
    """The command line of a table built from one clone: ``argv`` is the clone's path; writes
    ``out`` (sorted JSON) and prints ``lines`` of the result."""
    if len(argv) != 1:
        print(usage.split("\n\n")[1], file=sys.stderr)
        return 2
    data = build(Path(argv[0]))
    out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    for line in lines(data):
        print(line)
    return 0


def main(argv: list[str]) -> int:
    return run(argv, __doc__ or "", build, OUT, lambda data: [
        f"{key}: {f['first']} ({', '.join(f['branches'].values())})" for key, f in data["gpus"].items()])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
