"""Re-read the node facts of one platform table from its upstream files.

    python -m gpuplan.upstream.refresh_nodes PLATFORM SOURCE=GIT_DIR [SOURCE=GIT_DIR ...] [--ref SOURCE=REF]

``PLATFORM`` names ``gpuplan/upstream/nodes/<platform>.json``; each ``SOURCE=GIT_DIR`` is a clone
(bare or not) of that source's repository (``agentbaker=../AgentBaker``). Every fact of the
source is looked up in ``path`` at the table's ``ref`` (or the new ``--ref``): its ``pattern`` (a
regular expression whose first group is the value) is searched line by line, the match nearest
the recorded line wins, and ``line`` and ``value`` are rewritten; an ``absent`` fact checks that
its text does not occur. A fact whose pattern is gone fails the refresh (exit 1) and names the
file: the fact changed upstream and needs a reader, not a regex. Sources given by URL (platform
documentation) are listed for reading by hand.

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from gpuplan.nodefacts import TABLES


def _show(git_dir: Path, ref: str, path: str) -> list[str]:
    out = subprocess.run(["git", "-C", str(git_dir), "show", f"{ref}:{path}"],
                         capture_output=True, text=True, check=True).stdout
    return out.splitlines()


def _coerce(old: Any, text: str, fmt: str | None) -> Any:
    if isinstance(old, bool):
        return text == "true"
    if isinstance(old, int):
        return int(text)
    return fmt.format(text) if fmt else text


def refresh_fact(name: str, f: dict[str, Any], lines: list[str]) -> tuple[dict[str, Any], str | None]:
    """(the fact re-read from ``lines``, an error or None)."""
    if "absent" in f:
        hits = [i for i, ln in enumerate(lines, 1) if f["absent"] in ln]
        return f, (f"{name}: {f['absent']!r} now occurs at line {hits[0]}" if hits else None)
    rx = re.compile(f["pattern"])
    found = [(i, m) for i, ln in enumerate(lines, 1) if (m := rx.search(ln))]
    if not found:
        return f, f"{name}: pattern {f['pattern']!r} not found in {f['path']}"
    line, m = min(found, key=lambda im: abs(im[0] - f.get("line", 0)))
    return {**f, "line": line, "value": _coerce(f["value"], m.group(1), f.get("format"))}, None


def refresh(platform: str, git_dirs: dict[str, Path], refs: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
    path = TABLES / f"{platform}.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    errors: list[str] = []
    for sid, ref in refs.items():
        raw["sources"][sid]["ref"] = ref
    for name, f in sorted(raw["facts"].items()):
        src = raw["sources"][f["source"]]
        if f["source"] not in git_dirs:
            continue
        lines = _show(git_dirs[f["source"]], src["ref"], f["path"])
        raw["facts"][name], err = refresh_fact(name, f, lines)
        if err:
            errors.append(err)
    return raw, errors


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    platform, rest = argv[0], argv[1:]
    git_dirs: dict[str, Path] = {}
    refs: dict[str, str] = {}
    while rest:
        arg = rest.pop(0)
        if arg == "--ref":
            sid, _, ref = rest.pop(0).partition("=")
            refs[sid] = ref
        else:
            sid, _, where = arg.partition("=")
            git_dirs[sid] = Path(where)
    raw, errors = refresh(platform, git_dirs, refs)
    for sid, src in sorted(raw["sources"].items()):
        if "url" in src:
            print(f"read by hand: {sid} {src['url']}", file=sys.stderr)
        elif sid not in git_dirs:
            print(f"not refreshed: {sid} ({src['repository']})", file=sys.stderr)
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 1
    (TABLES / f"{platform}.json").write_text(json.dumps(raw, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
