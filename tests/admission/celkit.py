"""Evaluate the pinned CRDs' CEL rules on generated objects with a real CEL engine
(cel-python), adding the Kubernetes CEL library functions the rules use
(``find``, ``split``; k8s.io/apiserver/pkg/cel/library)."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import celpy
from celpy import celtypes

REPO = Path(__file__).resolve().parents[2]
_CEL_DIRS = (
    REPO / "gpuplan" / "upstream" / "cel",
    REPO.parent / "shared" / "reference" / "k8s" / "schemas" / "cel",
)


def cel_file(name: str) -> list[dict]:
    for d in _CEL_DIRS:
        if (d / name).is_file():
            return json.loads((d / name).read_text(encoding="utf-8"))
    raise FileNotFoundError(f"pinned CEL file {name} not found in {', '.join(map(str, _CEL_DIRS))}")


def _find(s, pattern):
    m = re.search(str(pattern), str(s))
    return celtypes.StringType(m.group(0) if m else "")


def _split(s, sep):
    return celtypes.ListType([celtypes.StringType(x) for x in str(s).split(str(sep))])


@lru_cache(maxsize=None)
def _program(rule: str):
    env = celpy.Environment()
    return env.program(env.compile(rule), functions={"find": _find, "split": _split})


def _at(obj, path: str):
    """Values at a rule path such as ``$.spec.amiSelectorTerms[*].alias``."""
    nodes = [obj]
    for part in path.removeprefix("$.").split("."):
        star = part.endswith("[*]")
        key = part.removesuffix("[*]")
        nxt = []
        for n in nodes:
            if isinstance(n, dict) and key in n:
                v = n[key]
                nxt.extend(v if star and isinstance(v, list) else [] if star else [v])
        nodes = nxt
    return nodes


def refusals(obj: dict, cel_name: str) -> list[str]:
    """Messages of the CEL rules (no transition rules) that ``obj`` breaks."""
    out = []
    for rule in cel_file(cel_name):
        if "oldSelf" in rule["rule"]:
            continue
        for value in _at(obj, rule["path"]):
            result = _program(rule["rule"]).evaluate({"self": celpy.json_to_cel(value)})
            if isinstance(result, Exception) or not bool(result):
                out.append(rule["message"])
    return out


_SCHEMA_DIRS = (
    REPO / "gpuplan" / "upstream" / "crds",
    REPO.parent / "shared" / "reference" / "k8s" / "schemas" / "catalog-strict",
)


@lru_cache(maxsize=None)
def _schema_validator(rel: str):
    import jsonschema

    for d in _SCHEMA_DIRS:
        if (d / rel).is_file():
            return jsonschema.Draft202012Validator(json.loads((d / rel).read_text(encoding="utf-8")))
    raise FileNotFoundError(f"pinned schema {rel} not found")


def schema_errors(obj: dict) -> list[str]:
    """Errors of the pinned strict CRD schema (the OpenAPI part the API server checks)."""
    group, _, version = obj["apiVersion"].rpartition("/")
    rel = f"{group}/{obj['kind'].lower()}_{version}.json"
    return [e.message for e in _schema_validator(rel).iter_errors(obj)]
