"""Node facts per platform image: what a GPU node of each platform runs before gpuplan's objects
reach it (containerd's runtime handler, whether CDI is on, the labels and taints the platform
sets, whether gpuplan can configure the node's container toolkit).

One table per platform in ``gpuplan/upstream/nodes/<platform>.json``; each fact names the
upstream file it was read from (repository, tag or commit, path, line, and the pattern that
finds it there), and ``python -m gpuplan.upstream.refresh_nodes`` re-reads those files. Lowering
and rules read facts through :func:`fact`; tests hold every emitted runtime class, toolkit
setting, label and taint to them (docs/platforms.md).

Stage: foundation (docs/architecture.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

TABLES = Path(__file__).resolve().parent / "upstream" / "nodes"


@dataclass(frozen=True)
class Table:
    platform: str
    describes: str
    sources: dict[str, dict[str, str]]
    facts: dict[str, dict[str, Any]]
    node_config: dict[str, Any]

    def value(self, name: str) -> Any:
        return self.facts[name]["value"]

    def cite(self, name: str) -> str:
        """``repository@ref path:line`` of one fact (the URL for a documented one)."""
        f = self.facts[name]
        src = self.sources[f["source"]]
        if "url" in src:
            return src["url"]
        return f"{src['repository']}@{src['ref']} {f['path']}:{f['line']}"


def platforms() -> list[str]:
    return sorted(p.stem for p in TABLES.glob("*.json"))


@cache
def table(platform: str) -> Table:
    raw = json.loads((TABLES / f"{platform}.json").read_text(encoding="utf-8"))
    return Table(raw["platform"], raw["describes"], raw["sources"], raw["facts"], raw.get("nodeConfig", {}))


def fact(platform: str, name: str) -> Any:
    return table(platform).value(name)


def taint(platform: str, name: str) -> dict[str, str]:
    """A ``key[=value]:effect`` taint fact as a taint object."""
    spec, _, effect = fact(platform, name).rpartition(":")
    key, eq, value = spec.partition("=")
    return {"key": key, **({"value": value} if eq else {}), "effect": effect}
