"""The draft's plain data (``Draft``, ``Note``) and the small readers every part of the
importer shares: a finding at an input object's line, the majority of a pool's values, and the
shapes of the device-plugin and mig-parted configs.

Stage: driver (docs/architecture.md)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from gpuplan.diagnostics import Diagnostic
from gpuplan.importer import conventions as V
from gpuplan.importer.read import Obj
from gpuplan.k8snames import is_label_key, is_label_value


def is_label(k: Any, v: Any) -> bool:
    return is_label_key(k) and is_label_value(v)


@dataclass
class Note:
    """Where a value came from, or what is left to decide."""

    source: str | None = None
    todo: str | None = None


@dataclass
class Draft:
    """The spec as plain data, with notes keyed by spec path (a tuple of keys
    and indices) and the findings."""

    spec: dict
    notes: dict[tuple, Note] = field(default_factory=dict)
    header: list[str] = field(default_factory=list)  # comment lines above the document
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # for the round trip: how the cluster's names map onto what gpuplan builds
    scope: dict[str, Any] = field(default_factory=dict)

    def note(self, path: tuple, source: str | None = None, todo: str | None = None) -> None:
        n = self.notes.setdefault(path, Note())
        if source:
            n.source = source if n.source is None else f"{n.source}; {source}"
        if todo:
            add_todo(n, todo)


def add_todo(n: Note, todo: str) -> None:
    n.todo = todo if n.todo is None else f"{n.todo}; {todo}"


def diag(code: Any, message: str, o: Obj | None, *sub: Any, hint: str | None = None) -> Diagnostic:
    if o is None:
        return code.diag(message, hint=hint)
    f, line, col = o.at(*sub)
    return code.diag(message, file=f, line=line, col=col, hint=hint)


def is_dp_config(v: Any) -> bool:
    return isinstance(v, dict) and v.get("version") == "v1" and ("flags" in v or "sharing" in v) \
        and "mig-configs" not in v


def is_mig_config(v: Any) -> bool:
    return isinstance(v, dict) and isinstance(v.get("mig-configs"), dict)


def majority(values: list) -> Any:
    c = Counter(json.dumps(v, sort_keys=True) for v in values)
    best = sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
    return json.loads(best)


def taints_of(o: Obj, raw: Any, pool: str | None) -> list[dict]:
    """A node's, template's or pool object's taints in the spec's form: gpuplan's binding taint
    (a build adds it again) and the node lifecycle taints left out."""
    out = []
    for t in raw if isinstance(raw, list) else ():
        if not isinstance(t, dict) or not isinstance(t.get("key"), str) or \
                t.get("effect") not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            continue
        if t["key"] == V.POOL_TAINT_KEY or t["key"].startswith(V.SYSTEM_TAINT_PREFIXES):
            continue  # gpuplan's binding taint (it adds it again) and node lifecycle taints
        d = {"key": t["key"]}
        if isinstance(t.get("value"), str) and t["value"]:
            d["value"] = t["value"]
        d["effect"] = t["effect"]
        out.append(d)
    return out


def own_labels(labels: dict[str, str]) -> dict[str, str]:
    """The labels a pool's author wrote: none that Kubernetes, a platform, NFD, GFD, Karpenter or
    gpuplan set."""
    return {k: v for k, v in labels.items() if not k.startswith(V.SYSTEM_LABEL_PREFIXES) and is_label(k, v)}
